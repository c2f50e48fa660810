//! Running a tool: pick the code (draft, a version, or the published one),
//! validate the arguments against its schema, run it in the sandbox.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::env::Env;
use super::Tools;
use super::{Tool, ToolError};
use crate::accounts::User;
use crate::connections::{Lapsed, NotConnected};
use crate::ids::ToolId;
use crate::policy::Policy;
use crate::sandbox::{FetchExchange, Input, Limits, RunError, RunEvent, RunOutcome, RunRequest, ToolValue};
use crate::schema::{ArgDef, CompiledSchema};
use crate::usage::{Outcome, UsageRecord};

/// Which code to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RunSource {
    /// Unsaved editor content (authors only).
    Draft {
        code: String,
        args: Vec<ArgDef>,
        /// The output schema its results are checked against, if any.
        output_schema: Option<serde_json::Value>,
    },
    Version(i64),
    Published,
}

/// How a call arrived: recorded with its usage.
#[derive(Debug, Clone, Copy)]
pub struct Via<'a> {
    /// `ui`, `mcp-http`, `mcp-sse`, `api`, `test`.
    pub transport: &'a str,
    pub token_id: Option<i64>,
    /// The bundle whose endpoint the call came through, if any.
    pub bundle_id: Option<ToolId>,
}

/// What the caller's client takes part in while a tool runs.
#[derive(Debug, Default)]
pub struct Live {
    /// Hears console lines and progress as they happen.
    pub events: Option<tokio::sync::mpsc::UnboundedSender<RunEvent>>,
    /// The answers to the tool's questions (`$input`, `$ask`) so far.
    pub input: Input,
    /// The client's declared capabilities (MCP `ClientCapabilities`), which the
    /// code reads as `$context.client.capabilities` to know what it may ask.
    pub capabilities: serde_json::Map<String, serde_json::Value>,
    /// The call runs as a task: it may take the longer time limit its tool
    /// has for tasks, and stops when this is cancelled.
    pub task: Option<tokio_util::sync::CancellationToken>,
    /// What an earlier round of this same call carried ([`super::approvals`]):
    /// the key its admitted round was given, or the request it waits on.
    pub approval: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The version that ran; `None` for a draft.
    pub version: Option<i64>,
    pub outcome: RunOutcome,
    /// The key the round was admitted with, if its tool needs approval: the
    /// call's next round (when it asks its caller questions) carries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
    /// The caller's account an API refused during the run and that could
    /// not be renewed: a failed run is told as [`ToolError::NotConnected`].
    #[serde(skip)]
    pub lapsed: Option<NotConnected>,
}

impl RunReport {
    /// The run stopped to ask its client something: a round, not a call that
    /// ended (neither counted in usage nor kept as a failure).
    pub fn asked(&self) -> bool {
        matches!(self.outcome.result, Err(RunError::NeedsInput { .. }))
    }
}

/// A run ready for the sandbox: the version (`None` for a draft), the
/// request, and the `$env` secrets to blank out of its outcome.
pub(crate) struct PreparedRun {
    pub version: Option<i64>,
    pub request: RunRequest,
    pub env: Arc<Env>,
    /// The code and its arguments' definitions.
    pub runnable: Arc<Runnable>,
    /// `tool_run`, its `outcome` filled when the run ends.
    pub span: tracing::Span,
    /// The time limit when the call runs as a task.
    pub task_limit_ms: u64,
    /// The approval the call was admitted under, if its tool needs one.
    pub approval: Option<String>,
    /// The caller's accounts the run found lapsed.
    pub lapsed: Lapsed,
}

/// A failed run whose API refused the caller's token, which could not be
/// renewed: where to connect again says more than the API's 401 did. (After
/// the run is recorded: it ran, and failed.)
fn lapsed_told(result: Result<RunReport, ToolError>) -> Result<RunReport, ToolError> {
    let report = result?;
    match &report.lapsed {
        Some(missing) if report.outcome.result.is_err() => Err(ToolError::NotConnected(missing.clone())),
        _ => Ok(report),
    }
}

