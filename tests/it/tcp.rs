//! Workers that serve over TCP: the ready line picked out of stderr, the
//! protocol over a loopback connection, and every fault leaving nothing
//! running. Through `spawn` directly (the reference worker with
//! `--transport tcp`, and the stand-in `tests/fixtures/workers/tcp_worker.py`
//! with its fault modes), then through `coldstart check` and `coldstart
//! bench` as a user runs them, from a folder outside the workspace.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use spawn::worker_proto::Request;
use spawn::{Command, ErrorKind, ShutdownPolicy, Stage, Transport, Worker};
use timeline::TrialRecord;

use crate::support::{self, Env, assert_group_gone, trials};

const READY: Duration = Duration::from_secs(30);
const REQUEST: Duration = Duration::from_secs(15);
/// The tcp transport's default stop: SIGINT this long after the ack.
const TCP_STOP_AFTER: Duration = Duration::from_secs(2);

fn policy() -> ShutdownPolicy {
    ShutdownPolicy {
        ack_timeout: Duration::from_secs(10),
        exit_timeout: Duration::from_secs(10),
        grace: Duration::from_secs(1),
        stop: None,
        tcp_stop: None,
    }
}

/// A marker no other process on the machine has in its argv.
fn marker(name: &str) -> String {
    support::marker("tcp", name)
}

/// Every process whose command line holds `marker` ends: each one found is
/// watched through a pidfd, for a bound no load reaches. (coldstart's guard,
/// a fork of coldstart that outlives it to kill what it left, ends by
/// itself once coldstart has exited: it is waited for, not counted.)
#[track_caller]
fn assert_nothing_left(marker: &str) {
    let left: Vec<String> = support::running_with(marker)
        .into_iter()
        .filter(|(pid, _)| !support::wait_until_gone(*pid, Duration::from_secs(30)))
        .map(|(pid, argv)| format!("{pid}: {argv}"))
        .collect();
    assert!(left.is_empty(), "processes left running: {left:#?}");
}

/// The reference worker over TCP, with `task` as its marker.
fn refworker(task: &str) -> Vec<String> {
    [
        support::python().display().to_string(),
        "-m".to_owned(),
        "refworker".to_owned(),
        "--test-echo".to_owned(),
        "--profile".to_owned(),
        "io".to_owned(),
        "--transport".to_owned(),
        "tcp".to_owned(),
        "--task".to_owned(),
        task.to_owned(),
    ]
    .to_vec()
}

fn refworker_cmd(task: &str) -> Command {
    let argv = refworker(task);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env("PYTHONPATH", support::worker_dir());
    cmd
}

fn standin(mode: &str, marker: &str) -> Command {
    let mut cmd = Command::new(support::python());
    cmd.arg(support::fixtures().join("workers").join("tcp_worker.py"))
        .args([mode, marker]);
    cmd
}

// ---- through spawn ---------------------------------------------------------

