//! The tokio front (feature `tokio`): [`AsyncWorker`], the blocking
//! [`Worker`] driven from async code on tokio's blocking pool, with the
//! same guarantees.
//!
//! Every call runs the blocking call on `spawn_blocking`, so a tokio
//! service never blocks its reactor on a pipe, a socket or a reap. What
//! the blocking worker guarantees holds as it is: its own process group,
//! the stderr tail, the stamped ready line, both transports, the typed
//! errors with the stderr tail, the timeout hook, the shutdown policy. On
//! top, the async side's ways of ending:
//!
//! - **drop** of an [`AsyncWorker`], also in the middle of a call whose
//!   future was dropped (a `select!`, a `timeout`, a cancelled task):
//!   SIGKILL goes to the whole group at once (grandchildren too), without
//!   waiting for the call; the worker is reaped right away when no call
//!   holds it, else as soon as that call returns (it returns at once: its
//!   worker is dead);
//! - **runtime shutdown**: the runtime drops its tasks, so the workers they
//!   hold are dropped as above; a worker still being spawned is dropped
//!   (killed and reaped) as its blocking spawn returns, since nobody takes
//!   it;
//! - **timeouts**: the blocking call's own (ready, request, shutdown
//!   policy), with the [`AsyncWorker::on_timeout`] hook run first, as on
//!   the blocking worker.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use worker_proto::{Ready, Request};

use crate::error::{Error, ErrorDetail, ErrorKind, Stage};
use crate::{Command, Exchange, Finished, ShutdownPolicy, Stamped, Worker, group};

/// A live worker for async code. Dropping it kills (SIGKILL) its whole
/// process group at once; see the module doc for every way it ends.
#[derive(Debug)]
pub struct AsyncWorker {
    pid: u32,
    spawned_at_ns: u64,
    command: String,
    worker: Arc<Mutex<Option<Worker>>>,
    /// Requests asked for so far: the next one's stage index, for the
    /// error of a call that was lost.
    asked: AtomicUsize,
}

fn lock(w: &Mutex<Option<Worker>>) -> MutexGuard<'_, Option<Worker>> {
    w.lock().unwrap_or_else(|e| e.into_inner())
}

/// The error of a call whose blocking task could not finish (a panic in
/// it, or a runtime shutting down).
fn lost(command: &str, pid: u32, stage: Stage, what: String) -> Error {
    Error::new(ErrorDetail {
        kind: ErrorKind::NotRunning,
        stage,
        command: command.to_owned(),
        instruments: Vec::new(),
        expected: what,
        status: None,
        noise: Vec::new(),
        stderr_tail: String::new(),
        pid,
        diagnostics: Vec::new(),
        finished: None,
    })
}

impl AsyncWorker {
    /// Starts `cmd` as [`Worker::spawn`] does, on the blocking pool.
    pub async fn spawn(cmd: Command) -> Result<AsyncWorker, Error> {
        let display = cmd.display();
        let worker = ::tokio::task::spawn_blocking(move || Worker::spawn(&cmd))
            .await
            .map_err(|e| {
                lost(
                    &display,
                    0,
                    Stage::Spawn,
                    format!("the spawn to finish ({e})"),
                )
            })??;
        Ok(AsyncWorker {
            pid: worker.pid(),
            spawned_at_ns: worker.spawned_at_ns(),
            command: worker.command().to_owned(),
            worker: Arc::new(Mutex::new(Some(worker))),
            asked: AtomicUsize::new(0),
        })
    }

    /// The worker's pid, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// [`crate::monotonic_ns`] taken just before the process was spawned.
    pub fn spawned_at_ns(&self) -> u64 {
        self.spawned_at_ns
    }

    /// The command as a person would type it.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Sets the hook run when a timeout fires ([`Worker::on_timeout`]).
    /// Takes effect for the calls that start after it.
    pub fn on_timeout(&self, hook: impl FnMut(u32) -> Option<String> + Send + 'static) {
        if let Some(w) = lock(&self.worker).as_mut() {
            w.on_timeout(hook);
        }
    }

    /// The last bytes of stderr so far; empty while a call holds the
    /// worker (its error carries the tail).
    pub fn stderr_tail(&self) -> String {
        match self.worker.try_lock() {
            Ok(g) => g.as_ref().map(Worker::stderr_tail).unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// Runs `call` on the blocking worker in the blocking pool.
    async fn call<T: Send + 'static>(
        &self,
        stage: Stage,
        expected: &str,
        call: impl FnOnce(&mut Worker) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let worker = Arc::clone(&self.worker);
        let (command, pid) = (self.command.clone(), self.pid);
        let (p, e) = (stage.clone(), expected.to_owned());
        ::tokio::task::spawn_blocking(move || match lock(&worker).as_mut() {
            Some(w) => call(w),
            None => Err(lost(&command, pid, p, e)),
        })
        .await
        .map_err(|e| lost(&self.command, self.pid, stage, format!("{expected} ({e})")))?
    }

    /// Waits for the ready line ([`Worker::wait_ready`]).
    pub async fn wait_ready(&self, timeout: Duration) -> Result<Stamped<Ready>, Error> {
        self.call(Stage::Startup, "a ready line", move |w| {
            w.wait_ready(timeout)
        })
        .await
    }

    /// Sends a request and waits for its reply ([`Worker::request`]).
    pub async fn request(&self, req: Request, timeout: Duration) -> Result<Exchange, Error> {
        let stage = Stage::Request {
            op: req.op().to_owned(),
            index: self.asked.fetch_add(1, Ordering::Relaxed) + 1,
        };
        self.call(stage, "a reply", move |w| w.request(&req, timeout))
            .await
    }

    /// Ends the worker politely with `policy` ([`Worker::shutdown`]).
    pub async fn shutdown(self, policy: ShutdownPolicy) -> Result<Finished, Error> {
        let taken = Arc::clone(&self.worker);
        let (command, pid) = (self.command.clone(), self.pid);
        ::tokio::task::spawn_blocking(move || match lock(&taken).take() {
            Some(w) => w.shutdown(&policy),
            None => Err(lost(
                &command,
                pid,
                Stage::Shutdown,
                "the worker to shut down".to_owned(),
            )),
        })
        .await
        .map_err(|e| {
            lost(
                &self.command,
                self.pid,
                Stage::Shutdown,
                format!("the shutdown to finish ({e})"),
            )
        })?
    }

    /// Kills (SIGKILL) the whole group now and reaps the worker
    /// ([`Worker::kill`]); `None` when it had already been taken.
    pub async fn kill(self) -> Option<Finished> {
        let taken = Arc::clone(&self.worker);
        group::signal(self.pid as i32, libc::SIGKILL);
        ::tokio::task::spawn_blocking(move || lock(&taken).take().map(Worker::kill))
            .await
            .ok()
            .flatten()
    }
}

impl Drop for AsyncWorker {
    /// SIGKILL to the group now (only while its leader is not reaped, so
    /// never to a reused id); the reap follows at once, or when the call
    /// in flight returns.
    fn drop(&mut self) {
        let live = match self.worker.try_lock() {
            Ok(mut g) => g.take(),
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner().take(),
            Err(std::sync::TryLockError::WouldBlock) => {
                // A call holds the worker: end it under the call, which
                // then returns at once; the worker is dropped (reaped)
                // with the call's last handle.
                group::signal(self.pid as i32, libc::SIGKILL);
                None
            }
        };
        if let Some(w) = live {
            drop(w.kill());
        }
    }
}
