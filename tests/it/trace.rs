//! `coldstart trace`, run as a user runs it: a stand-in parent that is not
//! Python (a shell script, where the Rust service would be) with Python
//! workers, traced as a command it starts (`trace -- CMD`) and as a
//! running PID. The files are read back: the Chrome JSON checked by the
//! Trace Event format's rules (`trace::chrome::validate`), the Perfetto
//! bytes decoded into its messages (the `trace` crate's own test decodes
//! them against Perfetto's schema).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use ::trace::perfetto::PbTrace;
use prost::Message as _;
use serde_json::Value;

use crate::support::{self, chrome_events, names, perfetto_names};

/// Bounds a hang only.
const TIMEOUT: Duration = Duration::from_secs(90);

fn fixture(dir: &str, name: &str) -> PathBuf {
    support::fixtures().join(dir).join(name)
}

/// The names of the slices on thread `tid` of process `pid`.
fn slices_on(events: &[Value], pid: u64, tid: u64) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == pid && e["tid"] == tid)
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Workers that start and end while the command is traced appear and end
/// on the trace with their Python functions; the parent waits on each
/// worker whose pipe it reads, and only on those (not on the worker whose
/// output it never reads, nor while it is in `wait`); the trace ends by
/// itself when the processes exit.
#[test]
fn trace_of_a_command_draws_workers_that_come_and_go_and_only_the_proven_waits() {
    let cwd = tempfile::tempdir().unwrap();
    let out = support::coldstart_bounded(cwd.path(), TIMEOUT)
        .args(["trace", "--output", "chrome-json=t.json"])
        .args(["--output", "perfetto=out/t.perfetto-trace", "--"])
        .arg("sh")
        .arg(fixture("trace", "in_turn.sh"))
        .arg(support::python())
        .output()
        .unwrap();
    let stdout = support::succeeded(&out);
    assert!(stdout.contains("(the processes exited)"), "{stdout}");
    assert!(
        stdout.contains("the command ended: exit status: 0"),
        "{stdout}"
    );
    let worker = |name: &str| -> u64 {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("worker {name} ")))
            .unwrap_or_else(|| panic!("no worker {name} in {stdout}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let (first, second) = (worker("first"), worker("second"));

    let events = chrome_events(&cwd.path().join("t.json"));
    let (processes, threads) = names(&events);
    let root = *processes
        .iter()
        .find(|(_, n)| n.starts_with("sh "))
        .unwrap_or_else(|| panic!("the parent is named: {processes:#?}\n{stdout}"))
        .0;
    let unread = *processes
        .iter()
        .find(|(_, n)| n.contains("short_worker.py unread"))
        .expect("the unread worker is on the trace")
        .0;
    assert_eq!(threads.get(&(root, root)).map(String::as_str), Some("sh"));
    // Every process's track has its first sight, the traced command's too.
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "i" && e["pid"] == root && e["name"] == "first seen"),
        "no first seen for the traced command {root}"
    );
    for pid in [first, second, unread] {
        assert_eq!(
            threads.get(&(pid, pid)).map(String::as_str),
            Some("MainThread")
        );
        let on_main = slices_on(&events, pid, pid);
        assert!(
            on_main
                .iter()
                .any(|s| s.starts_with("load_the_model (short_worker.py:")),
            "{pid}: {on_main:?}"
        );
        for moment in ["first seen", "exited"] {
            assert!(
                events
                    .iter()
                    .any(|e| e["ph"] == "i" && e["pid"] == pid && e["name"] == moment),
                "no {moment:?} for {pid}"
            );
        }
    }
    let mut waits: Vec<String> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "wait")
        .map(|e| {
            assert_eq!(
                (&e["pid"], &e["tid"]),
                (&Value::from(root), &Value::from(root))
            );
            e["name"].as_str().unwrap().to_owned()
        })
        .collect();
    waits.dedup();
    let wait_events: Vec<&Value> = events.iter().filter(|e| e["cat"] == "wait").collect();
    assert_eq!(
        waits,
        vec![
            format!("waiting on worker {first}"),
            format!("waiting on worker {second}")
        ],
        "the wait slices {wait_events:#?} among the processes {processes:#?}"
    );
    // Each wait's flow reaches its worker.
    for pid in [first, second] {
        assert!(
            events.iter().any(|e| e["ph"] == "f" && e["pid"] == pid),
            "no flow reaches {pid}"
        );
    }
    assert!(events.iter().any(|e| e["ph"] == "C" && e["name"] == "RSS"));

    let (p_names, t_names) = perfetto_names(&cwd.path().join("out/t.perfetto-trace"));
    assert_eq!(p_names.len(), processes.len(), "{p_names:?}");
    assert!(t_names.iter().any(|t| t == "sh"), "{t_names:?}");
    assert!(t_names.iter().any(|t| t == "MainThread"), "{t_names:?}");
}

