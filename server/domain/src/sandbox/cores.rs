//! Which runs execute JavaScript right now: at most one per core, time-sliced.
//!
//! A worker thread holds a run from start to end, but the run executes only
//! while it holds one of the `slots` (one per core); the rest of the time its
//! thread is parked here, costing no CPU. That is what keeps short calls fast
//! when loops outnumber the cores: the operating system's priorities cannot,
//! since every spinning thread still gets its share of a core.
//!
//! - A run is **short** until it has executed for a `slice`, then **long**.
//! - Long runs hold at most `long_slots` (all cores but one, at least one), so
//!   a core is left for short calls and for the server around them.
//! - A short run that finds every slot taken takes one a long run holds, at
//!   once; that long run parks at its next checkpoint (the QuickJS interrupt
//!   handler, every few thousand operations). So a short run never waits for
//!   a long one, even one the operating system is not running just then.
//! - A long run that has run a slice gives its slot to a waiting long run.
//! - Waiting runs are served short ones first, each class round-robin by
//!   caller, so one caller's many loops share one caller's turn.
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

use crate::ids::UserId;

pub(super) struct Cores {
    slots: usize,
    long_slots: usize,
    slice: Duration,
    state: Mutex<State>,
    /// Copies of `State::evicted` and the long line's length, read by
    /// checkpoints without the lock.
    evicted: AtomicUsize,
    long_waiting: AtomicUsize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Short,
    Long,
}

#[derive(Default)]
struct State {
    short: usize,
    long: usize,
    /// Long runs whose slot a short run took, still to park at a checkpoint.
    evicted: usize,
    short_line: Line,
    long_line: Line,
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

    /// Runs waiting, of all callers.
    fn len(&self) -> usize {
        self.0.iter().map(|(_, runs)| runs.len()).sum()
    }
}

/// A parked run's thread, and whether it has been given its slot.
struct Wake {
    thread: Thread,
    granted: AtomicBool,
}

impl Wake {
    fn grant(&self) {
        self.granted.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

impl Cores {
    pub(super) fn new(cores: usize, slice: Duration) -> Self {
        let slots = cores.max(1);
        Self {
            slots,
            long_slots: (slots - 1).max(1),
            slice,
            state: Mutex::default(),
            evicted: AtomicUsize::new(0),
            long_waiting: AtomicUsize::new(0),
        }
    }

    /// Never poisoned in practice (nothing here panics); a run must go on regardless.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A long run whose slot was taken still executes until it parks, so it
    /// still counts.
    fn fits(&self, state: &State, class: Class) -> bool {
        let long = state.long + state.evicted;
        state.short + long < self.slots && (class == Class::Short || long < self.long_slots)
    }

    /// Takes a slot for a run of `class`: a free one or, for a short run,
    /// one a long run holds (that run parks at its next checkpoint).
    fn admit(&self, state: &mut State, class: Class) -> bool {
        if self.fits(state, class) {
            match class {
                Class::Short => state.short += 1,
                Class::Long => state.long += 1,
            }
            return true;
        }
        if class == Class::Long || state.long == 0 {
            return false;
        }
        state.long -= 1;
        state.evicted += 1;
        self.evicted.store(state.evicted, Ordering::Relaxed);
        state.short += 1;
        true
    }

    fn give_back(&self, state: &mut State, class: Class) {
        match class {
            Class::Short => state.short -= 1,
            // A long run whose slot a short one took has nothing left to give.
            Class::Long if state.evicted > 0 => {
                state.evicted -= 1;
                self.evicted.store(state.evicted, Ordering::Relaxed);
            }
            Class::Long => state.long -= 1,
        }
    }

    fn line<'s>(&self, state: &'s mut State, class: Class) -> &'s mut Line {
        match class {
            Class::Short => &mut state.short_line,
            Class::Long => &mut state.long_line,
        }
    }

    /// Hands slots to waiting runs: short ones first.
    fn grant(&self, state: &mut State) {
        for class in [Class::Short, Class::Long] {
            while !self.line(state, class).is_empty() && self.admit(state, class) {
                self.line(state, class).pop().expect("the line is not empty").grant();
            }
        }
        self.long_waiting.store(state.long_line.len(), Ordering::Relaxed);
    }

