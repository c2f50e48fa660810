//! Which runs execute JavaScript right now: two lanes of slots, so that loops
//! cannot take the cores from short calls.
//!
//! A worker thread holds a run from start to end, but the run executes only
//! while it holds a slot of its lane; the rest of the time its thread is
//! parked here, costing no CPU.
//!
//! - A run is **short** until it has executed for a `slice`, then **long**.
//! - Short runs have one slot per core, and never wait for a long run.
//! - Long runs have all cores but one (at least one), and their threads run at
//!   the lowest CPU priority (the pool's `on_long`), so what they execute is
//!   what the server and the short calls leave. That alone is not enough when
//!   loops outnumber the cores (each spinning thread still gets its share, and
//!   its slices), so past the long slots loops are parked: they take turns of a
//!   `slice`, round-robin by caller, one caller's many loops sharing that
//!   caller's turn.
//! - A run awaiting its `$fetch`es or tool calls gives its slot back meanwhile.
//!
//! The time a run spends waiting for a slot is counted ([`Runner::waited`]):
//! it does not count against the run's time limit (see `engine.rs`).

use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use toolshed_types::ids::UserId;

pub(super) struct Cores {
    short: Slots,
    long: Slots,
    slice: Duration,
}

impl Cores {
    pub(super) fn new(cores: usize, slice: Duration) -> Self {
        let cores = cores.max(1);
        Self { short: Slots::new(cores), long: Slots::new((cores - 1).max(1)), slice }
    }
}

/// One lane: its slots, and the runs waiting for one.
struct Slots {
    size: usize,
    state: Mutex<SlotState>,
    /// The line's length, read by checkpoints without the lock.
    waiting: AtomicUsize,
}

#[derive(Default)]
struct SlotState {
    held: usize,
    line: Line,
}

impl Slots {
    fn new(size: usize) -> Self {
        Self { size, state: Mutex::default(), waiting: AtomicUsize::new(0) }
    }

    /// Never poisoned in practice (nothing here panics); a run must go on regardless.
    fn state(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a slot, waiting in line if none is free; returns the time waited.
    fn take(&self, caller: UserId) -> Duration {
        let mut state = self.state();
        if state.line.is_empty() && state.held < self.size {
            state.held += 1;
            return Duration::ZERO;
        }
        self.wait(state, caller)
    }

    /// Hands the slot to the next in line, if anyone waits, and waits for
    /// another turn; returns the time waited, or `None` if it kept the slot.
    fn pass(&self, caller: UserId) -> Option<Duration> {
        let mut state = self.state();
        if state.line.is_empty() {
            return None;
        }
        state.held -= 1;
        Some(self.wait(state, caller))
    }

    fn give_back(&self) {
        let mut state = self.state();
        state.held -= 1;
        self.grant(&mut state);
    }

    /// Joins the line (behind the caller's other runs; the caller's turn
    /// comes after everyone else's) and parks until given a slot.
    fn wait(&self, mut state: MutexGuard<'_, SlotState>, caller: UserId) -> Duration {
        let started = Instant::now();
        let wake = Arc::new(Wake { thread: thread::current(), granted: AtomicBool::new(false) });
        state.line.push(caller, wake.clone());
        self.grant(&mut state);
        drop(state);
        while !wake.granted.load(Ordering::Acquire) {
            thread::park();
        }
        started.elapsed()
    }

    fn grant(&self, state: &mut SlotState) {
        while state.held < self.size {
            let Some(wake) = state.line.pop() else { break };
            state.held += 1;
            wake.granted.store(true, Ordering::Release);
            wake.thread.unpark();
        }
        self.waiting.store(state.line.len(), Ordering::Relaxed);
    }
}

/// Runs waiting for a slot, round-robin by caller.
#[derive(Default)]
struct Line(VecDeque<(UserId, VecDeque<Arc<Wake>>)>);

impl Line {
    fn push(&mut self, caller: UserId, wake: Arc<Wake>) {
        match self.0.iter_mut().find(|(c, _)| *c == caller) {
            Some((_, runs)) => runs.push_back(wake),
            None => self.0.push_back((caller, VecDeque::from([wake]))),
        }
    }

