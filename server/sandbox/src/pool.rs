//! The worker threads that run tool code off the async reactor, shared fairly:
//! no listing and no caller can take the sandbox from the others.
//!
//! - **Threads hold runs, cores execute them.** A run keeps its worker thread
//!   from start to end, also while it awaits `$fetch` or waits for a core, so
//!   there are more threads than cores; which runs execute at any moment is
//!   decided by [`Cores`] (short runs one per core; long runs on all cores
//!   but one, taking turns).
//! - **Long runs get the leftovers.** A run that turns long drops its thread
//!   to the lowest CPU priority (`SCHED_IDLE`), so the operating system gives the
//!   cores to the server and to short calls first. A thread cannot raise its
//!   priority again: a fresh one takes its place first, and it ends with the run.
//! - **Caps.** At most `per_listing` runs of one listing and `per_caller` runs
//!   of one caller are in progress at once. Past a cap, calls wait their turn;
//!   waiting callers are served round-robin, so one caller's flood queues
//!   behind itself, not in front of everyone else.
//! - **A caller over their share is refused, nobody else.** Past
//!   `caller_calls` calls in flight (in progress or waiting), a caller's next
//!   call is refused `TooManyCalls` at once.
//! - **Queue briefly rather than refuse.** A call waits up to `queue_wait_ms` for
//!   its turn; only then, or past `queue` waiting calls in all, is it refused `Busy`.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::cores::{Cores, Runner};
use super::engine::{self, MAX_STACK_BYTES};
use super::{RunOutcome, RunRequest, MIB};
use toolshed_types::ids::{ToolId, UserId};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SandboxConfig {
    /// Worker threads: runs in progress at once (executing, waiting for a
    /// core, or awaiting their `$fetch`es).
    pub workers: usize,
    /// Runs executing JavaScript at once: the machine's cores.
    pub cores: usize,
    /// A run that has executed this long is a long run; long runs take turns
    /// of this length (see [`Cores`]).
    pub slice_ms: u64,
    /// Calls that may wait for their turn, in all, before more are refused `Busy`.
    pub queue: usize,
    /// Runs of one listing in progress at once.
    pub per_listing: usize,
    /// Runs of one caller in progress at once.
    pub per_caller: usize,
    /// Calls of one caller in flight (in progress or waiting) before more are
    /// refused `TooManyCalls`.
    pub caller_calls: usize,
    /// How long a call may wait for its turn before it is refused `Busy`.
    pub queue_wait_ms: u64,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        let cores = thread::available_parallelism().map_or(2, |n| n.get());
        let workers = (cores * 8).clamp(8, 64);
        Self {
            workers,
            cores,
            slice_ms: 10,
            queue: 4096,
            per_listing: workers / 2,
            per_caller: workers / 4,
            caller_calls: 256,
            queue_wait_ms: 10_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    #[error("the sandbox is busy: too many tool calls are waiting, try again shortly")]
    Busy,
    /// This caller has `caller_calls` calls in flight already; others are not refused.
    #[error("too many calls in flight for you; try again shortly")]
    TooManyCalls,
    #[error("the sandbox worker stopped before answering")]
    WorkerLost,
}

/// Whose run it is, for the caps and the turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lane {
    /// The listing: a tool, or a bundle for its code mode.
    pub tool: ToolId,
    pub caller: UserId,
}

const QUEUED: u8 = 0;
const STARTED: u8 = 1;
const GAVE_UP: u8 = 2;

struct Job {
    req: RunRequest,
    lane: Lane,
    reply: oneshot::Sender<RunOutcome>,
    /// When it joined the line, for [`RunOutcome::queued`].
    enqueued: Instant,
    /// The caller's span, entered on the worker so that `$fetch` spans are its children.
    span: tracing::Span,
    /// QUEUED until a worker takes it (STARTED) or its caller stops waiting (GAVE_UP).
    state: Arc<AtomicU8>,
}