#[test]
fn tcp_reference_worker_full_life_with_the_ready_line_from_stderr() {
    let mark = marker("full-life");
    for transport in [Transport::Tcp, Transport::Stdio] {
        // Said by the target, or found in the ready line on stderr.
        let mut cmd = refworker_cmd(&mark);
        cmd.transport(transport);
        let mut w = Worker::spawn(&cmd).unwrap();
        let pid = w.pid();
        let ready = w.wait_ready(READY).unwrap();
        assert_eq!(ready.value.extra["transport"], "tcp");
        let port = ready.value.extra["port"].as_u64().unwrap();
        assert!(port > 0);
        let x = w.request(&Request::health(), REQUEST).unwrap();
        assert_eq!(x.reply.op(), "health");
        assert!(x.sent_at_ns >= ready.read_at_ns && x.received_at_ns > x.sent_at_ns);
        let fin = w.shutdown(&policy()).unwrap();
        let connected = fin.connected_ns.expect("a connection stamp");
        let t = &fin.timeline;
        let r = t.ready.unwrap();
        assert!(t.spawned_ns < r.read_ns && r.read_ns <= connected);
        assert!(connected <= x.sent_at_ns);
        assert!(r.t_ns.unwrap() <= r.read_ns);
        // The stderr tail stays whole: the ready line is still in it.
        assert!(
            fin.stderr_tail.contains(r#""transport": "tcp""#),
            "{}",
            fin.stderr_tail
        );
        assert!(fin.stderr_tail.contains("shutdown acknowledged"));
        assert!(fin.noise.is_empty());
        assert_group_gone(pid);
    }
    assert_nothing_left(&mark);
}

#[test]
fn tcp_a_ready_line_naming_a_port_that_refuses_is_a_connect_error() {
    let mark = marker("refuse");
    let mut cmd = standin("refuse", &mark);
    cmd.transport(Transport::Tcp);
    let mut w = Worker::spawn(&cmd).unwrap();
    let pid = w.pid();
    let err = w.wait_ready(READY).unwrap_err();
    assert!(
        matches!(&err.kind, ErrorKind::Connect { cause, .. } if cause.kind() == std::io::ErrorKind::ConnectionRefused),
        "{err}"
    );
    assert_eq!(err.stage, Stage::Startup);
    // The stand-in names itself with its pid on stderr: `tcp-worker[PID]`.
    let named = regex::Regex::new(r"tcp-worker\[\d+\]").unwrap();
    let text = err.to_string().replace(&mark, "[MARKER]");
    let text = named.replace_all(&text, "tcp-worker[[PID]]");
    support::redactions().bind(|| insta::assert_snapshot!("refused_connect", text));
    assert_group_gone(pid);
    assert_nothing_left(&mark);
}

#[test]
fn tcp_a_connection_closed_mid_reply_is_a_disconnect_with_the_partial_line() {
    let mark = marker("drop");
    let mut cmd = standin("drop-mid-reply", &mark);
    cmd.transport(Transport::Tcp);
    let mut w = Worker::spawn(&cmd).unwrap();
    let pid = w.pid();
    w.wait_ready(READY).unwrap();
    let err = w.request(&Request::health(), REQUEST).unwrap_err();
    assert!(
        matches!(&err.kind, ErrorKind::Disconnected { partial: Some(p) } if p.contains("respo")),
        "{err}"
    );
    assert_eq!(
        err.stage,
        Stage::Request {
            op: "health".to_owned(),
            index: 1
        }
    );
    assert!(err.to_string().contains("closed the connection"), "{err}");
    assert!(
        err.stderr_tail.contains("closed the connection mid-reply"),
        "{err}"
    );
    // It kept running after closing: the harness killed its group.
    assert_eq!(
        err.finished.as_ref().unwrap().escalation,
        spawn::Escalation::Kill
    );
    assert_group_gone(pid);
    assert_nothing_left(&mark);
}

#[test]
fn tcp_no_ready_line_times_out_with_the_hook_and_ends_the_group() {
    let mark = marker("never");
    let mut cmd = standin("never-ready", &mark);
    cmd.transport(Transport::Tcp);
    let mut w = Worker::spawn(&cmd).unwrap();
    let pid = w.pid();
    w.on_timeout(|p| Some(format!("dump of {p}")));
    let err = w.wait_ready(Duration::from_secs(2)).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Timeout { .. }), "{err}");
    assert_eq!(err.diagnostics, [format!("dump of {pid}")]);
    assert!(
        err.expected.contains("on stderr"),
        "a tcp worker's ready line is awaited on stderr: {err}"
    );
    assert_group_gone(pid);
    assert_nothing_left(&mark);
}