    /// The first run of the caller whose turn it is; that caller goes to the back.
    fn pop(&mut self) -> Option<Arc<Wake>> {
        let (caller, mut runs) = self.0.pop_front()?;
        let wake = runs.pop_front();
        if !runs.is_empty() {
            self.0.push_back((caller, runs));
        }
        wake
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn len(&self) -> usize {
        self.0.iter().map(|(_, runs)| runs.len()).sum()
    }
}

/// A parked run's thread, and whether it has been given its slot.
struct Wake {
    thread: Thread,
    granted: AtomicBool,
}

/// One run's place at the cores, on its worker thread. Holds a slot from
/// [`Runner::start`] until dropped, except while parked or [`Runner::outside`].
pub(super) struct Runner {
    /// `None`: a run outside the pool (`run_blocking`), which never waits.
    cores: Option<Arc<Cores>>,
    caller: UserId,
    long: Cell<bool>,
    holding: Cell<bool>,
    /// When the run last got its slot.
    since: Cell<Instant>,
    /// Time executed before `since`.
    executed: Cell<Duration>,
    waited: Cell<Duration>,
    /// Called once, when the run turns long (before it continues as one).
    on_long: Cell<Option<Box<dyn FnOnce()>>>,
}

impl Runner {
    /// A run outside the pool: it executes on its own thread, unscheduled.
    pub(super) fn alone() -> Rc<Self> {
        Rc::new(Self::new(None, UserId(0), None))
    }

    /// Waits for a short run's slot for `caller`'s run; `on_long` is called
    /// if the run turns long.
    pub(super) fn start(cores: &Arc<Cores>, caller: UserId, on_long: impl FnOnce() + 'static) -> Rc<Self> {
        let runner = Self::new(Some(cores.clone()), caller, Some(Box::new(on_long)));
        runner.acquire();
        // Waiting to start is not part of the run.
        runner.waited.set(Duration::ZERO);
        Rc::new(runner)
    }

    fn new(cores: Option<Arc<Cores>>, caller: UserId, on_long: Option<Box<dyn FnOnce()>>) -> Self {
        Self {
            cores,
            caller,
            long: Cell::new(false),
            holding: Cell::new(false),
            since: Cell::new(Instant::now()),
            executed: Cell::new(Duration::ZERO),
            waited: Cell::new(Duration::ZERO),
            on_long: Cell::new(on_long),
        }
    }

    /// Time spent waiting for a slot since the run started.
    pub(super) fn waited(&self) -> Duration {
        self.waited.get()
    }

    /// Called often while the run executes: a short run that has executed a
    /// slice turns long; a long run that has had its turn lets the next one
    /// in line have theirs. Returns once it is this run's turn again.
    pub(super) fn checkpoint(&self) {
        let Some(cores) = &self.cores else { return };
        let now = Instant::now();
        let held = now.saturating_duration_since(self.since.get());
        if !self.long.get() {
            if self.executed.get() + held >= cores.slice {
                self.turn_long(cores, now);
            }
        } else if held >= cores.slice && cores.long.waiting.load(Ordering::Relaxed) > 0 {
            // A new turn starts now, whether the line (looked at under its lock) is still there or not.
            self.stop_clock(now);
            self.since.set(now);
            if let Some(waited) = cores.long.pass(self.caller) {
                self.resume(waited);
            }
        }
    }

    /// Runs `wait` (a blocking wait for host calls) without holding a slot.
    pub(super) fn outside<R>(&self, wait: impl FnOnce() -> R) -> R {
        self.release();
        let result = wait();
        self.acquire();
        result
    }

    fn turn_long(&self, cores: &Cores, now: Instant) {
        if let Some(on_long) = self.on_long.take() {
            on_long();
        }
        self.stop_clock(now);
        cores.short.give_back();
        self.long.set(true);
        self.resume(cores.long.take(self.caller));
    }

    fn lane<'c>(&self, cores: &'c Cores) -> &'c Slots {
        if self.long.get() {
            &cores.long
        } else {
            &cores.short
        }
    }

