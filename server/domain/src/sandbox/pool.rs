//! A fixed set of worker threads behind a bounded queue: tool code never runs
//! on the async reactor, and a flood of slow tools is refused (`Busy`)
//! instead of piling up.

use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::engine::{self, MAX_STACK_BYTES};
use super::{RunOutcome, RunRequest, MIB};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SandboxConfig {
    /// Worker threads, each running one call at a time.
    pub workers: usize,
    /// Calls that may wait for a free worker before `run` answers `Busy`.
    pub queue: usize,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self { workers: thread::available_parallelism().map_or(2, |n| n.get()), queue: 64 }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    #[error("the sandbox is busy: too many tool calls are waiting, try again shortly")]
    Busy,
    #[error("the sandbox worker stopped before answering")]
    WorkerLost,
}

struct Job {
    req: RunRequest,
    reply: oneshot::Sender<RunOutcome>,
}

/// Cheap to clone; the workers stop once the last clone is dropped.
#[derive(Clone)]
pub struct Sandbox {
    jobs: SyncSender<Job>,
}

impl Sandbox {
    pub fn new(config: SandboxConfig) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::sync_channel(config.queue);
        let queue = Arc::new(Mutex::new(queue));
        for i in 0..config.workers.max(1) {
            let queue = queue.clone();
            thread::Builder::new()
                .name(format!("toolshed-sandbox-{i}"))
                .stack_size(MAX_STACK_BYTES + 8 * MIB)
                .spawn(move || work(&queue))?;
        }
        Ok(Self { jobs })
    }

    /// Runs a call on a worker. `Busy` when the queue is full.
    pub async fn run(&self, req: RunRequest) -> Result<RunOutcome, SandboxError> {
        let (reply, answer) = oneshot::channel();
        self.jobs.try_send(Job { req, reply }).map_err(|e| match e {
            TrySendError::Full(_) => SandboxError::Busy,
            TrySendError::Disconnected(_) => SandboxError::WorkerLost,
        })?;
        answer.await.map_err(|_| SandboxError::WorkerLost)
    }
}

fn work(queue: &Mutex<Receiver<Job>>) {
    loop {
        let job = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(Job { req, reply }) = job else {
            return;
        };
        if reply.is_closed() {
            continue;
        }
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
    }
}
