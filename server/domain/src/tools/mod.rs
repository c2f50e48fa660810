//! Tools: a department's JavaScript functions with immutable versions, a draft
//! per author, publish and roll back, and who may see or change what.

mod accounts;
pub mod approvals;
mod compat;
mod env;
mod failures;
mod fork;
mod gates;
mod members;
mod permissions;
mod push;
mod runs;
mod test_cases;
mod versions;

use serde::{Deserialize, Serialize};
use sqlx::Row;

pub use crate::usage::{FailureRecord, KeptCall};
pub use compat::{schema_changes, PublishImpact, SchemaChange};
pub(crate) use env::Env;
pub use env::{EnvKind, EnvVar, SecretHosts};
pub use failures::FailedCall;
pub(crate) use failures::FailureBudget;
pub use fork::Upstream;
pub(crate) use gates::findings_in;
pub(crate) use members::member_label;
pub use permissions::{ActsAt, Permissions, META_KEY as PERMISSIONS_META_KEY};
pub use push::{FileTestCase, PushOutcome, PushReport, ToolFile};
pub use runs::{Live, RunReport, RunSource, Via};
pub(crate) use runs::{PreparedRun, RunnableCache};
pub use test_cases::{Check, TestCase, TestCaseResult};
pub(crate) use versions::{insert_version, mark_published, parse_changelog, schema_text, unified_diff};
pub use versions::{Draft, Source, ToolVersion, VersionDiff, VersionSummary};

use crate::accounts::User;
use crate::ids::{ToolId, UserId};
use crate::membership::may_author;
use crate::names::CodeMode;
use crate::names::Role;
use crate::names::TaskSupport;
use crate::names::{Description, Invalid, Tags, Title, ToolName};
use crate::policy::Policies;
use crate::serves::Serves;
use crate::store::StoreError;
use crate::store::Tx;
use crate::words::cjk_pairs;
use crate::{audit, now_ms};

handle! {
    /// Tools and their listings: drafts, versions, publishing, runs, test cases, forks.
    Tools
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    /// Every signed-in user.
    Everyone,
    /// Members of the tool's department.
    Department,
    /// The owner only.
    Private,
}

impl Visibility {
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Everyone => "everyone",
            Visibility::Department => "department",
            Visibility::Private => "private",
        }
    }

    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        match raw {
            "everyone" => Ok(Visibility::Everyone),
            "department" => Ok(Visibility::Department),
            "private" => Ok(Visibility::Private),
            _ => Err(Invalid { field: "Visibility", reason: "must be everyone, department or private".into() }),
        }
    }
}

/// What a listing is: one tool, or a bundle of tools served together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ListingKind {
    Tool,
    Bundle,
}

impl ListingKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ListingKind::Tool => "tool",
            ListingKind::Bundle => "bundle",
        }
    }

    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        match raw {
            "tool" => Ok(ListingKind::Tool),
            "bundle" => Ok(ListingKind::Bundle),
            _ => Err(Invalid { field: "Kind", reason: "must be tool or bundle".into() }),
        }
    }

    /// The URL segment of this kind's pages and endpoints: `tools` or `bundles`.
    pub fn plural(self) -> &'static str {
        match self {
            ListingKind::Tool => "tools",
            ListingKind::Bundle => "bundles",
        }
    }
}

/// Where a fork came from: the source listing and the version it copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkedFrom {
    pub id: ToolId,
    pub version: i64,
}

