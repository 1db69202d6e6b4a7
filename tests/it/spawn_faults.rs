//! spawn against stand-in workers (tests/fixtures/workers/): the happy path
//! and every fault of issue 3. Each fault test asserts the exact error kind
//! and phase, and that no process of the worker's group is left once the
//! call returned. Nothing here sleeps to synchronise: the tests wait on the
//! pipes, on exits, and on files the workers write before speaking.

use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use spawn::{
    Command, DEFAULT_STDERR_TAIL_BYTES, ErrorKind, Escalation, ExitStatus, ShutdownPolicy, Stage,
    Worker,
};
use worker_proto::{
    FrameError, HealthStatus, MAX_LINE_BYTES, Object, Reply, Request, escaped_prefix,
};

use crate::support::{self, assert_group_gone, ps};

/// The bound of a ready line or a reply that must come: a bound only fires
/// on a fault, so one a loaded 2-core machine can miss would fail a
/// well-behaved worker. A hang is ended by nextest's slow-timeout.
const READY: Duration = Duration::from_secs(60);
/// See [`READY`].
const REQUEST: Duration = Duration::from_secs(60);
/// The bound of a ready line that must not come (a hang): the case waits
/// for it to fire, so it is short; only its lower side is asserted.
const HANG: Duration = Duration::from_secs(2);

/// The policy of an end that must be graceful: bounds as generous as
/// [`READY`]'s, so only a fault escalates.
fn policy() -> ShutdownPolicy {
    ShutdownPolicy {
        ack_timeout: READY,
        exit_timeout: READY,
        ..fault_policy()
    }
}

/// The policy of an end that must escalate: short bounds the case waits
/// for (only their lower side is asserted: `not_before`).
fn fault_policy() -> ShutdownPolicy {
    ShutdownPolicy {
        ack_timeout: Duration::from_secs(1),
        exit_timeout: Duration::from_secs(1),
        grace: Duration::from_millis(300),
        stop: None,
        tcp_stop: None,
    }
}

fn script(name: &str) -> PathBuf {
    support::fixtures().join("workers").join(name)
}

fn worker_cmd(name: &str) -> Command {
    let mut cmd = Command::new(support::python());
    cmd.arg(script(name));
    cmd
}

fn start(name: &str) -> Worker {
    Worker::spawn(&worker_cmd(name)).expect("spawning a stand-in worker")
}

/// The one shape of a start-up fault: the stand-in `name` fails its ready
/// line in a way `kind` accepts, in start-up, and its whole group is gone
/// when the error comes back; the error is returned for the case's own
/// assertions.
#[track_caller]
fn ready_fails(name: &str, kind: impl Fn(&ErrorKind) -> bool) -> spawn::Error {
    let mut w = start(name);
    let pid = w.pid();
    let err = w.wait_ready(READY).unwrap_err();
    assert!(kind(&err.kind), "{name}: {err}");
    assert_eq!(err.stage, Stage::Startup, "{name}");
    assert_eq!(err.pid, pid, "{name}");
    assert_group_gone(pid);
    // What the user reads, whole: the failure, what was expected, the
    // command, how the process ended, its stderr and what to do.
    let snapshot = format!("ready_fails_{}", name.trim_end_matches(".py"));
    let text = err.to_string();
    support::redactions().bind(|| insta::assert_snapshot!(snapshot, text));
    err
}

/// The process is gone (reaped), not lingering as a zombie or alive.
#[track_caller]
fn assert_process_gone(pid: u32) {
    let stat = Path::new("/proc").join(pid.to_string()).join("stat");
    if let Ok(text) = std::fs::read_to_string(&stat) {
        panic!("process {pid} is still there: {text}\n{}", ps());
    }
}

/// A timeout did not fire early: the call that reported it took at least its
/// bound. Only this side is asserted, which no load can break; how soon after
/// the bound the call returned is not (no test asserts a duration's upper
/// bound; a hang is ended by nextest's slow-timeout).
#[track_caller]
fn not_before(started: Instant, bound: Duration) {
    let took = started.elapsed();
    assert!(
        took >= bound,
        "took {took:?}, less than its bound {bound:?}"
    );
}

