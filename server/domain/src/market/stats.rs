//! A listing's usage over the last 30 days, from `usage_records`: calls per
//! UTC day, the share of calls that failed, and p50/p95 duration.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::Market;
use super::DAY_MS;
use crate::accounts::User;
use crate::ids::ToolId;
use crate::now_ms;
use crate::tools::Tools;
use crate::tools::{ListingKind, ToolError};

pub const DAYS: i64 = 30;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DayCalls {
    /// Start of the UTC day, Unix ms.
    pub day_ms: i64,
    pub calls: i64,
    /// Calls whose outcome was not `ok`.
    pub errors: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageStats {
    /// Exactly [`DAYS`] entries, oldest first; the last is today.
    pub days: Vec<DayCalls>,
    pub calls: i64,
    pub errors: i64,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
}

impl UsageStats {
    /// Failed calls as a share of all calls, 0 when there were none.
    pub fn error_rate(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.errors as f64 / self.calls as f64
        }
    }
}

impl Market<'_> {
    /// Usage of a listing `user` may see (`NotFound` otherwise) over the last
    /// 30 days: a tool's calls, however they came, or the calls through a bundle.
    pub async fn usage_stats(self, user: &User, id: ToolId) -> Result<UsageStats, ToolError> {
        let column = match Tools::new(self.core).tool(user, id).await?.kind {
            ListingKind::Tool => "tool_id",
            ListingKind::Bundle => "bundle_id",
        };
        let first_day = (now_ms() / DAY_MS - (DAYS - 1)) * DAY_MS;
        let rows = sqlx::query(&format!(
            "SELECT (at_ms - $2) / $3 AS day, COUNT(*) AS calls, SUM(CASE WHEN outcome = 'ok' THEN 0 ELSE 1 END) AS errors \
             FROM usage_records WHERE {column} = $1 AND at_ms >= $2 GROUP BY 1"
        ))
        .bind(id.0)
        .bind(first_day)
        .bind(DAY_MS)
        .fetch_all(self.core.db().pool())
        .await?;
        let mut days: Vec<DayCalls> = (0..DAYS).map(|i| DayCalls { day_ms: first_day + i * DAY_MS, calls: 0, errors: 0 }).collect();
        for r in &rows {
            let day: i64 = r.try_get("day")?;
            if let Some(d) = usize::try_from(day).ok().and_then(|i| days.get_mut(i)) {
                d.calls = r.try_get("calls")?;
                d.errors = r.try_get("errors")?;
            }
        }
        let calls: i64 = days.iter().map(|d| d.calls).sum();
        let errors = days.iter().map(|d| d.errors).sum();
        let p50_ms = self.duration_percentile(column, id, first_day, calls, 0.50).await?;
        let p95_ms = self.duration_percentile(column, id, first_day, calls, 0.95).await?;
        Ok(UsageStats { days, calls, errors, p50_ms, p95_ms })
    }

    /// The nearest-rank percentile `q` of the durations of the `calls` calls since `since`.
    async fn duration_percentile(self, column: &str, id: ToolId, since: i64, calls: i64, q: f64) -> Result<Option<f64>, ToolError> {
        if calls == 0 {
            return Ok(None);
        }
        let rank = ((calls as f64 * q).ceil() as i64).clamp(1, calls);
        let row = sqlx::query(&format!(
            "SELECT duration_us FROM usage_records WHERE {column} = $1 AND at_ms >= $2 ORDER BY duration_us LIMIT 1 OFFSET $3"
        ))
        .bind(id.0)
        .bind(since)
        .bind(rank - 1)
        .fetch_optional(self.core.db().pool())
        .await?;
        Ok(row.map(|r| r.try_get::<i64, _>("duration_us")).transpose()?.map(|us| us as f64 / 1000.0))
    }
}