    /// Joins the line for a slot of `class` (the caller must then [`park`]).
    fn enqueue(&self, state: &mut State, caller: UserId, class: Class) -> Arc<Wake> {
        let wake = Arc::new(Wake { thread: thread::current(), granted: AtomicBool::new(false) });
        self.line(state, class).push(caller, wake.clone());
        self.long_waiting.store(state.long_line.len(), Ordering::Relaxed);
        wake
    }
}

/// Blocks until `wake` is granted its slot.
fn park(wake: &Wake) {
    while !wake.granted.load(Ordering::Acquire) {
        thread::park();
    }
}

/// One run's place at the cores, on its worker thread. Holds a slot from
/// [`Runner::start`] until dropped, except while parked or [`Runner::outside`].
pub(super) struct Runner {
    /// `None`: a run outside the pool (`run_blocking`), which never waits.
    cores: Option<Arc<Cores>>,
    caller: UserId,
    class: Cell<Class>,
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

    /// Waits for a slot (as a short run) for `caller`'s run; `on_long` is
    /// called if the run turns long.
    pub(super) fn start(cores: &Arc<Cores>, caller: UserId, on_long: impl FnOnce() + 'static) -> Rc<Self> {
        let runner = Self::new(Some(cores.clone()), caller, Some(Box::new(on_long)));
        runner.acquire();
        runner.waited.set(Duration::ZERO);
        Rc::new(runner)
    }