// ---- the happy path ------------------------------------------------------

#[test]
fn spawn_faults_well_behaved_worker_full_life() {
    let mut w = start("well_behaved.py");
    let pid = w.pid();
    let spawned = w.spawned_at_ns();

    let ready = w.wait_ready(READY).unwrap();
    assert!(ready.value.ready);
    assert_eq!(ready.value.pid, Some(pid));
    assert_eq!(ready.value.extra["transport"], "stdio");
    let t_ns = ready
        .value
        .t_ns
        .expect("the stand-in stamps its ready line");
    assert!(spawned < t_ns, "spawned {spawned} then worker stamp {t_ns}");
    assert!(
        t_ns <= ready.read_at_ns,
        "written {t_ns} after read {}",
        ready.read_at_ns
    );
    if cfg!(target_os = "linux") {
        assert!(w.rss_at_ready_bytes().unwrap() > 1024 * 1024);
    }

    let health = w.request(&Request::health(), REQUEST).unwrap();
    assert_eq!(health.request_op, "health");
    let Reply::Health(h) = &health.reply else {
        panic!("{health:?}")
    };
    assert_eq!(h.response.status, HealthStatus::Ok);
    assert!(ready.read_at_ns <= health.sent_at_ns);
    assert!(health.sent_at_ns < health.received_at_ns);

    // An unknown op is answered with an error reply: a valid exchange.
    let bogus = w
        .request(&Request::new("bogus", Object::new()), REQUEST)
        .unwrap();
    assert!(matches!(&bogus.reply, Reply::Error(e) if e.error.contains("bogus")));

    // Pipelined: two sends, then two replies in order.
    let s1 = w.send(&Request::health()).unwrap();
    let s2 = w.send(&Request::health()).unwrap();
    let r1 = w.recv(REQUEST).unwrap();
    let r2 = w.recv(REQUEST).unwrap();
    assert!(s1 <= s2 && r1.read_at_ns <= r2.read_at_ns);
    assert_eq!((r1.value.op(), r2.value.op()), ("health", "health"));

    let fin = w.shutdown(&policy()).unwrap();
    assert_eq!(fin.pid, pid);
    assert_eq!(fin.status, ExitStatus::Code(0));
    assert_eq!(fin.escalation, Escalation::None);
    let ru = fin.rusage.expect("wait4 rusage");
    assert!(ru.max_rss_bytes > 1024 * 1024, "{ru:?}");
    assert!(ru.user + ru.sys > Duration::ZERO, "{ru:?}");
    let t = fin.timeline.end;
    let sent = t.shutdown_sent_ns.unwrap();
    let ack = t.ack_read_ns.unwrap();
    assert!(
        r2.read_at_ns <= sent && sent < ack && ack <= t.exited_ns.unwrap(),
        "{t:?}"
    );
    assert_eq!((t.term_sent_ns, t.kill_sent_ns), (None, None));
    // The one timeline holds what the calls returned, stamp for stamp.
    let life = &fin.timeline;
    assert_eq!(life.spawned_ns, spawned);
    let mark = life.ready.expect("the ready line is in the timeline");
    assert_eq!((mark.read_ns, mark.t_ns), (ready.read_at_ns, Some(t_ns)));
    let ops: Vec<&str> = life.requests.iter().map(|r| r.op.as_str()).collect();
    assert_eq!(ops, ["health", "bogus", "health", "health"]);
    assert_eq!(
        (life.requests[0].sent_ns, life.requests[0].received_ns),
        (health.sent_at_ns, Some(health.received_at_ns))
    );
    assert_eq!(
        (life.requests[3].sent_ns, life.requests[3].received_ns),
        (s2, Some(r2.read_at_ns))
    );
    assert_eq!(life.marks().health.len(), 3);
    assert!(fin.noise.is_empty());
    assert!(
        fin.stderr_tail.contains("well_behaved: starting"),
        "{}",
        fin.stderr_tail
    );
    assert!(fin.group_gone);
    assert_group_gone(pid);
}