/// Moderation state; only `Active` tools are listed and served to everyone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Active,
    /// Out of browse and search; its page and endpoint answer its owner and admins only.
    Hidden,
    /// Listed, but its endpoint and Run panel refuse calls.
    Disabled,
    /// Soft-deleted: seen by admins only (who may restore it); the name stays taken.
    Deleted,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Hidden => "hidden",
            Status::Disabled => "disabled",
            Status::Deleted => "deleted",
        }
    }

    /// A stored status. One this code does not know (a newer replica's, say)
    /// reads as disabled: it refuses calls until someone who knows looks.
    pub(crate) fn parse(raw: &str) -> Self {
        match raw {
            "active" => Status::Active,
            "hidden" => Status::Hidden,
            "disabled" => Status::Disabled,
            "deleted" => Status::Deleted,
            unknown => {
                tracing::warn!(status = unknown, "a listing has a status this version does not know; it is treated as disabled");
                Status::Disabled
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub id: ToolId,
    pub kind: ListingKind,
    pub department: String,
    pub department_id: i64,
    pub name: String,
    pub title: String,
    pub description: String,
    pub tags: Vec<String>,
    pub visibility: Visibility,
    pub status: Status,
    pub owner_id: UserId,
    pub owner_username: String,
    pub owner_display_name: String,
    pub published_version: Option<i64>,
    /// Published by an editor, waiting for an admin's review (departments that require it).
    pub pending_version: Option<i64>,
    /// A new title and description waiting for an admin's review (departments
    /// that require it): models read `title` and `description` until approved.
    pub pending_text: Option<PendingText>,
    /// Why the last version waiting for review was rejected.
    pub review_note: Option<String>,
    /// The admin's note on the last moderation action (hide, disable, …), for the author.
    pub moderation_note: Option<String>,
    pub latest_version: Option<i64>,
    pub read_only_hint: bool,
    pub destructive_hint: bool,
    pub fetch_allow: Vec<String>,
    pub timeout_ms: i64,
    pub memory_mib: i64,
    /// Whether calls may run as tasks (and so past the usual time limit).
    pub task_support: TaskSupport,
    /// Served as a tool, a prompt or a resource.
    pub serves: Serves,
    /// The department's setting: its tools' calls that write wait for approval
    /// ([`approvals`]); read with the row, so a call's gate costs no query.
    pub approval_required: bool,
    /// The apps it acts as its caller at ([`crate::connections`]).
    #[serde(default)]
    pub accounts: Vec<String>,
    /// A bundle's code mode; always `Off` for a tool.
    pub code_mode: CodeMode,
    pub forked_from: Option<ForkedFrom>,
    pub created_at: i64,
    pub updated_at: i64,
    /// Set when an endpoint pinned this view of the listing to one version
    /// (`…/{name}@v3`, [`Tools::pinned`]): `published_version` is then that
    /// version, served whatever is published later.
    #[serde(default)]
    pub pinned: bool,
}

/// An endpoint's last path segment: a listing's name, or `name@vN` for its
/// version N; `None` when the suffix is not a version.
pub fn endpoint_name(segment: &str) -> Option<(&str, Option<i64>)> {
    let Some((name, version)) = segment.split_once('@') else { return Some((segment, None)) };
    let digits = version.strip_prefix('v')?;
    if digits.is_empty() || digits.len() > 9 || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((name, Some(digits.parse().ok()?)))
}

impl Tool {
    /// `department/name`, the tool's address in URLs and MCP endpoints.
    pub fn slug(&self) -> String {
        format!("{}/{}", self.department, self.name)
    }

    /// How the audit log and the change feed name this listing: `tool:dept/name` or `bundle:dept/name`.
    pub fn audit_target(&self) -> String {
        format!("{}:{}", self.kind.as_str(), self.slug())
    }

    /// The audit action of serving version `n` instead of the published one.
    pub fn publish_action(&self, n: i64) -> String {
        self.action(match self.published_version {
            Some(p) if n < p => "rolled_back",
            _ => "published",
        })
    }

    /// The audit action for `verb` done to this listing, e.g. `bundle.published`.
    pub fn action(&self, verb: &str) -> String {
        format!("{}.{verb}", self.kind.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// Also returned for tools the user may not see, so their existence does not leak.
    #[error("No such tool.")]
    NotFound,
    #[error("You may not change this tool.")]
    Forbidden,
    #[error(
        "Members browse, run and connect to their department's tools; ask a maintainer to make you an author to create and publish them."
    )]
    NotAnAuthor,
    #[error("A tool named “{0}” already exists in your department.")]
    NameTaken(String),
    #[error("Version {0} does not exist.")]
    NoSuchVersion(i64),
    #[error("This tool has no published version yet.")]
    NotPublished,
    /// A write raced others and lost; trying again will do.
    #[error("{0}")]
    Conflict(String),
    /// A name the listing does not serve (to this caller).
    #[error("There is no tool named “{0}” here.")]
    UnknownTool(String),
    #[error("This listing has been disabled by an administrator; it refuses calls.")]
    Disabled,
    #[error("{0}")]
    BadArguments(String),
    #[error("The sandbox is busy; try again in a moment.")]
    Busy,
    /// This caller has more calls in flight than their share; others are not refused.
    #[error("Too many calls in flight for you; try again shortly.")]
    TooManyCalls,
    /// A publish that may break callers' calls, not confirmed: the changes, `path: what`.
    #[error("This version may break calls made to the published version ({}); confirm to publish it.", .0.join("; "))]
    Breaking(Vec<String>),
    /// Tests are required before a publish, and the tool has none.
    #[error("Publishing here needs at least one test case that passes: add one under Test cases, then publish.")]
    TestsMissing,
    /// Tests are required before a publish, and these failed against the version.
    #[error("Publishing here needs every test case to pass; {} failed: {}.", .0.len(),
        .0.iter().map(|r| format!("“{}”: {}", r.name, r.reason.as_deref().unwrap_or("failed"))).collect::<Vec<_>>().join("; "))]
    TestsFailed(Vec<TestCaseResult>),
    /// What models would read holds text a person would not see, or text
    /// addressed to the model: held until an admin accepts it.
    #[error("Held for an administrator: what models read of this tool has {}. An administrator has been asked to look; once they accept it, publish again, or change the text.",
        .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    HiddenInstructions(Vec<crate::scan::Finding>),
    /// The call waits for a person's approval, or was refused it ([`approvals`]).
    #[error(transparent)]
    Held(approvals::Held),
    /// The tool acts as its caller at an app they have not connected.
    #[error(transparent)]
    NotConnected(crate::connections::NotConnected),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for ToolError {
    fn from(e: sqlx::Error) -> Self {
        ToolError::Store(e.into())
    }
}

impl From<crate::sandbox::SandboxError> for ToolError {
    fn from(e: crate::sandbox::SandboxError) -> Self {
        use crate::sandbox::SandboxError;
        match e {
            SandboxError::Busy => ToolError::Busy,
            SandboxError::TooManyCalls => ToolError::TooManyCalls,
            SandboxError::WorkerLost => {
                tracing::error!(error = %e, "sandbox failure");
                ToolError::Busy
            }
        }
    }
}

/// A listing's new title and description, waiting for review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingText {
    pub title: String,
    pub description: String,
}

