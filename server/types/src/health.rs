//! How tools fare in use: a tool's last 24 hours for its editors, and the
//! listings that fail or slow most for admins.

use serde::{Deserialize, Serialize};

use crate::ids::ToolId;

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

/// Failed calls as a share of `calls`, 0 when there were none.
pub fn error_rate(calls: i64, errors: i64) -> f64 {
    if calls == 0 {
        0.0
    } else {
        errors as f64 / calls as f64
    }
}

/// A listing's last 24 hours, every version and transport together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListingHealth {
    pub id: ToolId,
    /// The listing page: `/tools/dept/name` or `/bundles/dept/name`.
    pub href: String,
    pub title: String,
    pub calls: i64,
    pub errors: i64,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
}

/// The listings that failed and slowed most over the last 24 hours, for admins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthRanking {
    /// Listings with at least one failed call: the most failed calls first,
    /// then the higher error rate.
    pub failing: Vec<ListingHealth>,
    /// The highest p95 duration first.
    pub slowest: Vec<ListingHealth>,
}

/// How many listings each ranking shows.
pub const RANKED: usize = 10;
