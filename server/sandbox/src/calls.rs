//! Host calls a run waits for: `$fetch` requests and, in code mode, the
//! `tools.<name>(input)` calls to a bundle's members. JS holds a promise for
//! each; between jobs the engine blocks here until one finishes or the run's
//! deadline passes, then settles its promise.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use rquickjs::{Ctx, Exception, Function, IntoJs, Value};
use tokio::task::{self, JoinSet};

use super::fetch::{
    check_method, io, replayed, request, response_object, FetchExchange, FetchRequest, FetchResponse, Reach, RECORDED_BYTES,
};
use super::secrets::Secrets;
use super::{Input, Limits, RunOutcome, RunRequest, ToolValue};

pub(super) type Settle<'js> = (Function<'js>, Function<'js>);

/// Code mode: the tools the code reaches as `tools.<name>(input)`.
#[derive(Clone)]
pub struct CodeTools {
    /// The names `tools` has, in the order error messages list them.
    pub names: Vec<String>,
    /// Any other name goes to the host too, which refuses what it does not
    /// know (a catalog too large to list up front).
    pub any_name: bool,
    /// Tool calls one run may start; later ones reject.
    pub max_calls: u32,
    pub host: Arc<dyn ToolHost>,
    /// Where the host's futures run: the server's runtime, whose database
    /// pool they use (sandbox threads are outside any runtime).
    pub runtime: tokio::runtime::Handle,
}

impl fmt::Debug for CodeTools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CodeTools").field("names", &self.names).field("max_calls", &self.max_calls).finish_non_exhaustive()
    }
}

pub type PreparedCall = Pin<Box<dyn Future<Output = Result<ToolCall, String>> + Send>>;

/// What answers `tools.<name>(input)`: the domain, which knows the members.
pub trait ToolHost: Send + Sync {
    /// Finds the tool called `name`, checks `input` and prepares its run.
    /// `Err` is the message the JS call rejects with.
    fn prepare(&self, name: String, input: serde_json::Value) -> PreparedCall;
}

/// A member's run, ready to go. It runs on the calling code's own worker
/// thread (which is only waiting meanwhile), so code calling tools never
/// needs a second worker and cannot starve the pool.
pub enum ToolCall {
    Run {
        request: Box<RunRequest>,
        /// Records the run and turns its outcome into the value the JS call
        /// resolves with, or the message it rejects with.
        finish: Box<dyn FnOnce(RunOutcome) -> Result<ToolValue, String> + Send>,
        /// Entered while it runs, so its `$fetch`es are its children.
        span: tracing::Span,
    },
    /// Already answered by the host (an external MCP server's tool): nothing runs here.
    Answered(Result<ToolValue, String>),
}

pub(super) enum Reply {
    Fetch(Result<FetchResponse, String>),
    /// Boxed: a prepared run is large, and replies travel by value.
    Tool(Result<Box<ToolCall>, String>),
    /// A `$sleep` is over.
    Slept,
    /// The host's task panicked.
    Failed(String),
}

/// What a finished host call settles its promise with.
pub(super) enum Settled {
    Response(FetchResponse),
    Value(ToolValue),
    /// `undefined`.
    Nothing,
}

/// The run's in-flight host calls and the JS promises waiting for them.
pub(super) struct HostCalls<'js> {
    reach: Arc<Reach>,
    limits: Limits,
    tools: Option<CodeTools>,
    fetches: u32,
    tool_calls: u32,
    waiting: HashMap<task::Id, Settle<'js>>,
    tasks: JoinSet<Reply>,
    /// Every `$fetch` of the run, in the order the code made them.
    recorded: Vec<FetchExchange>,
    /// Which exchange each request in flight answers.
    recording: HashMap<task::Id, usize>,
    /// Bytes of bodies the recording may still keep.
    budget: usize,
    /// A replay: the recorded exchanges answer `$fetch`, and which were served.
    replay: Option<(Arc<Vec<FetchExchange>>, Vec<bool>)>,
    /// What `$input` may ask and the answers so far.
    input: Input,
    /// The questions without an answer: once there are any, the run stops.
    asked: Option<serde_json::Map<String, serde_json::Value>>,
    /// Set with `asked`, read by the interrupt handler: code that goes on
    /// running after asking is stopped too.
    stopping: Rc<Cell<bool>>,
    /// The objects `$content` returned, and their checked blocks.
    made: Vec<(Value<'js>, Vec<serde_json::Value>)>,
}

/// A `$fetch`'s response to come, from the network or a recording.
type Answer = Pin<Box<dyn Future<Output = Result<FetchResponse, String>> + Send>>;

/// Refusals are recorded too, but a loop of them only this far.
const MAX_RECORDED: usize = 100;

pub(super) enum Wait<'js> {
    /// A call finished; settle its promise with [`settle`].
    Done(Settle<'js>, Reply),
    /// Nothing is in flight.
    Idle,
    TimedOut,
    Cancelled,
}

