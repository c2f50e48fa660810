//! Bundles: the bundle page's and editor's data, and saving a version of members.
//! (Creating, publishing and forking a bundle use the listing calls in `tools`.)

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::server;
use super::ToolInfo;
use crate::args::ArgDef;
use crate::error::AppError;

/// A member of a bundle version, as the bundle page and the editor show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberView {
    pub tool: i64,
    pub slug: String,
    pub title: String,
    pub exposed_name: String,
    /// `None`: follows the tool's published version.
    pub pinned_version: Option<i64>,
    /// The version calls run, if any.
    pub serves: Option<i64>,
    /// Why it is not served to you right now.
    pub unavailable: Option<String>,
    /// The arguments of the version it serves.
    pub args: Vec<ArgDef>,
    /// Saved versions of the tool, newest first (for pinning).
    pub versions: Vec<i64>,
}

/// One member as the editor saves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberInput {
    pub tool: i64,
    pub pinned_version: Option<i64>,
    pub exposed_name: String,
}

/// A tool of an external MCP server in a bundle (or one that may be added).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalView {
    pub server: String,
    pub tool: String,
    /// `server__tool`, the name models see.
    pub exposed_name: String,
    pub description: String,
    /// Why it is not served right now (its server no longer lists it), if it is not.
    pub unavailable: Option<String>,
}

/// An external tool as the editor saves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalInput {
    pub server: String,
    pub tool: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundleInfo {
    pub listing: ToolInfo,
    /// The members of the published version, or of the latest if none is published.
    pub members: Vec<MemberView>,
    /// The members of the latest saved version (what the editor starts from).
    pub latest_members: Vec<MemberView>,
    /// External tools of the version `members` shows, and of the latest one.
    pub external: Vec<ExternalView>,
    pub latest_external: Vec<ExternalView>,
}

#[cfg(feature = "ssr")]
fn external_view(served: &toolshed_domain::upstream::ServedExternal) -> ExternalView {
    ExternalView {
        server: served.server.clone(),
        tool: served.tool.name.clone(),
        exposed_name: served.name.clone(),
        description: served.tool.description.clone(),
        unavailable: None,
    }
}

#[cfg(feature = "ssr")]
async fn external(
    ts: &toolshed_domain::Toolshed,
    user: &toolshed_domain::User,
    id: i64,
    version: Option<i64>,
) -> Result<Vec<ExternalView>, AppError> {
    let Some(n) = version else { return Ok(Vec::new()) };
    let items = ts.upstreams().bundle_external_members(user, toolshed_domain::ids::ToolId(id), n).await.map_err(server::fail)?;
    Ok(items
        .into_iter()
        .map(|(member, served)| match served {
            Some(s) => external_view(&s),
            None => ExternalView {
                exposed_name: toolshed_domain::upstream::exposed_name(&member.server, &member.tool),
                server: member.server,
                tool: member.tool,
                description: String::new(),
                unavailable: Some("its server no longer lists it".into()),
            },
        })
        .collect())
}

#[cfg(feature = "ssr")]
async fn members(
    ts: &toolshed_domain::Toolshed,
    user: &toolshed_domain::User,
    id: i64,
    version: Option<i64>,
) -> Result<Vec<MemberView>, AppError> {
    use toolshed_domain::ids::ToolId;
    let Some(n) = version else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for m in ts.bundles().bundle_members(user, ToolId(id), n).await.map_err(server::fail)? {
        let visible = !m.slug.starts_with('(');
        let versions = if visible {
            ts.tools().versions(user, m.tool_id).await.map_err(server::fail)?.iter().map(|v| v.version).collect()
        } else {
            Vec::new()
        };
        let args = match m.serves.filter(|_| visible) {
            Some(v) => ts.tools().version(user, m.tool_id, v).await.map(|v| v.args).unwrap_or_default(),
            None => Vec::new(),
        };
        out.push(MemberView {
            tool: m.tool_id.0,
            slug: m.slug,
            title: m.title,
            exposed_name: m.exposed_name,
            pinned_version: m.pinned_version,
            serves: m.serves,
            unavailable: m.unavailable,
            args,
            versions,
        });
    }
    Ok(out)
}

