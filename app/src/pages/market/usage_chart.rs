//! A listing's usage over 30 days, drawn as inline SVG on the server: a bar of
//! calls per day (failed calls in red at the foot of each bar) and the figures
//! beside it. Plain markup, so it reads the same without JavaScript.

use leptos::prelude::*;

use crate::api::{Health, UsageView};

const WIDTH: f64 = 300.0;
const BAR_SLOT: f64 = WIDTH / 30.0;
const PLOT_TOP: f64 = 12.0;
const BASELINE: f64 = 92.0;

/// "Nov 3" for the UTC day starting at `day_ms`.
fn month_day(day_ms: i64) -> String {
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = day_ms.div_euclid(86_400_000) + 719_468;
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    format!("{} {day}", MONTHS[(month - 1) as usize])
}

pub(crate) fn duration(ms: Option<f64>) -> String {
    match ms {
        None => "–".into(),
        Some(ms) if ms < 10.0 => format!("{ms:.2} ms"),
        Some(ms) => format!("{ms:.0} ms"),
    }
}

#[component]
pub fn UsageChart(usage: UsageView) -> impl IntoView {
    let max = usage.days.iter().map(|d| d.calls).max().unwrap_or(0).max(1);
    let scale = |n: i64| n as f64 / max as f64 * (BASELINE - PLOT_TOP);
    let first = usage.days.first().map(|d| month_day(d.day_ms)).unwrap_or_default();
    let label = match usage.calls {
        0 => "Calls per day over the last 30 days: none yet.".to_owned(),
        n => format!("Calls per day over the last 30 days: {n} in all, at most {max} in a day."),
    };
    let bars = usage
        .days
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let x = format!("{:.1}", i as f64 * BAR_SLOT + 1.0);
            let width = format!("{:.1}", BAR_SLOT - 2.0);
            let (all, failed) = (scale(d.calls), scale(d.errors));
            let tip = format!("{}: {} calls, {} failed", month_day(d.day_ms), d.calls, d.errors);
            view! {
                <g class="day">
                    <title>{tip}</title>
                    <rect class="bar" x=x.clone() y=format!("{:.1}", BASELINE - all) width=width.clone() height=format!("{all:.1}") />
                    <rect class="bar-error" x=x y=format!("{:.1}", BASELINE - failed) width=width height=format!("{failed:.1}") />
                </g>
            }
        })
        .collect_view();
    view! {
        <div class="usage">
            <svg class="usage-chart" viewBox="0 0 300 104" role="img" aria-label=label>
                // No calls yet: no scale to show, only the empty days.
                {(usage.calls > 0).then(|| view! {
                    <text class="axis" x="0" y="8">{if max == 1 { "1 call".to_owned() } else { format!("{max} calls") }}</text>
                })}
                <line class="axis-line" x1="0" y1=PLOT_TOP.to_string() x2="300" y2=PLOT_TOP.to_string() />
                {bars}
                <line class="axis-line" x1="0" y1=BASELINE.to_string() x2="300" y2=BASELINE.to_string() />
                <text class="axis" x="0" y="102">{first}</text>
                <text class="axis" x="300" y="102" text-anchor="end">"today"</text>
            </svg>
            <dl class="usage-figures">
                <div><dt>"Calls, 30 days"</dt><dd class="usage-calls">{usage.calls}</dd></div>
                <div><dt>"Error rate"</dt><dd class="usage-error-rate">{format!("{:.1} %", usage.error_rate * 100.0)}</dd></div>
                <div><dt>"p50 duration"</dt><dd>{duration(usage.p50_ms)}</dd></div>
                <div><dt>"p95 duration"</dt><dd>{duration(usage.p95_ms)}</dd></div>
            </dl>
        </div>
    }
}

/// A tool's last 24 hours for its editors: each version that ran, and the
/// errors its kept failed calls share most, which the editor replays.
#[component]
pub fn HealthCard(health: Health, editor: String) -> impl IntoView {
    let quiet = health.versions.is_empty();
    let rows = health
        .versions
        .into_iter()
        .map(|v| {
            let rate = toolshed_types::health::error_rate(v.calls, v.errors) * 100.0;
            let failing = rate >= 10.0;
            view! {
                <tr class:failing=failing>
                    <td>{v.version.map_or_else(|| "refused".to_owned(), |n| format!("v{n}"))}</td>
                    <td class="num">{v.calls}</td>
                    <td class="num health-error-rate">{format!("{rate:.1} %")}</td>
                    <td class="num">{duration(v.p50_ms)}</td>
                    <td class="num">{duration(v.p95_ms)}</td>
                </tr>
            }
        })
        .collect_view();
    let errors = (!health.errors.is_empty()).then(|| {
        let items = health
            .errors
            .into_iter()
            .map(|e| view! { <li><span class="count">{format!("{}×", e.count)}</span>" "<code>{e.error}</code></li> })
            .collect_view();
        view! {
            <h3>"Most common errors"</h3>
            <ol class="common-errors">{items}</ol>
            <p class="small"><a href=editor>"Replay these failed calls in the editor"</a></p>
        }
    });
    view! {
        <section class="card health">
            <h2>"Health, last 24 hours"</h2>
            {if quiet {
                view! { <p class="muted">"No calls in the last 24 hours."</p> }.into_any()
            } else {
                view! {
                    <table class="health-versions">
                        <thead><tr><th>"Version"</th><th class="num">"Calls"</th><th class="num">"Errors"</th><th class="num">"p50"</th><th class="num">"p95"</th></tr></thead>
                        <tbody>{rows}</tbody>
                    </table>
                }.into_any()
            }}
            {errors}
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_named_by_month_and_day_in_utc() {
        assert_eq!(month_day(0), "Jan 1");
        assert_eq!(month_day(1_709_164_800_000), "Feb 29"); // 2024, a leap year
        assert_eq!(month_day(1_798_675_200_000), "Dec 31"); // 2026
    }
}