    fn acquire(&self) {
        let Some(cores) = &self.cores else { return };
        self.resume(self.lane(cores).take(self.caller));
    }

    fn release(&self) {
        let Some(cores) = &self.cores else { return };
        if self.holding.get() {
            self.stop_clock(Instant::now());
            self.holding.set(false);
            self.lane(cores).give_back();
        }
    }

    /// It holds a slot again, after waiting `waited` for it.
    fn resume(&self, waited: Duration) {
        self.waited.set(self.waited.get() + waited);
        self.since.set(Instant::now());
        self.holding.set(true);
    }

    fn stop_clock(&self, now: Instant) {
        self.executed.set(self.executed.get() + now.saturating_duration_since(self.since.get()));
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    fn wake() -> Arc<Wake> {
        Arc::new(Wake { thread: thread::current(), granted: AtomicBool::new(false) })
    }

    #[test]
    fn waiting_runs_are_served_round_robin_by_caller() {
        let mut line = Line::default();
        let runs: Vec<_> = (0..4).map(|_| wake()).collect();
        for (caller, run) in [(1, &runs[0]), (1, &runs[1]), (1, &runs[2]), (2, &runs[3])] {
            line.push(UserId(caller), run.clone());
        }
        let order: Vec<_> = std::iter::from_fn(|| line.pop()).collect();
        let expected = [&runs[0], &runs[3], &runs[1], &runs[2]];
        assert_eq!(order.len(), expected.len());
        assert!(order.iter().zip(expected).all(|(got, want)| Arc::ptr_eq(got, want)));
    }

    /// `caller`'s run on its own thread, with no slice (its first checkpoint
    /// makes it long): says when it is long, then when it has checked in
    /// `turns` times more, and goes on until `stop`.
    fn looping(cores: &Arc<Cores>, caller: i64, turns: usize, stop: Arc<AtomicBool>) -> (mpsc::Receiver<()>, thread::JoinHandle<()>) {
        let (news, heard) = mpsc::channel();
        let cores = cores.clone();
        let run = thread::spawn(move || {
            let runner = Runner::start(&cores, UserId(caller), || ());
            runner.checkpoint();
            news.send(()).unwrap();
            for _ in 0..turns {
                runner.checkpoint();
            }
            news.send(()).unwrap();
            while !stop.load(Ordering::Acquire) {
                runner.checkpoint();
            }
        });
        (heard, run)
    }

    #[test]
    fn a_short_run_never_waits_for_a_long_one() {
        let cores = Arc::new(Cores::new(1, Duration::ZERO));
        let stop = Arc::new(AtomicBool::new(false));
        let (heard, run) = looping(&cores, 1, 0, stop.clone());
        heard.recv().unwrap();
        // The loop holds the only long slot and never ends by itself.
        let short = Runner::start(&cores, UserId(2), || ());
        assert_eq!((cores.short.state().held, cores.long.state().held), (1, 1));
        drop(short);
        stop.store(true, Ordering::Release);
        run.join().unwrap();
        assert_eq!((cores.short.state().held, cores.long.state().held), (0, 0));
    }

    #[test]
    fn loops_that_outnumber_the_long_slots_take_turns_on_them() {
        // Two cores: one long slot, and three loops of one caller and one of another.
        let cores = Arc::new(Cores::new(2, Duration::ZERO));
        let stop = Arc::new(AtomicBool::new(false));
        let loops: Vec<_> = [1, 1, 1, 2].into_iter().map(|caller| looping(&cores, caller, 100, stop.clone())).collect();
        // Each loop gets turns: each checks in a hundred times, one at a time.
        for (heard, _) in &loops {
            heard.recv().unwrap();
            heard.recv().unwrap();
        }
        let long = cores.long.state();
        assert_eq!((long.held, long.line.len()), (1, 3));
        drop(long);
        stop.store(true, Ordering::Release);
        for (_, run) in loops {
            run.join().unwrap();
        }
        assert_eq!((cores.short.state().held, cores.long.state().held), (0, 0));
    }
}