impl<'js> HostCalls<'js> {
    pub(super) fn new(req: &RunRequest, stopping: Rc<Cell<bool>>) -> Self {
        Self {
            reach: Arc::new(Reach {
                allow: req.fetch_allow.clone(),
                internal: req.internal_hosts.clone(),
                secrets: std::sync::Mutex::new(Secrets::new(req.outbound_secrets.clone())),
                renew: req.renew.clone(),
                renewed: Default::default(),
                read_only: req.read_only,
            }),
            limits: req.limits.clone(),
            tools: req.tools.clone(),
            fetches: 0,
            tool_calls: 0,
            waiting: HashMap::new(),
            tasks: JoinSet::new(),
            recorded: Vec::new(),
            recording: HashMap::new(),
            budget: RECORDED_BYTES,
            replay: req.replay.clone().map(|tape| {
                let served = vec![false; tape.len()];
                (tape, served)
            }),
            input: req.input.clone(),
            asked: None,
            stopping,
            made: Vec::new(),
        }
    }

    /// `$content`: keeps the object it returns, so that object (and no copy) is content.
    pub(super) fn made_content(&mut self, marker: Value<'js>, blocks: Vec<serde_json::Value>) {
        self.made.push((marker, blocks));
    }

    /// The blocks if `value` is an object `$content` returned.
    pub(super) fn content_of(&self, value: &Value<'js>) -> Option<Vec<serde_json::Value>> {
        self.made.iter().find(|(marker, _)| marker == value).map(|(_, blocks)| blocks.clone())
    }

    /// `$input`: the answers if every question has one; else the questions
    /// join the unanswered ones and the run stops (`None`). Questions asked
    /// together (`Promise.all`) are all put in the same round.
    pub(super) fn ask(&mut self, requests: serde_json::Value) -> Result<Option<serde_json::Map<String, serde_json::Value>>, String> {
        let requests = self.input.requests(requests)?;
        match self.input.answer(&requests) {
            Ok(answers) if self.asked.is_none() => Ok(Some(answers)),
            Ok(_) => Ok(None),
            Err(missing) => {
                self.asked.get_or_insert_default().extend(missing);
                self.stopping.set(true);
                Ok(None)
            }
        }
    }

    /// The questions the run stopped for, if it did.
    pub(super) fn take_asked(&mut self) -> Option<serde_json::Map<String, serde_json::Value>> {
        self.asked.take()
    }

    fn refuse_when_asking(&self) -> Result<(), String> {
        match self.asked {
            Some(_) => Err("the run is stopping to ask for input".into()),
            None => Ok(()),
        }
    }

    /// Starts a request, returning the error to reject with if it cannot
    /// start. Either way the request is recorded.
    pub(super) fn start_fetch(&mut self, req: FetchRequest, settle: Settle<'js>) -> Result<(), String> {
        let mut exchange = FetchExchange::of(&req, &mut self.budget);
        // A child of the run's span (the worker entered it): its context goes out with the request.
        // Only for a request that goes out: refusals and replays make none (a loop of refusals is not bounded by the fetch limit).
        let span = self.replay.is_none().then(|| req.span_fields());
        let started = match self.fetch(req) {
            Ok(answer) => io().map(|io| {
                let span = span.map_or_else(tracing::Span::none, |(method, host)| super::fetch::span(&method, &host));
                let fetched = async move {
                    let answer = answer.await;
                    if let Ok(response) = &answer {
                        tracing::Span::current().record("http.response.status_code", i64::from(response.status));
                    }
                    Reply::Fetch(answer)
                };
                self.tasks.spawn_on(tracing::Instrument::instrument(fetched, span), io.runtime.handle())
            }),
            Err(message) => Err(message),
        };
        match started {
            Ok(task) => {
                self.waiting.insert(task.id(), settle);
                self.recording.insert(task.id(), self.recorded.len());
                self.recorded.push(exchange);
                Ok(())
            }
            Err(message) => {
                if self.recorded.len() < MAX_RECORDED {
                    exchange.answered(&Err(message.clone()), &mut self.budget);
                    self.recorded.push(exchange);
                }
                Err(message)
            }
        }
    }

    /// The answer to `req`: from the network, or from the recording in a replay.
    fn fetch(&mut self, req: FetchRequest) -> Result<Answer, String> {
        self.refuse_when_asking()?;
        if self.fetches >= self.limits.fetch_requests {
            return Err(format!("too many $fetch calls (limit {} per run)", self.limits.fetch_requests));
        }
        let answer: Answer = match &mut self.replay {
            None => Box::pin(request(&self.reach, &self.limits, req)?),
            Some((tape, served)) => {
                check_method(&self.reach, &req)?;
                match replayed(tape, served, &req)? {
                    Some(answer) => Box::pin(std::future::ready(answer)),
                    // It had no answer before that call ended: nor has it now.
                    None => Box::pin(std::future::pending()),
                }
            }
        };
        self.fetches += 1;
        Ok(answer)
    }

    /// The run's `$fetch` exchanges, in order.
    pub(super) fn take_recording(&mut self) -> Vec<FetchExchange> {
        std::mem::take(&mut self.recorded)
    }