#[test]
fn spawn_faults_eof_on_stdin_ends_a_worker_too() {
    let mut w = start("well_behaved.py");
    let pid = w.pid();
    w.wait_ready(READY).unwrap();
    // terminate_with sends no op: SIGTERM's default action ends it.
    let fin = w.terminate_with(&policy());
    assert_eq!(fin.status, ExitStatus::Signal(libc::SIGTERM));
    assert_eq!(fin.escalation, Escalation::Term);
    assert!(fin.timeline.end.term_sent_ns.is_some());
    assert_eq!(fin.timeline.end.kill_sent_ns, None);
    assert_group_gone(pid);
}

#[test]
fn spawn_faults_kill_ends_the_group_at_once() {
    let mut w = start("well_behaved.py");
    let pid = w.pid();
    w.wait_ready(READY).unwrap();
    let fin = w.kill();
    assert_eq!(fin.status, ExitStatus::Signal(libc::SIGKILL));
    assert_eq!(fin.escalation, Escalation::Kill);
    assert!(fin.rusage.is_some());
    assert_group_gone(pid);
}

// ---- faults before ready -------------------------------------------------

#[test]
fn spawn_faults_crash_before_ready() {
    let mut w = start("crash_before_ready.py");
    let pid = w.pid();
    let err = w.wait_ready(READY).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::ExitedEarly), "{err}");
    assert_eq!(err.stage, Stage::Startup);
    assert_eq!(err.status, Some(ExitStatus::Code(1)));
    assert_eq!(err.pid, pid);
    assert!(
        err.stderr_tail
            .contains("RuntimeError: config file is corrupt"),
        "{err}"
    );
    assert_eq!(err.finished.as_ref().unwrap().escalation, Escalation::None);
    let text = err.to_string();
    support::redactions().bind(|| insta::assert_snapshot!("crash_before_ready", text));
    assert_group_gone(pid);
    drop(w);
    assert_group_gone(pid);
}

#[test]
fn spawn_faults_exit_zero_without_ready() {
    let err = ready_fails("exit_without_ready.py", |k| {
        matches!(k, ErrorKind::ExitedEarly)
    });
    assert_eq!(err.status, Some(ExitStatus::Code(0)));
}

#[test]
fn spawn_faults_hang_before_ready_times_out_and_runs_the_hook() {
    let mut w = start("hang_before_ready.py");
    let pid = w.pid();
    let (tx, rx) = std::sync::mpsc::channel();
    w.on_timeout(move |p| {
        tx.send(p).unwrap();
        Some(format!("stack dump of pid {p}"))
    });
    let started = Instant::now();
    let err = w.wait_ready(HANG).unwrap_err();
    not_before(started, HANG);
    assert!(
        matches!(err.kind, ErrorKind::Timeout { after } if after == HANG),
        "{err}"
    );
    assert_eq!(err.stage, Stage::Startup);
    assert_eq!(rx.try_recv(), Ok(pid), "the hook runs once, with the pid");
    assert_eq!(err.diagnostics, [format!("stack dump of pid {pid}")]);
    assert_eq!(err.status, Some(ExitStatus::Signal(libc::SIGKILL)));
    let fin = err.finished.as_ref().unwrap();
    assert_eq!(fin.escalation, Escalation::Kill);
    assert!(fin.timeline.end.kill_sent_ns.is_some());
    assert!(err.stderr_tail.contains("waiting forever"), "{err}");
    let text = err.to_string();
    support::redactions().bind(|| insta::assert_snapshot!("hang_before_ready", text));
    assert_group_gone(pid);
}