/// A running parent attached to by PID for a duration: its own thread
/// named, the busy worker's loop on its main thread, the blocked worker's
/// threads, and no wait claimed (the parent is in `wait`, not reading a
/// worker's pipe).
#[test]
fn trace_of_a_running_pid_names_the_parents_thread_and_claims_no_unproven_wait() {
    let mut parent = Command::new("sh")
        .arg(fixture("live", "standin_parent.sh"))
        .arg(support::python())
        .arg(format!("coldstart-trace-pid-{}", std::process::id()))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(parent.stdout.take().unwrap()).lines();
    let mut workers = BTreeMap::new();
    for _ in 0..2 {
        let line = lines.next().unwrap().unwrap();
        let parts: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(parts.get(1), Some(&"ready"), "{line}");
        workers.insert(parts[0].to_owned(), parts[2].parse::<u64>().unwrap());
    }
    let cwd = tempfile::tempdir().unwrap();
    let pid = u64::from(parent.id());
    let out = support::coldstart_bounded(cwd.path(), TIMEOUT)
        .args(["trace", &pid.to_string(), "--duration", "2"])
        .args([
            "--output",
            "chrome-json=t.json",
            "--output",
            "perfetto=t.pb",
        ])
        .output()
        .unwrap();
    // The workers exit when their shared stdin closes.
    drop(parent.stdin.take());
    parent.wait().unwrap();
    for w in workers.values() {
        assert!(support::wait_until_gone(*w as u32, TIMEOUT));
    }
    let stdout = support::succeeded(&out);
    assert!(stdout.contains("(the duration passed)"), "{stdout}");
    assert!(stdout.contains(" 0 proven waits on a worker"), "{stdout}");
    let events = chrome_events(&cwd.path().join("t.json"));
    let (processes, threads) = names(&events);
    assert!(processes.contains_key(&pid), "{processes:?}");
    assert_eq!(threads.get(&(pid, pid)).map(String::as_str), Some("sh"));
    let busy = workers["busy"];
    let on_main = slices_on(&events, busy, busy);
    assert!(
        on_main
            .iter()
            .any(|s| s.starts_with("tokenize_in_a_loop (busy_worker.py:")),
        "{on_main:?}"
    );
    assert!(!events.iter().any(|e| e["cat"] == "wait"));
    let (p_names, _) = perfetto_names(&cwd.path().join("t.pb"));
    assert!(
        p_names.iter().any(|n| n.contains("busy_worker.py")),
        "{p_names:?}"
    );
}

/// The command's own spans, sent over OTLP/HTTP (JSON and protobuf) to
/// the endpoint `trace` puts in its environment, on a track of its
/// process named after its service, nested as they were sent.
#[test]
fn trace_of_a_command_puts_the_spans_it_exports_over_otlp_on_a_track_of_its_own() {
    let cwd = tempfile::tempdir().unwrap();
    let out = support::coldstart_bounded(cwd.path(), TIMEOUT)
        .args(["trace", "--output", "chrome-json=t.json", "--"])
        .arg(support::python())
        .arg(fixture("trace", "otlp_parent.py"))
        .output()
        .unwrap();
    let stdout = support::succeeded(&out);
    for line in [
        "protocol http/protobuf",
        "status 200 application/json",
        "status 200 application/x-protobuf",
        "4 spans received over OTLP in 2 export requests, drawn on 2 tracks\n",
    ] {
        assert!(stdout.contains(line), "{line:?} not in {stdout}");
    }
    let events = chrome_events(&cwd.path().join("t.json"));
    let (processes, threads) = names(&events);
    let parent = *processes
        .iter()
        .find(|(_, n)| n.contains("otlp_parent.py"))
        .expect("the parent is on the trace")
        .0;
    // Two lanes of the service's spans: the root of another trace that
    // runs inside "handle request" is not drawn as its child.
    let track = |lane: &str| -> u64 {
        threads
            .iter()
            .find(|((p, _), n)| *p == parent && **n == format!("spans: stand-in ({lane})"))
            .unwrap_or_else(|| panic!("no span lane {lane} in {threads:?}"))
            .0
            .1
    };
    let span = |name: &str, lane: &str| -> (f64, f64) {
        let e = events
            .iter()
            .find(|e| e["ph"] == "X" && e["tid"] == track(lane) && e["name"] == name)
            .unwrap_or_else(|| panic!("no span {name:?} on lane {lane}"));
        assert_eq!(e["cat"], "span");
        let ts = e["ts"].as_f64().unwrap();
        (ts, ts + e["dur"].as_f64().unwrap())
    };
    let (handle, tokenize, load) = (
        span("handle request POST /infer", "1"),
        span("tokenize", "1"),
        span("load model", "1"),
    );
    let poll = span("poll queue", "2");
    assert!(
        handle.0 <= poll.0 && poll.1 <= handle.1,
        "{handle:?} {poll:?}"
    );
    assert!(
        handle.0 <= tokenize.0 && tokenize.1 <= handle.1,
        "{handle:?} {tokenize:?}"
    );
    assert!(
        (tokenize.1 - tokenize.0 - 50_000.0).abs() < 1.0,
        "{tokenize:?}"
    );
    assert!(load.0 >= handle.1, "{handle:?} {load:?}");
}

