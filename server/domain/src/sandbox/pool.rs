//! The worker threads that run tool code off the async reactor, shared fairly:
//! no tool and no caller can take the pool from the others.
//!
//! - **More threads than cores.** A run waiting on `$fetch` holds a thread,
//!   not a core, and a spinning run must not leave others without a thread.
//! - **Caps.** At most `per_tool` runs of one tool and `per_caller` runs of one
//!   caller at once. Past a cap, calls wait their turn; waiting callers are
//!   served round-robin, so one caller's flood queues behind itself, not in
//!   front of everyone else.
//! - **A slow lane.** A run still going after `slow_after_ms` is CPU-heavy or
//!   stuck: its thread's scheduling priority drops to the lowest (nice 19), so
//!   the cores go to everyone else's calls first. A thread may not raise its
//!   priority again (without privileges), so it retires after that run and the
//!   watcher starts a fresh one in its place (a thread inherits its creator's
//!   priority, so the slow one cannot).
//! - **Queue briefly rather than refuse.** A call waits up to `queue_wait_ms` for
//!   its turn; only then, or past `queue` waiting calls, is it refused `Busy`.

use std::collections::{HashMap, VecDeque};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::engine::{self, MAX_STACK_BYTES};
use super::{RunOutcome, RunRequest, MIB};
use crate::ids::{ToolId, UserId};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SandboxConfig {
    /// Worker threads, each running one call at a time.
    pub workers: usize,
    /// Calls that may wait for their turn before more are refused at once.
    pub queue: usize,
    /// Runs of one tool at once.
    pub per_tool: usize,
    /// Runs for one caller at once.
    pub per_caller: usize,
    /// How long a call may wait for its turn before it is refused `Busy`.
    pub queue_wait_ms: u64,
    /// A run going longer than this moves to the slow lane (lowest CPU priority).
    pub slow_after_ms: u64,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        let cores = thread::available_parallelism().map_or(2, |n| n.get());
        let workers = (cores * 8).clamp(8, 64);
        Self { workers, queue: 4096, per_tool: workers / 4, per_caller: workers / 4, queue_wait_ms: 10_000, slow_after_ms: 100 }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    #[error("the sandbox is busy: too many tool calls are waiting, try again shortly")]
    Busy,
    #[error("the sandbox worker stopped before answering")]
    WorkerLost,
}

/// Whose run it is, for the caps and the turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lane {
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
        self.0.closed.store(true, Ordering::Release);
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
    queue: Arc<Mutex<Receiver<Job>>>,
    /// One per worker thread (a replacement thread takes over its slot).
    slots: Vec<Arc<Slot>>,
    closed: AtomicBool,
}

/// What the slow-lane watcher knows of one worker thread.
#[derive(Default)]
struct Slot {
    /// Milliseconds since `EPOCH` when the current run started; 0 when idle.
    started_ms: AtomicU64,
    tid: AtomicI32,
    demoted: AtomicBool,
    /// The thread left after a slow run: the watcher starts another.
    vacant: AtomicBool,
}

/// Who is running and who waits, by lane.
#[derive(Default)]
struct Turns {
    running: usize,
    by_tool: HashMap<ToolId, usize>,
    by_caller: HashMap<UserId, usize>,
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
            // The receiver lives as long as the pool's shared state.
            let _ = jobs.send(job);
        }
    }

    /// The next job whose tool and caller are under their caps, taking callers
    /// in turn; drops the abandoned ones it passes.
    fn next(&mut self, config: &SandboxConfig) -> Option<Job> {
        for i in 0..self.waiting.len() {
            let (caller, jobs) = &mut self.waiting[i];
            if self.by_caller.get(caller).copied().unwrap_or(0) >= config.per_caller {
                continue;
            }
            let by_tool = &self.by_tool;
            let Some(at) = jobs.iter().position(|j| by_tool.get(&j.lane.tool).copied().unwrap_or(0) < config.per_tool) else {
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
            per_tool: config.per_tool.max(1),
            per_caller: config.per_caller.max(1),
            ..config
        };
        let (jobs, queue) = mpsc::channel();
        static POOLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let shared = Arc::new(Shared {
            id: POOLS.fetch_add(1, Ordering::Relaxed),
            slots: (0..config.workers).map(|_| Arc::default()).collect(),
            config,
            turns: Mutex::default(),
            jobs: Mutex::new(Some(jobs)),
            queue: Arc::new(Mutex::new(queue)),
            closed: AtomicBool::new(false),
        });
        for i in 0..shared.config.workers {
            spawn_worker(&shared, i)?;
        }
        let watched = Arc::downgrade(&shared);
        thread::Builder::new().name(format!("sandbox-{}-watch", shared.id)).spawn(move || watch(&watched))?;
        Ok(Self { owner: Arc::new(Owner(shared)) })
    }

    /// Runs a call on a worker when its lane's turn comes. `Busy` when it
    /// waited too long, or too many calls are waiting already.
    pub async fn run(&self, req: RunRequest, lane: Lane) -> Result<RunOutcome, SandboxError> {
        let shared = &self.owner.0;
        let (reply, mut answer) = oneshot::channel();
        let state = Arc::new(AtomicU8::new(QUEUED));
        {
            let mut turns = shared.turns();
            if turns.waiting_count >= shared.config.queue {
                return Err(SandboxError::Busy);
            }
            turns.enqueue(Job { req, lane, reply, state: state.clone() });
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
            // It started meanwhile: the run is bounded by its own wall clock.
            Err(_) => answer.await.map_err(|_| SandboxError::WorkerLost),
        }
    }
}

