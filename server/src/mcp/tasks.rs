//! Long calls as tasks (MCP's tasks extension, `io.modelcontextprotocol/tasks`).
//! A call of a tool that may run as a task, from a client that takes tasks,
//! is answered with a task id while the tool runs on here; the client polls
//! `tasks/get` (any replica answers: the task is in the database), answers
//! its questions with `tasks/update`, and stops it with `tasks/cancel`. This
//! replica runs it to the end: it looks in the database for cancels and
//! answers, and writes the result there.
//!
//! A tool set to `optional` runs in the request first and becomes a task only
//! once it has run for [`ESCALATE_AFTER`]: a quick call (or one that asks at
//! once) answers as any other; `required` is a task from the start.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult, DetailedTask, JsonObject, Task as McpTask, TaskPayload,
    TaskStatus as McpStatus,
};
use rmcp::ErrorData as McpError;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use toolshed_domain::asking::MAX_ROUNDS;
use toolshed_domain::calls::{Answer, Callables};
use toolshed_domain::ids::UserId;
use toolshed_domain::names::TaskSupport;
use toolshed_domain::sandbox::{Input, RunError, RunEvent};
use toolshed_domain::tasks::{Ending, Task, TaskError, TaskStatus, POLL_INTERVAL_MS, TTL_MS};
use toolshed_domain::tools::approvals::ApprovalStatus;
use toolshed_domain::tools::{Live, ToolError, Via};
use toolshed_domain::Toolshed;

use super::asking::{connect_accepted, connect_question, input_requests, undeclared, waited_for_connection};
use super::handler::{step, Step};

/// How long an `optional` tool's call runs in its request before it becomes a task.
pub(super) const ESCALATE_AFTER: Duration = Duration::from_millis(500);

/// How long a task waits for the answers to its questions.
const ANSWER_WAIT: Duration = Duration::from_secs(600);

const POLL: Duration = Duration::from_millis(POLL_INTERVAL_MS as u64);

/// One call, owned, so that its task can run it again after each round of answers.
pub(super) struct TaskCall {
    pub toolshed: Toolshed,
    pub callables: Arc<Callables>,
    pub name: String,
    pub input: Value,
    pub via: Via<'static>,
    pub capabilities: Map<String, Value>,
    /// Stops the run; cancelled when the task is.
    pub cancel: CancellationToken,
    /// Who called (a task waiting for approval withdraws its request when cancelled).
    pub user: UserId,
}

/// One run of the call, and its console lines and progress as they happen.
pub(super) struct Run {
    done: JoinHandle<Result<Answer, ToolError>>,
    events: mpsc::UnboundedReceiver<RunEvent>,
}

impl Run {
    /// Its answer (the join handle's, so a panic shows).
    pub async fn finished(&mut self) -> Result<Result<Answer, ToolError>, tokio::task::JoinError> {
        (&mut self.done).await
    }
}

impl TaskCall {
    /// Starts one run with the answers so far, under the call's approval if it has one.
    pub fn round(&self, input: Input, approval: Option<String>) -> Run {
        let (callables, name, arguments, via) = (self.callables.clone(), self.name.clone(), self.input.clone(), self.via);
        let (tx, events) = mpsc::unbounded_channel();
        let capabilities = self.capabilities.clone();
        let live = Live { events: Some(tx), input, capabilities, task: Some(self.cancel.clone()), approval };
        let run = async move { callables.call(&name, arguments, via, live).await };
        Run { done: tokio::spawn(tracing::Instrument::in_current_span(run)), events }
    }

    /// Makes the call a task whose first run is `run`, given `input` after
    /// `rounds` of questions in the request: the task exists before its id is
    /// answered, and this replica runs it on in the background.
    pub async fn become_task(
        self,
        listing: Option<toolshed_domain::ids::ToolId>,
        user: &toolshed_domain::User,
        run: Run,
        (input, rounds): (Input, usize),
    ) -> Result<CallToolResponse, McpError> {
        let task = match self.toolshed.tasks().create(user, listing, &self.name).await {
            Ok(task) => task,
            Err(e) => {
                self.cancel.cancel();
                return match e {
                    // The model can read it, and wait or cancel.
                    TaskError::TooMany => Ok(CallToolResult::error(vec![ContentBlock::text(e.to_string())]).into()),
                    TaskError::Store(e) => Err(McpError::internal_error(e.to_string(), None)),
                };
            }
        };
        let id = task.id.clone();
        let span = tracing::info_span!("task", task.id = %id, gen_ai.tool.name = %self.name);
        tokio::spawn(tracing::Instrument::instrument(self.run_on(id, run, input, rounds), span));
        Ok(CreateTaskResult::new(mcp_task(&task)).into())
    }