/// A Rust parent of the real shape, the dispatcher fixture (tokio, the
/// opentelemetry crates' OTLP exporter, two Python workers over pipes, one
/// stalling in one round; see its `src/main.rs`): the request's spans on
/// the parent, the stalled worker's Python stack during the stall, the
/// parent's blocking thread proven waiting on that worker, and a flow from
/// the span of that round trip to the worker, drawn because the span's
/// thread is the thread the kernel shows blocked on the worker's pipe.
#[test]
fn trace_of_a_rust_dispatcher_flows_from_its_span_to_the_worker_it_waited_on() {
    let cwd = tempfile::tempdir().unwrap();
    let out = support::coldstart_bounded(cwd.path(), TIMEOUT)
        .args(["trace", "--idle", "--output", "chrome-json=t.json"])
        .args(["--output", "perfetto=t.pb", "--"])
        .arg(support::dispatcher_bin())
        .arg(support::python())
        .arg(fixture("trace", "dispatch_worker.py"))
        .output()
        .unwrap();
    let stdout = support::succeeded(&out);
    let stalled: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("stalling: worker "))
        .unwrap_or_else(|| panic!("no stall in {stdout}"))
        .parse()
        .unwrap();
    assert!(
        stdout.contains("of them flow to the worker their thread was proven waiting on"),
        "{stdout}"
    );
    let events = chrome_events(&cwd.path().join("t.json"));
    let (processes, threads) = names(&events);
    let parent = *processes
        .iter()
        .find(|(_, n)| n.contains("dispatcher"))
        .unwrap_or_else(|| panic!("the parent is on the trace: {processes:#?}"))
        .0;
    // The stalled worker's stack while the parent waits.
    assert!(
        events.iter().any(|e| e["ph"] == "X"
            && e["pid"] == stalled
            && e["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("stall_in_model_download (dispatch_worker.py:"))),
        "no stall frame on worker {stalled}"
    );
    // The parent's blocking thread, proven waiting on it through the
    // stall: the longest of its waits on that worker (the main thread
    // also waits on each worker's ready line, briefly).
    let wait = events
        .iter()
        .filter(|e| {
            e["ph"] == "X"
                && e["pid"] == parent
                && e["name"] == format!("waiting on worker {stalled}").as_str()
        })
        .max_by_key(|e| e["dur"].as_u64())
        .unwrap_or_else(|| panic!("no wait on {stalled}: {threads:#?}"));
    assert!(wait["dur"].as_f64().unwrap() > 500_000.0, "{wait}");
    let waiter = &threads[&(parent, wait["tid"].as_u64().unwrap())];
    assert!(waiter.starts_with("dispatch-"), "{waiter}");
    // The round trip's span, on the track of that thread's spans.
    let track = threads
        .iter()
        .find(|((p, _), n)| *p == parent && **n == format!("spans on {waiter}"))
        .unwrap_or_else(|| panic!("no span track for {waiter}: {threads:#?}"))
        .0
        .1;
    let span = events
        .iter()
        .find(|e| e["ph"] == "X" && e["tid"] == track && e["name"] == "await reply stall")
        .unwrap_or_else(|| panic!("no `await reply stall` span on {waiter}'s track"));
    let (start, end) = (
        span["ts"].as_f64().unwrap(),
        span["ts"].as_f64().unwrap() + span["dur"].as_f64().unwrap(),
    );
    // Its enclosing request, on the tokio thread that awaited it.
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "X" && e["pid"] == parent && e["name"] == "request worker 1 stall"),
        "no request span"
    );
    // The flow leaves the span and reaches the stalled worker.
    let leaving: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "s" && e["tid"] == track)
        .filter(|e| (start..=end).contains(&e["ts"].as_f64().unwrap()))
        .collect();
    assert!(
        leaving.iter().any(|s| events
            .iter()
            .any(|f| f["ph"] == "f" && f["id"] == s["id"] && f["pid"] == stalled)),
        "no flow from the span to worker {stalled}: {leaving:#?}"
    );
    let (p_names, _) = perfetto_names(&cwd.path().join("t.pb"));
    assert_eq!(p_names.len(), processes.len(), "{p_names:?}");
    // In Perfetto the span track is nested under its thread's track.
    let bytes = std::fs::read(cwd.path().join("t.pb")).unwrap();
    let pb = PbTrace::decode(bytes.as_slice()).unwrap();
    let tracks: Vec<_> = pb
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref())
        .collect();
    let thread_track = tracks
        .iter()
        .find(|t| {
            t.thread.as_ref().is_some_and(|th| {
                th.pid == Some(parent as i32) && th.thread_name.as_deref() == Some(waiter)
            })
        })
        .unwrap_or_else(|| panic!("no Perfetto track of {waiter}"));
    let spans_track = tracks
        .iter()
        .find(|t| t.name.as_deref() == Some(format!("spans on {waiter}").as_str()))
        .unwrap_or_else(|| panic!("no Perfetto track of {waiter}'s spans"));
    assert_eq!(spans_track.parent_uuid, thread_track.uuid);
}