#[test]
fn tcp_stderr_flooded_around_the_ready_line_keeps_every_byte() {
    let mark = marker("flood");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr.log");
    let mut cmd = standin("flood", &mark);
    cmd.transport(Transport::Tcp).stderr_file(&log);
    let mut w = Worker::spawn(&cmd).unwrap();
    let pid = w.pid();
    let ready = w.wait_ready(READY).unwrap();
    w.request(&Request::health(), REQUEST).unwrap();
    let fin = w.shutdown(&policy()).unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // 20,000 lines before, the ready line, 20,000 after, and the logs.
    let at = lines
        .iter()
        .position(|l| l.starts_with(r#"{"ready": true"#))
        .expect("the ready line stays in the stderr copy");
    assert_eq!(
        lines[..at]
            .iter()
            .filter(|l| l.contains("before_mod") || l.contains("before log"))
            .count(),
        20000
    );
    assert_eq!(
        lines[at..]
            .iter()
            .filter(|l| l.contains("after_mod") || l.contains("after log"))
            .count(),
        20000
    );
    assert_eq!(
        serde_json::from_str::<Value>(lines[at]).unwrap()["port"],
        ready.value.extra["port"]
    );
    assert_eq!(fin.stderr_bytes, text.len() as u64);
    assert_group_gone(pid);
    assert_nothing_left(&mark);
}

#[test]
fn tcp_stdout_is_not_the_protocol_and_a_closed_stdout_does_not_end_the_wait() {
    let mark = marker("stdout");
    // Lines on stdout while serving over tcp are drained, not noise.
    let mut cmd = standin("stdout-noise", &mark);
    cmd.transport(Transport::Tcp).max_noise_lines(0);
    let mut w = Worker::spawn(&cmd).unwrap();
    w.wait_ready(READY).unwrap();
    for _ in 0..3 {
        w.request(&Request::health(), REQUEST).unwrap();
    }
    let fin = w.shutdown(&policy()).unwrap();
    assert!(fin.noise.is_empty());
    // Started as a stdio worker, it closes stdout before its tcp ready
    // line on stderr: found, connected, served.
    let mut w = Worker::spawn(&standin("closes-stdout", &mark)).unwrap();
    w.wait_ready(READY).unwrap();
    w.request(&Request::health(), REQUEST).unwrap();
    assert!(w.shutdown(&policy()).unwrap().connected_ns.is_some());
    assert_nothing_left(&mark);
}

// ---- through the command line -----------------------------------------------

/// The reference worker's folder on the workers' PYTHONPATH.
fn worker_path() -> Env<'static> {
    Env::Set("PYTHONPATH", support::worker_dir().into_os_string())
}

#[test]
fn tcp_check_passes_three_reference_workers_at_once_with_the_same_evidence() {
    let mark = marker("check");
    let dir = tempfile::tempdir().unwrap();
    let o = support::coldstart_run(
        dir.path(),
        &["check", "--json", "--processes", "3"],
        &refworker(&mark),
        &[worker_path()],
    );
    let json: Value = serde_json::from_slice(&o.stdout).expect("a JSON report");
    assert_eq!(o.status.code(), Some(0), "{json:#}");
    let t = &json["targets"][0];
    assert_eq!(t["status"], "pass", "{t:#}");
    let procs = t["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 3, "{t:#}");
    let mut pids = Vec::new();
    for p in procs {
        // The same evidence as over stdio: the recorder ran in the worker
        // and the importtime log was read, ready line and all.
        assert_eq!(p["recorder"], "ran", "{p:#}");
        assert!(p["importtime_entries"].as_u64().unwrap() > 50, "{p:#}");
        assert!(p["ready_ms"].as_f64().unwrap() > 0.0, "{p:#}");
        assert!(p["error"].is_null(), "{p:#}");
        pids.push(p["pid"].as_u64().unwrap());
    }
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), 3);
    assert!(t["violations"].as_array().unwrap().is_empty(), "{t:#}");
    assert_nothing_left(&mark);
}

#[test]
fn tcp_check_on_a_target_that_says_tcp_and_never_gets_ready_shows_the_stack() {
    let mark = marker("check-never");
    let dir = tempfile::tempdir().unwrap();
    let script = support::fixtures().join("workers").join("tcp_worker.py");
    std::fs::write(
        dir.path().join("coldstart.toml"),
        format!(
            "[[target]]\nname = \"tcp\"\ncommand = [{:?}, {:?}, \"never-ready\", {:?}]\ntransport = \"tcp\"\nready_timeout = 3.0\nprocesses = 1\n",
            support::python().display().to_string(),
            script.display().to_string(),
            mark
        ),
    )
    .unwrap();
    let o = support::coldstart_run(dir.path(), &["check"], &[], &[worker_path()]);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_ne!(o.status.code(), Some(0), "{all}");
    // The ready line awaited on stderr, the worker's own last words, and
    // the timeout's stack naming where it hangs.
    let all = all.replace(&mark, "[MARK]");
    support::redactions().bind(|| insta::assert_snapshot!("tcp_check_never_ready", all));
    assert_nothing_left(&mark);
}

#[test]
fn tcp_bench_times_ready_from_the_stderr_line_and_names_connect_and_first_reply() {
    let mark = marker("bench");
    let dir = tempfile::tempdir().unwrap();
    let out: PathBuf = dir.path().join("run");
    let out_s = out.display().to_string();
    let o = support::coldstart_run(
        dir.path(),
        &[
            "bench",
            "--out",
            &out_s,
            "--resamples",
            "2000",
            "--warmup",
            "0",
            "--trials",
            "3",
        ],
        &refworker(&mark),
        &[worker_path()],
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("connect-first-reply"), "{stdout}");
    let recs = trials(&out);
    let measured: Vec<&TrialRecord> = recs.iter().filter(|r| r.outcome.is_correct()).collect();
    assert_eq!(measured.len(), 3);
    for r in measured {
        let m = &r.workers[0].marks;
        let connected = m.connected_ns.expect("a tcp worker's connection stamp");
        assert!(m.ready_read_ns.unwrap() <= connected);
        assert!(connected <= m.health[0].sent_ns);
        assert!(r.phases.connect_first_reply_ns.is_some());
        assert_eq!(r.phases.pipe_latency_ns, None);
    }
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert!(
        summary["phases"].get("connect-first-reply").is_some(),
        "{summary:#}"
    );
    assert_nothing_left(&mark);
}

#[test]
fn tcp_serve_phase_closed_and_open_loop_over_the_connection() {
    let mark = marker("serve");
    let dir = tempfile::tempdir().unwrap();
    for load in [
        &["--requests", "40"][..],
        &["--rate", "200", "--requests", "40"][..],
    ] {
        let out = dir.path().join(format!("run-{}", load.len()));
        let out_s = out.display().to_string();
        let mut args = vec![
            "bench",
            "--out",
            &out_s,
            "--resamples",
            "2000",
            "--warmup",
            "0",
            "--trials",
            "1",
        ];
        args.extend_from_slice(load);
        let o = support::coldstart_run(dir.path(), &args, &refworker(&mark), &[worker_path()]);
        assert_eq!(o.status.code(), Some(0), "{load:?}");
        let summary: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap())
                .unwrap();
        let serve = &summary["serve"][0];
        assert_eq!(serve["ok"], 40, "{serve:#}");
        assert_eq!(serve["wrong_replies"], 0, "{serve:#}");
        assert!(serve["ended_early"].is_null(), "{serve:#}");
    }
    assert_nothing_left(&mark);
}