fn spawn_worker(shared: &Arc<Shared>, slot: usize) -> std::io::Result<()> {
    let shared = shared.clone();
    thread::Builder::new()
        .name(format!("sandbox-{}-{slot}", shared.id))
        .stack_size(MAX_STACK_BYTES + 8 * MIB)
        .spawn(move || work(&shared, slot))
        .map(drop)
}

fn work(shared: &Arc<Shared>, slot_index: usize) {
    let slot = &shared.slots[slot_index];
    // SAFETY: gettid has no preconditions.
    slot.tid.store(unsafe { libc::gettid() }, Ordering::Release);
    slot.demoted.store(false, Ordering::Release);
    loop {
        let msg = shared.queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(Job { req, lane, reply, .. }) = msg else { return };
        slot.started_ms.store(now_ms(), Ordering::Release);
        // The engine does not panic by design; this keeps the worker alive if it
        // ever does (the caller then sees `WorkerLost`).
        let ran = panic::catch_unwind(AssertUnwindSafe(|| {
            engine::run_reporting(req, |outcome| {
                let _ = reply.send(outcome);
            })
        }));
        if ran.is_err() {
            tracing::error!("a sandbox worker recovered from a panic");
        }
        slot.started_ms.store(0, Ordering::Release);
        {
            let mut turns = shared.turns();
            turns.finished(lane);
            shared.dispatch(&mut turns);
        }
        if slot.demoted.load(Ordering::Acquire) {
            // This thread runs at the lowest priority for good: the watcher starts a fresh one.
            slot.vacant.store(true, Ordering::Release);
            return;
        }
    }
}

/// Moves runs that go on past `slow_after_ms` to the slow lane; stops with the pool.
fn watch(shared: &Weak<Shared>) {
    loop {
        let Some(shared) = shared.upgrade() else { return };
        if shared.closed.load(Ordering::Acquire) {
            return;
        }
        let slow_after = shared.config.slow_after_ms;
        let now = now_ms();
        for (i, slot) in shared.slots.iter().enumerate() {
            if slot.vacant.load(Ordering::Acquire) {
                match spawn_worker(&shared, i) {
                    Ok(()) => slot.vacant.store(false, Ordering::Release),
                    Err(e) => tracing::error!(error = %e, "could not start a sandbox worker; trying again"),
                }
                continue;
            }
            let started = slot.started_ms.load(Ordering::Acquire);
            if started != 0 && now.saturating_sub(started) >= slow_after && !slot.demoted.swap(true, Ordering::AcqRel) {
                let tid = slot.tid.load(Ordering::Acquire);
                // SAFETY: setpriority on a thread id of this process; lowering priority needs no privilege.
                let lowered = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19) } == 0;
                if !lowered {
                    tracing::warn!(tid, "could not lower a slow sandbox run's priority");
                }
            }
        }
        drop(shared);
        thread::sleep(Duration::from_millis((slow_after / 4).clamp(5, 50)));
    }
}

/// Milliseconds on a monotonic clock (never 0 once running).
fn now_ms() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

#[cfg(test)]
mod tests;
