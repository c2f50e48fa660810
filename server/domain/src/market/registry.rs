//! What the registry API lists (the official MCP Registry's format, served by
//! the server's `registry` module): every listing a caller may see and call
//! (at its latest version or at one it served, updated since a time), and the
//! versions of one that were ever served.

use sqlx::Row;

use super::Market;
use super::{listed_to, Statement, Value};
use crate::accounts::User;
use crate::tools::Tools;
use crate::tools::{ListingKind, Status, Tool, ToolError};

/// A registry's `description` is at most 100 characters.
const DESCRIPTION_CHARS: usize = 100;

/// A listing as a registry entry describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryEntry {
    pub kind: ListingKind,
    pub department: String,
    pub name: String,
    pub title: String,
    /// Plain text, at most 100 characters (the title when there is no description).
    pub description: String,
    pub published_version: i64,
    /// When the published version was first served.
    pub published_at: i64,
    pub updated_at: i64,
}

impl RegistryEntry {
    pub fn slug(&self) -> String {
        format!("{}/{}", self.department, self.name)
    }

    /// A registry's description: the listing's as plain text, or its title.
    fn describe(title: &str, description: &str) -> String {
        // A cut summary ends with "…": one character more than it keeps.
        let summary = crate::markdown::summary(description, DESCRIPTION_CHARS - 1);
        if summary.is_empty() {
            title.chars().take(DESCRIPTION_CHARS).collect()
        } else {
            summary
        }
    }
}

/// A version that was served, and when it first was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedVersion {
    pub version: i64,
    pub published_at: i64,
}

/// Which version of each listing a registry list shows (its `version` filter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListedVersion {
    /// The published one.
    Latest,
    /// This version, of every listing that served it.
    Exact(i64),
}

/// What a registry list is filtered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryFilter {
    pub version: ListedVersion,
    /// Only entries updated after this (Unix ms): the listing, or the version's publish.
    pub updated_since: Option<i64>,
}

impl Market<'_> {
    /// Every active listing `user` may see, by department and name, each with
    /// the version `filter` asks for (listings that never served it are left
    /// out), updated since `filter.updated_since`.
    pub async fn registry_entries(self, user: &User, filter: &RegistryFilter) -> Result<Vec<(RegistryEntry, ServedVersion)>, ToolError> {
        let mut st = Statement::default();
        let listed = listed_to(&mut st, user, "t");
        let version = match filter.version {
            // An old published version may predate `published_at`: the listing's time stands in.
            ListedVersion::Latest => "LEFT JOIN tool_versions v ON v.tool_id = t.id AND v.version = t.published_version".to_owned(),
            ListedVersion::Exact(n) => {
                let n = st.bind(Value::Int(n));
                format!("JOIN tool_versions v ON v.tool_id = t.id AND v.version = {n} AND v.published_at IS NOT NULL")
            }
        };
        // The entry's `updatedAt` is the later of the two.
        let since = match filter.updated_since {
            Some(ms) => {
                let ms = st.bind(Value::Int(ms));
                format!(" AND (t.updated_at > {ms} OR v.published_at > {ms})")
            }
            None => String::new(),
        };
        st.sql = format!(
            "SELECT t.kind, d.name AS dept, t.name, t.title, t.description, t.published_version, t.updated_at, v.published_at AS listed_at, \
             (SELECT p.published_at FROM tool_versions p WHERE p.tool_id = t.id AND p.version = t.published_version) AS published_at \
             FROM tools t JOIN departments d ON d.id = t.department_id {version} WHERE {listed}{since} ORDER BY d.name, t.name, t.kind"
        );
        let rows = st.query().fetch_all(self.core.db().pool()).await?;
        rows.iter()
            .map(|r| {
                let title: String = r.try_get("title")?;
                let updated_at = r.try_get("updated_at")?;
                let entry = RegistryEntry {
                    kind: ListingKind::parse(&r.try_get::<String, _>("kind")?).unwrap_or(ListingKind::Tool),
                    department: r.try_get("dept")?,
                    name: r.try_get("name")?,
                    description: RegistryEntry::describe(&title, &r.try_get::<String, _>("description")?),
                    title,
                    published_version: r.try_get("published_version")?,
                    published_at: r.try_get::<Option<i64>, _>("published_at")?.unwrap_or(updated_at),
                    updated_at,
                };
                let version = match filter.version {
                    ListedVersion::Latest => entry.published_version,
                    ListedVersion::Exact(n) => n,
                };
                let published_at = r.try_get::<Option<i64>, _>("listed_at")?.unwrap_or(updated_at);
                Ok((entry, ServedVersion { version, published_at }))
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(Into::into)
    }

    /// One listing as a registry entry, if `user` may see and call it, with
    /// the versions of it that were served, newest first.
    pub async fn registry_entry(
        self,
        user: &User,
        kind: ListingKind,
        department: &str,
        name: &str,
    ) -> Result<(RegistryEntry, Vec<ServedVersion>), ToolError> {
        let t: Tool = Tools::new(self.core).listing_by_slug(user, kind, department, name).await?;
        let Some(published) = t.published_version.filter(|_| t.status == Status::Active) else { return Err(ToolError::NotFound) };
        let rows = sqlx::query(
            "SELECT version, published_at FROM tool_versions WHERE tool_id = $1 AND published_at IS NOT NULL ORDER BY version DESC",
        )
        .bind(t.id.0)
        .fetch_all(self.core.db().pool())
        .await?;
        let versions: Vec<ServedVersion> = rows
            .iter()
            .map(|r| Ok(ServedVersion { version: r.try_get("version")?, published_at: r.try_get("published_at")? }))
            .collect::<Result<_, sqlx::Error>>()?;
        let published_at = versions.iter().find(|v| v.version == published).map_or(t.updated_at, |v| v.published_at);
        let entry = RegistryEntry {
            kind: t.kind,
            description: RegistryEntry::describe(&t.title, &t.description),
            department: t.department,
            name: t.name,
            title: t.title,
            published_version: published,
            published_at,
            updated_at: t.updated_at,
        };
        Ok((entry, versions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_is_plain_text_of_at_most_100_characters_or_the_title() {
        let long = format!("**Bold** {}", "word ".repeat(60));
        let d = RegistryEntry::describe("Title", &long);
        assert!(d.chars().count() <= DESCRIPTION_CHARS && d.starts_with("Bold word") && d.ends_with('…'), "{d}");
        assert_eq!(RegistryEntry::describe("Title", "  "), "Title");
    }
}