#[test]
fn tcp_profile_samples_a_worker_driven_over_the_connection() {
    let mark = marker("profile");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("profile");
    let out_s = out.display().to_string();
    let o = support::coldstart_run(
        dir.path(),
        &["profile", "--rate", "200", "--out", &out_s],
        &refworker(&mark),
        &[worker_path()],
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("flame graph:"), "{stdout}");
    assert!(stdout.contains("refworker"), "{stdout}");
    assert_nothing_left(&mark);
}

#[test]
fn tcp_serve_keeps_k_requests_in_flight_and_matches_out_of_order_replies_by_id() {
    let mark = marker("in-flight");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out_s = out.display().to_string();
    let argv = [
        support::python().display().to_string(),
        support::fixtures()
            .join("workers")
            .join("tcp_worker.py")
            .display()
            .to_string(),
        "reorder".to_owned(),
        mark.clone(),
    ];
    let o = support::coldstart_run(
        dir.path(),
        &[
            "bench",
            "--out",
            &out_s,
            "--resamples",
            "2000",
            "--warmup",
            "0",
            "--trials",
            "1",
            "--requests",
            "20",
            "--in-flight",
            "2",
            "--request",
            r#"{"op": "work", "n": 1}"#,
        ],
        &argv,
        &[worker_path()],
    );
    assert_eq!(o.status.code(), Some(0));
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let serve = &summary["serve"][0];
    // Every reply came second-first and was matched to its request by id.
    assert_eq!(serve["ok"], 20, "{serve:#}");
    assert_eq!(serve["wrong_replies"], 0, "{serve:#}");
    assert_eq!(serve["max_in_flight"], 2, "{serve:#}");
    assert_nothing_left(&mark);
}

/// The stand-in daemon shaped like the real system's (`tests/fixtures/
/// workers/tcp_daemon.py`: its shutdown op only ends the connection, it
/// goes back to `accept`, it stops on SIGINT and unregisters from its
/// registry file), marked with `mark`.
fn daemon(mark: &str) -> Vec<String> {
    vec![
        support::python().display().to_string(),
        support::fixtures()
            .join("workers/tcp_daemon.py")
            .display()
            .to_string(),
        mark.to_owned(),
    ]
}

/// What `coldstart` is run with for daemons: every daemon it starts keeps
/// its state (registry, stop stamps) in `state`, and none gets the
/// reference worker's PYTHONPATH.
fn daemons_keeping_state_in(state: &Path) -> [Env<'static>; 2] {
    [
        Env::Set("DAEMON_STATE_DIR", state.into()),
        Env::Unset("PYTHONPATH"),
    ]
}

