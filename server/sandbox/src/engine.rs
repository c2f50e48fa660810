//! One call: a fresh context (on the thread's kept runtime, or a new one),
//! run the async body to completion, turn the outcome (or the way it failed)
//! into a [`RunOutcome`].

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use rquickjs::context::intrinsic::{Date, Eval, Json, MapSet, Promise as PromiseApi, Proxy, RegExp};
use rquickjs::context::{EvalOptions, Intrinsic};
use rquickjs::{Coerced, Context, Ctx, Runtime, Value};

use super::alloc::{CappedAllocator, MemoryStats};
use super::calls::{settle, HostCalls, Reply, Settled, ToolCall, Wait};
use super::cores::Runner;
use super::globals::{display, install, Host, Needs};
use super::{FetchExchange, Limits, RunError, RunOutcome, RunRequest, ToolValue, KIB, MIB};

/// Always added to the base objects: compiling, JSON and async functions.
/// Date, RegExp and Map/Set are added when the code names them (see
/// [`Needs`]); Proxy, typed arrays, WeakRef and Performance never are.
type Core = (Eval, Json, PromiseApi);

/// Error stacks name this file; its lines are the user's lines.
const FILE_NAME: &str = "tool.js";
/// Kept on the same line as the user's first line so line numbers need no offset.
const PREFIX: &str = "(async function(){";
const SUFFIX: &str = "\n})()";
/// A request cannot ask for more native stack than this (pool workers have 16 MiB).
pub(super) const MAX_STACK_BYTES: usize = 8 * MIB;
/// Stands in for a wall-clock limit too large to add to an `Instant`.
const FAR_FUTURE: Duration = Duration::from_secs(24 * 3600);

/// Runs one call on the current thread and returns when it is over.
///
/// The thread needs `limits.stack_bytes` of native stack plus about 1 MiB of
/// headroom, and must not be inside a tokio runtime (`$fetch` blocks on its
/// own). Async code should use [`super::Sandbox::run`].
pub fn run_blocking(req: RunRequest) -> RunOutcome {
    run_reporting_on(req, &Runner::alone())
}

/// Like [`run_blocking`], but hands the outcome to `report` before freeing
/// the run's context (about a fifth of a trivial call), so the caller can
/// answer first.
pub fn run_reporting(req: RunRequest, report: impl FnOnce(RunOutcome)) {
    run_scheduled(req, &Runner::alone(), report);
}

/// [`run_reporting`] for a pool worker: the run executes while `runner`
/// holds a core, and steps aside when it is another run's turn.
pub(super) fn run_scheduled(req: RunRequest, runner: &Rc<Runner>, report: impl FnOnce(RunOutcome)) {
    let (outcome, finished) = run(req, runner);
    let clean = ended_cleanly(&outcome.result);
    report(outcome);
    if let Some(finished) = finished {
        finished.recycle(clean);
    }
}

fn run_reporting_on(req: RunRequest, runner: &Rc<Runner>) -> RunOutcome {
    let mut outcome = None;
    run_scheduled(req, runner, |o| outcome = Some(o));
    outcome.expect("run_scheduled reports every run")
}

fn run(mut req: RunRequest, runner: &Rc<Runner>) -> (RunOutcome, Option<Finished>) {
    let started = Instant::now();
    let host = Rc::new(Host::new(started, req.events.take(), req.limits.console_bytes));
    let engine = Engine::take(req.limits.memory_bytes);
    let stats = engine.as_ref().map_or_else(|| Rc::new(MemoryStats::default()), |e| e.stats.clone());
    let guard = Guard {
        limits: req.limits.clone(),
        clock: Clock {
            runner: runner.clone(),
            deadline: started.checked_add(Duration::from_millis(req.limits.wall_clock_ms)).unwrap_or(started + FAR_FUTURE),
            waited_before: runner.waited(),
        },
        timed_out: Rc::new(Cell::new(false)),
        asking: Rc::new(Cell::new(false)),
        cancel: req.cancel.clone(),
        stats: stats.clone(),
    };
    let needs = Needs::of(&req.code, req.tools.is_some());
    let started_context = match &engine {
        Some(engine) => guard.start(&engine.runtime, &needs),
        None => Err(guard.out_of_memory()),
    };
    let (result, fetches, context) = match started_context {
        Ok(context) => {
            let (result, fetches) = context.with(|ctx| execute(&ctx, &req, &needs, &host, &guard));
            (result, fetches, Some(context))
        }
        Err(error) => (Err(error), Vec::new(), None),
    };
    let outcome = RunOutcome {
        result,
        console: host.take_console(),
        fetches,
        duration: started.elapsed(),
        queued: Duration::ZERO,
        peak_memory_bytes: stats.peak(),
    };
    (outcome, engine.map(|engine| Finished { engine, context }))
}

