//! The service: starts the Python worker (`python3 -m mlworker` with
//! `worker/` on PYTHONPATH), waits for its ready line, asks its health,
//! and shuts it down; a real service would route inference requests to it
//! in between. The worker must be ready fast: it imports no model runtime
//! until a `load` request asks for one, and `cargo xtask import-boundary`
//! keeps that true.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use spawn::worker_proto::Request;

fn main() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("the service lives one level below the project root")?;
    let mut cmd = spawn::Command::new("python3");
    cmd.args(["-m", "mlworker"])
        .env("PYTHONPATH", root.join("worker"))
        .current_dir(root);
    let mut worker = spawn::Worker::spawn(&cmd)?;
    let ready = worker.wait_ready(Duration::from_secs(30))?;
    let ms = ready.read_at_ns.saturating_sub(worker.spawned_at_ns()) as f64 / 1e6;
    println!("worker ready in {ms:.1} ms");
    let health = worker.request(&Request::health(), Duration::from_secs(5))?;
    println!("health: {}", health.reply.to_object()["response"]);
    let finished = worker.shutdown(&spawn::ShutdownPolicy::default())?;
    println!("worker ended: {}", finished.status);
    Ok(())
}
