//! A listing's usage over the last 30 days, from `usage_records`: calls per
//! UTC day, the share of calls that failed, and p50/p95 duration; and a tool's
//! health for its editors: the last 24 hours per version, and its commonest errors.

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

/// One version's last 24 hours (`version` `None`: calls refused before any
/// code ran, for their arguments or a full sandbox).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionHealth {
    pub version: Option<i64>,
    pub calls: i64,
    pub errors: i64,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
}

/// An error the tool's kept failed calls share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommonError {
    pub error: String,
    /// Kept failed calls with this error (at most 20 a minute are kept).
    pub count: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Health {
    /// Newest version first, at most [`HEALTH_VERSIONS`] that ran; then the
    /// refused calls, if any.
    pub versions: Vec<VersionHealth>,
    /// At most [`HEALTH_ERRORS`], the commonest first.
    pub errors: Vec<CommonError>,
}

pub const HEALTH_VERSIONS: usize = 5;
pub const HEALTH_ERRORS: i64 = 5;

impl Market<'_> {
    /// A tool's last 24 hours, for its editors (`NotFound`/`Forbidden` otherwise).
    pub async fn health(self, user: &User, id: ToolId) -> Result<Health, ToolError> {
        Tools::new(self.core).code_tool_for_edit(user, id).await?;
        let since = now_ms() - DAY_MS;
        let rows = sqlx::query(
            "SELECT version, COUNT(*) AS calls, SUM(CASE WHEN outcome = 'ok' THEN 0 ELSE 1 END) AS errors \
             FROM usage_records WHERE tool_id = $1 AND at_ms >= $2 GROUP BY version",
        )
        .bind(id.0)
        .bind(since)
        .fetch_all(self.core.db().pool())
        .await?;
        // One row per version called that day, and one for the refused calls: few.
        let mut rows = rows
            .iter()
            .map(|r| Ok((r.try_get::<Option<i64>, _>("version")?, r.try_get::<i64, _>("calls")?, r.try_get::<i64, _>("errors")?)))
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        rows.sort_by_key(|(version, ..)| std::cmp::Reverse(version.map_or(i64::MIN, |n| n)));
        let (ran, refused): (Vec<_>, Vec<_>) = rows.into_iter().partition(|(version, ..)| version.is_some());
        let mut versions = Vec::new();
        for (version, calls, errors) in ran.into_iter().take(HEALTH_VERSIONS).chain(refused) {
            let (p50_ms, p95_ms) = match version {
                Some(v) => (
                    self.duration_percentile("tool_id", id, since, Some(v), calls, 0.50).await?,
                    self.duration_percentile("tool_id", id, since, Some(v), calls, 0.95).await?,
                ),
                None => (None, None),
            };
            versions.push(VersionHealth { version, calls, errors, p50_ms, p95_ms });
        }
        let errors = sqlx::query(
            "SELECT error, COUNT(*) AS n FROM failed_calls WHERE tool_id = $1 AND at_ms >= $2 \
             GROUP BY error ORDER BY n DESC, MAX(id) DESC LIMIT $3",
        )
        .bind(id.0)
        .bind(since)
        .bind(HEALTH_ERRORS)
        .fetch_all(self.core.db().pool())
        .await?
        .iter()
        .map(|r| Ok(CommonError { error: r.try_get("error")?, count: r.try_get("n")? }))
        .collect::<Result<_, sqlx::Error>>()?;
        Ok(Health { versions, errors })
    }

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
        let p50_ms = self.duration_percentile(column, id, first_day, None, calls, 0.50).await?;
        let p95_ms = self.duration_percentile(column, id, first_day, None, calls, 0.95).await?;
        Ok(UsageStats { days, calls, errors, p50_ms, p95_ms })
    }

    /// The nearest-rank percentile `q` of the durations of the `calls` calls
    /// since `since` (of `version` only, if given).
    async fn duration_percentile(
        self,
        column: &str,
        id: ToolId,
        since: i64,
        version: Option<i64>,
        calls: i64,
        q: f64,
    ) -> Result<Option<f64>, ToolError> {
        if calls == 0 {
            return Ok(None);
        }
        let rank = ((calls as f64 * q).ceil() as i64).clamp(1, calls);
        let of_version = if version.is_some() { "AND version = $4" } else { "" };
        let sql = format!(
            "SELECT duration_us FROM usage_records WHERE {column} = $1 AND at_ms >= $2 {of_version} ORDER BY duration_us LIMIT 1 OFFSET $3"
        );
        let query = sqlx::query(&sql).bind(id.0).bind(since).bind(rank - 1);
        // PostgreSQL refuses a parameter the statement does not use.
        let query = match version {
            Some(v) => query.bind(v),
            None => query,
        };
        let row = query.fetch_optional(self.core.db().pool()).await?;
        Ok(row.map(|r| r.try_get::<i64, _>("duration_us")).transpose()?.map(|us| us as f64 / 1000.0))
    }
}