/// False for the ways a run may end that can leave its runtime in any state:
/// such a runtime is not kept.
fn ended_cleanly(result: &Result<ToolValue, RunError>) -> bool {
    !matches!(
        result,
        Err(RunError::Timeout { .. }
            | RunError::OutOfMemory { .. }
            | RunError::StackOverflow { .. }
            | RunError::NeverSettled
            | RunError::Cancelled
            | RunError::NeedsInput { .. }
            | RunError::Internal { .. })
    )
}

/// A runtime kept by its thread between runs: creating one (its atoms,
/// classes and shapes) and freeing it was about a sixth of a trivial call's
/// CPU. Every run still gets a context of its own, so no global a run sets is
/// seen by the next; what a run leaves in the runtime itself is checked
/// before it is kept (see [`Finished::recycle`]).
struct Engine {
    runtime: Runtime,
    stats: Rc<MemoryStats>,
    /// Bytes the runtime held when new, before any context.
    baseline: usize,
    runs: u32,
}

thread_local! {
    static KEPT: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

/// A kept runtime may hold this much more than when it was new (grown atom
/// and shape tables), else it is dropped.
const KEPT_GROWTH_BYTES: usize = 256 * KIB;
/// Past this many runs a runtime is dropped anyway, bounding whatever the
/// checks cannot see.
const KEPT_RUNS: u32 = 10_000;

impl Engine {
    /// The thread's kept runtime, or a new one, for a run that may hold
    /// `limit` bytes in all; `None` if a runtime does not fit in that.
    fn take(limit: usize) -> Option<Self> {
        // A nested run (a member called by code mode) finds none: its caller's is taken.
        if let Some(engine) = KEPT.with(|kept| kept.borrow_mut().take()) {
            engine.stats.begin(limit);
            return Some(engine);
        }
        let stats = Rc::new(MemoryStats::default());
        stats.begin(limit);
        let runtime = Runtime::new_with_alloc(CappedAllocator::new(stats.clone())).ok()?;
        let baseline = stats.used();
        Some(Self { runtime, stats, baseline, runs: 0 })
    }
}

/// How many runs the thread's kept runtime has served, if it keeps one.
#[cfg(test)]
pub(super) fn kept_runs() -> Option<u32> {
    KEPT.with(|kept| kept.borrow().as_ref().map(|engine| engine.runs))
}

/// A run's runtime and context once its outcome is known.
struct Finished {
    engine: Engine,
    context: Option<Context>,
}

impl Finished {
    /// Frees the run's context, and keeps the runtime for the thread's next
    /// run if the run ended `clean` and nothing of it is left: no job queued,
    /// its memory given back.
    fn recycle(self, clean: bool) {
        let Self { mut engine, context } = self;
        drop(context);
        // The handler holds the run's place at the cores (see `Runner`'s Drop).
        engine.runtime.set_interrupt_handler(None);
        if !clean || engine.runs >= KEPT_RUNS {
            return;
        }
        engine.runtime.run_gc();
        if engine.runtime.is_job_pending() || engine.stats.used() > engine.baseline + KEPT_GROWTH_BYTES {
            return;
        }
        engine.runs += 1;
        KEPT.with(|kept| {
            let mut kept = kept.borrow_mut();
            if kept.is_none() {
                *kept = Some(engine);
            }
        });
    }
}

/// The limits of one call and what tripped them.
struct Guard {
    limits: Limits,
    clock: Clock,
    timed_out: Rc<Cell<bool>>,
    /// The code asked a question without an answer: the run stops.
    asking: Rc<Cell<bool>>,
    /// Cancelled from outside: the run stops.
    cancel: Option<tokio_util::sync::CancellationToken>,
    stats: Rc<MemoryStats>,
}

/// The time limit counts the run's own time: executing, or awaiting its host
/// calls. Time spent waiting for a core while others run does not count, so a
/// busy machine slows a run down but does not time it out.
#[derive(Clone)]
struct Clock {
    runner: Rc<Runner>,
    /// The deadline if the run never waits for a core.
    deadline: Instant,
    /// The runner's waiting before this run started (a member's run starts
    /// partway through its caller's).
    waited_before: Duration,
}

impl Clock {
    fn deadline(&self) -> Instant {
        let waited = self.runner.waited().saturating_sub(self.waited_before);
        self.deadline.checked_add(waited).unwrap_or(self.deadline)
    }
}

impl Guard {
    fn start(&self, runtime: &Runtime, needs: &Needs) -> Result<Context, RunError> {
        // Zero would switch QuickJS's check off and let recursion crash the thread.
        runtime.set_max_stack_size(self.limits.stack_bytes.clamp(64 * KIB, MAX_STACK_BYTES));
        let (clock, timed_out, asking, cancel) = (self.clock.clone(), self.timed_out.clone(), self.asking.clone(), self.cancel.clone());
        runtime.set_interrupt_handler(Some(Box::new(move || {
            // First: a run's turn may end here, and its waiting moves its deadline.
            clock.runner.checkpoint();
            let late = Instant::now() >= clock.deadline();
            if late {
                timed_out.set(true);
            }
            late || asking.get() || cancel.as_ref().is_some_and(|c| c.is_cancelled())
        })));
        let context = match (needs.date, needs.regexp, needs.map_set) {
            (false, false, false) => Context::custom::<Core>(runtime),
            (true, false, false) => Context::custom::<(Core, Date)>(runtime),
            (false, true, false) => Context::custom::<(Core, RegExp)>(runtime),
            (false, false, true) => Context::custom::<(Core, MapSet)>(runtime),
            (true, true, false) => Context::custom::<(Core, Date, RegExp)>(runtime),
            (true, false, true) => Context::custom::<(Core, Date, MapSet)>(runtime),
            (false, true, true) => Context::custom::<(Core, RegExp, MapSet)>(runtime),
            (true, true, true) => Context::custom::<(Core, Date, RegExp, MapSet)>(runtime),
        };
        let context = context.map_err(|e| {
            if self.stats.exhausted() {
                self.out_of_memory()
            } else {
                RunError::Internal { message: format!("cannot create a JS context: {e}") }
            }
        })?;
        if needs.tools {
            // `tools` is a Proxy so that a name outside the bundle gets a clear error.
            // SAFETY: the context is alive and used by this thread only.
            context.with(|ctx| unsafe { Proxy::add_intrinsic(ctx.as_raw()) });
        }
        Ok(context)
    }

    fn out_of_memory(&self) -> RunError {
        RunError::OutOfMemory { limit_bytes: self.limits.memory_bytes }
    }

    fn timeout(&self) -> RunError {
        self.timed_out.set(true);
        RunError::Timeout { limit_ms: self.limits.wall_clock_ms }
    }

    fn cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(|c| c.is_cancelled())
    }

    /// A limit that tripped (or a cancel) explains any error that follows it.
    fn tripped(&self) -> Option<RunError> {
        if self.cancelled() {
            Some(RunError::Cancelled)
        } else if self.timed_out.get() {
            Some(self.timeout())
        } else if self.stats.exhausted() {
            Some(self.out_of_memory())
        } else {
            None
        }
    }

    /// Maps an error from the JS API, taking the pending exception if there is one.
    fn failure(&self, ctx: &Ctx<'_>, error: rquickjs::Error) -> RunError {
        match error {
            rquickjs::Error::Exception => self.thrown(ctx, ctx.catch()),
            other => self.tripped().unwrap_or(RunError::Internal { message: other.to_string() }),
        }
    }

    fn thrown<'js>(&self, ctx: &Ctx<'js>, value: Value<'js>) -> RunError {
        if let Some(error) = self.tripped() {
            return error;
        }
        let Some(error) = value.as_object().filter(|_| value.is_error()) else {
            let message = display(ctx, &value).unwrap_or_else(|_| value.type_name().into());
            return RunError::Thrown { name: "Error".into(), message, line: None, stack: None };
        };
        let text = |key: &str| error.get::<_, Option<Coerced<String>>>(key).ok().flatten().map(|v| v.0);
        let name = text("name").unwrap_or_else(|| "Error".into());
        let message = text("message").unwrap_or_default();
        let stack = text("stack").and_then(tidy_stack);
        let line = stack.as_deref().and_then(line_in_tool);
        match name.as_str() {
            "RangeError" if message.contains("call stack size exceeded") => RunError::StackOverflow { line },
            "InternalError" if message.contains("stack overflow") => RunError::StackOverflow { line },
            "InternalError" if message == "out of memory" => self.out_of_memory(),
            _ => RunError::Thrown { name, message, line, stack },
        }
    }

    fn result<'js>(&self, ctx: &Ctx<'js>, value: Value<'js>) -> Result<ToolValue, RunError> {
        if value.type_of().is_void() {
            return Ok(ToolValue::Text(String::new()));
        }
        let (text, is_json) = match value.as_string() {
            Some(text) => (text.clone(), false),
            None => match ctx.json_stringify(value.clone()) {
                Ok(Some(json)) => (json, true),
                Ok(None) => {
                    return Err(RunError::NotSerializable { message: format!("a {} cannot be represented as JSON", value.type_name()) })
                }
                Err(rquickjs::Error::Exception) => {
                    let error = ctx.catch();
                    return Err(self
                        .tripped()
                        .unwrap_or_else(|| RunError::NotSerializable { message: display(ctx, &error).unwrap_or_default() }));
                }
                Err(e) => return Err(self.failure(ctx, e)),
            },
        };
        let text = text.to_string().map_err(|_| RunError::NotSerializable { message: "the text is not valid Unicode".into() })?;
        if text.len() > self.limits.result_bytes {
            return Err(RunError::OutputTooLarge { limit_bytes: self.limits.result_bytes, actual_bytes: text.len() });
        }
        if !is_json {
            return Ok(ToolValue::Text(text));
        }
        serde_json::from_str(&text).map(ToolValue::Json).map_err(|e| RunError::NotSerializable {
            message: match e.to_string().contains("recursion limit") {
                true => "it is nested more than 128 levels deep".into(),
                false => e.to_string(),
            },
        })
    }
}

