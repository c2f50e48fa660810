//! Code mode: a bundle may serve one tool, `run_code`, instead of its members
//! or beside them. The model's JavaScript runs in the sandbox with the
//! bundle's time and memory limits and without `$fetch` or `$env`;
//! `tools.<name>(input)` calls a member exactly as a direct call through the
//! bundle would: arguments validated against its schema, its own code,
//! limits, `$env` and allow-list, recorded in usage with the bundle's id.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use crate::accounts::User;
use crate::bundles::Bundles;
use crate::calls::Calls;
use crate::calls::{Callable, Callables};
use crate::codegen::{run_code_def, ToolDef};
use crate::ids::ToolId;
use crate::names::CodeMode;
use crate::policy::Policies;
use crate::sandbox::{CodeTools, PreparedCall, RunOutcome, ToolCall, ToolHost};
use crate::tools::Tools;
use crate::tools::{ListingKind, Live, PreparedRun, RunReport, Status, Tool, ToolError, Via};
use crate::{audit, now_ms};

handle! {
    /// Code mode: a bundle served as one tool that runs a model's code against its members.
    CodeModes
}

/// Tool calls one `run_code` may make: code that calls tools in a loop
/// forever stops here, or at its time limit, whichever comes first.
pub const MAX_TOOL_CALLS: u32 = 50;

/// Marks member calls made from `run_code` in usage: `mcp-http+run_code`.
pub(crate) const USAGE_SUFFIX: &str = "+run_code";

/// What `run_code` answers: the console output, then the returned value
/// (when there is one); `Err` when the code failed, with its output so far
/// and the error (its line included).
pub fn transcript(outcome: &RunOutcome) -> Result<String, String> {
    let mut text: String = outcome.console.iter().map(|l| format!("{}\n", l.message)).collect();
    match &outcome.result {
        Ok(value) => text.push_str(&value.to_text()),
        Err(e) => {
            text.push_str(&e.to_string());
            return Err(text);
        }
    }
    Ok(text.trim_end_matches('\n').to_owned())
}

impl CodeModes<'_> {
    /// Sets a bundle's code mode (edit rights needed). Audited as
    /// `bundle.code_mode_changed`, which open MCP sessions hear as `list_changed`.
    pub async fn set_code_mode(self, user: &User, id: ToolId, mode: CodeMode) -> Result<Tool, ToolError> {
        let bundle = Bundles::new(self.core).bundle_for_edit(user, id).await?;
        if bundle.code_mode == mode {
            return Ok(bundle);
        }
        let mut tx = self.core.begin().await?;
        sqlx::query("UPDATE tools SET code_mode = $1, updated_at = $2 WHERE id = $3")
            .bind(mode.as_str())
            .bind(now_ms())
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
        audit::record(
            &mut tx,
            Some(user.id),
            &bundle.action("code_mode_changed"),
            &bundle.audit_target(),
            Some(serde_json::json!({"code_mode": bundle.code_mode})),
            Some(serde_json::json!({"code_mode": mode})),
        )
        .await?;
        tx.commit().await?;
        Tools::new(self.core).tool(user, id).await
    }

    /// What `listing`'s MCP endpoint lists to `user`: its tools, and in code
    /// mode `run_code` instead of them or after them.
    pub async fn mcp_tool_defs(self, user: &User, listing: &Tool) -> Result<Vec<ToolDef>, ToolError> {
        let mut defs = Bundles::new(self.core).tool_defs(user, listing).await?;
        let run_code = || run_code_def(&listing.slug(), &defs);
        Ok(match listing.code_mode {
            CodeMode::Off => defs,
            CodeMode::Instead => vec![run_code()],
            CodeMode::Beside => {
                let def = run_code();
                defs.push(def);
                defs
            }
        })
    }

    /// Runs model-written `code` against the members `bundle` (already looked
    /// up as `user`) serves them. Member calls are recorded with the bundle's
    /// id; the run itself calls no tool of its own, so it is not recorded.
    pub async fn run_code(self, user: &User, bundle: &Tool, code: String, via: Via<'_>) -> Result<RunOutcome, ToolError> {
        if bundle.kind != ListingKind::Bundle || bundle.code_mode == CodeMode::Off {
            return Err(ToolError::NotFound);
        }
        if bundle.status == Status::Disabled {
            return Err(ToolError::Disabled);
        }
        let callables = Calls::new(self.core).callables(user, bundle).await?;
        let policy = Policies::new(self.core).policy().await?;
        let mut request =
            Tools::new(self.core).run_request(bundle, &policy, code, Default::default(), BTreeMap::new(), user, via.transport);
        request.fetch_allow.clear();
        request.tools = Some(CodeTools {
            names: callables.names().map(str::to_owned).collect(),
            any_name: false,
            max_calls: MAX_TOOL_CALLS,
            host: Arc::new(Members {
                callables: Arc::new(callables),
                transport: format!("{}{USAGE_SUFFIX}", via.transport),
                token_id: via.token_id,
            }),
            runtime: tokio::runtime::Handle::current(),
        });
        let span = tracing::info_span!(
            "run_code",
            listing = %bundle.slug(),
            department = %user.department.name,
            transport = via.transport,
            outcome = tracing::field::Empty,
        );
        let lane = crate::sandbox::Lane { tool: bundle.id, caller: user.id };
        Ok(self.core.run_sandboxed(request, lane, span).await?)
    }
}