/// What the "New tool" form sends, parsed.
#[derive(Debug, Clone)]
pub struct NewTool {
    pub name: ToolName,
    pub title: Title,
    pub description: Description,
    pub tags: Tags,
    pub visibility: Visibility,
}

impl NewTool {
    pub fn parse(name: &str, title: &str, description: &str, tags: &str, visibility: &str) -> Result<Self, Invalid> {
        Ok(Self {
            name: ToolName::parse(name)?,
            title: Title::parse(title)?,
            description: Description::parse(description)?,
            tags: Tags::parse(tags)?,
            visibility: Visibility::parse(visibility)?,
        })
    }
}

/// Settings an author changes without making a new version.
#[derive(Debug, Clone)]
pub struct ToolSettings {
    pub title: Title,
    pub description: Description,
    pub tags: Tags,
    pub visibility: Visibility,
    pub read_only_hint: bool,
    pub destructive_hint: bool,
    pub fetch_allow: Vec<String>,
    pub timeout_ms: i64,
    pub memory_mib: i64,
    pub task_support: TaskSupport,
    pub serves: Serves,
}

/// The first code a new tool starts with: shows the globals at work.
pub const STARTER_CODE: &str = "// The body of an async function. Arguments are globals: $name, or args.name.\nconsole.log('called with', args);\nreturn `Hello, ${$name}!`;\n";