    /// Runs task `id` to its end: each run, the questions it stops for and
    /// the answers the client gives, the approval it waits for, until it
    /// completes, fails or is cancelled. `rounds`: those the call took in
    /// its request before it became a task.
    async fn run_on(self, id: String, mut run: Run, mut input: Input, mut rounds: usize) {
        let tasks = self.toolshed.tasks();
        // The app the person was sent to connect (once a call).
        let mut connecting = None;
        let ending = loop {
            // The questions, and the approval (if any) the run that asked them was admitted under.
            let (asked, approval) = match self.await_run(&id, &mut run).await {
                None => return,
                Some(Ok(Step::Done(result))) => break Ending::Completed(as_object(&result)),
                // Where the client opens URLs the task sends its person to connect (input
                // required); else, or once they were sent, the link is its answer.
                Some(Ok(Step::Connect(missing))) => match connect_question(&self.capabilities, &input, &missing) {
                    Some(asked) => {
                        connecting = Some(missing.app);
                        (asked, None)
                    }
                    None => break Ending::Completed(as_object(&CallToolResult::error(vec![ContentBlock::text(missing.to_string())]))),
                },
                Some(Err(e)) => break Ending::Failed(as_object(&e)),
                Some(Ok(Step::Asks { requests, approval })) => (requests, approval),
                Some(Ok(Step::Held { approval: request, message })) => {
                    if !self.await_decision(&id, &request, &message).await {
                        return;
                    }
                    // Decided: the gate runs the call under the approval, or says why not.
                    run = self.round(input.clone(), Some(request));
                    continue;
                }
            };
            rounds += 1;
            if let Some(refused) = undeclared(&self.capabilities, &asked) {
                break Ending::Failed(as_object(&refused));
            }
            let why = RunError::NeedsInput { requests: asked.clone() }.to_string();
            if rounds >= MAX_ROUNDS {
                break tool_error(format!("{why} (the tool has asked in {MAX_ROUNDS} rounds; a call may take no more)"));
            }
            if let Err(text) = input_requests(asked.clone()) {
                break tool_error(text);
            }
            match tasks.ask(&id, &asked, &input).await {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => break Ending::Failed(as_object(&McpError::internal_error(e.to_string(), None))),
            }
            input = match self.await_answers(&id).await {
                Some(answers) => answers,
                None => return,
            };
            if let Some(app) = connecting.take().filter(|_| connect_accepted(&input)) {
                // Connected or not (the run then answers with the link), the call runs again.
                if !self.await_connection(&id, &app).await && self.cancel.is_cancelled() {
                    return;
                }
            }
            run = self.round(input.clone(), approval);
        };
        if let Err(e) = tasks.settle(&id, ending).await {
            tracing::warn!(error = %e, "could not record a task's end");
        }
    }

    /// Where the run leaves the call, looking meanwhile for a cancel; `None`
    /// once cancelled. Its latest `$progress` becomes the task's status message.
    async fn await_run(&self, id: &str, run: &mut Run) -> Option<Result<Step, McpError>> {
        let mut poll = tokio::time::interval(POLL);
        let (mut said, mut latest) = (None, None);
        loop {
            tokio::select! {
                Some(event) = run.events.recv() => {
                    if let RunEvent::Progress { done, total, message } = event {
                        latest = Some(progress_message(done, total, message));
                    }
                }
                done = &mut run.done => {
                    return match done {
                        _ if self.cancel.is_cancelled() => None,
                        Ok(answer) => Some(task_step(&self.name, answer)),
                        Err(e) => Some(Err(McpError::internal_error(format!("the run stopped: {e}"), None))),
                    };
                }
                _ = poll.tick() => {
                    match self.toolshed.tasks().beat(id).await {
                        Ok(Some((status, _))) if !status.is_terminal() => {}
                        // Cancelled, or failed by a reader who took this replica for gone.
                        Ok(_) => self.cancel.cancel(),
                        Err(e) => tracing::warn!(error = %e, "could not look in on a task"),
                    }
                    // At most one write a poll, and only of news.
                    if latest.is_some() && latest != said {
                        if let Err(e) = self.toolshed.tasks().say(id, latest.as_deref().unwrap_or_default()).await {
                            tracing::warn!(error = %e, "could not record a task's progress");
                        }
                        said = latest.clone();
                    }
                }
            }
        }
    }