/// The run's result, and its `$fetch` exchanges.
fn execute<'js>(
    ctx: &Ctx<'js>,
    req: &RunRequest,
    needs: &Needs,
    host: &Rc<Host>,
    guard: &Guard,
) -> (Result<ToolValue, RunError>, Vec<FetchExchange>) {
    let calls = Rc::new(RefCell::new(HostCalls::new(req, guard.asking.clone())));
    let _clear = ClearOnDrop(&calls);
    let mut result = install(ctx, req, needs, host.clone(), calls.clone())
        .map_err(|e| guard.failure(ctx, e))
        .and_then(|()| drive(ctx, &req.code, &calls, guard));
    // Whatever the code did after asking (caught the interrupt, returned), it stopped to ask.
    if let Some(requests) = calls.borrow_mut().take_asked() {
        result = Err(RunError::NeedsInput { requests });
    }
    let fetches = calls.borrow_mut().take_recording();
    (result, fetches)
}

/// Runs even when unwinding: JS values left in the queue would outlive the
/// context, and QuickJS aborts the process when a runtime is freed with live objects.
struct ClearOnDrop<'a, 'js>(&'a RefCell<HostCalls<'js>>);

impl Drop for ClearOnDrop<'_, '_> {
    fn drop(&mut self) {
        if let Ok(mut queue) = self.0.try_borrow_mut() {
            queue.clear();
        }
    }
}