    /// Starts preparing a tool call, returning the error to reject with if it cannot start.
    pub(super) fn start_tool(&mut self, name: String, input: serde_json::Value, settle: Settle<'js>) -> Result<(), String> {
        self.refuse_when_asking()?;
        let Some(tools) = &self.tools else { return Err("there are no tools here".into()) };
        if !tools.any_name && !tools.names.contains(&name) {
            return Err(format!("there is no tool “{name}” here; the tools are: {}", tools.names.join(", ")));
        }
        if self.tool_calls >= tools.max_calls {
            return Err(format!("too many tool calls (limit {} per run)", tools.max_calls));
        }
        self.tool_calls += 1;
        let prepared = tools.host.prepare(name, input);
        // In the run's span (the worker entered it), so an external member's request continues its trace.
        let prepared = tracing::Instrument::instrument(prepared, tracing::Span::current());
        let task = self.tasks.spawn_on(async move { Reply::Tool(prepared.await.map(Box::new)) }, &tools.runtime);
        self.waiting.insert(task.id(), settle);
        Ok(())
    }

    /// `$sleep(ms)`: settles after `ms` on the host, taking no core meanwhile
    /// (a tool polling a slow job waits between requests). The run's deadline
    /// still holds.
    pub(super) fn start_sleep(&mut self, ms: f64, settle: Settle<'js>) -> Result<(), String> {
        self.refuse_when_asking()?;
        if ms.is_nan() || ms < 0.0 {
            return Err(format!("$sleep takes a number of milliseconds, not {ms}"));
        }
        let io = io()?;
        let duration = std::time::Duration::from_millis(ms.min(u32::MAX.into()) as u64);
        let task = self.tasks.spawn_on(
            async move {
                tokio::time::sleep(duration).await;
                Reply::Slept
            },
            io.runtime.handle(),
        );
        self.waiting.insert(task.id(), settle);
        Ok(())
    }

    /// Blocks until one call finishes, the deadline passes or the run is cancelled.
    pub(super) fn wait(&mut self, deadline: Instant, cancel: Option<&tokio_util::sync::CancellationToken>) -> Wait<'js> {
        if self.tasks.is_empty() {
            return Wait::Idle;
        }
        let Ok(io) = io() else {
            return Wait::Idle;
        };
        loop {
            let next = io.runtime.block_on(async {
                let cancelled = async {
                    match cancel {
                        Some(c) => c.cancelled().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    next = tokio::time::timeout_at(deadline.into(), self.tasks.join_next_with_id()) => Some(next),
                    () = cancelled => None,
                }
            });
            let Some(next) = next else { return Wait::Cancelled };
            let (id, reply) = match next {
                Err(_) => return Wait::TimedOut,
                Ok(None) => return Wait::Idle,
                Ok(Some(Ok(done))) => done,
                // Tasks are only aborted by `clear`, so this is a panic inside the call.
                Ok(Some(Err(e))) => (e.id(), Reply::Failed(format!("host call failed: {e}"))),
            };
            if let (Some(i), Reply::Fetch(answer)) = (self.recording.remove(&id), &reply) {
                self.recorded[i].answered(answer, &mut self.budget);
            }
            if let Some(settle) = self.waiting.remove(&id) {
                return Wait::Done(settle, reply);
            }
        }
    }

    /// Drops the promise resolvers: they may form cycles with the global
    /// object through the `$fetch` closure, which QuickJS's GC cannot see.
    pub(super) fn clear(&mut self) {
        self.waiting.clear();
        self.made.clear();
        self.tasks.abort_all();
    }
}

/// Resolves a host call's promise, or rejects it with an Error.
pub(super) fn settle<'js>(ctx: &Ctx<'js>, (resolve, reject): Settle<'js>, result: Result<Settled, String>) -> rquickjs::Result<()> {
    let value: Value<'js> = match result {
        Ok(Settled::Response(response)) => response_object(ctx, response)?.into_value(),
        Ok(Settled::Value(ToolValue::Json(json))) => json_to_js(ctx, &json)?,
        Ok(Settled::Value(ToolValue::Text(text))) => text.into_js(ctx)?,
        // A member's content reaches the calling code as plain data: `{content: [...]}`.
        Ok(Settled::Value(ToolValue::Content(blocks))) => json_to_js(ctx, &serde_json::json!({ "content": blocks }))?,
        Ok(Settled::Nothing) => Value::new_undefined(ctx.clone()),
        Err(message) => return reject.call((Exception::from_message(ctx.clone(), &message)?,)),
    };
    resolve.call((value,))
}

/// Through one JSON.parse: cheaper than building the value property by property.
pub(super) fn json_to_js<'js>(ctx: &Ctx<'js>, value: &impl serde::Serialize) -> rquickjs::Result<Value<'js>> {
    let json = serde_json::to_string(value).map_err(|e| Exception::throw_internal(ctx, &e.to_string()))?;
    ctx.json_parse(json)
}