impl Job {
    /// Takes the job for a worker, unless its caller is gone.
    fn start(&self) -> bool {
        !self.reply.is_closed() && self.state.compare_exchange(QUEUED, STARTED, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    fn abandoned(&self) -> bool {
        self.reply.is_closed() || self.state.load(Ordering::Acquire) == GAVE_UP
    }
}

/// Cheap to clone; the workers stop once the last clone is dropped.
#[derive(Clone)]
pub struct Sandbox {
    owner: Arc<Owner>,
}

struct Owner(Arc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        // With the only sender gone, every worker's next `recv` ends it.
        self.0.jobs.lock().unwrap_or_else(PoisonError::into_inner).take();
    }
}

struct Shared {
    /// Names this pool's threads (`sandbox-N-…`), apart from other pools in the process.
    id: usize,
    config: SandboxConfig,
    turns: Mutex<Turns>,
    /// `None` once the pool is dropped.
    jobs: Mutex<Option<Sender<Job>>>,
    queue: Mutex<Receiver<Job>>,
    cores: Arc<Cores>,
    /// Threads started so far, for their names.
    threads: AtomicUsize,
}

/// Who is in progress and who waits, by lane.
#[derive(Default)]
struct Turns {
    running: usize,
    by_tool: HashMap<ToolId, usize>,
    by_caller: HashMap<UserId, usize>,
    /// Runs started whose caller has no answer yet (a run holds its thread a
    /// little longer, to tear its runtime down).
    unanswered: HashMap<UserId, usize>,
    /// Waiting callers in round-robin order, each with their calls in order.
    waiting: VecDeque<(UserId, VecDeque<Job>)>,
    waiting_count: usize,
}

impl Turns {
    /// Hands waiting jobs to workers while there is room.
    fn dispatch(&mut self, config: &SandboxConfig, jobs: &Sender<Job>) {
        while self.running < config.workers {
            let Some(job) = self.next(config) else { return };
            self.running += 1;
            *self.by_tool.entry(job.lane.tool).or_default() += 1;
            *self.by_caller.entry(job.lane.caller).or_default() += 1;
            *self.unanswered.entry(job.lane.caller).or_default() += 1;
            // The receiver lives as long as the pool's shared state.
            let _ = jobs.send(job);
        }
    }

    /// The next job whose listing and caller are under their caps, taking
    /// callers in turn; drops the abandoned ones it passes.
    fn next(&mut self, config: &SandboxConfig) -> Option<Job> {
        for i in 0..self.waiting.len() {
            let (caller, jobs) = &mut self.waiting[i];
            if self.by_caller.get(caller).copied().unwrap_or(0) >= config.per_caller {
                continue;
            }
            let by_tool = &self.by_tool;
            let Some(at) = jobs.iter().position(|j| by_tool.get(&j.lane.tool).copied().unwrap_or(0) < config.per_listing) else {
                continue;
            };
            let job = jobs.remove(at).expect("the position is in the queue");
            self.waiting_count -= 1;
            // This caller goes to the back of the line (or leaves it).
            let (caller, rest) = self.waiting.remove(i).expect("the index is in the line");
            if !rest.is_empty() {
                self.waiting.push_back((caller, rest));
            }
            if job.start() {
                return Some(job);
            }
            return self.next(config);
        }
        None
    }

    fn finished(&mut self, lane: Lane) {
        self.running -= 1;
        release(&mut self.by_tool, lane.tool);
        release(&mut self.by_caller, lane.caller);
    }

    fn answered(&mut self, caller: UserId) {
        release(&mut self.unanswered, caller);
    }

    /// The caller's calls not answered yet: waiting, or in progress. A client
    /// with N calls at once never has more than N.
    fn in_flight(&self, caller: UserId) -> usize {
        let waiting = self.waiting.iter().find(|(c, _)| *c == caller).map_or(0, |(_, jobs)| jobs.len());
        self.unanswered.get(&caller).copied().unwrap_or(0) + waiting
    }

    /// Forgets `caller`'s abandoned calls.
    fn purge(&mut self, caller: UserId) {
        let Some(i) = self.waiting.iter().position(|(c, _)| *c == caller) else { return };
        let jobs = &mut self.waiting[i].1;
        let before = jobs.len();
        jobs.retain(|j| !j.abandoned());
        self.waiting_count -= before - jobs.len();
        if jobs.is_empty() {
            self.waiting.remove(i);
        }
    }

    fn enqueue(&mut self, job: Job) {
        self.waiting_count += 1;
        match self.waiting.iter_mut().find(|(c, _)| *c == job.lane.caller) {
            Some((_, jobs)) => jobs.push_back(job),
            None => self.waiting.push_back((job.lane.caller, VecDeque::from([job]))),
        }
    }
}

fn release<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, usize>, key: K) {
    if let Some(n) = counts.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            counts.remove(&key);
        }
    }
}

impl Shared {
    fn turns(&self) -> std::sync::MutexGuard<'_, Turns> {
        self.turns.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn dispatch(&self, turns: &mut Turns) {
        if let Some(jobs) = &*self.jobs.lock().unwrap_or_else(PoisonError::into_inner) {
            turns.dispatch(&self.config, jobs);
        }
    }
}

impl Sandbox {
    pub fn new(config: SandboxConfig) -> std::io::Result<Self> {
        let config = SandboxConfig {
            workers: config.workers.max(1),
            per_listing: config.per_listing.max(1),
            per_caller: config.per_caller.max(1),
            caller_calls: config.caller_calls.max(1),
            ..config
        };
        let (jobs, queue) = mpsc::channel();
        static POOLS: AtomicUsize = AtomicUsize::new(0);
        let shared = Arc::new(Shared {
            id: POOLS.fetch_add(1, Ordering::Relaxed),
            cores: Arc::new(Cores::new(config.cores, Duration::from_millis(config.slice_ms))),
            config,
            turns: Mutex::default(),
            jobs: Mutex::new(Some(jobs)),
            queue: Mutex::new(queue),
            threads: AtomicUsize::new(0),
        });
        for _ in 0..shared.config.workers {
            spawn_worker(&shared)?;
        }
        Ok(Self { owner: Arc::new(Owner(shared)) })
    }