#[test]
fn spawn_faults_malformed_json_line() {
    let err = ready_fails(
        "malformed_json.py",
        |k| matches!(k, ErrorKind::Protocol(FrameError::Malformed { prefix, .. }) if prefix == &escaped_prefix(br#"{"ready": tru, "pid": 1}"#)),
    );
    // It was still running: the harness ended it.
    assert_eq!(err.finished.as_ref().unwrap().escalation, Escalation::Kill);
}

#[test]
fn spawn_faults_forty_noise_lines_are_tolerated_and_kept() {
    let mut cmd = worker_cmd("noisy.py");
    cmd.arg("40");
    let mut w = Worker::spawn(&cmd).unwrap();
    let pid = w.pid();
    let ready = w.wait_ready(READY).unwrap();
    let noise = w.noise();
    assert_eq!(noise.len(), 40);
    assert_eq!(noise[0].text, "noise line 0: a library says hello");
    assert_eq!(noise[39].text, "noise line 39: a library says hello");
    assert!(noise.iter().all(|n| n.stage == Stage::Startup));
    assert!(noise.windows(2).all(|p| p[0].read_at_ns <= p[1].read_at_ns));
    assert!(noise[39].read_at_ns <= ready.read_at_ns);
    w.request(&Request::health(), REQUEST).unwrap();
    let fin = w.shutdown(&policy()).unwrap();
    assert_eq!(fin.noise.len(), 40);
    assert_group_gone(pid);
}

#[test]
fn spawn_faults_too_much_noise() {
    let mut cmd = worker_cmd("noisy.py");
    cmd.arg("150").max_noise_lines(100);
    let mut w = Worker::spawn(&cmd).unwrap();
    let pid = w.pid();
    let err = w.wait_ready(READY).unwrap_err();
    assert!(
        matches!(err.kind, ErrorKind::TooMuchNoise { limit: 100 }),
        "{err}"
    );
    assert_eq!(err.stage, Stage::Startup);
    assert_eq!(err.noise.len(), 101);
    let text = err.to_string();
    support::redactions().bind(|| insta::assert_snapshot!("too_much_noise", text));
    assert_group_gone(pid);
}

#[test]
fn spawn_faults_partial_line_then_eof() {
    let err = ready_fails(
        "partial_line.py",
        |k| matches!(k, ErrorKind::PartialLine { prefix } if prefix == &escaped_prefix(br#"{"ready": true, "pid": "#)),
    );
    assert_eq!(err.status, Some(ExitStatus::Code(0)));
}

#[test]
fn spawn_faults_two_mib_line() {
    let err = ready_fails("huge_line.py", |k| {
        matches!(k, ErrorKind::Protocol(FrameError::TooLong { .. }))
    });
    let ErrorKind::Protocol(FrameError::TooLong { len, cap, prefix }) = &err.kind else {
        panic!("{err}")
    };
    assert_eq!(*cap, MAX_LINE_BYTES);
    assert_eq!(
        *len,
        2 * 1024 * 1024 + r#"{"ready": true, "pad": ""}"#.len()
    );
    assert!(
        prefix.starts_with(&escaped_prefix(br#"{"ready": true, "pad": "xxx"#)),
        "{prefix}"
    );
    assert_eq!(err.finished.as_ref().unwrap().escalation, Escalation::Kill);
}

#[test]
fn spawn_faults_non_utf8_bytes() {
    ready_fails(
        "non_utf8.py",
        |k| matches!(k, ErrorKind::Protocol(FrameError::NotUtf8 { prefix, .. }) if prefix.contains("caf\\xe9")),
    );
}

#[test]
fn spawn_faults_fifty_mb_of_stderr_before_ready() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr.log");
    let mut cmd = worker_cmd("stderr_flood.py");
    cmd.stderr_file(&log);
    let mut w = Worker::spawn(&cmd).unwrap();
    let pid = w.pid();
    // Generous: 50 MB through a pipe on a loaded machine.
    w.wait_ready(Duration::from_secs(30)).unwrap();
    assert!(w.stderr_tail().len() <= DEFAULT_STDERR_TAIL_BYTES);
    w.request(&Request::health(), REQUEST).unwrap();
    let fin = w.shutdown(&policy()).unwrap();
    assert_eq!(fin.stderr_bytes, 50_000_000);
    assert_eq!(fin.stderr_file_error, None);
    assert!(fin.stderr_tail.len() <= DEFAULT_STDERR_TAIL_BYTES);
    assert!(fin.stderr_tail.len() >= DEFAULT_STDERR_TAIL_BYTES - 100);
    assert!(fin.stderr_tail.ends_with(&format!("{}\n", "e".repeat(99))));
    assert_eq!(std::fs::metadata(&log).unwrap().len(), 50_000_000);
    assert_group_gone(pid);
}

#[test]
fn spawn_faults_small_tail_bound_holds() {
    let mut cmd = worker_cmd("stderr_flood.py");
    cmd.stderr_tail_bytes(1000);
    let mut w = Worker::spawn(&cmd).unwrap();
    let pid = w.pid();
    w.wait_ready(Duration::from_secs(30)).unwrap();
    assert_eq!(w.stderr_tail().len(), 1000);
    let fin = w.shutdown(&policy()).unwrap();
    assert_eq!(fin.stderr_tail.len(), 1000);
    assert_eq!(fin.stderr_bytes, 50_000_000);
    assert_group_gone(pid);
}

// ---- faults at the end -----------------------------------------------------

#[test]
fn spawn_faults_ignores_the_shutdown_op_escalates_to_sigterm() {
    let mut w = start("ignores_shutdown.py");
    let pid = w.pid();
    w.wait_ready(READY).unwrap();
    w.request(&Request::health(), REQUEST).unwrap();
    let p = fault_policy();
    let started = Instant::now();
    let err = w.shutdown(&p).unwrap_err();
    not_before(started, p.ack_timeout);
    assert!(
        matches!(err.kind, ErrorKind::Timeout { after } if after == p.ack_timeout),
        "{err}"
    );
    assert_eq!(err.stage, Stage::Shutdown);
    assert_eq!(err.status, Some(ExitStatus::Signal(libc::SIGTERM)));
    let fin = err.finished.as_ref().unwrap();
    assert_eq!(fin.escalation, Escalation::Term);
    let t = fin.timeline.end;
    assert!(
        t.shutdown_sent_ns.is_some() && t.ack_read_ns.is_none(),
        "{t:?}"
    );
    let closed = t.stdin_closed_ns.unwrap();
    let term = t.term_sent_ns.unwrap();
    assert!(
        t.shutdown_sent_ns.unwrap() < closed && closed < term && term <= t.exited_ns.unwrap(),
        "{t:?}"
    );
    assert_eq!(t.kill_sent_ns, None);
    assert!(err.stderr_tail.contains("staying up"), "{err}");
    assert_group_gone(pid);
}

#[test]
fn spawn_faults_ignores_sigterm_escalates_to_sigkill() {
    let mut w = start("ignores_sigterm.py");
    let pid = w.pid();
    w.wait_ready(READY).unwrap();
    let p = fault_policy();
    let started = Instant::now();
    let err = w.shutdown(&p).unwrap_err();
    not_before(started, p.exit_timeout + p.grace);
    // The ack came; the exit did not.
    assert!(
        matches!(err.kind, ErrorKind::Timeout { after } if after == p.exit_timeout),
        "{err}"
    );
    assert_eq!(err.stage, Stage::Exit);
    assert_eq!(err.status, Some(ExitStatus::Signal(libc::SIGKILL)));
    let fin = err.finished.as_ref().unwrap();
    assert_eq!(fin.escalation, Escalation::Kill);
    let t = fin.timeline.end;
    let (ack, term, kill) = (
        t.ack_read_ns.unwrap(),
        t.term_sent_ns.unwrap(),
        t.kill_sent_ns.unwrap(),
    );
    assert!(
        ack < term && term < kill && kill <= t.exited_ns.unwrap(),
        "{t:?}"
    );
    // SIGKILL came no sooner than the grace period after SIGTERM.
    assert!(kill - term >= p.grace.as_nanos() as u64, "{t:?}");
    assert_group_gone(pid);
}

#[test]
fn spawn_faults_grandchild_keeps_stdout_open_worker_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("helper.pid");
    let mut cmd = worker_cmd("grandchild_holds_stdout.py");
    cmd.arg("crash-before-ready").arg(&pid_file);
    let mut w = Worker::spawn(&cmd).unwrap();
    let pid = w.pid();
    // ExitedEarly, not a timeout: the harness did not wait for the ready
    // bound although the helper still holds stdout open.
    let err = w.wait_ready(READY).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::ExitedEarly), "{err}");
    assert_eq!(err.stage, Stage::Startup);
    assert_eq!(err.status, Some(ExitStatus::Code(1)));
    // Written before the worker exited, so it is there now.
    let helper: u32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    assert_process_gone(helper);
    assert_group_gone(pid);
}

#[test]
fn spawn_faults_grandchild_keeps_stdout_open_after_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("helper.pid");
    let mut cmd = worker_cmd("grandchild_holds_stdout.py");
    cmd.arg("exit-after-ack").arg(&pid_file);
    let mut w = Worker::spawn(&cmd).unwrap();
    let pid = w.pid();
    w.wait_ready(READY).unwrap();
    // Written before the ready line.
    let helper: u32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    w.request(&Request::health(), REQUEST).unwrap();
    // No escalation: the exit was seen although the helper still holds
    // stdout open, so no bound of the policy was waited for.
    let fin = w.shutdown(&policy()).unwrap();
    assert_eq!(fin.status, ExitStatus::Code(0));
    assert_eq!(fin.escalation, Escalation::None);
    assert!(fin.group_gone);
    assert_process_gone(helper);
    assert_group_gone(pid);
}

#[test]
fn spawn_faults_harness_panics_mid_conversation() {
    let pgid = std::cell::Cell::new(0u32);
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        let mut w = start("well_behaved.py");
        pgid.set(w.pid());
        w.wait_ready(READY).unwrap();
        w.request(&Request::health(), REQUEST).unwrap();
        w.send(&Request::health()).unwrap();
        panic!("a harness bug, mid-conversation");
    }));
    let payload = outcome.unwrap_err();
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"a harness bug, mid-conversation")
    );
    assert!(pgid.get() > 0);
    assert_group_gone(pgid.get());
}

