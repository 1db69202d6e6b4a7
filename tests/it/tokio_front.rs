//! The tokio front of `spawn` (`AsyncWorker`, feature `tokio`): many
//! workers under one runtime dropped mid-request, a runtime shut down while
//! a worker starts, a hung worker's timeout with its hook's text, and a
//! whole life over TCP; nothing left running after any, grandchildren
//! included (the stand-in `tests/fixtures/workers/stall_with_grandchild.py`
//! starts one whose argv holds the test's marker).

use std::time::Duration;

use spawn::worker_proto::Request;
use spawn::{AsyncWorker, Command, ErrorKind, ShutdownPolicy, Transport};

use crate::support;

/// A marker no other process on the machine has in its argv.
fn marker(name: &str) -> String {
    support::marker("tokio", name)
}

/// Nothing whose argv holds `mark` runs any more, right as this is called
/// (no wait: the front has reaped every worker and its group by then).
#[track_caller]
fn assert_none_running(mark: &str) {
    let left = support::running_with(mark);
    assert!(left.is_empty(), "left running: {left:#?}");
}

fn stall(mark: &str, mode: &str) -> Command {
    let mut cmd = Command::new(support::python());
    cmd.arg(
        support::fixtures()
            .join("workers")
            .join("stall_with_grandchild.py"),
    )
    .args([mark, mode]);
    cmd
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
}

#[test]
fn tokio_front_many_workers_dropped_mid_request_leave_nothing() {
    let mark = marker("drop");
    let rt = runtime();
    let pids = rt.block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..6 {
            let cmd = stall(&mark, "ready");
            tasks.push(tokio::spawn(async move {
                let w = AsyncWorker::spawn(cmd).await.unwrap();
                w.wait_ready(Duration::from_secs(60)).await.unwrap();
                let pid = w.pid();
                // The worker never answers: the request is abandoned in
                // flight, and the worker dropped with it.
                let r = tokio::time::timeout(
                    Duration::from_millis(300),
                    w.request(Request::health(), Duration::from_secs(60)),
                )
                .await;
                assert!(r.is_err(), "the stand-in never answers");
                drop(w);
                pid
            }));
        }
        let mut pids = Vec::new();
        for t in tasks {
            pids.push(t.await.unwrap());
        }
        pids
    });
    // Dropping the runtime waits for its blocking calls: each abandoned
    // request has returned and its worker is reaped.
    drop(rt);
    assert_eq!(pids.len(), 6);
    assert_none_running(&mark);
}

#[test]
fn tokio_front_runtime_shutdown_while_a_worker_starts_leaves_nothing() {
    let mark = marker("shutdown");
    let rt = runtime();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let cmd = stall(&mark, "slow-start");
    rt.spawn(async move {
        let w = AsyncWorker::spawn(cmd).await.unwrap();
        started_tx.send(w.pid()).unwrap();
        // Still waiting for its ready line when the runtime goes.
        let _ = w.wait_ready(Duration::from_secs(60)).await;
        unreachable!("the runtime shuts down first");
    });
    let pid = started_rx.recv().unwrap();
    assert!(pid > 0);
    drop(rt);
    assert_none_running(&mark);
}

#[test]
fn tokio_front_a_hung_worker_times_out_with_its_hook_and_a_tcp_worker_lives_whole() {
    let mark = marker("hung");
    let rt = runtime();
    rt.block_on(async {
        // Started for tcp, it never prints its ready line.
        let mut cmd = Command::new(support::python());
        cmd.arg(support::fixtures().join("workers").join("tcp_worker.py"))
            .args(["never-ready", &mark])
            .transport(Transport::Tcp);
        let w = AsyncWorker::spawn(cmd).await.unwrap();
        let pid = w.pid();
        w.on_timeout(|p| Some(format!("stacks of {p}")));
        let err = w.wait_ready(Duration::from_secs(2)).await.unwrap_err();
        assert!(matches!(err.kind, ErrorKind::Timeout { .. }), "{err}");
        assert_eq!(err.diagnostics, [format!("stacks of {pid}")]);
        assert!(err.stderr_tail.contains("never-ready"), "{err}");

        // The reference worker over tcp, through the whole life.
        let mut cmd = Command::new(support::python());
        cmd.args([
            "-m",
            "refworker",
            "--test-echo",
            "--profile",
            "io",
            "--transport",
            "tcp",
            "--task",
            &mark,
        ])
        .env("PYTHONPATH", support::worker_dir());
        let w = AsyncWorker::spawn(cmd).await.unwrap();
        let ready = w.wait_ready(Duration::from_secs(30)).await.unwrap();
        assert_eq!(ready.value.extra["transport"], "tcp");
        let x = w
            .request(Request::health(), Duration::from_secs(15))
            .await
            .unwrap();
        assert_eq!(x.reply.op(), "health");
        let fin = w.shutdown(ShutdownPolicy::default()).await.unwrap();
        assert!(fin.status.success());
        assert!(fin.connected_ns.is_some());
    });
    drop(rt);
    assert_none_running(&mark);
}

#[test]
fn tokio_front_the_example_service_s_pool_replaces_a_hung_worker_and_shuts_down() {
    let out = support::example_cargo(&["run", "-q", "-p", "ml-service"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.iter().filter(|l| l.contains(" ready in ")).count(),
        3,
        "two workers, then one to replace the hung one:\n{text}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("health: worker"))
            .count(),
        3,
        "{text}"
    );
    assert!(
        text.lines().any(|l| l
            .strip_prefix("hang: a request failed: worker failed at hang request #")
            .is_some_and(|rest| rest.ends_with(": no answer within 3 s"))),
        "{text}"
    );
    assert!(
        text.contains("still running, so the harness killed its group"),
        "{text}"
    );
    // The timeout's error shows where the worker hung.
    assert!(
        text.contains("waiting_forever (mlworker/__main__.py:"),
        "{text}"
    );
    assert!(text.contains(" replaced by worker "), "{text}");
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.ends_with("ended: exit code 0"))
            .count(),
        2,
        "{text}"
    );
    assert_eq!(lines.last(), Some(&"pool shut down"), "{text}");
}
