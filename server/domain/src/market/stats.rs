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
pub use toolshed_types::health::{
    CommonError, Health, HealthRanking, ListingHealth, VersionHealth, HEALTH_ERRORS, HEALTH_VERSIONS, RANKED,
};

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
        toolshed_types::health::error_rate(self.calls, self.errors)
    }
}

impl Market<'_> {
    /// A tool's last 24 hours, for its editors (`NotFound`/`Forbidden` otherwise).
    pub async fn health(self, user: &User, id: ToolId) -> Result<Health, ToolError> {
        Tools::new(self.core).code_tool_for_edit(user, id).await?;
        let since = now_ms() - DAY_MS;
        let rows = sqlx::query(
            "SELECT version, COUNT(*) AS calls, SUM(CASE WHEN outcome IN ('ok', 'cancelled') THEN 0 ELSE 1 END) AS errors \
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

    /// The listings that failed and slowed most over the last 24 hours, for
    /// admins (`Forbidden` otherwise). One pass over the day's records: the
    /// window numbers each listing's calls that ran by duration, so the
    /// nearest-rank p50/p95 is the row whose number is ⌈n·q⌉; calls refused
    /// before any code ran count as calls and errors only, as on the health card.
    pub async fn health_ranking(self, admin: &User) -> Result<HealthRanking, ToolError> {
        if !admin.is_admin {
            return Err(ToolError::Forbidden);
        }
        let rows = sqlx::query(
            "WITH recent AS (\
                 SELECT tool_id, outcome, duration_us, version, \
                        ROW_NUMBER() OVER (PARTITION BY tool_id, version IS NULL ORDER BY duration_us) AS nth, \
                        COUNT(*) OVER (PARTITION BY tool_id) AS n, \
                        SUM(CASE WHEN version IS NULL THEN 0 ELSE 1 END) OVER (PARTITION BY tool_id) AS ran \
                 FROM usage_records WHERE at_ms >= $1) \
             SELECT r.tool_id, r.n AS calls, SUM(CASE WHEN r.outcome IN ('ok', 'cancelled') THEN 0 ELSE 1 END) AS errors, \
                    MAX(CASE WHEN r.version IS NOT NULL AND r.nth = (r.ran * 50 + 99) / 100 THEN r.duration_us END) AS p50_us, \
                    MAX(CASE WHEN r.version IS NOT NULL AND r.nth = (r.ran * 95 + 99) / 100 THEN r.duration_us END) AS p95_us, \
                    t.kind, d.name AS dept, t.name, t.title \
             FROM recent r JOIN tools t ON t.id = r.tool_id JOIN departments d ON d.id = t.department_id \
             GROUP BY r.tool_id, r.n, r.ran, t.kind, d.name, t.name, t.title",
        )
        .bind(now_ms() - DAY_MS)
        .fetch_all(self.core.db().pool())
        .await?;
        let ms = |us: Option<i64>| us.map(|us| us as f64 / 1000.0);
        let listings = rows
            .iter()
            .map(|r| {
                let kind = ListingKind::parse(&r.try_get::<String, _>("kind")?).unwrap_or(ListingKind::Tool);
                Ok(ListingHealth {
                    id: ToolId(r.try_get("tool_id")?),
                    href: format!("/{}/{}/{}", kind.plural(), r.try_get::<String, _>("dept")?, r.try_get::<String, _>("name")?),
                    title: r.try_get("title")?,
                    calls: r.try_get("calls")?,
                    errors: r.try_get("errors")?,
                    p50_ms: ms(r.try_get("p50_us")?),
                    p95_ms: ms(r.try_get("p95_us")?),
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        Ok(rank(listings))
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
            "SELECT (at_ms - $2) / $3 AS day, COUNT(*) AS calls, SUM(CASE WHEN outcome IN ('ok', 'cancelled') THEN 0 ELSE 1 END) AS errors \
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

/// Orders the day's listings into the two rankings, [`RANKED`] each.
fn rank(listings: Vec<ListingHealth>) -> HealthRanking {
    let rate = |l: &ListingHealth| toolshed_types::health::error_rate(l.calls, l.errors);
    let mut failing: Vec<_> = listings.iter().filter(|l| l.errors > 0).cloned().collect();
    failing.sort_by(|a, b| b.errors.cmp(&a.errors).then(rate(b).total_cmp(&rate(a))).then(a.href.cmp(&b.href)));
    failing.truncate(RANKED);
    let mut slowest = listings;
    slowest.sort_by(|a, b| b.p95_ms.unwrap_or(0.0).total_cmp(&a.p95_ms.unwrap_or(0.0)).then(a.href.cmp(&b.href)));
    slowest.truncate(RANKED);
    HealthRanking { failing, slowest }
}