#[test]
fn spawn_faults_missing_program() {
    let missing = support::fixtures()
        .join("workers")
        .join("no-such-interpreter");
    let err = Worker::spawn(&Command::new(&missing)).unwrap_err();
    assert!(
        matches!(&err.kind, ErrorKind::SpawnFailed(e) if e.kind() == io::ErrorKind::NotFound),
        "{err}"
    );
    assert_eq!(err.stage, Stage::Spawn);
    assert_eq!(err.pid, 0);
    assert!(err.to_string().contains("no-such-interpreter"), "{err}");
}

// ---- faults after ready --------------------------------------------------

fn misbehaving(mode: &str) -> Worker {
    let mut cmd = worker_cmd("misbehaves_on_request.py");
    cmd.arg(mode);
    let mut w = Worker::spawn(&cmd).unwrap();
    w.wait_ready(READY).unwrap();
    w
}

#[test]
fn spawn_faults_request_timeout_runs_the_hook() {
    let mut w = misbehaving("stall");
    let pid = w.pid();
    w.on_timeout(|p| Some(format!("dump of {p}")));
    let timeout = Duration::from_secs(1);
    let started = Instant::now();
    let err = w.request(&Request::health(), timeout).unwrap_err();
    not_before(started, timeout);
    assert!(
        matches!(err.kind, ErrorKind::Timeout { after } if after == timeout),
        "{err}"
    );
    assert_eq!(
        err.stage,
        Stage::Request {
            op: "health".to_owned(),
            index: 1
        }
    );
    assert_eq!(err.diagnostics, [format!("dump of {pid}")]);
    assert!(err.stderr_tail.contains("stalling"), "{err}");
    assert_eq!(err.finished.as_ref().unwrap().escalation, Escalation::Kill);
    assert_group_gone(pid);
}

