//! The dispatcher's accounting on the stand-in worker (`crate::standin`,
//! `slow:S:T`: S ms to start, T ms per request): every request ends in
//! exactly one outcome, the stamps are in order, the kill and the
//! replacement are recorded, the limits reject and count, and every worker
//! is gone when a run returns. Bounds only, never a timing that a loaded
//! machine could cross: where a test says a late worker served, the
//! stand-in's gate (`gate:N:S:T:DIR`) holds the others until it has.

use std::path::Path;

use phases::jsonl;
use phases::pool::{PoolRequest, PoolStats, Role, Window};
use phases::serve::{OfferedLoad, RequestOutcome};
use phases::stats::Resampling;
use timeline::Variant;

use super::*;
use crate::serve::{Plan, PoolOptions};
use crate::side::Side;
use crate::standin;

fn boot() -> Resampling {
    Resampling {
        resamples: 200,
        ..Resampling::default()
    }
}

/// A pool run of the stand-in in `mode` under `load`.
fn run(
    dir: &Path,
    mode: &str,
    load: OfferedLoad,
    opts: &PoolOptions,
    stop: &Interrupt,
) -> Result<PoolRun> {
    let target = standin::target(dir, mode, "standin");
    let side = Side::new(Variant::A, target.clone(), Some(0), 1)?;
    let plan = Plan::new(load, None, &target)?;
    let mut log = jsonl::Writer::create(&dir.join("pool-requests.jsonl")).unwrap();
    run_pool(&side, opts, &plan, &mut log, &boot(), stop)
}

#[track_caller]
fn assert_groups_gone(stats: &PoolStats) {
    for m in &stats.members {
        let pid = m.pid.expect("every member was started") as i32;
        // SAFETY: signal 0 only checks for existence.
        let rc = unsafe { libc::kill(-pid, 0) };
        assert_eq!(
            rc, -1,
            "worker {} (group {pid}) still has processes",
            m.slot
        );
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::ESRCH)
        );
    }
}

#[test]
fn every_request_is_accounted_for_across_the_kill_and_the_replacement() {
    let dir = tempfile::tempdir().unwrap();
    let opts = PoolOptions {
        workers: 2,
        replace_at: Some(0.2),
        ..PoolOptions::default()
    };
    // Worker 1 holds its first request until the replacement has one, so
    // the replacement serves however late it starts.
    let gate = format!("gate:2:0:5:{}", dir.path().display());
    let run = run(
        dir.path(),
        &gate,
        OfferedLoad::open(100.0, 0.5),
        &opts,
        &Interrupt::new(),
    )
    .unwrap();
    let s = &run.stats;
    assert_eq!(run.records.len(), 50);
    assert_eq!(s.scheduled, 50);
    assert_eq!(s.ok + s.rejections + s.wrong_replies, 50, "{s:#?}");
    assert!(
        s.rejections <= 1,
        "only the request in flight at the kill may be lost: {s:#?}"
    );
    let arrived: usize = s.windows.iter().map(|w| w.arrived).sum();
    assert_eq!(arrived, 50);
    for r in &run.records {
        let q = &r.request;
        match &q.outcome {
            RequestOutcome::Ok => {
                let d = r
                    .dispatched_at_ns
                    .expect("an answered request was dispatched");
                let (sent, got) = (q.sent_at_ns.unwrap(), q.received_at_ns.unwrap());
                assert!(q.scheduled_at_ns <= d && d <= sent && sent <= got, "{r:?}");
                assert_eq!(q.latency_ns, Some(got - q.scheduled_at_ns));
                assert!(r.worker.unwrap() < 3);
            }
            RequestOutcome::Lost { .. } => assert_eq!(r.worker, Some(0), "{r:?}"),
            other => panic!("unexpected outcome {other:?}"),
        }
    }
    // The kill, the replacement, and who served after the kill.
    let killed = &s.members[0];
    assert!(
        killed.killed_at_ns.is_some() && !killed.failed,
        "{killed:?}"
    );
    assert_eq!(killed.end, "killed by the pool (SIGKILL)");
    let replacement = &s.members[2];
    assert_eq!(replacement.role, Role::Replacement);
    assert!(
        replacement.ready_ms.is_some() && !replacement.failed,
        "{replacement:?}"
    );
    assert_eq!(s.members[1].end, "shut down");
    let kill = killed.killed_at_ns.unwrap();
    for r in run
        .records
        .iter()
        .filter(|r| r.dispatched_at_ns.is_some_and(|d| d > kill))
    {
        assert_ne!(
            r.worker,
            Some(0),
            "nothing goes to the killed worker: {r:?}"
        );
    }
    // The gate held worker 1's first answer until the replacement had a
    // request: the replacement serving is the dispatcher's doing.
    let first = |w| run.records.iter().find(|r| r.worker == Some(w)).unwrap();
    assert!(
        first(1).request.received_at_ns.unwrap() >= first(2).dispatched_at_ns.unwrap(),
        "{:?}",
        first(1)
    );
    let c = s.cold_start.expect("a cold start");
    assert!(c.ready_ms.is_some() && c.window_ms.is_some());
    assert_eq!(c.role, Role::Replacement);
    assert_eq!(s.windows[0].window, Window::Before);
    assert!(!s.failed(), "{:?}", s.warnings());
    // The log holds every record, as written.
    let read = jsonl::read::<PoolRequest>(&dir.path().join("pool-requests.jsonl")).unwrap();
    assert_eq!(read.records, run.records);
    assert_groups_gone(s);
}