/// A saved version ready to run, its argument schema compiled. Versions never
/// change, so these are cached: a hot tool is read and compiled once.
pub(crate) struct Runnable {
    code: String,
    schema: CompiledSchema,
    args: Vec<ArgDef>,
    /// The declared output schema, compiled.
    output: Option<CompiledSchema>,
}

impl Runnable {
    pub(crate) fn args(&self) -> &[ArgDef] {
        &self.args
    }

    fn new(code: String, args: &[ArgDef], output: Option<&serde_json::Value>) -> Result<Self, ToolError> {
        let schema = CompiledSchema::new(&crate::schema::to_json_schema(args)).map_err(|e| ToolError::BadArguments(e.to_string()))?;
        let output =
            output.map(CompiledSchema::new).transpose().map_err(|e| super::Invalid { field: "Output schema", reason: e.to_string() })?;
        Ok(Self { code, schema, args: args.to_vec(), output })
    }

    /// A tool that declares an output schema promises its clients results
    /// of that shape (MCP's SDKs reject a result that does not match it): a
    /// result that does not is the tool's error. The message names where, and
    /// may quote the value (the caller redacts `$env` secrets after this).
    pub(crate) fn check_output(&self, result: &mut Result<ToolValue, RunError>) {
        let Some(schema) = &self.output else { return };
        let message = match &*result {
            Ok(value @ (ToolValue::Json(_) | ToolValue::Text(_))) => match schema.validate(&value.to_json()) {
                Ok(()) => return,
                Err(violations) => {
                    let said: Vec<String> = violations
                        .iter()
                        .take(3)
                        .map(|v| if v.path.is_empty() { v.message.clone() } else { format!("at {}: {}", v.path, v.message) })
                        .collect();
                    said.join("; ")
                }
            },
            Ok(ToolValue::Content(_)) => "it returned content blocks ($content), not a value of the schema".into(),
            Err(_) => return,
        };
        *result = Err(RunError::OutputMismatch { message });
    }

    /// The call's arguments checked against the schema, with every declared
    /// default filled in; and the declared ones left out without a default.
    fn arguments(&self, mut input: serde_json::Value) -> Result<(serde_json::Map<String, serde_json::Value>, Vec<String>), ToolError> {
        if input.is_null() {
            input = serde_json::Value::Object(Default::default());
        }
        let mut absent = Vec::new();
        if let Some(given) = input.as_object_mut() {
            for def in &self.args {
                if given.contains_key(&def.name) {
                    continue;
                }
                match &def.default {
                    Some(default) => {
                        given.insert(def.name.clone(), default.clone());
                    }
                    None => absent.push(def.name.clone()),
                }
            }
        }
        // Checked with the defaults in: a default that breaks its own schema says so.
        Ok((check_arguments(&self.schema, input)?, absent))
    }
}

/// Recently run versions by (tool, version). Bounded: when full it starts over,
/// which costs one read per hot version.
#[derive(Default)]
pub(crate) struct RunnableCache(Mutex<HashMap<(i64, i64), Arc<Runnable>>>);

const RUNNABLE_CACHE_SIZE: usize = 2048;

impl RunnableCache {
    fn get(&self, id: ToolId, n: i64) -> Option<Arc<Runnable>> {
        self.0.lock().expect("runnable cache lock").get(&(id.0, n)).cloned()
    }

    fn insert(&self, id: ToolId, n: i64, r: Arc<Runnable>) {
        let mut map = self.0.lock().expect("runnable cache lock");
        if map.len() >= RUNNABLE_CACHE_SIZE {
            map.clear();
        }
        map.insert((id.0, n), r);
    }
}

