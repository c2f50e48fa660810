//! Bundles: one MCP endpoint serving a chosen set of tools. A bundle is a
//! listing (a `tools` row of kind `bundle`) whose versions list members: each
//! a tool the author could see, pinned to one of its versions or following
//! its published one, under a name unique within the bundle.
//!
//! What a bundle serves is decided per caller and per call: members the caller
//! may not see, and hidden or disabled tools, are left out, so a tool that is
//! moderated away disappears from every bundle at once.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::accounts::User;
use crate::codegen::{ListingApi, ToolDef, RUN_CODE};
use crate::ids::ToolId;
use crate::names::{Invalid, ToolName};
use crate::policy::Policies;
use crate::serves::Serves;
use crate::tools::Tools;
use crate::tools::{
    can_edit, can_see, insert_version, member_label, parse_changelog, rolled_back, ListingKind, Source, Status, Tool, ToolError,
};
use crate::upstream::Upstreams;
use crate::upstream::{ExternalMember, ServedExternal};
use crate::{audit, now_ms};

handle! {
    /// MCP bundles: their members, versions and external servers.
    Bundles
}

/// The most members a bundle version may have.
pub const MAX_MEMBERS: usize = 64;

/// One member as the bundle editor sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberSpec {
    pub tool: ToolId,
    /// `None`: follow the tool's published version.
    pub pinned_version: Option<i64>,
    /// The name models see; blank means the tool's own name.
    pub exposed_name: String,
}

/// A member of a saved bundle version, as the bundle's pages show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub tool_id: ToolId,
    /// `department/name` of the tool.
    pub slug: String,
    pub title: String,
    pub exposed_name: String,
    pub pinned_version: Option<i64>,
    /// The version calls run: the pinned one, or the tool's published one.
    pub serves: Option<i64>,
    /// Why the member is not served to this user right now, if it is not.
    pub unavailable: Option<String>,
}

/// A tool a bundle serves: the tool as the caller sees it, the version that
/// runs, and the name it goes by in the bundle.
#[derive(Debug, Clone)]
pub struct ServedTool {
    pub name: String,
    pub tool: Tool,
    pub version: i64,
}

/// What a bundle's endpoint serves to one caller.
#[derive(Debug, Clone, Default)]
pub struct Served {
    pub tools: Vec<ServedTool>,
    /// Tools of external MCP servers, served after the bundle's own tools.
    pub external: Vec<ServedExternal>,
    /// Audit targets of every member, served or not: a change to any of them
    /// may change the bundle's tool list.
    pub member_targets: Vec<String>,
}

/// One thing an endpoint serves, and what it is served as.
#[derive(Debug, Clone)]
pub struct ServedDef {
    pub def: ToolDef,
    pub serves: Serves,
}