const TOOL_SELECT: &str = "SELECT t.id, t.kind, t.department_id, d.name AS dept, t.name, t.title, t.description, t.tags, t.visibility, t.status, \
     t.owner_id, u.username AS owner_username, u.display_name AS owner_display_name, t.published_version, \
     t.pending_version, t.pending_title, t.pending_description, t.review_note, t.moderation_note, \
     (SELECT MAX(v.version) FROM tool_versions v WHERE v.tool_id = t.id) AS latest_version, \
     t.read_only_hint, t.destructive_hint, t.fetch_allow, t.timeout_ms, t.memory_mib, t.task_support, t.serves, t.accounts, t.resource_uri, t.resource_mime, d.approval_required, t.code_mode, t.forked_from_tool_id, t.forked_from_version, t.created_at, t.updated_at \
     FROM tools t JOIN departments d ON d.id = t.department_id JOIN users u ON u.id = t.owner_id";

fn tool_from_row(r: &sqlx::any::AnyRow) -> Result<Tool, sqlx::Error> {
    let tags: String = r.try_get("tags")?;
    let allow: String = r.try_get("fetch_allow")?;
    let forked_from = match (r.try_get::<Option<i64>, _>("forked_from_tool_id")?, r.try_get::<Option<i64>, _>("forked_from_version")?) {
        (Some(id), Some(version)) => Some(ForkedFrom { id: ToolId(id), version }),
        _ => None,
    };
    Ok(Tool {
        id: ToolId(r.try_get("id")?),
        kind: ListingKind::parse(&r.try_get::<String, _>("kind")?).unwrap_or(ListingKind::Tool),
        department_id: r.try_get("department_id")?,
        department: r.try_get("dept")?,
        name: r.try_get("name")?,
        title: r.try_get("title")?,
        description: r.try_get("description")?,
        tags: tags.split_whitespace().map(str::to_owned).collect(),
        visibility: Visibility::parse(&r.try_get::<String, _>("visibility")?).unwrap_or(Visibility::Private),
        status: Status::parse(&r.try_get::<String, _>("status")?),
        owner_id: UserId(r.try_get("owner_id")?),
        owner_username: r.try_get("owner_username")?,
        owner_display_name: r.try_get("owner_display_name")?,
        published_version: r.try_get("published_version")?,
        pending_version: r.try_get("pending_version")?,
        review_note: r.try_get("review_note")?,
        pending_text: match (r.try_get::<Option<String>, _>("pending_title")?, r.try_get::<Option<String>, _>("pending_description")?) {
            (Some(title), Some(description)) => Some(PendingText { title, description }),
            _ => None,
        },
        moderation_note: r.try_get("moderation_note")?,
        latest_version: r.try_get("latest_version")?,
        read_only_hint: r.try_get::<i64, _>("read_only_hint")? != 0,
        destructive_hint: r.try_get::<i64, _>("destructive_hint")? != 0,
        fetch_allow: allow.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect(),
        timeout_ms: r.try_get("timeout_ms")?,
        memory_mib: r.try_get("memory_mib")?,
        task_support: TaskSupport::parse(&r.try_get::<String, _>("task_support")?).unwrap_or_default(),
        serves: Serves::from_columns(&r.try_get::<String, _>("serves")?, r.try_get("resource_uri")?, r.try_get("resource_mime")?),
        approval_required: r.try_get::<i64, _>("approval_required")? != 0,
        accounts: r.try_get::<String, _>("accounts")?.lines().map(str::to_owned).collect(),
        code_mode: CodeMode::parse(&r.try_get::<String, _>("code_mode")?).unwrap_or(CodeMode::Off),
        forked_from,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
        pinned: false,
    })
}

