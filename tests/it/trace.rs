//! `coldstart trace`, run as a user runs it: a stand-in parent that is not
//! Python (a shell script, where the Rust service would be) with Python
//! workers, traced as a command it starts (`trace -- CMD`) and as a
//! running PID. The files are read back: the Chrome JSON checked by the
//! Trace Event format's rules (`trace::chrome::validate`), the Perfetto
//! bytes decoded into its messages (the `trace` crate's own test decodes
//! them against Perfetto's schema).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use ::trace::perfetto::PbTrace;
use prost::Message;
use serde_json::Value;

use crate::support;

/// Bounds a hang only.
const TIMEOUT: Duration = Duration::from_secs(90);

fn fixture(dir: &str, name: &str) -> PathBuf {
    support::fixtures().join(dir).join(name)
}

fn coldstart(cwd: &Path) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::new(support::coldstart_bin());
    cmd.current_dir(cwd).timeout(TIMEOUT);
    cmd
}

/// The events of a Chrome JSON trace, after checking it by the rules.
fn chrome_events(path: &Path) -> Vec<Value> {
    let json = std::fs::read_to_string(path).unwrap();
    ::trace::chrome::validate(&json).unwrap_or_else(|e| panic!("{e}"));
    let doc: Value = serde_json::from_str(&json).unwrap();
    doc["traceEvents"].as_array().unwrap().clone()
}

/// `process_name` and `thread_name` metadata: pid -> name, (pid, tid) -> name.
fn names(events: &[Value]) -> (BTreeMap<u64, String>, BTreeMap<(u64, u64), String>) {
    let (mut processes, mut threads) = (BTreeMap::new(), BTreeMap::new());
    for e in events.iter().filter(|e| e["ph"] == "M") {
        let (pid, tid) = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        let name = e["args"]["name"].as_str().unwrap().to_owned();
        if e["name"] == "process_name" {
            processes.insert(pid, name);
        } else {
            threads.insert((pid, tid), name);
        }
    }
    (processes, threads)
}

/// The names of the slices on thread `tid` of process `pid`.
fn slices_on(events: &[Value], pid: u64, tid: u64) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == pid && e["tid"] == tid)
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The Perfetto file decoded: each track's begins and ends pair up, and
/// (process names, thread names) of its descriptors.
fn perfetto_names(path: &Path) -> (Vec<String>, Vec<String>) {
    let bytes = std::fs::read(path).unwrap();
    let trace = PbTrace::decode(bytes.as_slice()).expect("the Perfetto file decodes");
    let mut depth = BTreeMap::<u64, i64>::new();
    for e in trace.packet.iter().filter_map(|p| p.track_event.as_ref()) {
        let d = depth.entry(e.track_uuid.unwrap()).or_default();
        match e.r#type {
            Some(1) => *d += 1,
            Some(2) => *d -= 1,
            _ => {}
        }
        assert!(*d >= 0, "a slice ends before it begins");
    }
    assert!(depth.values().all(|d| *d == 0), "{depth:?}");
    let tracks = trace
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref());
    let mut processes = Vec::new();
    let mut threads = Vec::new();
    for t in tracks {
        if let Some(p) = &t.process {
            processes.push(p.process_name.clone().unwrap_or_default());
        }
        if let Some(th) = &t.thread {
            threads.push(th.thread_name.clone().unwrap_or_default());
        }
    }
    (processes, threads)
}

/// Workers that start and end while the command is traced appear and end
/// on the trace with their Python functions; the parent waits on each
/// worker whose pipe it reads, and only on those (not on the worker whose
/// output it never reads, nor while it is in `wait`); the trace ends by
/// itself when the processes exit.
#[test]
fn trace_of_a_command_draws_workers_that_come_and_go_and_only_the_proven_waits() {
    let cwd = tempfile::tempdir().unwrap();
    let out = coldstart(cwd.path())
        .args(["trace", "--output", "chrome-json=t.json"])
        .args(["--output", "perfetto=out/t.perfetto-trace", "--"])
        .arg("sh")
        .arg(fixture("trace", "in_turn.sh"))
        .arg(support::python())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
        .expect("the parent is named")
        .0;
    let unread = *processes
        .iter()
        .find(|(_, n)| n.contains("short_worker.py unread"))
        .expect("the unread worker is on the trace")
        .0;
    assert_eq!(threads.get(&(root, root)).map(String::as_str), Some("sh"));
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
    assert_eq!(
        waits,
        vec![
            format!("waiting on worker {first}"),
            format!("waiting on worker {second}")
        ]
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
    let out = coldstart(cwd.path())
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
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
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

#[test]
fn trace_without_a_process_or_a_file_says_what_to_name() {
    let cwd = tempfile::tempdir().unwrap();
    coldstart(cwd.path())
        .args(["trace", "--output", "chrome-json=t.json"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "name a PID to attach to, or a command after `--`",
        ));
    coldstart(cwd.path())
        .args(["trace", "1"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--output"));
}