/// Every daemon that kept its state in `state` was ended by the stop rule
/// and unregistered: each got its SIGINT after it had had `after` to exit
/// by itself (`TCP_STOP_AFTER`, 2 s, the tcp default), and long before the
/// exit timeout (10 s) would have run out (the daemon stamps both moments
/// on the one monotonic clock), and the registry is empty. Gives how many
/// were stopped.
#[track_caller]
fn assert_daemons_stopped_by_sigint(state: &Path, after: Duration) -> usize {
    let least = after;
    let stopped: Vec<Value> = std::fs::read_dir(state)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("stopped.")
        })
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    for s in &stopped {
        let after = Duration::from_nanos(
            s["sigint_ns"].as_u64().unwrap() - s["shutdown_ns"].as_u64().expect("a shutdown op"),
        );
        assert!(
            (least..Duration::from_secs(10)).contains(&after),
            "SIGINT {after:?} after the shutdown reply"
        );
    }
    let registry: Value =
        serde_json::from_str(&std::fs::read_to_string(state.join("workers.json")).unwrap())
            .unwrap();
    assert_eq!(registry, serde_json::json!([]), "every worker unregistered");
    stopped.len()
}

/// `check` on the daemon as a target that says `transport = "tcp"`, in a
/// config given by `--config`: each worker is ended the way it is built
/// to end (SIGINT after the shutdown reply, the tcp transport's default
/// stop), `check` passes, and the registry is left empty. The target is
/// labelled with the config file's own name.
#[test]
fn tcp_check_stops_a_daemon_with_sigint_and_leaves_its_registry_clean() {
    let mark = marker("daemon");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::write(
        dir.path().join("daemon.toml"),
        format!(
            "[[target]]\nname = \"daemon\"\ncommand = {:?}\ntransport = \"tcp\"\n",
            daemon(&mark),
        ),
    )
    .unwrap();
    let out = support::coldstart_run(
        dir.path(),
        &["check", "--json", "--config", "daemon.toml"],
        &[],
        &daemons_keeping_state_in(&state),
    );
    assert_check_passed_and_daemons_stopped(&out, "daemon.toml", &state, &mark);
}

/// `check --json`'s output `out` passed, its target from `origin`, every
/// process exited 0 with no error, each daemon was stopped by SIGINT after
/// its shutdown reply (its registry in `state` empty), and no process
/// marked `mark` is left.
fn assert_check_passed_and_daemons_stopped(
    out: &std::process::Output,
    origin: &str,
    state: &Path,
    mark: &str,
) {
    let json: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    let t = &json["targets"][0];
    assert_eq!(t["status"], "pass", "{t:#}");
    assert_eq!(t["origin"], origin, "{t:#}");
    for p in t["processes"].as_array().unwrap() {
        assert!(p["error"].is_null(), "{p:#}");
        assert_eq!(p["exit"], "exit code 0", "{p:#}");
    }
    let stopped = assert_daemons_stopped_by_sigint(state, TCP_STOP_AFTER);
    assert_eq!(stopped, t["processes"].as_array().unwrap().len());
    assert_nothing_left(mark);
}

/// The same daemon as a bare command after `--`, no config: it is a tcp
/// worker by its ready line alone, and is stopped as one (SIGINT after
/// its shutdown reply): `check` passes and the registry is empty.
#[test]
fn tcp_check_stops_a_bare_daemon_known_by_its_ready_line() {
    let mark = marker("bare-check");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let out = support::coldstart_run(
        dir.path(),
        &["check", "--json"],
        &daemon(&mark),
        &daemons_keeping_state_in(&state),
    );
    assert_check_passed_and_daemons_stopped(&out, "command line", &state, &mark);
}