/// Ctrl-C (SIGINT to coldstart alone) ends a trace cleanly: exit 0, the
/// files written and valid, the command it started waited for.
#[test]
fn trace_stopped_by_ctrl_c_writes_the_trace_and_waits_for_the_command() {
    let cwd = tempfile::tempdir().unwrap();
    let mut tracer = support::coldstart(cwd.path())
        .args(["trace", "--output", "chrome-json=t.json", "--"])
        .arg("sh")
        .arg(fixture("live", "standin_parent.sh"))
        .arg(support::python())
        .arg(format!("coldstart-trace-sigint-{}", std::process::id()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    BufReader::new(tracer.stderr.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert!(said.starts_with("tracing process"), "{said}");
    // The workers share coldstart's stdout: their ready lines come first.
    let mut lines = BufReader::new(tracer.stdout.take().unwrap()).lines();
    let mut workers = Vec::new();
    while workers.len() < 2 {
        let line = lines.next().unwrap().unwrap();
        let parts: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(parts.get(1), Some(&"ready"), "{line}");
        workers.push(parts[2].parse::<u32>().unwrap());
    }
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(tracer.id() as i32, libc::SIGINT) };
    let status = tracer.wait().unwrap();
    // The workers exit when their shared stdin closes; they hold the
    // stdout they share with coldstart until then.
    drop(tracer.stdin.take());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    for w in &workers {
        assert!(support::wait_until_gone(*w, TIMEOUT));
    }
    let text = rest.join("\n");
    assert!(status.success(), "{status}: {text}");
    assert!(text.contains("(stopped by SIGINT)"), "{text}");
    assert!(text.contains("the command ended: "), "{text}");
    let events = chrome_events(&cwd.path().join("t.json"));
    let (processes, _) = names(&events);
    for w in &workers {
        assert!(processes.contains_key(&u64::from(*w)), "{processes:?}");
    }
}

/// A command that starts two workers and is ended by `--duration`: the
/// workers (still running, one in the command's process group, one in a
/// session of its own) end with it, and nothing the trace started
/// outlives coldstart. A `--native` that
/// this build cannot read is refused before anything starts.
#[test]
fn trace_leaves_no_worker_of_the_command_it_ended() {
    let dir = tempfile::tempdir().unwrap();
    let marker = support::marker("trace", "orphan");
    let python = support::python();
    // The worker: a Python process that sleeps until it is killed, and
    // ignores SIGTERM (the grace, then SIGKILL, must end it).
    let worker = format!(
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)  # {marker}"
    );
    // Two workers: one in the command's process group, one in a group of
    // its own (as the real service starts each worker, `setpgid(0, 0)`).
    let parent = format!(
        "import subprocess, sys, time\nfor own in (False, True):\n    subprocess.Popen([sys.executable, '-c', {worker:?}], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=own)\ntime.sleep(600)"
    );
    let out = dir.path().join("t.json");
    // Its output to files, not pipes: should a worker outlive coldstart
    // with them open, the test still ends (and says so) instead of
    // waiting on a pipe for as long as the worker lives.
    let (stdout_file, stderr_file) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut tracer = support::coldstart(dir.path())
        .args(["trace", "--duration", "1", "--output"])
        .arg(format!("chrome-json={}", out.display()))
        .arg("--")
        .arg(python)
        .args(["-c", &parent])
        .stdout(std::fs::File::create(&stdout_file).unwrap())
        .stderr(std::fs::File::create(&stderr_file).unwrap())
        .spawn()
        .unwrap();
    let mut status = None;
    support::wait_until("coldstart trace ended", TIMEOUT, || {
        status = tracer.try_wait().unwrap();
        status.is_some()
    });
    let stdout = std::fs::read_to_string(&stdout_file).unwrap();
    let stderr = std::fs::read_to_string(&stderr_file).unwrap();
    assert!(status.unwrap().success(), "{stdout}{stderr}");
    assert!(stdout.contains("the command ended"), "{stdout}{stderr}");
    let left = support::running_with(&marker);
    let ps = support::ps();
    for (pid, _) in &left {
        // SAFETY: kill(2) on a leftover of this test, found by its marker.
        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
    }
    assert!(left.is_empty(), "left running: {left:?}\n{ps}");

    if !cfg!(feature = "native") {
        let started = support::marker("trace", "native-refused");
        let out = support::coldstart_bounded(dir.path(), TIMEOUT)
            .args(["trace", "--native", "--duration", "1", "--output"])
            .arg(format!("chrome-json={}", out.display()))
            .arg("--")
            .arg(python)
            .args(["-c", &format!("import time; time.sleep(30)  # {started}")])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--native: native (C) frames are not in this build"),
            "{err}"
        );
        assert!(
            !err.contains("Terminated") && !err.contains("tracing process"),
            "refused before the command started: {err}"
        );
    }
}