/// Who may see a tool: everyone for public ones, the department for
/// department ones, the owner for private ones; admins see everything.
/// Hidden tools are seen by their owners and admins only, deleted ones by admins only.
pub fn can_see(user: &User, tool: &Tool) -> bool {
    if user.is_admin {
        return true;
    }
    match tool.status {
        Status::Deleted => return false,
        _ if tool.owner_id == user.id => return true,
        Status::Hidden => return false,
        Status::Active | Status::Disabled => {}
    }
    match tool.visibility {
        Visibility::Everyone => true,
        Visibility::Department => tool.department_id == user.department.id.0,
        Visibility::Private => false,
    }
}

/// Who may change a tool: its department's authors and maintainers (the
/// owner alone for private tools), an owner who is still an author, and admins.
pub fn can_edit(user: &User, tool: &Tool) -> bool {
    user.is_admin
        || (user.role >= Role::Author
            && (tool.owner_id == user.id || (tool.department_id == user.department.id.0 && tool.visibility != Visibility::Private)))
}

/// Parses the `$fetch` allow-list: one host or `*.domain` per line.
pub fn parse_fetch_allow(raw: &str) -> Result<Vec<String>, Invalid> {
    raw.lines().map(str::trim).filter(|l| !l.is_empty()).map(|line| crate::names::parse_host_entry("Fetch allow-list", line)).collect()
}