    fn new(cores: Option<Arc<Cores>>, caller: UserId, on_long: Option<Box<dyn FnOnce()>>) -> Self {
        Self {
            cores,
            caller,
            class: Cell::new(Class::Short),
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

    /// Called often while the run executes: gives the slot up when it is
    /// someone else's turn, and returns once it is this run's turn again.
    pub(super) fn checkpoint(&self) {
        let Some(cores) = &self.cores else { return };
        let now = Instant::now();
        let held = now.saturating_duration_since(self.since.get());
        match self.class.get() {
            Class::Short if self.executed.get() + held >= cores.slice => self.turn_long(cores, now),
            Class::Short => {}
            Class::Long => {
                let evicted = cores.evicted.load(Ordering::Relaxed) > 0;
                let long_waits = held >= cores.slice && cores.long_waiting.load(Ordering::Relaxed) > 0;
                if evicted || long_waits {
                    self.step_aside(cores, now);
                }
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

    /// A short run has executed a slice: it continues as a long one if the
    /// long runs have a slot to spare, else it waits for their turn.
    fn turn_long(&self, cores: &Cores, now: Instant) {
        if let Some(on_long) = self.on_long.take() {
            on_long();
        }
        let mut state = cores.state();
        self.stop_clock(now);
        cores.give_back(&mut state, Class::Short);
        self.class.set(Class::Long);
        if state.long_line.is_empty() && cores.admit(&mut state, Class::Long) {
            // Its first turn as a long run starts now.
            self.since.set(now);
            return;
        }
        self.wait_turn(cores, state, now);
    }

    /// A long run parks if a short run took its slot, or gives its slot to
    /// a waiting long run once it has run a slice.
    fn step_aside(&self, cores: &Cores, now: Instant) {
        let mut state = cores.state();
        let held = now.saturating_duration_since(self.since.get());
        if state.evicted == 0 && (held < cores.slice || state.long_line.is_empty()) {
            return;
        }
        self.stop_clock(now);
        cores.give_back(&mut state, Class::Long);
        self.wait_turn(cores, state, now);
    }

    fn acquire(&self) {
        let Some(cores) = &self.cores else { return };
        let now = Instant::now();
        let mut state = cores.state();
        let class = self.class.get();
        if cores.line(&mut state, class).is_empty() && cores.admit(&mut state, class) {
            self.since.set(now);
            self.holding.set(true);
            return;
        }
        self.wait_turn(cores, state, now);
    }

    fn release(&self) {
        let Some(cores) = &self.cores else { return };
        if !self.holding.get() {
            return;
        }
        let mut state = cores.state();
        self.stop_clock(Instant::now());
        cores.give_back(&mut state, self.class.get());
        self.holding.set(false);
        cores.grant(&mut state);
    }

    /// Waits in its class's line, holding no slot, until granted one. Joins
    /// the line before any freed slot is handed on, so the round-robin counts
    /// this caller.
    fn wait_turn(&self, cores: &Cores, mut state: MutexGuard<'_, State>, since: Instant) {
        self.holding.set(false);
        let wake = cores.enqueue(&mut state, self.caller, self.class.get());
        cores.grant(&mut state);
        drop(state);
        park(&wake);
        let now = Instant::now();
        self.waited.set(self.waited.get() + now.saturating_duration_since(since));
        self.since.set(now);
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

    /// Starts `caller`'s run on its own thread: it takes a slot (as a short
    /// run), says so, then checks in until `stop` says otherwise.
    fn looping(cores: &Arc<Cores>, caller: i64, stop: Arc<AtomicBool>) -> (mpsc::Receiver<()>, thread::JoinHandle<Duration>) {
        let (started, news) = mpsc::channel();
        let cores = cores.clone();
        let run = thread::spawn(move || {
            let runner = Runner::start(&cores, UserId(caller), || ());
            started.send(()).unwrap();
            while !stop.load(Ordering::Acquire) {
                runner.checkpoint();
            }
            runner.waited()
        });
        (news, run)
    }

    #[test]
    fn a_short_run_takes_a_long_runs_core_at_once_and_the_long_run_parks_at_its_next_checkpoint() {
        let cores = Arc::new(Cores::new(1, Duration::ZERO));
        let (turned_long, is_long) = mpsc::channel();
        let (go_on, resume) = mpsc::channel::<()>();
        let long_cores = cores.clone();
        let long = thread::spawn(move || {
            let runner = Runner::start(&long_cores, UserId(1), || ());
            // No slice: this checkpoint makes it long, on the only core.
            runner.checkpoint();
            turned_long.send(()).unwrap();
            // Not running meanwhile, as if the system gave its thread no CPU.
            resume.recv().unwrap();
            runner.checkpoint();
        });
        is_long.recv().unwrap();
        // Had it to wait for the long run's next checkpoint, this would never return.
        let short = Runner::start(&cores, UserId(2), || ());
        let at = |cores: &Cores| {
            let state = cores.state();
            (state.short, state.long, state.evicted)
        };
        assert_eq!(at(&cores), (1, 0, 1));
        go_on.send(()).unwrap();
        drop(short);
        long.join().unwrap();
        assert_eq!(at(&cores), (0, 0, 0));
    }

    #[test]
    fn a_long_run_gives_its_core_to_a_short_run_of_another_caller_at_its_next_checkpoint() {
        // One core and no slice: every run that has checked in once is long.
        let cores = Arc::new(Cores::new(1, Duration::ZERO));
        let stop = Arc::new(AtomicBool::new(false));
        let (started, long) = looping(&cores, 1, stop.clone());
        started.recv().unwrap();
        // The loop never ends by itself, yet the short run gets the only core.
        let short = Runner::start(&cores, UserId(2), || ());
        assert_eq!(cores.state().short, 1);
        drop(short);
        stop.store(true, Ordering::Release);
        assert!(long.join().unwrap() > Duration::ZERO, "the long run waited while the short one ran");
    }

    #[test]
    fn long_runs_never_execute_on_more_than_all_cores_but_one() {
        let cores = Arc::new(Cores::new(2, Duration::ZERO));
        let stop = Arc::new(AtomicBool::new(false));
        let loops: Vec<_> = (0..3).map(|_| looping(&cores, 1, stop.clone())).collect();
        for (started, _) in &loops {
            started.recv().unwrap();
        }
        // Three loops, two cores: at most one loop executes (the others wait
        // in line), and a short run gets a core.
        let short = Runner::start(&cores, UserId(2), || ());
        let state = cores.state();
        assert!(
            state.short >= 1 && state.long + state.evicted <= 1,
            "{} short, {} long, {} evicted",
            state.short,
            state.long,
            state.evicted
        );
        assert!(state.long_line.len() >= 1, "a loop waits");
        drop(state);
        drop(short);
        stop.store(true, Ordering::Release);
        for (_, run) in loops {
            run.join().unwrap();
        }
        let state = cores.state();
        assert_eq!((state.short, state.long, state.long_line.is_empty()), (0, 0, true));
    }
}