#[test]
fn trace_without_a_process_or_a_file_says_what_to_name() {
    let cwd = tempfile::tempdir().unwrap();
    support::coldstart_bounded(cwd.path(), TIMEOUT)
        .args(["trace", "--output", "chrome-json=t.json"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "name a PID to attach to, or a command after `--`",
        ));
    support::coldstart_bounded(cwd.path(), TIMEOUT)
        .args(["trace", "1"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--output"));
}

/// The Rust service (`examples/ml-service`) and its Python workers traced
/// with `--native` (a build with the `native` feature, as `cargo xtask
/// test` builds the suite).
#[cfg(feature = "native")]
mod native_stacks {
    use super::*;

    /// Both halves on one trace: the service's threads named (its tokio
    /// workers) with its own Rust frames, each worker's Python frames, and
    /// the service's threads that read each worker's output pipe drawn as
    /// waiting on that worker, the wait the outermost slice of the samples
    /// taken in it.
    #[test]
    fn trace_native_of_the_service_draws_both_halves_and_its_waits_on_each_worker() {
        let (tree, workers) = crate::live::native_stacks::service();
        let cwd = tempfile::tempdir().unwrap();
        let pid = u64::from(tree.pid());
        let out = support::coldstart_bounded(cwd.path(), TIMEOUT)
            // Idle threads too: the service waits for requests, so its
            // threads are idle and would not be sampled otherwise.
            .args(["trace", &pid.to_string(), "--native", "--idle"])
            .args(["--duration", "2"])
            .args([
                "--output",
                "chrome-json=t.json",
                "--output",
                "perfetto=t.pb",
            ])
            .output()
            .unwrap();
        support::succeeded(&out);
        let events = chrome_events(&cwd.path().join("t.json"));
        let (_, threads) = names(&events);
        assert!(
            threads
                .iter()
                .any(|((p, _), n)| *p == pid && n == "tokio-rt-worker"),
            "{threads:?}"
        );
        let parent_slices: Vec<&str> = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["pid"] == pid)
            .filter_map(|e| e["name"].as_str())
            .collect();
        assert!(
            parent_slices.iter().any(|s| s.starts_with("ml_service::")),
            "{parent_slices:?}"
        );
        for w in &workers {
            let w = u64::from(*w);
            assert!(
                events.iter().any(|e| e["ph"] == "X"
                    && e["pid"] == w
                    && e["name"]
                        .as_str()
                        .is_some_and(|n| n.contains("(mlworker/__main__.py:"))),
                "no Python frame of worker {w}"
            );
            let wait = format!("waiting on worker {w}");
            assert!(
                parent_slices.contains(&wait.as_str()),
                "{wait} not in {parent_slices:?}"
            );
        }
        let (_, t_names) = perfetto_names(&cwd.path().join("t.pb"));
        assert!(
            t_names.iter().any(|t| t == "tokio-rt-worker"),
            "{t_names:?}"
        );
    }
}