    /// Waits for approval request `request` to be decided (or to expire),
    /// saying so as the task's status; `false` once the task was cancelled
    /// (the request is then withdrawn).
    async fn await_decision(&self, id: &str, request: &str, message: &str) -> bool {
        let (tasks, approvals) = (self.toolshed.tasks(), self.toolshed.approvals());
        if let Err(e) = tasks.say(id, message).await {
            tracing::warn!(error = %e, "could not record a task's status");
        }
        let mut poll = tokio::time::interval(POLL);
        loop {
            poll.tick().await;
            match tasks.beat(id).await {
                Ok(Some((status, _))) if !status.is_terminal() => {}
                Ok(_) => {
                    if let Err(e) = approvals.withdraw(self.user, request).await {
                        tracing::warn!(error = %e, "could not withdraw a cancelled task's approval request");
                    }
                    return false;
                }
                Err(e) => tracing::warn!(error = %e, "could not look in on a task"),
            }
            match approvals.status(self.user, request).await {
                Ok(Some(ApprovalStatus::Pending)) => {}
                Ok(_) => return true,
                Err(e) => tracing::warn!(error = %e, "could not look in on an approval"),
            }
        }
    }

    /// Waits for the person to connect their account at `app`, saying so as
    /// the task's status and looking in on the task meanwhile; true once connected.
    async fn await_connection(&self, id: &str, app: &str) -> bool {
        let tasks = self.toolshed.tasks();
        if let Err(e) = tasks.say(id, &format!("Waiting for you to connect your account at “{app}”.")).await {
            tracing::warn!(error = %e, "could not record a task's status");
        }
        let waiting = waited_for_connection(&self.toolshed, self.user, app, &self.cancel);
        tokio::pin!(waiting);
        let mut poll = tokio::time::interval(POLL);
        loop {
            tokio::select! {
                connected = &mut waiting => return connected,
                _ = poll.tick() => match tasks.beat(id).await {
                    Ok(Some((status, _))) if !status.is_terminal() => {}
                    // Cancelled: the wait ends with it.
                    Ok(_) => self.cancel.cancel(),
                    Err(e) => tracing::warn!(error = %e, "could not look in on a task"),
                },
            }
        }
    }

    /// The answers once every question has one; `None` if the task was
    /// cancelled, or no answer came in time (then it failed).
    async fn await_answers(&self, id: &str) -> Option<Input> {
        let mut poll = tokio::time::interval(POLL);
        let give_up = tokio::time::Instant::now() + ANSWER_WAIT;
        loop {
            poll.tick().await;
            match self.toolshed.tasks().beat(id).await {
                Ok(Some((TaskStatus::Working, answers))) => return Some(answers),
                Ok(Some((TaskStatus::InputRequired, _))) if tokio::time::Instant::now() < give_up => {}
                Ok(Some((TaskStatus::InputRequired, _))) => {
                    let error = McpError::internal_error("No answer to the tool's questions came in time.", None);
                    let _ = self.toolshed.tasks().settle(id, Ending::Failed(as_object(&error))).await;
                    return None;
                }
                Ok(_) => return None,
                Err(e) => tracing::warn!(error = %e, "could not look in on a task"),
            }
        }
    }
}

/// [`step`] for a task: a result that breaks the tool's own output schema is
/// not a result any client may be given, so the task fails (a protocol
/// error, as the official SDKs make it), where a call in its request shows
/// the model the mismatch to act on.
fn task_step(name: &str, answer: Result<Answer, ToolError>) -> Result<Step, McpError> {
    if let Ok(Answer::Ran(r)) = &answer {
        if let Err(e @ RunError::OutputMismatch { .. }) = &r.outcome.result {
            return Err(McpError::internal_error(e.to_string(), None));
        }
    }
    step(name, answer)
}

