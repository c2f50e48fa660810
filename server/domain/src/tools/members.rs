//! A bundle's members as one of its versions stores them. Tools own every
//! listing's versions, a bundle's included: diffs, forks and the bundles
//! subsystem read members here.

use sqlx::Row;

use super::{can_see, ToolError, Tools};
use crate::ids::ToolId;
use crate::User;

/// A stored member row, before it is checked against the caller.
pub(crate) struct ItemRow {
    pub(crate) tool_id: ToolId,
    pub(crate) pinned_version: Option<i64>,
    pub(crate) exposed_name: String,
    /// The pinned version has been served (see `tools::mark_published`).
    pub(crate) pinned_published: bool,
}

impl Tools<'_> {
    pub(crate) async fn bundle_items(self, bundle: ToolId, n: i64) -> Result<Vec<ItemRow>, ToolError> {
        let rows = sqlx::query(
            "SELECT i.tool_id, i.pinned_version, i.exposed_name, CASE WHEN v.published_at IS NULL THEN 0 ELSE 1 END AS pinned_published \
             FROM bundle_items i LEFT JOIN tool_versions v ON v.tool_id = i.tool_id AND v.version = i.pinned_version \
             WHERE i.bundle_id = $1 AND i.version = $2 ORDER BY i.position",
        )
        .bind(bundle.0)
        .bind(n)
        .fetch_all(self.core.db().pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ItemRow {
                    tool_id: ToolId(r.try_get("tool_id")?),
                    pinned_version: r.try_get("pinned_version")?,
                    exposed_name: r.try_get("exposed_name")?,
                    pinned_published: r.try_get::<i64, _>("pinned_published")? != 0,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(Into::into)
    }

    /// Version `n`'s members as `user` may know them, one `name = dept/tool@vN`
    /// line each (for diffs); a member they may not see is one line that says so.
    pub(crate) async fn member_lines(self, user: &User, bundle: ToolId, n: i64) -> Result<String, ToolError> {
        let items = self.bundle_items(bundle, n).await?;
        let tools = self.tools_by_ids(&items.iter().map(|i| i.tool_id).collect::<Vec<_>>()).await?;
        Ok(items
            .iter()
            .map(|i| match tools.get(&i.tool_id).filter(|t| can_see(user, t)) {
                Some(t) => member_label(&i.exposed_name, &t.slug(), i.pinned_version) + "\n",
                None => "(a tool you cannot see)\n".to_owned(),
            })
            .collect())
    }
}

/// `name = dept/tool@v3` (pinned) or `name = dept/tool@published`, for the audit log.
pub(crate) fn member_label(name: &str, slug: &str, pinned: Option<i64>) -> String {
    match pinned {
        Some(v) => format!("{name} = {slug}@v{v}"),
        None => format!("{name} = {slug}@published"),
    }
}