/// The checked arguments of a call, ready for the sandbox.
fn check_arguments(schema: &CompiledSchema, input: serde_json::Value) -> Result<serde_json::Map<String, serde_json::Value>, ToolError> {
    let input = match input {
        serde_json::Value::Null => serde_json::Value::Object(Default::default()),
        other => other,
    };
    if let Err(violations) = schema.validate(&input) {
        let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
        return Err(ToolError::BadArguments(format!("Invalid arguments: {}", list.join("; "))));
    }
    match input {
        serde_json::Value::Object(map) => Ok(map),
        _ => Err(ToolError::BadArguments("Invalid arguments: expected a JSON object".into())),
    }
}

impl Tools<'_> {
    /// The sandbox limits and host configuration for one of this tool's runs.
    /// The admin's policy bounds the tool's own settings, even ones saved before
    /// the policy tightened.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_request(
        self,
        tool: &Tool,
        policy: &Policy,
        code: String,
        args: serde_json::Map<String, serde_json::Value>,
        env: BTreeMap<String, String>,
        user: &User,
        transport: &str,
    ) -> RunRequest {
        let mut context = serde_json::Map::new();
        context.insert("caller".into(), user.username.clone().into());
        context.insert("department".into(), user.department.name.clone().into());
        context.insert("tool".into(), tool.slug().into());
        context.insert("transport".into(), transport.into());
        let limits = Limits {
            memory_bytes: (tool.memory_mib.clamp(1, policy.max_memory_mib.max(1)) as usize) * 1024 * 1024,
            wall_clock_ms: tool.timeout_ms.clamp(100, policy.max_timeout_ms.max(100)) as u64,
            ..Limits::default()
        };
        let fetch_allow = tool.fetch_allow.iter().filter(|h| policy.permits_host(h)).cloned().collect();
        let internal_hosts = self.core.settings().internal_hosts.clone();
        RunRequest {
            code,
            args,
            absent: Vec::new(),
            env,
            context,
            fetch_allow,
            read_only: tool.read_only_hint,
            internal_hosts,
            outbound_secrets: Vec::new(),
            renew: None,
            limits,
            events: None,
            tools: None,
            replay: None,
            input: Input::default(),
            cancel: None,
        }
    }

    /// Runs a tool for `user` (who must be able to see it; drafts need edit rights).
    /// `events` receives console lines and progress while the call runs.
    pub async fn run_tool(
        self,
        user: &User,
        id: ToolId,
        source: RunSource,
        input: serde_json::Value,
        transport: &str,
        events: Option<tokio::sync::mpsc::UnboundedSender<RunEvent>>,
    ) -> Result<RunReport, ToolError> {
        let live = Live { events, ..Live::default() };
        self.run_tool_via(user, id, source, input, Via { transport, token_id: None, bundle_id: None }, live).await
    }

    /// [`Tools::run_tool`] for a caller that came with an API token, or whose
    /// client answers the tool's questions.
    pub async fn run_tool_via(
        self,
        user: &User,
        id: ToolId,
        source: RunSource,
        input: serde_json::Value,
        via: Via<'_>,
        live: Live,
    ) -> Result<RunReport, ToolError> {
        let tool = self.tool_to_run(user, id, &source).await?;
        self.run_loaded(user, &tool, source, input, via, live).await
    }

    /// The tool, if `user` may run `source` of it.
    pub(super) async fn tool_to_run(self, user: &User, id: ToolId, source: &RunSource) -> Result<Tool, ToolError> {
        let tool = match source {
            RunSource::Draft { .. } => self.tool_for_edit(user, id).await?,
            _ => self.tool(user, id).await?,
        };
        if let RunSource::Version(n) = *source {
            // By number as by its endpoint: a disabled listing refuses calls (but an
            // admin's), and a version never served is its editors' alone.
            if tool.status == super::Status::Disabled && !user.is_admin {
                return Err(ToolError::Disabled);
            }
            if !self.may_use_version(user, &tool, n).await? {
                return Err(ToolError::NoSuchVersion(n));
            }
        }
        Ok(tool)
    }

    /// Runs `source` as [`Tools::run_tool`] does, but `$fetch` answers
    /// from `recording`, never the network; not recorded in usage (a replay
    /// of a failed call, a test case made from one).
    pub(crate) async fn run_tool_replaying(
        self,
        user: &User,
        id: ToolId,
        source: RunSource,
        input: serde_json::Value,
        recording: Arc<Vec<FetchExchange>>,
    ) -> Result<RunReport, ToolError> {
        let tool = self.tool_to_run(user, id, &source).await?;
        self.run_unrecorded(user, &tool, source, input, "replay", Live::default(), Some(recording)).await
    }

    /// Runs a tool the caller already looked up *as this user* (so visibility
    /// and, for drafts, edit rights are checked). Every run of a saved version
    /// is recorded in usage (drafts are authors' tries), and kept if it failed.
    pub async fn run_loaded(
        self,
        user: &User,
        tool: &Tool,
        source: RunSource,
        input: serde_json::Value,
        via: Via<'_>,
        live: Live,
    ) -> Result<RunReport, ToolError> {
        let started = std::time::Instant::now();
        if matches!(source, RunSource::Draft { .. }) {
            return lapsed_told(self.run_unrecorded(user, tool, source, input, via.transport, live, None).await);
        }
        let args = input.clone();
        let result = self.run_unrecorded(user, tool, source, input, via.transport, live, None).await;
        self.record_run(user, tool, via, started, &result);
        if let Ok(report) = &result {
            self.keep_failure(user, tool, via, args, report).await;
        }
        lapsed_told(result)
    }

    /// Hands a saved version's run to the usage writer (never waits for it).
    /// A call that never reached code (not found, not published) is not counted.
    pub(crate) fn record_run(
        self,
        user: &User,
        tool: &Tool,
        via: Via<'_>,
        started: std::time::Instant,
        result: &Result<RunReport, ToolError>,
    ) {
        let (version, outcome) = match result {
            Ok(r) if r.asked() => return,
            Ok(r) => (r.version, Outcome::of_run(&r.outcome.result)),
            Err(ToolError::BadArguments(_)) => (None, Outcome::InvalidArguments),
            Err(ToolError::Busy | ToolError::TooManyCalls) => (None, Outcome::Busy),
            Err(_) => return,
        };
        self.core.record_call(
            &tool.slug(),
            UsageRecord {
                at_ms: crate::now_ms(),
                tool_id: tool.id.0,
                version,
                user_id: user.id.0,
                token_id: via.token_id,
                bundle_id: via.bundle_id.map(|b| b.0),
                transport: via.transport.to_owned(),
                duration_us: started.elapsed().as_micros() as i64,
                outcome,
                upstream_server_id: None,
                upstream_tool: None,
            },
        );
    }

    /// A saved version, compiled, from the cache or the database.
    pub(super) async fn runnable(self, id: ToolId, n: i64) -> Result<Arc<Runnable>, ToolError> {
        if let Some(r) = self.core.runnables().get(id, n) {
            return Ok(r);
        }
        let v = self.version_row(id, n).await?;
        let r = Arc::new(Runnable::new(v.code, &v.args, v.output_schema.as_ref())?);
        self.core.runnables().insert(id, n, r.clone());
        Ok(r)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run_unrecorded(
        self,
        user: &User,
        tool: &Tool,
        source: RunSource,
        input: serde_json::Value,
        transport: &str,
        live: Live,
        replay: Option<Arc<Vec<FetchExchange>>>,
    ) -> Result<RunReport, ToolError> {
        let PreparedRun { version, mut request, env, span, runnable, task_limit_ms, approval, lapsed } =
            self.prepare_run(user, tool, source, input, transport, live.approval.as_deref()).await?;
        if let Some(cancel) = live.task {
            request.limits.wall_clock_ms = task_limit_ms;
            request.cancel = Some(cancel);
        }
        let client = serde_json::json!({ "capabilities": live.capabilities });
        request.context.insert("client".into(), client);
        request.events = live.events;
        request.input = live.input;
        request.replay = replay;
        let lane = crate::sandbox::Lane { tool: tool.id, caller: user.id };
        let mut outcome = self.core.run_sandboxed(request, lane, span).await?;
        runnable.check_output(&mut outcome.result);
        env.redact(&mut outcome);
        let report = RunReport { version, outcome, approval, lapsed: lapsed.first() };
        if let Some(id) = report.approval.as_deref().filter(|_| !report.asked()) {
            // The call is over: its approval admits no further round.
            super::approvals::Approvals::new(self.core).finish(id).await?;
        }
        Ok(report)
    }

    /// Everything up to the sandbox: the code (draft, version or published),
    /// the arguments checked against its schema, the approval gate (`held`:
    /// what an earlier round of the same call was admitted under), `$env`,
    /// the policy's limits.
    pub(crate) async fn prepare_run(
        self,
        user: &User,
        tool: &Tool,
        source: RunSource,
        input: serde_json::Value,
        transport: &str,
        held: Option<&str>,
    ) -> Result<PreparedRun, ToolError> {
        let id = tool.id;
        if tool.kind != super::ListingKind::Tool {
            // A bundle has no code of its own: its members run, each as itself.
            return Err(ToolError::NotFound);
        }
        let (version, runnable) = match source {
            RunSource::Draft { code, args, output_schema } => {
                crate::schema::check_defs(&args).map_err(|e| ToolError::BadArguments(e.to_string()))?;
                (None, Arc::new(Runnable::new(code, &args, output_schema.as_ref())?))
            }
            RunSource::Version(n) => (Some(n), self.runnable(id, n).await?),
            RunSource::Published => {
                if tool.status == super::Status::Disabled {
                    return Err(ToolError::Disabled);
                }
                let n = tool.published_version.ok_or(ToolError::NotPublished)?;
                (Some(n), self.runnable(id, n).await?)
            }
        };
        // Editors' own runs (drafts, test cases, replays) need no approval.
        let gated = version.filter(|_| !matches!(transport, "test" | "replay"));
        let called = gated.map(|n| (n, input.clone()));
        let (args, absent) = runnable.arguments(input)?;
        // The caller's tokens before the approval gate: a call that cannot run
        // for want of an account asks no approver. A replay's `$fetch`es are
        // answered from its recording: no token goes out.
        let accounts = match transport {
            "replay" => Vec::new(),
            _ => self.account_tokens(user, tool).await?,
        };
        // After the arguments were checked: a call that could not run asks nobody.
        let approval = match called {
            Some((n, called)) => super::approvals::Approvals::new(self.core).admit(user, (tool, n), &called, held).await?,
            None => None,
        };
        let (env, policy) = self.env_and_policy(id).await?;
        let mut request = self.run_request(tool, &policy, runnable.code.clone(), args, env.values.clone(), user, transport);
        request.absent = absent;
        // A token an API refuses mid-run is renewed and the request sent again.
        let lapsed = Lapsed::default();
        request.renew = (!accounts.is_empty()).then(|| crate::connections::Connections::new(self.core).renewal(user, &lapsed));
        request.outbound_secrets = env.outbound.iter().cloned().chain(accounts).collect();
        let span = tracing::info_span!(
            "tool_run",
            listing = %tool.slug(),
            version,
            department = %user.department.name,
            transport,
            outcome = tracing::field::Empty,
        );
        let task_limit_ms = tool.timeout_ms.clamp(100, policy.max_timeout_for(tool.task_support)) as u64;
        Ok(PreparedRun { version, request, env, runnable, span, task_limit_ms, approval, lapsed })
    }
}