/// `$progress(done, total, message)` as a task's status message.
fn progress_message(done: f64, total: Option<f64>, message: Option<String>) -> String {
    let count = match total {
        Some(total) => format!("{done} of {total}"),
        None => format!("{done}"),
    };
    match message {
        Some(message) => format!("{message} ({count})"),
        None => count,
    }
}

fn tool_error(text: String) -> Ending {
    Ending::Completed(as_object(&CallToolResult::error(vec![ContentBlock::text(text)])))
}

fn as_object(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

/// Whether `support` makes a call of this client a task, and from when.
pub(super) enum AsTask {
    /// It answers in the request.
    No,
    /// From the start.
    Now,
    /// Once it has run for [`ESCALATE_AFTER`].
    Later,
}

/// How a call of a tool with `support` runs for a client that does (or does
/// not) take tasks; a client that does not is refused a tool that is only a task.
pub(super) fn as_task(support: TaskSupport, client_takes_tasks: bool) -> Result<AsTask, McpError> {
    Ok(match (support, client_takes_tasks) {
        (TaskSupport::Required, false) => {
            let tasks = rmcp::model::ClientCapabilities::builder().enable_tasks().build();
            return Err(McpError::missing_required_client_capability(tasks));
        }
        (TaskSupport::Required, true) => AsTask::Now,
        (TaskSupport::Optional, true) => AsTask::Later,
        _ => AsTask::No,
    })
}

fn timestamp(ms: i64) -> String {
    let at = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

/// A task as MCP describes it.
pub(super) fn mcp_task(t: &Task) -> McpTask {
    let status = match t.status {
        TaskStatus::Working => McpStatus::Working,
        TaskStatus::InputRequired => McpStatus::InputRequired,
        TaskStatus::Completed => McpStatus::Completed,
        TaskStatus::Failed => McpStatus::Failed,
        TaskStatus::Cancelled => McpStatus::Cancelled,
    };
    let mut task = McpTask::new(&t.id, status, timestamp(t.created_at), timestamp(t.updated_at))
        .with_ttl_ms(TTL_MS as u64)
        .with_poll_interval_ms(POLL_INTERVAL_MS as u64);
    task.status_message = t.status_message.clone();
    task
}

/// A task as `tasks/get` answers it: with its questions, result or error.
pub(super) fn detailed(t: &Task) -> DetailedTask {
    let object = |v: &Option<Value>| -> JsonObject {
        match v {
            Some(Value::Object(map)) => map.clone(),
            _ => JsonObject::new(),
        }
    };
    let payload = match t.status {
        TaskStatus::Working => TaskPayload::Working,
        // The runner stored only questions that were valid MCP requests.
        TaskStatus::InputRequired => match input_requests(t.input_requests.clone().unwrap_or_default()) {
            Ok(input_requests) => TaskPayload::InputRequired { input_requests },
            Err(e) => TaskPayload::Failed { error: object(&Some(as_object(&McpError::internal_error(e, None)))) },
        },
        TaskStatus::Completed => TaskPayload::Completed { result: object(&t.result) },
        TaskStatus::Failed => TaskPayload::Failed { error: object(&t.error) },
        TaskStatus::Cancelled => TaskPayload::Cancelled,
    };
    DetailedTask::new(mcp_task(t), payload)
}

/// `c`'s task `id` when it was started on this endpoint: to any other endpoint
/// (another token's scope) it does not exist.
pub(super) async fn task_of(toolshed: &Toolshed, c: &super::Caller, id: &str) -> Result<Task, McpError> {
    match toolshed.tasks().get(&c.user, id).await {
        Ok(Some(task)) if task.listing == c.served.listing_id() => Ok(task),
        Ok(_) => Err(unknown_task(id)),
        Err(e) => Err(McpError::internal_error(e.to_string(), None)),
    }
}

/// What `tasks/*` answers for an id the caller has no task under.
pub(super) fn unknown_task(id: &str) -> McpError {
    McpError::invalid_params(format!("There is no task “{id}” (it may have expired)."), None)
}
