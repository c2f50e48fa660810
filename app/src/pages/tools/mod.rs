//! Tool pages: my tools, new tool, the listing page, the editor; and the
//! listing parts bundle pages share.

mod api_card;
mod args_editor;
mod editor;
mod list;
mod listing;
mod mcp_debugger;
mod new;
mod run_panel;
mod versions;

pub use api_card::ApiCard;
pub use editor::{SettingsCard, ToolEditor};
pub use list::MyTools;
pub use listing::{Lineage, ListingActions, ListingHead, ListingPage, ModerationNotice, ToolListing, VersionList};
pub use mcp_debugger::ConnectPanel;
pub use new::{NewBundle, NewTool};
pub use run_panel::ConsoleLines;
pub use versions::VersionsPanel;

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