#[test]
fn the_queue_s_limits_reject_and_count_and_nothing_waits_past_them() {
    let dir = tempfile::tempdir().unwrap();
    // One worker at 40 ms a request, offered one every 10 ms: the queue
    // grows by three a service, so both limits are hit.
    let opts = PoolOptions {
        workers: 1,
        replace_at: None,
        max_wait_ms: Some(60.0),
        queue_cap: Some(3),
        scale_at_depth: None,
    };
    let run = run(
        dir.path(),
        "slow:0:40",
        OfferedLoad::open(100.0, 0.4),
        &opts,
        &Interrupt::new(),
    )
    .unwrap();
    let s = &run.stats;
    let rejected: Vec<&PoolRequest> = run
        .records
        .iter()
        .filter(|r| matches!(r.request.outcome, RequestOutcome::Rejected { .. }))
        .collect();
    assert!(rejected.len() >= 10, "{s:#?}");
    assert_eq!(s.rejections, rejected.len());
    assert_eq!(s.ok + s.rejections, 40, "{s:#?}");
    let reason = |r: &&PoolRequest| match &r.request.outcome {
        RequestOutcome::Rejected { reason } => reason.clone(),
        _ => unreachable!(),
    };
    assert!(rejected.iter().any(|r| reason(r).contains("--queue-cap")));
    assert!(rejected.iter().any(|r| reason(r).contains("--max-wait")));
    assert!(
        rejected
            .iter()
            .all(|r| r.dispatched_at_ns.is_none() && r.request.sent_at_ns.is_none())
    );
    for r in run.records.iter().filter(|r| r.dispatched_at_ns.is_some()) {
        // Checked at the dispatch's own stamp: never past the limit.
        let wait_ns = r.queue_wait_ns().unwrap();
        assert!(
            wait_ns <= 60_000_000,
            "dispatched after {wait_ns} ns in the queue: {r:?}"
        );
    }
    assert!(s.cold_start.is_none());
    assert_eq!(s.windows.len(), 1);
    assert_groups_gone(s);
}

