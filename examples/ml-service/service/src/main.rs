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

#[tokio::main]
async fn main() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("the service lives one level below the project root")?
        .to_path_buf();
    let mut pool = Pool::new(root, POOL).await?;
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