/// Evaluates the wrapped body, then runs jobs and settles host calls until
/// its promise settles.
fn drive<'js>(ctx: &Ctx<'js>, code: &str, calls: &RefCell<HostCalls<'js>>, guard: &Guard) -> Result<ToolValue, RunError> {
    let mut source = String::with_capacity(PREFIX.len() + code.len() + SUFFIX.len());
    source.push_str(PREFIX);
    source.push_str(code);
    source.push_str(SUFFIX);
    let mut options = EvalOptions::default();
    options.filename = Some(FILE_NAME.into());
    let value: Value = match ctx.eval_with_options(source, options) {
        Ok(value) => value,
        Err(rquickjs::Error::Exception) => {
            let error = ctx.catch();
            return Err(match guard.thrown(ctx, error) {
                RunError::Thrown { name, message, line, .. } if name == "SyntaxError" => RunError::Syntax { message, line },
                other => other,
            });
        }
        Err(e) => return Err(guard.failure(ctx, e)),
    };
    // Only code that closes the wrapper early (`}); ...`) evaluates to something else.
    let Some(promise) = value.as_promise() else {
        return guard.result(ctx, value);
    };

    // `execute` fills in the questions the run stopped for.
    let asked = || RunError::NeedsInput { requests: Default::default() };
    loop {
        if guard.asking.get() {
            return Err(asked());
        }
        while ctx.execute_pending_job() {
            if guard.asking.get() {
                return Err(asked());
            }
            if Instant::now() >= guard.clock.deadline() {
                return Err(guard.timeout());
            }
        }
        if guard.cancelled() {
            return Err(RunError::Cancelled);
        }
        if guard.timed_out.get() {
            return Err(guard.timeout());
        }
        // A rejection comes back as a pending exception holding the reason.
        match promise.result::<Value>() {
            Some(Ok(value)) => {
                if let Some(blocks) = calls.borrow().content_of(&value) {
                    return Ok(ToolValue::Content(blocks));
                }
                return guard.result(ctx, value);
            }
            Some(Err(e)) => return Err(guard.failure(ctx, e)),
            None => {}
        }
        // Awaiting host calls counts against the time limit, but needs no core.
        let deadline = guard.clock.deadline();
        let next = guard.clock.runner.outside(|| calls.borrow_mut().wait(deadline, guard.cancel.as_ref()));
        match next {
            Wait::Done(resolvers, reply) => {
                let result = match reply {
                    Reply::Fetch(response) => response.map(Settled::Response),
                    Reply::Tool(Ok(call)) => run_member(*call, guard).map(Settled::Value),
                    Reply::Slept => Ok(Settled::Nothing),
                    Reply::Tool(Err(message)) | Reply::Failed(message) => Err(message),
                };
                settle(ctx, resolvers, result).map_err(|e| guard.failure(ctx, e))?
            }
            Wait::Idle => return Err(RunError::NeverSettled),
            Wait::TimedOut => return Err(guard.timeout()),
            Wait::Cancelled => return Err(RunError::Cancelled),
        }
    }
}

