//! The service: a tokio service shaped like the real one. It keeps a small
//! pool of Python workers (`python3 -m mlworker` with `worker/` on
//! PYTHONPATH), each started through `spawn`'s async front
//! (`spawn::AsyncWorker`: its own process group, the whole group killed on
//! drop, on timeout and on runtime shutdown), routes requests to them in
//! turn, replaces a worker that does not answer within its timeout (the
//! error shows the worker's Python stack, read by py-spy as a library), and
//! shuts every worker down cleanly at the end. The workers must be ready
//! fast: they import no model runtime until a `load` request asks for one,
//! and `cargo xtask check` keeps that true.
//!
//! `cargo run -p ml-service` serves a fixed list of requests (with one
//! `hang` among them, to show the replacement) and prints what happened.
//! `cargo run -p ml-service -- --serve` keeps serving until its stdin
//! closes: `work` requests (a few hundred milliseconds of CPU in the
//! worker) to both workers at once, round after round, the service's
//! tokio threads waiting on the replies, the situation to profile both
//! halves in (`coldstart dump PID --native`, `coldstart record PID
//! --native --subprocesses`). It prints `serving: service PID, workers A B`
//! once both workers are ready.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use spawn::worker_proto::{Object, Request};
use spawn::{AsyncWorker, ShutdownPolicy};

/// Workers in the pool.
const POOL: usize = 2;
/// How long a request may take before its worker is replaced.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// The pool: workers by slot, and where the next request goes.
struct Pool {
    root: PathBuf,
    slots: Vec<AsyncWorker>,
    next: usize,
}

impl Pool {
    /// A worker started and ready, with the stack dump armed for timeouts.
    async fn start(root: &Path) -> Result<AsyncWorker> {
        let mut cmd = spawn::Command::new("python3");
        cmd.args(["-m", "mlworker"])
            .env("PYTHONPATH", root.join("worker"))
            .current_dir(root);
        let w = AsyncWorker::spawn(cmd).await?;
        w.on_timeout(|pid| Some(harness::pyspy::timeout_stacks(None, pid)));
        let ready = w.wait_ready(Duration::from_secs(30)).await?;
        let ms = ready.read_at_ns.saturating_sub(w.spawned_at_ns()) as f64 / 1e6;
        println!("worker {} ready in {ms:.1} ms", w.pid());
        Ok(w)
    }

    async fn new(root: PathBuf, size: usize) -> Result<Pool> {
        let mut slots = Vec::with_capacity(size);
        for _ in 0..size {
            slots.push(Pool::start(&root).await?);
        }
        Ok(Pool {
            root,
            slots,
            next: 0,
        })
    }

    /// Routes `req` to the next worker; a worker that fails (a timeout,
    /// an exit) is replaced and the error returned.
    async fn serve(&mut self, req: Request) -> Result<String> {
        let slot = self.next % self.slots.len();
        self.next += 1;
        match self.slots[slot].request(req, REQUEST_TIMEOUT).await {
            Ok(x) => Ok(format!(
                "worker {} answered {}",
                self.slots[slot].pid(),
                serde_json::Value::Object(x.reply.to_object())
            )),
            Err(e) => {
                // The failed worker's group is already killed and reaped;
                // a fresh one takes its slot.
                let fresh = Pool::start(&self.root).await?;
                let old = std::mem::replace(&mut self.slots[slot], fresh);
                println!(
                    "worker {} replaced by worker {}",
                    old.pid(),
                    self.slots[slot].pid()
                );
                Err(anyhow::Error::new(e).context("a request failed"))
            }
        }
    }

    /// Shuts every worker down with the default policy.
    async fn shutdown(self) -> Result<()> {
        for w in self.slots {
            let pid = w.pid();
            let fin = w.shutdown(ShutdownPolicy::default()).await?;
            println!("worker {pid} ended: {}", fin.status);
        }
        Ok(())
    }
}

fn op(name: &str) -> Request {
    Request::new(name, Object::new())
}

/// `--serve`: `work` to every worker at once, round after round, until
/// stdin closes; then the pool is shut down.
async fn serve_until_stdin_closes(pool: Pool) -> Result<()> {
    let pids: Vec<String> = pool.slots.iter().map(|w| w.pid().to_string()).collect();
    println!(
        "serving: service {}, workers {}",
        std::process::id(),
        pids.join(" ")
    );
    let closed = tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
    });
    let [first, second] = &pool.slots[..] else {
        anyhow::bail!("--serve keeps a pool of two workers busy at once");
    };
    let work = || {
        let mut args = Object::new();
        args.insert("ms".into(), 300.into());
        Request::new("work", args)
    };
    let mut rounds = 0u64;
    while !closed.is_finished() {
        let (a, b) = tokio::join!(
            first.request(work(), REQUEST_TIMEOUT),
            second.request(work(), REQUEST_TIMEOUT)
        );
        a.context("a work request failed")?;
        b.context("a work request failed")?;
        rounds += 1;
    }
    println!("stdin closed after {rounds} rounds");
    pool.shutdown().await
}

#[tokio::main]
async fn main() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("the service lives one level below the project root")?
        .to_path_buf();
    let serve = std::env::args().any(|a| a == "--serve");
    let mut pool = Pool::new(root, POOL).await?;
    if serve {
        return serve_until_stdin_closes(pool).await;
    }
    for req in [op("health"), op("health"), op("hang"), op("health")] {
        let what = req.op().to_owned();
        match pool.serve(req).await {
            Ok(text) => println!("{what}: {text}"),
            Err(e) => println!("{what}: {e:#}"),
        }
    }
    pool.shutdown().await?;
    println!("pool shut down");
    Ok(())
}