#[test]
fn a_queue_past_the_depth_adds_one_worker_and_the_window_runs_to_its_ready_line() {
    let dir = tempfile::tempdir().unwrap();
    // One worker at 20 ms a request, offered one every 10 ms: the queue
    // passes 3 within a few requests; the added worker takes 150 ms to start.
    let opts = PoolOptions {
        workers: 1,
        scale_at_depth: Some(3),
        ..PoolOptions::default()
    };
    // Worker 0 holds its first request until the added one has one, so
    // the added worker serves however late it starts.
    let gate = format!("gate:1:150:20:{}", dir.path().display());
    let run = run(
        dir.path(),
        &gate,
        OfferedLoad::open(100.0, 0.6),
        &opts,
        &Interrupt::new(),
    )
    .unwrap();
    let s = &run.stats;
    assert_eq!(
        s.members.len(),
        2,
        "one worker added, once: {:?}",
        s.members
    );
    let added = &s.members[1];
    assert_eq!(added.role, Role::Added);
    assert!(added.ready_ms.unwrap() >= 150.0, "{added:?}");
    let trigger = added.triggered_at_ns.unwrap();
    // The trigger came after at least four arrivals (one served, more than
    // three queued).
    assert!(
        run.records[4].request.scheduled_at_ns <= trigger,
        "{added:?}"
    );
    let c = s.cold_start.expect("a cold start");
    assert_eq!(c.role, Role::Added);
    assert!(c.window_ms.unwrap() >= 150.0, "{c:?}");
    assert_eq!(s.ok, 60, "{:?}", s.warnings());
    // The gate held the first request until the added worker, 150 ms to
    // start, had one: the added worker serving is the dispatcher's doing.
    let first = |w| run.records.iter().find(|r| r.worker == Some(w)).unwrap();
    assert!(first(0).request.received_at_ns.unwrap() >= first(1).dispatched_at_ns.unwrap());
    assert!(run.records[0].request.latency_ns.unwrap() >= 150_000_000);
    assert!(s.members.iter().all(|m| m.end == "shut down" && !m.failed));
    assert_groups_gone(s);
}

#[test]
fn a_pool_that_cannot_start_says_which_worker() {
    let dir = tempfile::tempdir().unwrap();
    let opts = PoolOptions {
        workers: 2,
        ..PoolOptions::default()
    };
    let e = run(
        dir.path(),
        "crash",
        OfferedLoad::open(10.0, 1.0),
        &opts,
        &Interrupt::new(),
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(text.contains("the pool could not start: worker"), "{text}");
    assert!(text.contains("did not become ready"), "{text}");
}

#[test]
fn an_interrupt_while_the_pool_starts_stops_it_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let stop = Interrupt::new();
    stop.press();
    let opts = PoolOptions {
        workers: 2,
        ..PoolOptions::default()
    };
    let run = run(
        dir.path(),
        "slow:0:1",
        OfferedLoad::open(50.0, 2.0),
        &opts,
        &stop,
    );
    let e = run.unwrap_err().to_string();
    assert!(
        e.contains("interrupted while the pool's workers started"),
        "{e}"
    );
}

#[test]
fn flags_that_cannot_make_a_pool_are_refused_with_what_to_change() {
    let open = Some(OfferedLoad::open(10.0, 2.0));
    let pool = |workers, replace_at, max_wait_ms, queue_cap| PoolOptions {
        workers,
        replace_at,
        max_wait_ms,
        queue_cap,
        scale_at_depth: None,
    };
    let e = |o: PoolOptions, load| o.check(load).unwrap_err().to_string();
    assert!(e(pool(0, None, None, None), open).contains("at least 1"));
    assert!(e(pool(2, None, None, None), None).contains("--rate R"));
    let closed = Some(OfferedLoad::Closed {
        requests: 5,
        in_flight: 1,
    });
    assert!(e(pool(2, None, None, None), closed).contains("open loop"));
    assert!(e(pool(2, Some(2.0), None, None), open).contains("before 2"));
    assert!(e(pool(2, Some(0.0), None, None), open).contains("after 0"));
    assert!(e(pool(2, None, Some(-1.0), None), open).contains("--max-wait"));
    assert!(e(pool(2, None, None, Some(0)), open).contains("--queue-cap"));
    assert!(pool(2, Some(1.0), Some(50.0), Some(8)).check(open).is_ok());
    assert_eq!(
        pool(2, Some(1.5), None, None).describe(),
        "2 workers, one killed at 1.5 s and replaced"
    );
    let scale = |replace_at, depth, cap| PoolOptions {
        scale_at_depth: Some(depth),
        ..pool(1, replace_at, None, cap)
    };
    assert!(e(scale(Some(1.0), 4, None), open).contains("pick one"));
    assert!(e(scale(None, 0, None), open).contains("--scale-at-depth"));
    assert!(e(scale(None, 4, Some(4)), open).contains("below --queue-cap"));
    assert!(scale(None, 4, Some(5)).check(open).is_ok());
    assert_eq!(
        scale(None, 4, None).describe(),
        "1 worker, one added when more than 4 requests queue"
    );
}
