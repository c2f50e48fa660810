//! Forks: a copy of a listing someone can see, in the forker's department,
//! that remembers where it came from (`dept/name@vN`) so its page can say
//! when the source has moved on.

use serde::{Deserialize, Serialize};

use super::test_cases::insert_test_case;
use super::versions::{insert_version, Source, VersionDiff};
use super::Tools;
use super::{insert_listing, rolled_back, ForkedFrom, ListingKind, NewTool, Tool, ToolError};
use crate::accounts::User;
use crate::audit;
use crate::ids::ToolId;
use crate::names::{Description, Tags, Title, ToolName};

/// What a fork's page says about its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Upstream {
    pub source: Tool,
    /// The source version the fork copied.
    pub forked_version: i64,
    /// Set when the source has published something newer than what was copied:
    /// the change from the copied version to the source's published one
    /// (empty code and arguments for bundles).
    pub newer: Option<VersionDiff>,
}

impl Tools<'_> {
    /// Forks a listing `user` may see into their own department under `name`:
    /// a new listing of the same kind whose version 1 copies the source's
    /// published version (code, arguments and test cases with their checks;
    /// or a bundle's members). Nothing of real calls is copied: not `$env`
    /// (it may be another team's secrets), nor the test cases saved from a
    /// failed call (those with its recording: someone's arguments and answers).
    pub async fn fork(self, user: &User, source: ToolId, name: ToolName) -> Result<Tool, ToolError> {
        if !crate::membership::may_author(user, user.department.id.0) {
            return Err(ToolError::NotAnAuthor);
        }
        let src = self.tool(user, source).await?;
        let n = src.published_version.ok_or(ToolError::NotPublished)?;
        let version = self.version_row(src.id, n).await?;
        let new = NewTool {
            name,
            // Named after its department too, so pickers never show two identical entries.
            title: Title::parse(&format!("{} ({})", src.title, user.department.title)).or_else(|_| Title::parse(&src.title))?,
            description: Description::parse(&src.description)?,
            tags: Tags::parse(&src.tags.join(" "))?,
            visibility: src.visibility,
        };
        let changelog = format!("Forked from {}@v{n}", src.slug());
        // Copied as cases, check and all, through the one way cases are stored.
        let cases = match src.kind {
            ListingKind::Tool => self.test_cases(user, src.id).await?,
            ListingKind::Bundle => Vec::new(),
        };
        let mut tx = self.core.begin().await?;
        let id = match insert_listing(&mut tx, user, src.kind, &new, Some(ForkedFrom { id: src.id, version: n })).await {
            Ok(id) => id,
            Err(e) => return Err(rolled_back(tx, e).await),
        };
        sqlx::query(
            "UPDATE tools SET read_only_hint = $1, destructive_hint = $2, fetch_allow = $3, timeout_ms = $4, memory_mib = $5, \
             task_support = $7, serves = $8, resource_uri = $9, resource_mime = $10 WHERE id = $6",
        )
        .bind(i64::from(src.read_only_hint))
        .bind(i64::from(src.destructive_hint))
        .bind(src.fetch_allow.join("\n"))
        .bind(src.timeout_ms)
        .bind(src.memory_mib)
        .bind(id.0)
        // Its time limit may be a task's: the fork runs as the original does.
        .bind(src.task_support.as_str())
        // A fork of a prompt or a resource is one too.
        .bind(src.serves.kind())
        .bind(src.serves.uri().map(|u| u.as_str().to_owned()))
        .bind(src.serves.mime().map(|m| m.as_str().to_owned()))
        .execute(&mut *tx)
        .await?;
        let copy = Source::parse(&version.code, version.args, version.output_schema)?;
        insert_version(&mut tx, user, id, &copy, &changelog).await?;
        match src.kind {
            ListingKind::Tool => {
                for case in cases.iter().filter(|c| c.recording.is_none()) {
                    insert_test_case(&mut tx, id, case.case()).await?;
                }
            }
            ListingKind::Bundle => {
                sqlx::query(
                    "INSERT INTO bundle_items (bundle_id, version, position, tool_id, pinned_version, exposed_name) \
                     SELECT $1, 1, position, tool_id, pinned_version, exposed_name FROM bundle_items WHERE bundle_id = $2 AND version = $3",
                )
                .bind(id.0)
                .bind(src.id.0)
                .bind(n)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "INSERT INTO bundle_external_items (bundle_id, version, position, server_id, tool_name) \
                     SELECT $1, 1, position, server_id, tool_name FROM bundle_external_items WHERE bundle_id = $2 AND version = $3",
                )
                .bind(id.0)
                .bind(src.id.0)
                .bind(n)
                .execute(&mut *tx)
                .await?;
            }
        }
        let target = format!("{}:{}/{}", src.kind.as_str(), user.department.name, new.name);
        let from = serde_json::json!({"forked_from": format!("{}@v{n}", src.slug())});
        audit::record(&mut tx, Some(user.id), &src.action("forked"), &target, Some(from), Some(serde_json::json!({"version": 1}))).await?;
        tx.commit().await?;
        self.tool(user, id).await
    }

    /// Where `fork` came from, if it is a fork and `user` may see the source.
    pub async fn upstream(self, user: &User, fork: &Tool) -> Result<Option<Upstream>, ToolError> {
        let Some(from) = fork.forked_from else { return Ok(None) };
        let source = match self.tool(user, from.id).await {
            Ok(s) => s,
            Err(ToolError::NotFound) => return Ok(None),
            Err(e) => return Err(e),
        };
        let newer = match source.published_version {
            Some(p) if p > from.version => Some(self.diff_versions(user, source.id, from.version, p).await?),
            _ => None,
        };
        Ok(Some(Upstream { source, forked_version: from.version, newer }))
    }
}