    /// Runs a call on a worker when its lane's turn comes. `TooManyCalls` at
    /// once when its caller has too many in flight; `Busy` when it waited too
    /// long, or too many calls are waiting already.
    pub async fn run(&self, req: RunRequest, lane: Lane) -> Result<RunOutcome, SandboxError> {
        let shared = &self.owner.0;
        let (reply, mut answer) = oneshot::channel();
        let state = Arc::new(AtomicU8::new(QUEUED));
        {
            let mut turns = shared.turns();
            if turns.in_flight(lane.caller) >= shared.config.caller_calls {
                // Calls whose callers went away do not count.
                turns.purge(lane.caller);
                if turns.in_flight(lane.caller) >= shared.config.caller_calls {
                    return Err(SandboxError::TooManyCalls);
                }
            }
            if turns.waiting_count >= shared.config.queue {
                return Err(SandboxError::Busy);
            }
            let span = tracing::Span::current();
            turns.enqueue(Job { req, lane, reply, enqueued: Instant::now(), span, state: state.clone() });
            shared.dispatch(&mut turns);
        }
        let wait = Duration::from_millis(shared.config.queue_wait_ms);
        match tokio::time::timeout(wait, &mut answer).await {
            Ok(outcome) => outcome.map_err(|_| SandboxError::WorkerLost),
            Err(_) if state.compare_exchange(QUEUED, GAVE_UP, Ordering::AcqRel, Ordering::Acquire).is_ok() => {
                // Leave the line now, so it does not count against the queue.
                shared.turns().purge(lane.caller);
                Err(SandboxError::Busy)
            }
            // It started meanwhile: the run is bounded by its own time limit.
            Err(_) => answer.await.map_err(|_| SandboxError::WorkerLost),
        }
    }
}

fn spawn_worker(shared: &Arc<Shared>) -> std::io::Result<()> {
    let worker = shared.clone();
    thread::Builder::new()
        .name(format!("sandbox-{}-{}", shared.id, shared.threads.fetch_add(1, Ordering::Relaxed)))
        .stack_size(MAX_STACK_BYTES + 8 * MIB)
        .spawn(move || work(&worker))
        .map(drop)
}

/// Makes the calling worker thread a long run's: a replacement starts at
/// normal priority (a thread inherits its creator's), then this one drops to
/// the lowest, so the operating system gives the cores to everything else
/// first; it ends after the run, since it may not raise its priority again.
/// True if it did.
fn step_down(shared: &Arc<Shared>) -> bool {
    if let Err(e) = spawn_worker(shared) {
        tracing::error!(error = %e, "could not start a sandbox worker; a long run keeps its priority");
        return false;
    }
    // SCHED_IDLE rather than nice 19: a waking normal thread preempts an
    // idle-policy one at once, while a nice-19 one may keep its core for the
    // rest of its slice (echo's p99 beside four loops: 3.46× alone at nice 19,
    // against a goal of 3×). Any thread may lower itself to it; nice 19 is the fallback.
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: both calls act on this thread's own id with valid arguments;
    // lowering a priority needs no privilege.
    let lowered = unsafe {
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0
            || libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19) == 0
    };
    if !lowered {
        tracing::warn!("could not lower a long sandbox run's priority");
    }
    true
}

fn work(shared: &Arc<Shared>) {
    loop {
        let msg = shared.queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(Job { req, lane, reply, enqueued, span, .. }) = msg else { return };
        let queued = enqueued.elapsed();
        let entered = span.enter();
        // The engine does not panic by design; this keeps the worker alive if it
        // ever does (the caller then sees `WorkerLost`, and the core is given back).
        let mut answered = false;
        let retire = Rc::new(Cell::new(false));
        let ran = panic::catch_unwind(AssertUnwindSafe(|| {
            let (worker, retiring) = (shared.clone(), retire.clone());
            let runner = Runner::start(&shared.cores, lane.caller, move || retiring.set(step_down(&worker)));
            engine::run_scheduled(req, &runner, |mut outcome| {
                // Counted out before the answer leaves, so the caller's next call never sees it.
                shared.turns().answered(lane.caller);
                answered = true;
                outcome.queued = queued;
                let _ = reply.send(outcome);
            })
        }));
        if ran.is_err() {
            tracing::error!("a sandbox worker recovered from a panic");
        }
        drop(entered);
        let mut turns = shared.turns();
        if !answered {
            turns.answered(lane.caller);
        }
        turns.finished(lane);
        shared.dispatch(&mut turns);
        drop(turns);
        if retire.get() {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