impl Bundles<'_> {
    /// Saves the bundle's next version with `members`, in that order. Every
    /// member must be a tool the author can see, with the version it pins (or
    /// a published one to follow); exposed names must be unique.
    pub async fn save_bundle_version(self, user: &User, id: ToolId, members: &[MemberSpec], changelog: &str) -> Result<i64, ToolError> {
        self.save_bundle_version_with_external(user, id, members, &[], changelog).await
    }

    /// [`Bundles::save_bundle_version`], with tools of external MCP servers of
    /// the bundle's department after the members (exposed as `server__tool`).
    pub async fn save_bundle_version_with_external(
        self,
        user: &User,
        id: ToolId,
        members: &[MemberSpec],
        external: &[ExternalMember],
        changelog: &str,
    ) -> Result<i64, ToolError> {
        let bundle = self.bundle_for_edit(user, id).await?;
        let changelog = parse_changelog(changelog)?;
        let checked = self.check_members(user, members, external.len()).await?;
        let external = Upstreams::new(self.core).check_external(&bundle, external).await?;
        let mut taken: HashSet<String> = checked.iter().map(|(_, _, name)| name.as_str().to_ascii_lowercase()).collect();
        if let Some(clash) = external.iter().find(|e| !taken.insert(e.name.to_ascii_lowercase())) {
            return Err(ToolError::Invalid(Invalid {
                field: "Tools",
                reason: format!("two members would be called “{}”: add it once, or rename the tool", clash.name),
            }));
        }
        let mut tx = self.core.begin().await?;
        let version = match insert_version(&mut tx, user, id, &Source::empty(), &changelog).await {
            Ok(v) => v,
            Err(e) => return Err(rolled_back(tx, e).await),
        };
        for (position, (tool, pinned, name)) in checked.iter().enumerate() {
            sqlx::query(
                "INSERT INTO bundle_items (bundle_id, version, position, tool_id, pinned_version, exposed_name) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(id.0)
            .bind(version)
            .bind(position as i64)
            .bind(tool.id.0)
            .bind(*pinned)
            .bind(name.as_str())
            .execute(&mut *tx)
            .await?;
        }
        for (position, e) in external.iter().enumerate() {
            sqlx::query(
                "INSERT INTO bundle_external_items (bundle_id, version, position, server_id, tool_name) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(id.0)
            .bind(version)
            .bind(position as i64)
            .bind(e.server_id)
            .bind(&e.tool.name)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("UPDATE tools SET updated_at = $1 WHERE id = $2").bind(now_ms()).bind(id.0).execute(&mut *tx).await?;
        let mut listed: Vec<String> = checked.iter().map(|(t, pinned, name)| member_label(name.as_str(), &t.slug(), *pinned)).collect();
        listed.extend(external.iter().map(|e| format!("{} = external {}", e.name, e.server)));
        audit::record(
            &mut tx,
            Some(user.id),
            &bundle.action("version_saved"),
            &bundle.audit_target(),
            None,
            Some(serde_json::json!({"version": version, "changelog": changelog, "members": listed})),
        )
        .await?;
        tx.commit().await?;
        Ok(version)
    }

    /// The members of version `n` of a bundle `user` may see, each with what
    /// it serves to them.
    pub async fn bundle_members(self, user: &User, id: ToolId, n: i64) -> Result<Vec<Member>, ToolError> {
        let bundle = Tools::new(self.core).tool(user, id).await?;
        if bundle.kind != ListingKind::Bundle {
            return Err(ToolError::NotFound);
        }
        let items = Tools::new(self.core).bundle_items(id, n).await?;
        let tools = Tools::new(self.core).tools_by_ids(&items.iter().map(|i| i.tool_id).collect::<Vec<_>>()).await?;
        Ok(items
            .into_iter()
            .map(|item| {
                let tool = tools.get(&item.tool_id).filter(|t| can_see(user, t));
                let serves = item.pinned_version.or(tool.and_then(|t| t.published_version));
                let unavailable = match tool {
                    None => Some("you may not see this tool".to_owned()),
                    Some(t) if t.status != Status::Active => Some(format!("{} by an administrator", t.status.as_str())),
                    Some(_) if serves.is_none() => Some("not published".to_owned()),
                    Some(_) => None,
                };
                Member {
                    tool_id: item.tool_id,
                    // A member the user may not see stays anonymous.
                    slug: tool.map(Tool::slug).unwrap_or_else(|| "(not visible to you)".into()),
                    title: tool.map(|t| t.title.clone()).unwrap_or_default(),
                    exposed_name: item.exposed_name,
                    pinned_version: item.pinned_version,
                    serves,
                    unavailable,
                }
            })
            .collect())
    }

    /// What `bundle`'s published version serves to `user` (already checked
    /// to see the bundle): visible, active members with a version to run.
    pub async fn served_tools(self, user: &User, bundle: &Tool) -> Result<Served, ToolError> {
        let Some(n) = bundle.published_version.filter(|_| bundle.kind == ListingKind::Bundle) else { return Ok(Served::default()) };
        let items = Tools::new(self.core).bundle_items(bundle.id, n).await?;
        let tools = Tools::new(self.core).tools_by_ids(&items.iter().map(|i| i.tool_id).collect::<Vec<_>>()).await?;
        let mut served = Served::default();
        for item in items {
            let Some(tool) = tools.get(&item.tool_id) else { continue };
            served.member_targets.push(tool.audit_target());
            if !can_see(user, tool) || tool.status != Status::Active {
                continue;
            }
            // A version never served reaches nobody but the tool's editors, a bundle or not.
            if item.pinned_version.is_some() && !item.pinned_published && !can_edit(user, tool) {
                continue;
            }
            if let Some(version) = item.pinned_version.or(tool.published_version) {
                served.tools.push(ServedTool { name: item.exposed_name, tool: tool.clone(), version });
            }
        }
        for (member, external) in Upstreams::new(self.core).external_items(bundle, n).await? {
            served.member_targets.push(crate::upstream::audit_target(&member.server));
            served.external.extend(external);
        }
        Ok(served)
    }

    /// The tools `listing` serves to `user`: the tool itself at its published
    /// version, or the bundle's members as [`Bundles::served_tools`] decides.
    pub async fn served_by(self, user: &User, listing: &Tool) -> Result<Vec<ServedTool>, ToolError> {
        match listing.kind {
            ListingKind::Tool => Ok(listing
                .published_version
                .map(|version| ServedTool { name: listing.name.clone(), tool: listing.clone(), version })
                .into_iter()
                .collect()),
            ListingKind::Bundle => Ok(self.served_tools(user, listing).await?.tools),
        }
    }

    /// The tools `listing` serves to `user`, as `tools/list` and the
    /// generated APIs describe them (not its prompts or resources).
    pub async fn tool_defs(self, user: &User, listing: &Tool) -> Result<Vec<ToolDef>, ToolError> {
        let defs = self.served_defs(user, listing).await?;
        Ok(defs.into_iter().filter(|d| d.serves == Serves::Tool).map(|d| d.def).collect())
    }

    /// Everything `listing` serves to `user`: tools, prompts and resources,
    /// each described as a tool is (a prompt's arguments are its `input_schema`).
    pub async fn served_defs(self, user: &User, listing: &Tool) -> Result<Vec<ServedDef>, ToolError> {
        let (own, external) = match listing.kind {
            ListingKind::Tool => (self.served_by(user, listing).await?, Vec::new()),
            ListingKind::Bundle => {
                let served = self.served_tools(user, listing).await?;
                (served.tools, served.external)
            }
        };
        let mut defs = Vec::new();
        let policy = if own.is_empty() { Default::default() } else { Policies::new(self.core).policy().await? };
        for s in own {
            let v = Tools::new(self.core).version_row(s.tool.id, s.version).await?;
            let permissions = Tools::new(self.core).permissions_under(&s.tool, &policy).await?;
            let def = ToolDef {
                name: s.name,
                title: s.tool.title,
                description: s.tool.description,
                input_schema: crate::schema::to_json_schema(&v.args),
                output_schema: v.output_schema,
                // Enforced: a read-only tool's `$fetch` sends nothing but GET and HEAD.
                read_only: !permissions.writes,
                destructive: permissions.writes && s.tool.destructive_hint,
                permissions: Some(permissions),
            };
            defs.push(ServedDef { def, serves: s.tool.serves });
        }
        defs.extend(
            external
                .into_iter()
                .map(|e| ToolDef {
                    permissions: None,
                    read_only: e.tool.hint("readOnlyHint"),
                    destructive: e.tool.hint("destructiveHint"),
                    name: e.name,
                    title: e.tool.title,
                    description: e.tool.description,
                    input_schema: e.tool.input_schema,
                    output_schema: e.tool.output_schema,
                })
                .map(|def| ServedDef { def, serves: Serves::Tool }),
        );
        Ok(defs)
    }

    /// The TypeScript API, OpenAI definitions and token costs of what
    /// `listing` serves to `user` (a bundle's OpenAI names are `bundle__tool`).
    pub async fn listing_api(self, user: &User, listing: &Tool) -> Result<ListingApi, ToolError> {
        let defs = self.tool_defs(user, listing).await?;
        let prefix = (listing.kind == ListingKind::Bundle).then_some(listing.name.as_str());
        // Counting tokens is CPU work (milliseconds for a large bundle): off the reactor.
        let slug = listing.slug();
        let prefix = prefix.map(str::to_owned);
        match tokio::task::spawn_blocking(move || ListingApi::build(&slug, prefix.as_deref(), &defs)).await {
            Ok(api) => Ok(api),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }

    pub(crate) async fn bundle_for_edit(self, user: &User, id: ToolId) -> Result<Tool, ToolError> {
        Some(Tools::new(self.core).tool_for_edit(user, id).await?).filter(|t| t.kind == ListingKind::Bundle).ok_or(ToolError::NotFound)
    }

    /// Checks the editor's members: (tool, pinned version, exposed name) in order.
    async fn check_members(
        self,
        user: &User,
        members: &[MemberSpec],
        external: usize,
    ) -> Result<Vec<(Tool, Option<i64>, ToolName)>, ToolError> {
        let bad = |reason: String| ToolError::Invalid(Invalid { field: "Tools", reason });
        if members.is_empty() && external == 0 {
            return Err(bad("add at least one tool".into()));
        }
        if members.len() + external > MAX_MEMBERS {
            return Err(bad(format!("a bundle holds at most {MAX_MEMBERS} tools")));
        }
        let mut checked = Vec::with_capacity(members.len());
        let mut taken: HashMap<String, String> = HashMap::new();
        let mut at: HashMap<String, String> = HashMap::new();
        for m in members {
            // The same answer whether the tool does not exist or is not the author's to see.
            let tool = match Tools::new(self.core).tool(user, m.tool).await {
                Ok(t) if t.kind == ListingKind::Tool => t,
                Ok(_) | Err(ToolError::NotFound) => return Err(bad(format!("there is no tool #{} you can add", m.tool))),
                Err(e) => return Err(e),
            };
            match m.pinned_version {
                Some(v) => {
                    // A version never served is pinned by the tool's editors only; to others it does not exist.
                    let usable = Tools::new(self.core).version_row(tool.id, v).await.is_ok()
                        && Tools::new(self.core).may_use_version(user, &tool, v).await?;
                    if !usable {
                        return Err(bad(format!("{} has no version {v}", tool.slug())));
                    }
                }
                None if tool.published_version.is_none() => {
                    return Err(bad(format!("{} has no published version to follow: pin a saved version", tool.slug())));
                }
                None => {}
            }
            let raw = if m.exposed_name.trim().is_empty() { tool.name.as_str() } else { m.exposed_name.as_str() };
            let name = ToolName::parse(raw).map_err(|e| bad(format!("{}: {}", tool.slug(), e.reason)))?;
            if name.as_str().eq_ignore_ascii_case(RUN_CODE) {
                // Code mode lists its own tool under this name beside the members.
                return Err(bad(format!("{}: “{RUN_CODE}” is the name of code mode's tool: give it another name", tool.slug())));
            }
            if let Some(other) = taken.get(&name.as_str().to_ascii_lowercase()) {
                let suggestion = format!("{}__{}", tool.department, tool.name);
                return Err(bad(format!(
                    "{} and {other} would both be called “{name}”: give one another name, e.g. “{suggestion}”",
                    tool.slug()
                )));
            }
            taken.insert(name.as_str().to_ascii_lowercase(), tool.slug());
            if let Some(uri) = tool.serves.uri() {
                // A URI names one resource: the second would never be read.
                if let Some(other) = at.insert(uri.as_str().to_owned(), tool.slug()) {
                    return Err(bad(format!("{} and {other} are both resources at {uri}: a URI names one resource", tool.slug())));
                }
            }
            checked.push((tool, m.pinned_version, name));
        }
        Ok(checked)
    }

    /// Bundles the user may see that contain `tool` in their published version.
    pub async fn bundles_with(self, user: &User, tool: ToolId) -> Result<Vec<Tool>, ToolError> {
        let rows = sqlx::query(
            "SELECT DISTINCT b.id FROM bundle_items i JOIN tools b ON b.id = i.bundle_id AND i.version = b.published_version WHERE i.tool_id = $1",
        )
        .bind(tool.0)
        .fetch_all(self.core.db().pool())
        .await?;
        let ids: HashSet<ToolId> = rows.iter().map(|r| r.try_get("id").map(ToolId)).collect::<Result<_, _>>()?;
        let mut bundles: Vec<Tool> = Tools::new(self.core)
            .tools_by_ids(&ids.into_iter().collect::<Vec<_>>())
            .await?
            .into_values()
            .filter(|b| can_see(user, b))
            .collect();
        bundles.sort_by_key(|b| b.slug());
        Ok(bundles)
    }
}
