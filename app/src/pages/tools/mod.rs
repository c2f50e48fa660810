//! Tool pages: my tools, new tool, the listing page, the editor; and the
//! listing parts bundle pages share.

mod api_card;
mod args_editor;
mod autosave;
mod editor;
mod failed_calls;
mod list;
mod listing;
mod mcp_debugger;
mod new;
mod run_panel;
mod test_cases;
mod versions;

pub use api_card::ApiCard;
pub use editor::{SettingsCard, ToolEditor};
pub use list::MyTools;
pub use listing::{Lineage, ListingActions, ListingHead, ListingPage, ModerationNotice, ToolListing, VersionList};
pub use mcp_debugger::ConnectPanel;
pub use new::{NewBundle, NewTool};
pub use run_panel::ConsoleLines;
pub use versions::{DiffText, VersionsPanel};

/// "3 minutes ago"-style text for a Unix-ms time, against `now_ms`.
pub fn ago(at_ms: i64, now_ms: i64) -> String {
    let s = (now_ms - at_ms).max(0) / 1000;
    match s {
        0..=59 => "just now".into(),
        60..=3599 => format!("{} min ago", s / 60),
        3600..=86_399 => format!("{} h ago", s / 3600),
        _ => format!("{} days ago", s / 86_400),
    }
}

/// How far `at_ms` is ahead of `now_ms`, for people: "in 5 h", "in 1 day".
pub fn until(at_ms: i64, now_ms: i64) -> String {
    let s = (at_ms - now_ms).max(0) / 1000;
    match s {
        0..=59 => "in under a minute".into(),
        60..=3599 => format!("in {} min", s / 60),
        3600..=86_399 => format!("in {} h", s / 3600),
        86_400..=172_799 => "in 1 day".into(),
        _ => format!("in {} days", s / 86_400),
    }
}

pub fn now_ms() -> i64 {
    #[cfg(feature = "ssr")]
    {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or_default()
    }
    #[cfg(not(feature = "ssr"))]
    {
        js_sys::Date::now() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::until;

    #[test]
    fn a_time_ahead_reads_in_the_largest_whole_unit() {
        let now = 1_000_000_000;
        assert_eq!(until(now + 30_000, now), "in under a minute");
        assert_eq!(until(now + 5 * 3_600_000 + 10, now), "in 5 h");
        assert_eq!(until(now + 86_400_000, now), "in 1 day");
        assert_eq!(until(now + 90 * 86_400_000, now), "in 90 days");
    }
}