impl Tools<'_> {
    pub(crate) async fn tool_row(self, id: ToolId) -> Result<Option<Tool>, ToolError> {
        let sql = format!("{TOOL_SELECT} WHERE t.id = $1");
        let row = sqlx::query(&sql).bind(id.0).fetch_optional(self.core.db().pool()).await?;
        Ok(row.as_ref().map(tool_from_row).transpose()?)
    }

    /// Listings by id, whoever may see them: callers check [`can_see`].
    pub(crate) async fn tools_by_ids(self, ids: &[ToolId]) -> Result<std::collections::HashMap<ToolId, Tool>, ToolError> {
        if ids.is_empty() {
            return Ok(Default::default());
        }
        let list: Vec<String> = ids.iter().map(|id| id.0.to_string()).collect();
        let sql = format!("{TOOL_SELECT} WHERE t.id IN ({})", list.join(", "));
        let rows = sqlx::query(&sql).fetch_all(self.core.db().pool()).await?;
        rows.iter().map(|r| tool_from_row(r).map(|t| (t.id, t))).collect::<Result<_, _>>().map_err(Into::into)
    }

    /// A tool the user may see, or `NotFound`.
    pub async fn tool(self, user: &User, id: ToolId) -> Result<Tool, ToolError> {
        self.tool_row(id).await?.filter(|t| can_see(user, t)).ok_or(ToolError::NotFound)
    }

    /// A tool the user may change; `NotFound` when they may not even see it.
    pub async fn tool_for_edit(self, user: &User, id: ToolId) -> Result<Tool, ToolError> {
        let tool = self.tool(user, id).await?;
        if can_edit(user, &tool) {
            Ok(tool)
        } else {
            Err(ToolError::Forbidden)
        }
    }

    /// A tool (not a bundle) the user may see, by `department/name`.
    pub async fn tool_by_slug(self, user: &User, department: &str, name: &str) -> Result<Tool, ToolError> {
        self.listing_by_slug(user, ListingKind::Tool, department, name).await
    }

    /// A listing of `kind` the user may see, by `department/name`.
    pub async fn listing_by_slug(self, user: &User, kind: ListingKind, department: &str, name: &str) -> Result<Tool, ToolError> {
        self.listing_row(kind, department, name).await?.filter(|t| can_see(user, t)).ok_or(ToolError::NotFound)
    }

    /// [`Tools::listing_by_slug`] for the MCP endpoints, through the call
    /// cache: what they read of a listing changes only by audited writes.
    pub async fn listing_for_call(self, user: &User, kind: ListingKind, department: &str, name: &str) -> Result<Tool, ToolError> {
        let key = (kind, department.to_owned(), name.to_owned());
        let cache = &self.core.call_cache().listings;
        let tool = match cache.get(&key) {
            Some(t) => t,
            None => {
                let at = cache.epoch();
                let t = self.listing_row(kind, department, name).await?.ok_or(ToolError::NotFound)?;
                cache.insert(key, t.clone(), at);
                t
            }
        };
        Some(tool).filter(|t| can_see(user, t)).ok_or(ToolError::NotFound)
    }

    async fn listing_row(self, kind: ListingKind, department: &str, name: &str) -> Result<Option<Tool>, ToolError> {
        let sql = format!("{TOOL_SELECT} WHERE d.name = $1 AND t.name = $2 AND t.kind = $3");
        let row = sqlx::query(&sql).bind(department).bind(name).bind(kind.as_str()).fetch_optional(self.core.db().pool()).await?;
        Ok(row.as_ref().map(tool_from_row).transpose()?)
    }

    /// A tool with code of its own (not a bundle) the user may change: what
    /// drafts, versions of code, test cases and `$env` belong to.
    pub(crate) async fn code_tool_for_edit(self, user: &User, id: ToolId) -> Result<Tool, ToolError> {
        Some(self.tool_for_edit(user, id).await?).filter(|t| t.kind == ListingKind::Tool).ok_or(ToolError::NotFound)
    }

    /// "My tools": the tools and bundles the user may edit in their department, newest change first.
    pub async fn tools_for_author(self, user: &User) -> Result<Vec<Tool>, ToolError> {
        let sql = format!("{TOOL_SELECT} WHERE t.department_id = $1 OR t.owner_id = $2 ORDER BY t.updated_at DESC");
        let rows = sqlx::query(&sql).bind(user.department.id.0).bind(user.id.0).fetch_all(self.core.db().pool()).await?;
        let tools: Vec<Tool> = rows.iter().map(tool_from_row).collect::<Result<_, _>>()?;
        Ok(tools.into_iter().filter(|t| can_see(user, t) && can_edit(user, t)).collect())
    }

    /// Creates a tool in the user's own department (never another: the
    /// department is not something the client gets to say).
    pub async fn create_tool(self, user: &User, new: NewTool) -> Result<Tool, ToolError> {
        self.create_listing(user, ListingKind::Tool, new).await
    }

    /// Creates an empty bundle in the user's own department.
    pub async fn create_bundle(self, user: &User, new: NewTool) -> Result<Tool, ToolError> {
        self.create_listing(user, ListingKind::Bundle, new).await
    }

    async fn create_listing(self, user: &User, kind: ListingKind, new: NewTool) -> Result<Tool, ToolError> {
        if !may_author(user, user.department.id.0) {
            return Err(ToolError::NotAnAuthor);
        }
        let mut tx = self.core.begin().await?;
        let id = match write_new_listing(&mut tx, user, kind, &new).await {
            Ok(id) => id,
            Err(e) => return Err(rolled_back(tx, e).await),
        };
        tx.commit().await?;
        self.tool(user, id).await
    }

    pub async fn update_tool_settings(self, user: &User, id: ToolId, s: ToolSettings) -> Result<Tool, ToolError> {
        let before = self.tool_for_edit(user, id).await?;
        self.check_settings(&s).await?;
        if let (Some(uri), Some(n)) = (s.serves.uri(), before.published_version) {
            // Served at once: the published version's arguments must fit the URI.
            uri.fits(&self.version_row(id, n).await?.args)?;
        }
        // Models read the new title and description at once where a version is
        // served: they are scanned with its arguments first.
        let held = match (s.texts_differ(&before), before.published_version) {
            (true, Some(n)) => {
                let version = self.version_row(id, n).await?;
                self.screen(user, &s.applied_to(&before), (&version).into(), n).await?;
                self.texts_waiting(user, &before, &s).await?
            }
            _ => None,
        };
        let mut tx = self.core.begin().await?;
        write_settings(&mut tx, user, &before, &s, held.as_ref()).await?;
        tx.commit().await?;
        self.tool(user, id).await
    }

    /// Refuses limits and hosts beyond the admin's policy.
    pub(crate) async fn check_settings(self, s: &ToolSettings) -> Result<(), ToolError> {
        let policy = Policies::new(self.core).policy().await?;
        let most = policy.max_timeout_for(s.task_support);
        if !(100..=most).contains(&s.timeout_ms) {
            let reason = match s.task_support {
                TaskSupport::Forbidden => {
                    format!("must be between 100 and {most} ms (a tool whose calls may run as tasks may take longer)")
                }
                _ => format!("must be between 100 and {most} ms"),
            };
            return Err(Invalid { field: "Time limit", reason }.into());
        }
        if !(1..=policy.max_memory_mib).contains(&s.memory_mib) {
            return Err(Invalid { field: "Memory limit", reason: format!("must be between 1 and {} MiB", policy.max_memory_mib) }.into());
        }
        if let Some(host) = s.fetch_allow.iter().find(|h| !policy.permits_host(h)) {
            return Err(Invalid {
                field: "Fetch allow-list", reason: format!("the administrator does not allow tools to reach “{host}”")
            }
            .into());
        }
        Ok(())
    }

    /// The title and description `s` gives `before`, when they wait for an
    /// admin: in a department that requires review, an editor's new text for
    /// a published tool waits like a version does (the form sends the waiting
    /// text back; sending the approved one withdraws it).
    pub(crate) async fn texts_waiting(self, user: &User, before: &Tool, s: &ToolSettings) -> Result<Option<PendingText>, ToolError> {
        if !s.texts_differ(before) || before.published_version.is_none() || user.is_admin {
            return Ok(None);
        }
        Ok(self
            .review_required(before.department_id)
            .await?
            .then(|| PendingText { title: s.title.as_str().to_owned(), description: s.description.as_str().to_owned() }))
    }
}

