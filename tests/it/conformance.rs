//! The reference worker against the protocol, with the real interpreter.
//!
//! Drives `python -m refworker` over plain `std::process` pipes (no harness
//! crate in between), reads every stdout line through `worker_proto`'s
//! `FrameReader` and requires each one to be a protocol message: the worker
//! must never write noise. Every exchange shown in `docs/protocol.md` is
//! checked here.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;

use serde_json::{Value, json};
use timeline::monotonic_ns;
use worker_proto::{
    FrameReader, HealthStatus, Inbound, Message, Ready, Reply, Request, TimedLine, encode,
};

use crate::support;

/// The built-in default's flags: no models, cpu without probing CUDA.
const DEFAULT_FLAGS: &[&str] = &["--test-echo", "--profile", "gpu", "--force-cpu"];

/// A running reference worker; killed and reaped if a test fails midway.
struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: FrameReader<ChildStdout>,
    stderr: Option<JoinHandle<String>>,
    /// Every stdout line seen, classified.
    seen: Vec<Message>,
}

impl Worker {
    fn spawn(flags: &[&str]) -> Worker {
        Worker::spawn_on(
            Command::new(support::python()).args(["-m", "refworker"]),
            &[],
            flags,
        )
    }

    /// Spawns `cmd` with `flags`, `worker/` and then `extra` on PYTHONPATH.
    fn spawn_on(cmd: &mut Command, extra: &[PathBuf], flags: &[&str]) -> Worker {
        let paths = std::iter::once(support::worker_dir()).chain(extra.iter().cloned());
        cmd.args(flags)
            .env("PYTHONPATH", std::env::join_paths(paths).unwrap())
            .env_remove("PYTHONPROFILEIMPORTTIME")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {cmd:?}: {e}"));
        let stdin = child.stdin.take();
        let stdout = FrameReader::new(child.stdout.take().unwrap()).with_clock(monotonic_ns);
        let mut err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
        });
        Worker {
            child,
            stdin,
            stdout,
            stderr: Some(stderr),
            seen: Vec::new(),
        }
    }

    /// The next stdout line, which must be a protocol message.
    #[track_caller]
    fn recv_frame(&mut self) -> (Message, TimedLine) {
        let frame = self
            .stdout
            .next_frame()
            .expect("reading the worker's stdout")
            .unwrap_or_else(|| panic!("stdout ended early; stderr:\n{}", self.stderr_now()));
        let msg = match frame.line.classify(self.stdout.cap()) {
            Ok(Inbound::Message(m)) => m,
            other => panic!(
                "stdout carried a non-protocol line {:?}: {other:?}",
                frame.line
            ),
        };
        self.seen.push(msg.clone());
        (msg, frame)
    }

    #[track_caller]
    fn recv(&mut self) -> Message {
        self.recv_frame().0
    }

    #[track_caller]
    fn ready(&mut self) -> Ready {
        match self.recv() {
            Message::Ready(r) => r,
            other => panic!("expected the ready line, got {other:?}"),
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("writing to the worker");
        stdin.flush().unwrap();
    }

    fn send(&mut self, req: &Request) {
        self.send_raw(&encode(req));
    }

    #[track_caller]
    fn call(&mut self, req: &Request) -> Reply {
        self.send(req);
        match self.recv() {
            Message::Reply(r) => r,
            other => panic!("expected a reply to {req:?}, got {other:?}"),
        }
    }

    #[track_caller]
    fn call_json(&mut self, req: Value) -> Value {
        let Value::Object(mut map) = req else {
            panic!("a request is an object")
        };
        let op = map.remove("op").unwrap();
        let reply = self.call(&Request::new(op.as_str().unwrap(), map));
        Value::Object(reply.to_object())
    }

    fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// Waits for the exit, then checks that stdout holds nothing more.
    #[track_caller]
    fn finish(mut self) -> (ExitStatus, String) {
        self.close_stdin();
        let rest: Vec<_> = std::iter::from_fn(|| self.stdout.next_frame().unwrap())
            .map(|f| f.line)
            .collect();
        let status = self.child.wait().expect("waiting for the worker");
        let stderr = self.stderr.take().unwrap().join().unwrap();
        assert!(
            rest.is_empty(),
            "stdout went on after the last reply: {rest:?}\nstderr:\n{stderr}"
        );
        (status, stderr)
    }

    fn stderr_now(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[track_caller]
fn response(reply: &Value) -> &serde_json::Map<String, Value> {
    reply["response"]
        .as_object()
        .unwrap_or_else(|| panic!("no response object in {reply}"))
}

#[test]
fn ready_line_carries_pid_transport_and_a_stamp_on_the_harness_clock() {
    let before = monotonic_ns();
    let mut w = Worker::spawn(DEFAULT_FLAGS);
    let (msg, frame) = w.recv_frame();
    let Message::Ready(ready) = msg else {
        panic!("the first line must be the ready line, got {msg:?}")
    };
    assert!(ready.ready);
    assert_eq!(ready.pid, Some(w.child.id()), "pid is the worker's own");
    assert_eq!(ready.extra.get("transport"), Some(&json!("stdio")));
    let t_ns = ready.t_ns.expect("the ready line has t_ns");
    let read_at = frame.read_at_ns.expect("the reader stamps frames");
    assert!(
        before <= t_ns && t_ns <= read_at,
        "t_ns {t_ns} is not between the spawn ({before}) and the read ({read_at}): \
         not CLOCK_MONOTONIC?"
    );
    assert_eq!(
        ready.extra.keys().collect::<Vec<_>>(),
        ["transport"],
        "the ready line is exactly ready, pid, transport, t_ns"
    );
    w.send(&Request::shutdown());
    assert_eq!(
        w.recv(),
        Message::Reply(Reply::Shutdown(Default::default()))
    );
    let (status, _) = w.finish();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn health_round_trip_reports_ok() {
    let mut w = Worker::spawn(DEFAULT_FLAGS);
    let ready = w.ready();
    for _ in 0..3 {
        let Reply::Health(h) = w.call(&Request::health()) else {
            panic!("a health request gets a health reply")
        };
        assert_eq!(h.response.status, HealthStatus::Ok);
        assert_eq!(h.response.extra["pid"], json!(ready.pid.unwrap()));
        assert_eq!(h.response.extra["device"], "cpu");
        assert_eq!(h.response.extra["model_loaded"], false);
    }
    w.close_stdin();
    assert_eq!(w.finish().0.code(), Some(0));
}

#[test]
fn capabilities_lists_ops_and_profile() {
    let mut w = Worker::spawn(&[
        "--test-echo",
        "--profile",
        "stanza",
        "--task",
        "ner",
        "--lang",
        "de",
    ]);
    w.ready();
    let reply = w.call_json(json!({"op": "capabilities", "id": "c1"}));
    assert_eq!(reply["op"], "capabilities");
    assert_eq!(reply["id"], "c1", "the request's id is echoed");
    let r = response(&reply);
    assert_eq!(
        r["ops"],
        json!(["health", "capabilities", "load", "infer", "shutdown"])
    );
    assert_eq!(r["profiles"], json!(["gpu", "stanza", "io"]));
    assert_eq!(r["profile"], "stanza");
    assert_eq!(r["requires"], json!(["stanza"]));
    assert_eq!((&r["task"], &r["lang"]), (&json!("ner"), &json!("de")));
    assert_eq!(r["test_echo"], true);
    assert_eq!(r["max_line_bytes"], json!(worker_proto::MAX_LINE_BYTES));
    w.close_stdin();
    assert_eq!(w.finish().0.code(), Some(0));
}

#[test]
fn unknown_ops_and_malformed_lines_get_error_replies_and_the_worker_goes_on() {
    let mut w = Worker::spawn(DEFAULT_FLAGS);
    w.ready();
    let cases: &[(&[u8], &str)] = &[
        (b"{\"op\": \"bogus\"}\n", "unknown op: 'bogus'"),
        (b"not json\n", "malformed request: not JSON"),
        (b"{\"op\": \"health\"\n", "malformed request: not JSON"),
        (
            b"[1, 2]\n",
            "malformed request: expected a JSON object, got list",
        ),
        (
            b"{\"text\": \"no op\"}\n",
            "malformed request: missing string field \"op\"",
        ),
        (
            b"{\"op\": 7}\n",
            "malformed request: missing string field \"op\"",
        ),
        (
            b"{\"op\": \"h\xffealth\"}\n",
            "malformed request: not UTF-8",
        ),
    ];
    for (line, want) in cases {
        w.send_raw(line);
        let Message::Reply(Reply::Error(e)) = w.recv() else {
            panic!("{line:?} must get an error reply")
        };
        assert!(e.error.starts_with(want), "{line:?}: {:?}", e.error);
    }
    // The seed system's exact shape for an unknown op.
    let reply = w.call_json(json!({"op": "bogus"}));
    assert_eq!(
        reply,
        json!({"op": "error", "error": "unknown op: 'bogus'"})
    );
    // Blank lines are tolerated and not answered; CRLF is accepted.
    w.send_raw(b"\n  \n{\"op\": \"health\"}\r\n");
    assert!(matches!(w.recv(), Message::Reply(Reply::Health(_))));
    w.send(&Request::shutdown());
    assert_eq!(
        w.recv(),
        Message::Reply(Reply::Shutdown(Default::default()))
    );
    assert_eq!(w.finish().0.code(), Some(0));
}

#[test]
fn an_over_long_request_line_gets_an_error_reply() {
    let mut w = Worker::spawn(DEFAULT_FLAGS);
    w.ready();
    let mut line = br#"{"op": "infer", "text": ""#.to_vec();
    line.resize(worker_proto::MAX_LINE_BYTES + 10, b'x');
    line.extend_from_slice(b"\"}\n");
    let len = line.len() - 1;
    // Write from another thread: the worker answers only after the whole
    // line, and the pipe holds far less than a mebibyte.
    let mut stdin = w.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        stdin.write_all(&line).unwrap();
        stdin
    });
    let Message::Reply(Reply::Error(e)) = w.recv() else {
        panic!("an over-long line must get an error reply")
    };
    assert_eq!(
        e.error,
        format!(
            "request line of {len} bytes exceeds the {}-byte cap; send one JSON object per line, smaller",
            worker_proto::MAX_LINE_BYTES
        )
    );
    w.stdin = Some(writer.join().unwrap());
    let Reply::Health(h) = w.call(&Request::health()) else {
        panic!("the worker goes on after an over-long line")
    };
    assert!(h.response.status.is_ok());
    assert_eq!(w.finish().0.code(), Some(0));
}

#[test]
fn shutdown_is_acknowledged_then_the_worker_exits_0() {
    let mut w = Worker::spawn(DEFAULT_FLAGS);
    w.ready();
    w.send(&Request::shutdown());
    // Exactly the seed system's ack.
    let ack = w.recv();
    assert_eq!(
        Value::Object(match &ack {
            Message::Reply(r) => r.to_object(),
            other => panic!("{other:?}"),
        }),
        json!({"op": "shutdown"})
    );
    // The worker exits on its own, with stdin still open.
    let status = w.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let (_, stderr) = w.finish();
    assert!(stderr.contains("shutdown acknowledged"), "{stderr}");
}

#[test]
fn eof_on_stdin_ends_the_worker_with_exit_0() {
    let mut w = Worker::spawn(DEFAULT_FLAGS);
    w.ready();
    w.close_stdin();
    let (status, stderr) = w.finish();
    assert_eq!(status.code(), Some(0));
    assert!(stderr.contains("stdin closed"), "{stderr}");
}

#[test]
fn infer_echoes_and_load_with_profile_io_loads_nothing_heavy() {
    let mut w = Worker::spawn(&["--profile", "io", "--task", "ner"]);
    w.ready();
    let reply = w.call_json(json!({"op": "infer", "text": "héllo", "id": 1}));
    let r = response(&reply);
    assert_eq!(r["echo"], json!({"text": "héllo"}));
    assert_eq!(
        r["model"], "refworker-echo-io",
        "without --test-echo infer loads on demand"
    );
    let span = &r["evidence"]["spans"][0];
    assert_eq!(
        (&span["start"], &span["end"], &span["text"]),
        (&json!(0), &json!(5), &json!("héllo"))
    );
    let reply = w.call_json(json!({"op": "load"}));
    let r = response(&reply);
    assert_eq!(r["status"], "loaded");
    assert_eq!(r["already_loaded"], true);
    assert_eq!(r["runtime"], json!({}));
    assert_eq!(w.finish().0.code(), Some(0));
}

/// Whether `module` can be imported by the test interpreter.
fn installed(module: &str) -> bool {
    let out = Command::new(support::python())
        .args(["-c", "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 3)"])
        .arg(module)
        .output()
        .unwrap();
    match out.status.code() {
        Some(0) => true,
        Some(3) => false,
        _ => panic!("asking the interpreter about {module} failed: {out:?}"),
    }
}

#[test]
fn load_with_profile_gpu_names_the_missing_torch() {
    assert!(
        !installed("torch"),
        "this test needs an interpreter without torch; {} has it",
        support::python().display()
    );
    let mut w = Worker::spawn(DEFAULT_FLAGS);
    w.ready();
    let reply = w.call_json(json!({"op": "load", "id": 9}));
    assert_eq!(reply["op"], "error", "{reply}");
    assert_eq!(reply["missing"], "torch");
    assert_eq!(reply["id"], 9);
    assert_eq!(
        reply["error"],
        "cannot load the gpu profile: torch is not installed; install torch and transformers \
         in this interpreter, or run with --profile io"
    );
    // Still serving, still no model.
    let Reply::Health(h) = w.call(&Request::health()) else {
        panic!("health after a failed load")
    };
    assert_eq!(h.response.extra["model_loaded"], false);
    assert_eq!(w.finish().0.code(), Some(0));
}

/// Runs the worker under a `-c` wrapper that records every import attempt
/// (a `sys.meta_path` finder placed first, which sees imports of packages
/// that are not installed too) and dumps `sys.modules` at exit.
fn imports_of(flags: &[&str], requests: &[Request]) -> (Vec<String>, Vec<String>) {
    imports_on(&[], flags, requests)
}

/// [`imports_of`] with `extra` on PYTHONPATH.
fn imports_on(
    extra: &[PathBuf],
    flags: &[&str],
    requests: &[Request],
) -> (Vec<String>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let report: PathBuf = dir.path().join("imports.json");
    let mut cmd = Command::new(support::python());
    cmd.args(["-c", IMPORT_SPY])
        .env("REFWORKER_IMPORT_REPORT", &report);
    let mut w = Worker::spawn_on(&mut cmd, extra, flags);
    w.ready();
    for req in requests {
        w.send(req);
        w.recv();
    }
    w.send(&Request::shutdown());
    w.recv();
    let (status, stderr) = w.finish();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let report = read_json(&report);
    let strings = |key: &str| -> Vec<String> {
        report[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    (strings("attempted"), strings("modules"))
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("the import report {} is missing: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

const IMPORT_SPY: &str = r#"
import json, os, runpy, sys
attempted = []
class Spy:
    def find_spec(self, name, path=None, target=None):
        attempted.append(name)
        return None
sys.meta_path.insert(0, Spy())
sys.argv[0] = "refworker"
try:
    runpy.run_module("refworker", run_name="__main__", alter_sys=True)
finally:
    with open(os.environ["REFWORKER_IMPORT_REPORT"], "w") as f:
        json.dump({"attempted": attempted, "modules": sorted(sys.modules)}, f)
"#;

const HEAVY: &[&str] = &["torch", "transformers", "stanza"];

fn heavy(names: &[String]) -> Vec<&str> {
    names
        .iter()
        .map(String::as_str)
        .filter(|n| HEAVY.contains(&n.split('.').next().unwrap()))
        .collect()
}

#[test]
fn the_default_worker_imports_no_model_runtime() {
    let (attempted, modules) = imports_of(
        DEFAULT_FLAGS,
        &[
            Request::health(),
            Request::new("capabilities", Default::default()),
        ],
    );
    // The spy saw the worker's own imports, so it was really in place.
    assert!(
        attempted.iter().any(|m| m == "refworker.worker"),
        "{attempted:?}"
    );
    assert!(
        modules.iter().any(|m| m == "refworker.evidence"),
        "{modules:?}"
    );
    assert_eq!(
        heavy(&attempted),
        Vec::<&str>::new(),
        "attempted at start-up"
    );
    assert_eq!(
        heavy(&modules),
        Vec::<&str>::new(),
        "in sys.modules at exit"
    );
    assert!(
        !modules.iter().any(|m| m.starts_with("refworker.models.")),
        "model code was imported: {modules:?}"
    );
    // Lean start-up: no event loop machinery.
    assert!(!modules.iter().any(|m| m == "asyncio"), "{modules:?}");
}

#[test]
fn the_spy_sees_torch_when_the_worker_does_reach_for_it() {
    // Without --force-cpu, device detection tries torch at start-up.
    let (attempted, _) = imports_of(&["--test-echo", "--profile", "gpu"], &[]);
    assert_eq!(heavy(&attempted), ["torch"]);
    // With it, only the load request reaches for the model code.
    let (attempted, modules) =
        imports_of(DEFAULT_FLAGS, &[Request::new("load", Default::default())]);
    assert_eq!(heavy(&attempted), ["torch"]);
    assert!(
        attempted.iter().any(|m| m == "refworker.models.infer"),
        "{attempted:?}"
    );
    assert!(
        !modules.iter().any(|m| m == "refworker.models.infer"),
        "a failed import is not kept"
    );
}

#[test]
fn stdout_carries_nothing_but_protocol_lines() {
    let mut w = Worker::spawn(&["--profile", "io", "--log-level", "debug"]);
    w.ready();
    for req in [
        json!({"op": "health"}),
        json!({"op": "capabilities"}),
        json!({"op": "load"}),
        json!({"op": "infer", "text": "x"}),
        json!({"op": "bogus"}),
    ] {
        w.call_json(req);
    }
    w.send_raw(b"junk\n");
    w.recv();
    w.send(&Request::shutdown());
    w.recv();
    let seen = w.seen.len();
    let (status, stderr) = w.finish();
    assert_eq!(status.code(), Some(0));
    // ready + 5 replies + 1 error + ack, each classified as a message by recv.
    assert_eq!(seen, 8);
    assert!(stderr.contains("refworker["), "logs go to stderr: {stderr}");
}

/// Stand-in torch, transformers and stanza (marked as such in their
/// `__init__.py`), so `load` can succeed without the real packages.
fn standins() -> PathBuf {
    support::fixtures().join("conformance").join("standins")
}

#[test]
fn load_imports_the_profile_model_code_only_when_asked() {
    let load = Request::new("load", Default::default());
    // gpu: nothing heavy until load, then torch and transformers for real.
    let (attempted, modules) = imports_on(&[standins()], DEFAULT_FLAGS, &[]);
    assert_eq!(heavy(&attempted), Vec::<&str>::new());
    assert_eq!(heavy(&modules), Vec::<&str>::new());
    let (_, modules) = imports_on(&[standins()], DEFAULT_FLAGS, std::slice::from_ref(&load));
    assert_eq!(heavy(&modules), ["torch", "transformers"]);
    assert!(modules.iter().any(|m| m == "refworker.models.infer"));
    // stanza: only stanza.
    let (_, modules) = imports_on(
        &[standins()],
        &["--profile", "stanza"],
        std::slice::from_ref(&load),
    );
    assert_eq!(heavy(&modules), ["stanza"]);
    // io: nothing heavy even after load.
    let (attempted, _) = imports_on(&[standins()], &["--profile", "io"], &[load]);
    assert_eq!(heavy(&attempted), Vec::<&str>::new());
}

#[test]
fn load_answers_with_the_model_and_its_runtime() {
    let mut cmd = Command::new(support::python());
    cmd.args(["-m", "refworker"]);
    let mut w = Worker::spawn_on(&mut cmd, &[standins()], DEFAULT_FLAGS);
    w.ready();
    let reply = w.call_json(json!({"op": "load"}));
    let r = response(&reply);
    assert_eq!(r["status"], "loaded", "{reply}");
    assert_eq!(r["already_loaded"], false);
    assert_eq!(r["model"], "refworker-echo-gpu");
    assert_eq!(r["device"], "cpu");
    assert_eq!(
        r["runtime"],
        json!({"torch": "0.0.0+standin", "transformers": "0.0.0+standin"})
    );
    assert!(r["load_ns"].as_u64().is_some());
    // Once loaded, the model answers infer, --test-echo or not.
    let reply = w.call_json(json!({"op": "infer", "text": "hi"}));
    assert_eq!(response(&reply)["model"], "refworker-echo-gpu");
    assert_eq!(response(&reply)["evidence"]["model"], "refworker-echo-gpu");
    let Reply::Health(h) = w.call(&Request::health()) else {
        panic!("health after load")
    };
    assert_eq!(h.response.extra["model_loaded"], true);
    assert_eq!(w.finish().0.code(), Some(0));
}

#[test]
fn device_detection_imports_torch_only_without_force_cpu() {
    let (_, modules) = imports_on(&[standins()], &["--test-echo", "--profile", "gpu"], &[]);
    assert_eq!(heavy(&modules), ["torch"], "probing CUDA imports torch");
    let (attempted, _) = imports_on(&[standins()], &["--test-echo", "--profile", "stanza"], &[]);
    assert_eq!(
        heavy(&attempted),
        Vec::<&str>::new(),
        "only the gpu profile probes"
    );
}
