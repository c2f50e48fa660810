//! The one way to call what a listing serves. The MCP handler, the
//! playground's turns and code mode's `tools.<name>()` all resolve names here,
//! so a tool that a listing offers is a tool each of them can call, run the
//! same way and recorded the same way.

use crate::accounts::User;
use crate::bundles::Bundles;
use crate::sandbox::ToolValue;
use crate::serves::Serves;
use crate::tools::Tools;
use crate::tools::{ListingKind, Live, RunReport, RunSource, Tool, ToolError, Via};
use crate::upstream::ServedExternal;
use crate::upstream::Upstreams;
use crate::Core;

handle! {
    /// What a listing serves a caller, by the names the caller uses.
    Calls
}

/// Where a name in a listing leads.
// A listing's few callables live for one request: boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub(crate) enum Callable {
    /// A Toolshed tool: a tool's own endpoint runs its published version
    /// (refused once disabled), a bundle the version it serves of a member.
    Tool { tool: Tool, source: RunSource },
    /// A tool of an external MCP server, answered by that server.
    External(ServedExternal),
}

impl Callable {
    /// An external server's tools are tools.
    fn serves(&self) -> &Serves {
        match self {
            Callable::Tool { tool, .. } => &tool.serves,
            Callable::External(_) => &Serves::Tool,
        }
    }
}

/// Everything one listing serves one caller, by the names the caller uses,
/// in the order the listing lists them. Tools are called ([`Callables::call`]);
/// prompts and resources are rendered ([`Callables::render`]), never called.
#[derive(Clone)]
pub struct Callables {
    core: Core,
    user: User,
    listing: Tool,
    entries: Vec<(String, Callable)>,
}

/// What a call answered.
#[derive(Debug)]
pub enum Answer {
    /// A Toolshed tool ran (its outcome may still be an error).
    Ran(RunReport),
    /// An external server's `CallToolResult` JSON; every failure is an `isError` result.
    External(serde_json::Value),
}

impl Answer {
    /// The answer as a model reads it in code mode and the playground: the
    /// value, or what went wrong (an external tool's text when it set `isError`).
    pub fn value(&self) -> Result<ToolValue, String> {
        match self {
            Answer::Ran(report) => report.outcome.result.clone().map_err(|e| e.to_string()),
            Answer::External(result) => {
                let text: Vec<&str> = result["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect();
                let text = text.join("\n");
                if result["isError"].as_bool() == Some(true) {
                    return Err(text);
                }
                Ok(match result.get("structuredContent") {
                    Some(v) if !v.is_null() => ToolValue::Json(v.clone()),
                    _ => serde_json::from_str(&text).map(ToolValue::Json).unwrap_or(ToolValue::Text(text)),
                })
            }
        }
    }
}

impl Calls<'_> {
    /// What `listing` (already looked up as `user`) serves them: a tool its
    /// published version (or the one its endpoint pinned) under its own name; a bundle the members `user` may
    /// see, then its external servers' tools.
    pub async fn callables(self, user: &User, listing: &Tool) -> Result<Callables, ToolError> {
        let entries = match listing.kind {
            ListingKind::Tool => match listing.published_version {
                Some(n) => {
                    let source = if listing.pinned { RunSource::Version(n) } else { RunSource::Published };
                    vec![(listing.name.clone(), Callable::Tool { tool: listing.clone(), source })]
                }
                None => Vec::new(),
            },
            ListingKind::Bundle => {
                let served = Bundles::new(self.core).served_tools(user, listing).await?;
                let members =
                    served.tools.into_iter().map(|m| (m.name, Callable::Tool { tool: m.tool, source: RunSource::Version(m.version) }));
                members.chain(served.external.into_iter().map(|e| (e.name.clone(), Callable::External(e)))).collect()
            }
        };
        Ok(Callables { core: self.core.clone(), user: user.clone(), listing: listing.clone(), entries })
    }
}

impl Callables {
    pub fn listing(&self) -> &Tool {
        &self.listing
    }