#[test]
fn spawn_faults_reply_for_another_op() {
    let mut w = misbehaving("wrong-op");
    let pid = w.pid();
    let err = w.request(&Request::health(), REQUEST).unwrap_err();
    assert!(
        matches!(&err.kind, ErrorKind::UnexpectedReply { got } if got.contains("capabilities")),
        "{err}"
    );
    assert_eq!(
        err.stage,
        Stage::Request {
            op: "health".to_owned(),
            index: 1
        }
    );
    assert_group_gone(pid);
}

#[test]
fn spawn_faults_crash_mid_request() {
    let mut w = misbehaving("crash");
    let pid = w.pid();
    let err = w.request(&Request::health(), REQUEST).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::ExitedEarly), "{err}");
    assert_eq!(
        err.stage,
        Stage::Request {
            op: "health".to_owned(),
            index: 1
        }
    );
    assert_eq!(err.status, Some(ExitStatus::Code(3)));
    assert!(err.stderr_tail.contains("MemoryError"), "{err}");
    assert_group_gone(pid);
}

#[test]
fn spawn_faults_noise_between_replies_is_kept_with_its_phase() {
    let mut w = misbehaving("noisy-reply");
    let pid = w.pid();
    let x = w.request(&Request::health(), REQUEST).unwrap();
    assert_eq!(x.reply.op(), "health");
    let noise = w.noise();
    assert_eq!(noise.len(), 1);
    assert_eq!(noise[0].text, "loading weights 1/1");
    assert_eq!(
        noise[0].stage,
        Stage::Request {
            op: "health".to_owned(),
            index: 1
        }
    );
    assert!(x.sent_at_ns < noise[0].read_at_ns && noise[0].read_at_ns <= x.received_at_ns);
    let fin = w.shutdown(&policy()).unwrap();
    assert_eq!(fin.noise.len(), 1);
    assert_group_gone(pid);
}