/// `bench` on the bare daemon: every trial's worker is stopped by SIGINT
/// after its shutdown reply, none needs SIGTERM, every trial is measured,
/// and the registry is empty.
#[test]
fn tcp_bench_stops_a_bare_daemon_known_by_its_ready_line() {
    let mark = marker("bare-bench");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let out = dir.path().join("run");
    let out_s = out.display().to_string();
    let o = support::coldstart_run(
        dir.path(),
        &["bench", "--out", &out_s, "--warmup", "0", "--trials", "2"],
        &daemon(&mark),
        &daemons_keeping_state_in(&state),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let recs = trials(&out);
    assert!(!recs.is_empty());
    for r in &recs {
        assert!(r.outcome.is_correct(), "{r:?}");
        for w in &r.workers {
            assert_eq!(w.escalation, timeline::Escalation::None, "{w:?}");
        }
    }
    let workers: usize = recs.iter().map(|r| r.workers.len()).sum();
    assert!(assert_daemons_stopped_by_sigint(&state, TCP_STOP_AFTER) >= workers);
    assert_nothing_left(&mark);
}

/// `lazy` on the bare daemon: its instrumented processes are stopped by
/// SIGINT after their shutdown replies, it runs to its report, and the
/// registry is empty.
#[test]
fn tcp_lazy_stops_a_bare_daemon_known_by_its_ready_line() {
    let mark = marker("bare-lazy");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let o = support::coldstart_run(
        dir.path(),
        &["lazy", "--format", "json", "--processes", "2"],
        &daemon(&mark),
        &daemons_keeping_state_in(&state),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(assert_daemons_stopped_by_sigint(&state, TCP_STOP_AFTER) >= 2);
    assert_nothing_left(&mark);
}

/// Through `spawn`: the tcp transport's stop (`ShutdownPolicy::tcp_stop`)
/// follows the transport the worker served over. The daemon started for
/// the default stdio is a tcp worker by its ready line on stderr, and gets
/// it after its shutdown reply, with no SIGTERM.
#[test]
fn tcp_the_tcp_stop_goes_to_a_worker_known_for_tcp_by_its_ready_line() {
    let dir = tempfile::tempdir().unwrap();
    let mark = marker("tcp-stop");
    let argv = daemon(&mark);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).env("DAEMON_STATE_DIR", dir.path());
    assert_eq!(cmd.get_transport(), Transport::Stdio);
    let mut w = Worker::spawn(&cmd).unwrap();
    w.wait_ready(READY).unwrap();
    w.request(&Request::health(), REQUEST).unwrap();
    let policy = ShutdownPolicy {
        tcp_stop: Some(spawn::Stop {
            signal: libc::SIGINT,
            after: Duration::from_millis(300),
        }),
        ..policy()
    };
    let f = w
        .shutdown(&policy)
        .expect("the daemon ends cleanly on SIGINT");
    let end = &f.timeline.end;
    assert!(end.stop_sent_ns.is_some(), "SIGINT was sent: {end:?}");
    assert!(end.term_sent_ns.is_none(), "no SIGTERM: {end:?}");
    assert_eq!(
        assert_daemons_stopped_by_sigint(dir.path(), Duration::from_millis(300)),
        1
    );
    assert_nothing_left(&mark);
}

/// Through `spawn`: the stop signal goes after the shutdown reply only to
/// a worker still running, the exit is stamped after it, and a worker
/// that exits by itself never gets it.
#[test]
fn tcp_the_stop_signal_goes_only_to_a_worker_that_outlives_its_reply() {
    let dir = tempfile::tempdir().unwrap();
    let mark = marker("stop");
    let mut cmd = Command::new(support::python());
    cmd.arg(support::fixtures().join("workers/tcp_daemon.py"))
        .arg(&mark)
        .env("DAEMON_STATE_DIR", dir.path())
        .transport(Transport::Tcp);
    let mut w = Worker::spawn(&cmd).unwrap();
    w.wait_ready(READY).unwrap();
    let stop = ShutdownPolicy {
        stop: Some(spawn::Stop {
            signal: libc::SIGINT,
            after: Duration::from_millis(300),
        }),
        ..policy()
    };
    let f = w
        .shutdown(&stop)
        .expect("the daemon ends cleanly on SIGINT");
    let end = &f.timeline.end;
    let (ack, sent, exited) = (
        end.ack_read_ns.unwrap(),
        end.stop_sent_ns.expect("SIGINT was sent"),
        end.exited_ns.unwrap(),
    );
    assert!(ack + 300_000_000 <= sent && sent <= exited, "{end:?}");
    assert!(end.term_sent_ns.is_none(), "no SIGTERM: {end:?}");
    assert_nothing_left(&mark);

    // The reference worker exits by itself after its reply: no signal.
    let mut w = Worker::spawn(&refworker_cmd(&marker("stop-ref"))).unwrap();
    w.wait_ready(READY).unwrap();
    let f = w.shutdown(&stop).unwrap();
    assert!(
        f.timeline.end.stop_sent_ns.is_none(),
        "{:?}",
        f.timeline.end
    );
}