    /// The tools' names, in the listing's order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().filter(|(_, c)| c.serves() == &Serves::Tool).map(|(name, _)| name.as_str())
    }

    /// The prompt called `name`, or the resource with that name, as it is served.
    pub fn served_as(&self, name: &str) -> Option<&Serves> {
        self.entries.iter().find(|(n, c)| n == name && c.serves() != &Serves::Tool).map(|(_, c)| c.serves())
    }

    /// The resource at `uri`: its name, and its template's values (its
    /// arguments). A fixed URI wins over a template, then the listing's order.
    pub fn resource(&self, uri: &str) -> Option<(&str, serde_json::Map<String, serde_json::Value>)> {
        let resources = || self.entries.iter().filter_map(|(name, c)| Some((name.as_str(), c.serves().uri()?)));
        resources()
            .find(|(_, u)| !u.is_template() && u.as_str() == uri)
            .or_else(|| resources().find(|(_, u)| u.is_template() && u.matches(uri).is_some()))
            .and_then(|(name, u)| Some((name, u.matches(uri)?)))
    }

    /// Whether a call of `name` may run as a task: only a Toolshed tool's may,
    /// as its author set it.
    pub fn task_support(&self, name: &str) -> crate::names::TaskSupport {
        match self.get(name) {
            Some(Callable::Tool { tool, .. }) => tool.task_support,
            _ => crate::names::TaskSupport::Forbidden,
        }
    }

    /// Whether a call of `name` waits for a person's approval ([`crate::tools::approvals`]).
    pub fn needs_approval(&self, name: &str) -> bool {
        match self.get(name) {
            Some(Callable::Tool { tool, .. }) => crate::tools::approvals::Approvals::required_for(tool),
            _ => false,
        }
    }

    /// Who answers `name`, as log lines name it: a tool's `department/name`,
    /// an external tool's `server__tool`.
    pub fn origin(&self, name: &str) -> Option<String> {
        Some(match self.get(name)? {
            Callable::Tool { tool, .. } => tool.slug(),
            Callable::External(ext) => ext.name.clone(),
        })
    }

    pub(crate) fn core(&self) -> &Core {
        &self.core
    }

    pub(crate) fn user(&self) -> &User {
        &self.user
    }

    /// The tool called `name` (not a prompt or resource of that name).
    pub(crate) fn get(&self, name: &str) -> Option<&Callable> {
        self.entries.iter().find(|(n, c)| n == name && c.serves() == &Serves::Tool).map(|(_, c)| c)
    }

    /// The usage record's route: a bundle's calls carry its id.
    pub(crate) fn via<'a>(&self, via: Via<'a>) -> Via<'a> {
        let bundle_id = (self.listing.kind == ListingKind::Bundle).then_some(self.listing.id);
        Via { bundle_id, ..via }
    }

    /// Calls `name` with `input` as the caller: arguments checked against its
    /// schema, run (or sent to its server) and recorded in usage. `live`
    /// hears a Toolshed tool's console lines and progress as it runs, and
    /// says what it may ask.
    pub async fn call(&self, name: &str, input: serde_json::Value, via: Via<'_>, live: Live) -> Result<Answer, ToolError> {
        self.run(self.get(name).ok_or_else(|| ToolError::UnknownTool(name.to_owned()))?, input, via, live).await
    }

    /// Runs the prompt or resource `name` with `input`, as [`Callables::call`]
    /// runs a tool: its value is the prompt's messages or the resource's contents.
    pub async fn render(&self, name: &str, input: serde_json::Value, via: Via<'_>, live: Live) -> Result<Answer, ToolError> {
        let found = self.entries.iter().find(|(n, c)| n == name && c.serves() != &Serves::Tool).map(|(_, c)| c);
        self.run(found.ok_or_else(|| ToolError::UnknownTool(name.to_owned()))?, input, via, live).await
    }

    async fn run(&self, callable: &Callable, input: serde_json::Value, via: Via<'_>, live: Live) -> Result<Answer, ToolError> {
        let via = self.via(via);
        match callable {
            Callable::Tool { tool, source } => {
                Tools::new(&self.core).run_loaded(&self.user, tool, source.clone(), input, via, live).await.map(Answer::Ran)
            }
            Callable::External(ext) => {
                Ok(Answer::External(Upstreams::new(&self.core).call_external(&self.user, &self.listing, ext, input, via).await))
            }
        }
    }
}