impl ToolSettings {
    /// Whether models would read another title or description.
    pub(crate) fn texts_differ(&self, tool: &Tool) -> bool {
        self.title.as_str() != tool.title || self.description.as_str() != tool.description
    }

    /// `tool` as these settings make it.
    pub(crate) fn applied_to(&self, tool: &Tool) -> Tool {
        Tool {
            title: self.title.as_str().to_owned(),
            description: self.description.as_str().to_owned(),
            tags: self.tags.as_slice().to_vec(),
            visibility: self.visibility,
            read_only_hint: self.read_only_hint,
            destructive_hint: self.destructive_hint,
            fetch_allow: self.fetch_allow.clone(),
            timeout_ms: self.timeout_ms,
            memory_mib: self.memory_mib,
            task_support: self.task_support,
            serves: self.serves.clone(),
            ..tool.clone()
        }
    }
}

/// Writes `s` over `before`'s settings in `tx`, with the audit row; with
/// `held`, the new title and description wait for review and models keep
/// reading the approved ones.
pub(crate) async fn write_settings(
    tx: &mut Tx,
    user: &User,
    before: &Tool,
    s: &ToolSettings,
    held: Option<&PendingText>,
) -> Result<(), ToolError> {
    let (title, description) = match held {
        Some(_) => (before.title.as_str(), before.description.as_str()),
        None => (s.title.as_str(), s.description.as_str()),
    };
    sqlx::query(
        "UPDATE tools SET title = $1, description = $2, tags = $3, visibility = $4, read_only_hint = $5, destructive_hint = $6, \
         fetch_allow = $7, timeout_ms = $8, memory_mib = $9, updated_at = $10, pending_title = $12, pending_description = $13, \
         cjk_pairs = $14, task_support = $15, serves = $16, resource_uri = $17, resource_mime = $18 WHERE id = $11",
    )
    .bind(title)
    .bind(description)
    .bind(s.tags.joined())
    .bind(s.visibility.as_str())
    .bind(i64::from(s.read_only_hint))
    .bind(i64::from(s.destructive_hint))
    .bind(s.fetch_allow.join("\n"))
    .bind(s.timeout_ms)
    .bind(s.memory_mib)
    .bind(now_ms())
    .bind(before.id.0)
    .bind(held.map(|p| p.title.as_str()))
    .bind(held.map(|p| p.description.as_str()))
    .bind(cjk_pairs(title, description))
    .bind(s.task_support.as_str())
    .bind(s.serves.kind())
    .bind(s.serves.uri().map(|u| u.as_str().to_owned()))
    .bind(s.serves.mime().map(|m| m.as_str().to_owned()))
    .execute(&mut **tx)
    .await?;
    audit::record(
        tx,
        Some(user.id),
        &before.action("settings_changed"),
        &before.audit_target(),
        Some(serde_json::json!({"title": before.title, "visibility": before.visibility})),
        Some(serde_json::json!({"title": title, "visibility": s.visibility, "title_waiting_for_review": held.map(|p| &p.title)})),
    )
    .await?;
    Ok(())
}