#[server(endpoint = "bundles/detail")]
pub async fn bundle_detail(department: String, name: String) -> Result<BundleInfo, AppError> {
    use toolshed_domain::tools::ListingKind;
    let user = server::require_user().await?;
    let ts = server::toolshed()?;
    let bundle = ts.tools().listing_by_slug(&user, ListingKind::Bundle, &department, &name).await.map_err(server::fail)?;
    let (id, published, latest) = (bundle.id.0, bundle.published_version, bundle.latest_version);
    let listing = super::tools::detail(&ts, &user, bundle).await?;
    let shown = published.or(latest);
    let members_shown = members(&ts, &user, id, shown).await?;
    let latest_members = if latest == shown { members_shown.clone() } else { members(&ts, &user, id, latest).await? };
    let external_shown = external(&ts, &user, id, shown).await?;
    let latest_external = if latest == shown { external_shown.clone() } else { external(&ts, &user, id, latest).await? };
    Ok(BundleInfo { listing, members: members_shown, latest_members, external: external_shown, latest_external })
}

/// Tools the author may add: published tools they can see that match `q`.
#[server(endpoint = "bundles/candidates")]
pub async fn bundle_candidates(q: String) -> Result<Vec<MemberView>, AppError> {
    use toolshed_domain::market::BrowseQuery;
    let user = server::require_user().await?;
    let ts = server::toolshed()?;
    let query = BrowseQuery::parse(&q, "", "", "tool", "", "").map_err(|e| server::fail(AppError::Invalid(e.to_string())))?;
    let found = ts.market().browse(&user, &query).await.map_err(server::fail)?;
    let mut out = Vec::new();
    for card in found.cards {
        let tool = ts.tools().tool(&user, toolshed_domain::ids::ToolId(card.id)).await.map_err(server::fail)?;
        let versions = ts.tools().versions(&user, tool.id).await.map_err(server::fail)?.iter().map(|v| v.version).collect();
        out.push(MemberView {
            tool: tool.id.0,
            slug: tool.slug(),
            title: tool.title.clone(),
            exposed_name: tool.name.clone(),
            pinned_version: None,
            serves: tool.published_version,
            unavailable: None,
            args: Vec::new(),
            versions,
        });
    }
    Ok(out)
}

/// Tools of the bundle's department's external MCP servers the editor may add.
#[server(endpoint = "bundles/external_candidates")]
pub async fn bundle_external_candidates(bundle: i64) -> Result<Vec<ExternalView>, AppError> {
    let user = server::require_user().await?;
    let found =
        server::toolshed()?.upstreams().external_candidates(&user, toolshed_domain::ids::ToolId(bundle)).await.map_err(server::fail)?;
    Ok(found.iter().map(external_view).collect())
}

/// Saves the bundle's members (and external tools) as its next version;
/// returns the version number.
#[server(endpoint = "bundles/save_version", input = crate::api::JsonArgs)]
pub async fn save_bundle_version(
    bundle: i64,
    members: Vec<MemberInput>,
    #[server(default)] external: Vec<ExternalInput>,
    changelog: String,
) -> Result<i64, AppError> {
    use toolshed_domain::bundles::MemberSpec;
    use toolshed_domain::ids::ToolId;
    use toolshed_domain::upstream::ExternalMember;
    let user = server::require_user().await?;
    let specs: Vec<MemberSpec> = members
        .into_iter()
        .map(|m| MemberSpec { tool: ToolId(m.tool), pinned_version: m.pinned_version, exposed_name: m.exposed_name })
        .collect();
    let external: Vec<ExternalMember> = external.into_iter().map(|e| ExternalMember { server: e.server, tool: e.tool }).collect();
    server::toolshed()?
        .bundles()
        .save_bundle_version_with_external(&user, ToolId(bundle), &specs, &external, &changelog)
        .await
        .map_err(server::fail)
}

/// Sets the bundle's code mode (`off`, `instead`, `beside`); a plain form.
#[server(endpoint = "bundles/code_mode")]
pub async fn set_code_mode(bundle: i64, mode: String) -> Result<ToolInfo, AppError> {
    use toolshed_domain::ids::ToolId;
    use toolshed_domain::names::CodeMode;
    let user = server::require_user().await?;
    let ts = server::toolshed()?;
    let mode = CodeMode::parse(&mode).map_err(|e| server::fail(AppError::Invalid(e.to_string())))?;
    let bundle = ts.code_mode().set_code_mode(&user, ToolId(bundle), mode).await.map_err(server::fail)?;
    super::tools::detail(&ts, &user, bundle).await
}

/// The members of version `version` (the editor's Load button).
#[server(endpoint = "bundles/version")]
pub async fn bundle_version_members(department: String, name: String, version: i64) -> Result<Vec<MemberView>, AppError> {
    use toolshed_domain::tools::ListingKind;
    let user = server::require_user().await?;
    let ts = server::toolshed()?;
    let bundle = ts.tools().listing_by_slug(&user, ListingKind::Bundle, &department, &name).await.map_err(server::fail)?;
    members(&ts, &user, bundle.id.0, Some(version)).await
}