#[test]
fn spawn_faults_helper_that_left_the_group_keeps_stdout_open() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("helper.pid");
    let mut cmd = worker_cmd("grandchild_holds_stdout.py");
    cmd.arg("escape").arg(&pid_file);
    let mut w = Worker::spawn(&cmd).unwrap();
    let pid = w.pid();
    // Far longer than the harness needs: the kind below shows it did not
    // wait for this timeout, though stdout never reached EOF.
    let err = w.wait_ready(Duration::from_secs(30)).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::ExitedEarly), "{err}");
    assert_eq!(err.stage, Stage::Startup);
    assert_eq!(err.status, Some(ExitStatus::Code(1)));
    assert_group_gone(pid);
    drop(w);

    // The helper is outside the worker's reach, alive, and was re-parented
    // to this process (the harness is a child subreaper): end and reap it.
    let helper: i32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    // SAFETY: plain syscalls on a pid this process is the parent of.
    unsafe {
        assert_eq!(libc::kill(helper, libc::SIGKILL), 0, "the helper was alive");
        let mut status = 0;
        assert_eq!(libc::waitpid(helper, &mut status, 0), helper, "{}", ps());
    }
    assert_process_gone(helper as u32);
}

#[test]
fn a_worker_that_stops_reading_stdin_makes_a_write_time_out() {
    let mut cmd = worker_cmd("stops_reading.py");
    cmd.write_timeout(Duration::from_millis(500));
    let mut w = Worker::spawn(&cmd).expect("spawning a stand-in worker");
    let pgid = w.pid();
    w.wait_ready(READY).expect("ready");
    let mut extra = Object::new();
    extra.insert("text".to_owned(), "x".repeat(16 * 1024).into());
    let req = Request::new("infer", extra);
    // The pipe holds 64 KiB by default (at most 1 MiB): a few hundred
    // 16 KiB lines must overflow any pipe; the write that finds it full
    // waits for the bound, then fails.
    let started = Instant::now();
    let err = (0..200)
        .find_map(|_| w.send(&req).err())
        .expect("a worker that never reads cannot take 3 MiB of requests");
    not_before(started, Duration::from_millis(500));
    assert!(
        matches!(err.kind, ErrorKind::Timeout { after } if after == Duration::from_millis(500)),
        "{err}"
    );
    assert!(
        matches!(&err.stage, Stage::Request { op, index } if op == "infer" && *index > 1),
        "{:?}",
        err.stage
    );
    assert!(err.expected.contains("stopped reading its stdin"), "{err}");
    drop(w);
    assert_group_gone(pgid);
}