/// Inserts a listing owned by `user` in their department, with its audit row.
pub(crate) async fn write_new_listing(tx: &mut Tx, user: &User, kind: ListingKind, new: &NewTool) -> Result<ToolId, ToolError> {
    let id = insert_listing(tx, user, kind, new, None).await?;
    let target = format!("{}:{}/{}", kind.as_str(), user.department.name, new.name);
    let action = format!("{}.created", kind.as_str());
    audit::record(tx, Some(user.id), &action, &target, None, Some(serde_json::json!({"title": new.title.as_str()}))).await?;
    Ok(id)
}

/// Ends `tx` now and hands back `e`. A dropped transaction rolls back only
/// later, and until then SQLite's write lock makes the next writer fail.
pub(crate) async fn rolled_back(tx: crate::store::Tx, e: ToolError) -> ToolError {
    match tx.rollback().await {
        Ok(()) => e,
        Err(rollback) => {
            tracing::warn!(error = %rollback, "could not roll back after an error");
            e
        }
    }
}

/// Inserts a listing owned by `user` in their department; a taken name is `NameTaken`.
pub(crate) async fn insert_listing(
    tx: &mut Tx,
    user: &User,
    kind: ListingKind,
    new: &NewTool,
    forked_from: Option<ForkedFrom>,
) -> Result<ToolId, ToolError> {
    let now = now_ms();
    let inserted = sqlx::query(
        "INSERT INTO tools (kind, department_id, name, title, description, tags, visibility, owner_id, \
         forked_from_tool_id, forked_from_version, created_at, updated_at, cjk_pairs) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12) RETURNING id",
    )
    .bind(kind.as_str())
    .bind(user.department.id.0)
    .bind(new.name.as_str())
    .bind(new.title.as_str())
    .bind(new.description.as_str())
    .bind(new.tags.joined())
    .bind(new.visibility.as_str())
    .bind(user.id.0)
    .bind(forked_from.map(|f| f.id.0))
    .bind(forked_from.map(|f| f.version))
    .bind(now)
    .bind(cjk_pairs(new.title.as_str(), new.description.as_str()))
    .fetch_one(&mut **tx)
    .await
    .map_err(StoreError::from);
    match inserted {
        Ok(row) => Ok(ToolId(row.try_get("id")?)),
        Err(e) if e.is_unique_violation() => Err(ToolError::NameTaken(new.name.to_string())),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::{endpoint_name, Status};

    #[test]
    fn an_endpoint_names_a_listing_or_one_version_of_it() {
        assert_eq!(endpoint_name("echo"), Some(("echo", None)));
        assert_eq!(endpoint_name("echo@v3"), Some(("echo", Some(3))));
        assert_eq!(endpoint_name("echo@v12"), Some(("echo", Some(12))));
        for bad in ["echo@3", "echo@v", "echo@v0", "echo@v03", "echo@v+3", "echo@v-1", "echo@v3x", "echo@latest", "echo@v9999999999"] {
            assert_eq!(endpoint_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_status_this_version_does_not_know_reads_as_disabled() {
        for s in [Status::Active, Status::Hidden, Status::Disabled, Status::Deleted] {
            assert_eq!(Status::parse(s.as_str()), s);
        }
        assert_eq!(Status::parse("quarantined"), Status::Disabled);
        assert_eq!(Status::parse(""), Status::Disabled);
    }
}