/// Answers `tools.<name>(input)` with the bundle's members as one caller sees them.
struct Members {
    callables: Arc<Callables>,
    transport: String,
    token_id: Option<i64>,
}

impl ToolHost for Members {
    fn prepare(&self, name: String, input: serde_json::Value) -> PreparedCall {
        Box::pin(prepare_member(self.callables.clone(), name, input, self.transport.clone(), self.token_id))
    }
}

/// Prepares `tools.<name>(input)` of code mode as `callables` serve it: an
/// external tool answered whole by the host, a Toolshed tool as a run inside
/// the calling sandbox thread (recorded in usage when it finishes, and kept if it failed).
pub(crate) async fn prepare_member(
    callables: Arc<Callables>,
    name: String,
    input: serde_json::Value,
    transport: String,
    token_id: Option<i64>,
) -> Result<ToolCall, String> {
    let via = callables.via(Via { transport: &transport, token_id, bundle_id: None });
    let (tool, source) = match callables.get(&name) {
        None => return Err(format!("there is no tool “{name}” here")),
        Some(Callable::External(_)) => {
            // Answered whole by the host: it runs no code in this sandbox.
            let answer = callables.call(&name, input, via, Live::default()).await.map_err(|e| format!("{name}: {e}"))?;
            return Ok(ToolCall::Answered(answer.value().map_err(|e| format!("{name}: {e}"))));
        }
        Some(Callable::Tool { tool, source }) => (tool.clone(), source.clone()),
    };
    let (core, user) = (callables.core(), callables.user());
    let started = Instant::now();
    let given = input.clone();
    let PreparedRun { version, request, env, runnable, span, approval, lapsed, .. } =
        match Tools::new(core).prepare_run(user, &tool, source, input, &transport, None).await {
            Ok(p) => p,
            Err(e) => {
                let message = format!("{name}: {e}");
                Tools::new(core).record_run(user, &tool, via, started, &Err(e));
                return Err(message);
            }
        };
    let (core, user, bundle_id) = (core.clone(), user.clone(), via.bundle_id);
    let allow = crate::fetches_counted_by(&request);
    let run_span = span.clone();
    let finish = move |mut outcome: RunOutcome| {
        core.count_run(Ok(&outcome), allow.as_deref(), crate::Waited::Nested, &run_span);
        runnable.check_output(&mut outcome.result);
        env.redact(&mut outcome);
        let lapsed = lapsed.first();
        // An API refused the caller's token and it could not be renewed:
        // where to connect again says more than the API's 401 did.
        let result = outcome.result.clone().map_err(|e| match &lapsed {
            Some(missing) => format!("{name}: {missing}"),
            None => format!("{name}: {e}"),
        });
        let via = Via { transport: &transport, token_id, bundle_id };
        let report = Ok(RunReport { version, outcome, approval, lapsed });
        Tools::new(&core).record_run(&user, &tool, via, started, &report);
        if let Ok(report) = &report {
            Tools::new(&core).keep_failure_of(&user, &tool, via, given, report, runnable.args());
        }
        result
    };
    Ok(ToolCall::Run { request: Box::new(request), finish: Box::new(finish), span })
}