/// Runs a member's call here, nested: this thread only waits meanwhile. The
/// member keeps its own limits, but its time never runs past the caller's deadline.
fn run_member(call: ToolCall, guard: &Guard) -> Result<ToolValue, String> {
    let (mut request, finish, span) = match call {
        ToolCall::Run { request, finish, span } => (request, finish, span),
        ToolCall::Answered(result) => return result,
    };
    let _in_its_span = span.enter();
    let left = guard.clock.deadline().saturating_duration_since(Instant::now());
    if left.is_zero() {
        // Still finished, so the call is recorded (and counted) as the time-out it is.
        let outcome = RunOutcome {
            result: Err(guard.timeout()),
            console: Vec::new(),
            fetches: Vec::new(),
            duration: Duration::ZERO,
            queued: Duration::ZERO,
            peak_memory_bytes: 0,
        };
        return finish(outcome);
    }
    let left_ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX).max(1);
    request.limits.wall_clock_ms = request.limits.wall_clock_ms.min(left_ms);
    // A cancelled caller stops its member too.
    request.cancel = request.cancel.take().or_else(|| guard.cancel.clone());
    finish(run_reporting_on(*request, &guard.clock.runner))
}

/// Drops the frame of the wrapper's call, which is not the user's code.
fn tidy_stack(stack: String) -> Option<String> {
    let wrapper = format!("at <eval> ({FILE_NAME}:");
    let tidy: String = stack.split_inclusive('\n').filter(|frame| !frame.contains(&wrapper)).collect();
    (!tidy.trim().is_empty()).then_some(tidy)
}

/// The line of the innermost stack frame in the tool's own code.
fn line_in_tool(stack: &str) -> Option<u32> {
    let marker = format!("{FILE_NAME}:");
    let at = stack.find(&marker)? + marker.len();
    let digits: String = stack[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}
