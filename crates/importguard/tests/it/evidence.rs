//! Evidence that cannot be dodged, end to end: stand-in workers
//! (tests/fixtures/evidence/, each says what it simulates) run with the
//! import recorder and importtime through ready, health and shutdown; their
//! records are judged on the harness's timeline, and each case checks the
//! module, the line, the process and the phase the verdict gives, or the
//! missing evidence it reports.

use crate::support::{fixtures, python};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use importguard::importtime;
use importguard::recorder::{Channel, Recorder, Recording, Relation, SpawnKind};
use importguard::verdict::{
    Answering, Evidence, ImportStatus, MissingReason, Policy, ProcessVerdict, Violation,
    judge_answered,
};
use timeline::{ReadyMark, RequestMark, Stage, Timeline, monotonic_ns};

const TIMEOUT: Duration = Duration::from_secs(30);

fn script(name: &str) -> PathBuf {
    fixtures().join("evidence").join(name)
}

/// The 1-based line of `script` that carries `# [marker]`.
fn line(name: &str, marker: &str) -> u32 {
    let text = std::fs::read_to_string(script(name)).unwrap();
    let tag = format!("[{marker}]");
    let i = text
        .lines()
        .position(|l| l.contains('#') && l.contains(&tag))
        .unwrap_or_else(|| panic!("{name} has no {tag}"));
    u32::try_from(i + 1).unwrap()
}

/// A worker's process group, killed on drop (leftover children included).
struct Group(i32);

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group this test created.
        unsafe {
            libc::kill(-self.0, libc::SIGKILL);
        }
    }
}

/// What one run of a fixture gave.
struct Run {
    verdict: ProcessVerdict,
    recording: Recording,
    ready_pid: u32,
}

impl Run {
    fn torch(&self) -> Vec<&Violation> {
        self.verdict
            .violations
            .iter()
            .filter(|v| v.module == "torch")
            .collect()
    }
}

/// Runs `python FIXTURE ARGS` with the recorder and importtime through
/// ready, `health` health requests and shutdown, and judges it.
fn run_with(python: &OsString, name: &str, args: &[&str], health: usize) -> Run {
    let policy = Policy::new(
        ["torch", "transformers", "stanza"]
            .map(String::from)
            .to_vec(),
        Vec::new(),
    )
    .unwrap();
    let dir = fixtures();
    let pythonpath = format!(
        "{}:{}",
        dir.join("evidence").display(),
        dir.join("boundary/stand-ins").display()
    );
    let setup =
        Recorder::prepare(&policy.recorder_policy(false), Some(pythonpath.as_ref())).unwrap();
    let stderr_path = setup.dir().join("stderr.log");
    let mut command = vec![python.to_string_lossy().into_owned()];
    command.push(script(name).display().to_string());
    command.extend(args.iter().map(|a| a.to_string()));

    let mut cmd = Command::new(python);
    cmd.args(&command[1..])
        .envs(setup.env().iter().map(|(k, v)| (k, v)))
        .env("PYTHONPROFILEIMPORTTIME", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .process_group(0);
    let mut timeline = Timeline {
        spawned_ns: monotonic_ns(),
        ..Timeline::default()
    };
    let mut child = cmd.spawn().unwrap();
    let child_pid = child.id();
    let group = Group(child.id() as i32);
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let stderr = || std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let next = |what: &str| -> serde_json::Value {
        let l = rx
            .recv_timeout(TIMEOUT)
            .unwrap_or_else(|e| panic!("{name}: no {what} line ({e}); stderr:\n{}", stderr()));
        serde_json::from_str(&l).unwrap_or_else(|e| panic!("{name}: {what} line {l:?}: {e}"))
    };
    let ready = next("ready");
    let ready_pid = ready["pid"].as_u64().unwrap() as u32;
    timeline.ready = ready["t_ns"].as_u64().map(|t_ns| ReadyMark {
        read_ns: monotonic_ns(),
        t_ns: Some(t_ns),
    });
    for _ in 0..health {
        timeline.requests.push(RequestMark {
            op: "health".into(),
            sent_ns: monotonic_ns(),
            received_ns: None,
        });
        stdin.write_all(b"{\"op\": \"health\"}\n").unwrap();
        assert_eq!(next("health")["op"], "health");
    }
    timeline.end.shutdown_sent_ns = Some(monotonic_ns());
    stdin.write_all(b"{\"op\": \"shutdown\"}\n").unwrap();
    assert_eq!(next("shutdown")["op"], "shutdown");
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(child.wait());
    });
    let status = done_rx
        .recv_timeout(TIMEOUT)
        .expect("the worker did not exit");
    assert!(status.unwrap().success(), "{name}: stderr:\n{}", stderr());
    drop(group);

    let recording = setup.read().unwrap();
    let log = importtime::parse(&std::fs::read(&stderr_path).unwrap());
    let verdict = judge_answered(
        &policy,
        &Evidence {
            importtime: Some(&log),
            recording: Some(&recording),
            timeline: Some(&timeline),
        },
        &Answering {
            ready_pid: Some(ready_pid),
            spawned: Some(child_pid),
            command,
        },
    );
    Run {
        verdict,
        recording,
        ready_pid,
    }
}

fn run(name: &str, args: &[&str], health: usize) -> Run {
    run_with(&python().as_os_str().to_owned(), name, args, health)
}

#[track_caller]
fn at(frame: Option<&importguard::recorder::CallSite>, name: &str, marker: &str) {
    let f = frame.unwrap_or_else(|| panic!("no line, expected {name} [{marker}]"));
    assert!(f.file.ends_with(name), "{f} is not in {name}");
    assert_eq!(f.line, line(name, marker), "{f} is not {name} [{marker}]");
}

fn health1() -> Stage {
    Stage::Request {
        op: "health".into(),
        index: 1,
    }
}

#[test]
fn a_re_exec_with_a_scrubbed_environment_is_missing_evidence_not_a_pass() {
    let name = "reexec_scrubbed.py";
    let r = run(name, &[], 1);
    let v = &r.verdict;
    assert!(!v.holds(), "{v:#?}");
    let m = v.missing.as_ref().expect("missing evidence");
    assert_eq!(m.pid, Some(r.ready_pid));
    match &m.reason {
        MissingReason::ExecWithoutRecorder {
            from,
            at: line,
            dropped,
            ..
        } => {
            assert_eq!((from.pid, from.exec_gen), (r.ready_pid, 0));
            at(line.as_ref(), name, "exec");
            for var in ["COLDSTART_RECORD", "PYTHONPATH", "PYTHONPROFILEIMPORTTIME"] {
                assert!(dropped.iter().any(|d| d == var), "{var} not in {dropped:?}");
            }
        }
        other => panic!("{other:?}"),
    }
    let text = m.to_string();
    assert!(
        text.starts_with(&format!("no import evidence from pid {}", r.ready_pid))
            && text.contains("replaced itself with os.exec")
            && text.contains("a cleared environment"),
        "{text}"
    );
    // transformers was imported where nothing could see it: not a pass.
    assert!(v.violations.is_empty(), "{:#?}", v.violations);
}

#[test]
fn lazy_loader_executed_during_health_fails_in_health_with_both_lines() {
    let name = "lazy_health.py";
    let r = run(name, &[], 1);
    let torch = r.torch();
    assert_eq!(torch.len(), 1, "{:#?}", r.verdict);
    let t = torch[0];
    assert_eq!(t.status, ImportStatus::Loaded);
    assert_eq!(t.stage, Some(health1()));
    at(t.importer.as_ref(), name, "touched");
    let lazy = t.lazy.as_ref().expect("a lazy use");
    at(lazy.declared.as_ref(), name, "declared");
    at(lazy.made_real_at.as_ref(), name, "touched");
    assert_eq!(t.channel, Some(Channel::Audit));
    assert_eq!(t.process.as_ref().unwrap().relation, Relation::Root);
    assert!(t.beneath.iter().any(|b| b == "torch._C"), "{t:#?}");
    assert!(!r.verdict.probed.contains(&"torch".to_owned()));
    assert!(r.verdict.missing.is_none());
}

#[test]
fn the_lazy_loader_package_is_declared_at_the_workers_line_not_its_own() {
    let name = "lazy_loader_health.py";
    let r = run(name, &[], 1);
    let torch = r.torch();
    assert_eq!(torch.len(), 1, "{:#?}", r.verdict);
    let t = torch[0];
    assert_eq!(t.stage, Some(health1()));
    at(t.importer.as_ref(), name, "touched");
    at(t.lazy.as_ref().unwrap().declared.as_ref(), name, "declared");
}

#[test]
fn lazy_loader_declared_and_never_touched_passes() {
    let r = run("lazy_health.py", &["--untouched"], 1);
    assert!(r.verdict.holds(), "{:#?}", r.verdict);
    assert_eq!(r.verdict.lazy, ["torch"]);
}

#[test]
fn a_helper_interpreter_and_a_forked_child_at_start_up_are_judged_in_their_processes() {
    let name = "helper_startup.py";
    let r = run(name, &[], 1);
    let torch = r.torch();
    assert_eq!(torch.len(), 2, "{:#?}", r.verdict.violations);
    for t in &torch {
        assert_eq!(t.stage, Some(Stage::Startup), "{t:#?}");
        let p = t.process.as_ref().unwrap();
        assert_eq!(p.parent.map(|i| i.pid), Some(r.ready_pid), "{p:#?}");
        assert_ne!(p.image.pid, r.ready_pid);
    }
    let helper = torch
        .iter()
        .find(|t| t.process.as_ref().unwrap().relation == Relation::Child)
        .expect("the helper's violation");
    let p = helper.process.as_ref().unwrap();
    assert_eq!(p.spawn_kind, Some(SpawnKind::Subprocess));
    assert_eq!(p.command[1..], ["-c", "import torch"]);
    at(p.started_at.as_ref(), name, "subprocess");
    assert_eq!(helper.importer.as_ref().unwrap().to_string(), "<string>:1");
    let shown = p.to_string();
    assert!(
        shown.contains("-c 'import torch'")
            && shown.contains(&format!("a subprocess child of pid {}", r.ready_pid))
            && shown.contains("helper_startup.py:12"),
        "{shown}"
    );

    let forked = torch
        .iter()
        .find(|t| t.process.as_ref().unwrap().relation == Relation::Fork)
        .expect("the forked child's violation");
    at(
        forked.process.as_ref().unwrap().started_at.as_ref(),
        name,
        "fork",
    );
    at(forked.importer.as_ref(), name, "child import");
    at(
        forked.chain_lines.last().unwrap().as_ref(),
        name,
        "child import",
    );
    // The worker itself imported nothing forbidden.
    assert!(
        r.verdict
            .violations
            .iter()
            .all(|v| !v.process.as_ref().unwrap().is_worker())
    );
    assert_eq!(r.verdict.processes[0].relation, Relation::Root);
    assert!(r.verdict.processes.len() >= 3, "{:#?}", r.verdict.processes);
}

#[test]
fn a_rewritten_finder_list_is_seen_by_the_audit_hook_with_the_importing_line() {
    let name = "metapath_rewrite.py";
    let r = run(name, &[], 1);
    let torch = r.torch();
    assert_eq!(torch.len(), 1, "{:#?}", r.verdict.violations);
    let t = torch[0];
    assert_eq!(t.channel, Some(Channel::Audit));
    at(t.importer.as_ref(), name, "import");
    assert_eq!(t.stage, Some(Stage::Startup));
    assert_eq!(t.status, ImportStatus::Loaded);
}

#[test]
fn a_computed_name_through_builtins_import_is_seen_with_its_line() {
    let name = "computed_import.py";
    let r = run(name, &[], 1);
    let torch = r.torch();
    assert_eq!(torch.len(), 1, "{:#?}", r.verdict.violations);
    let t = torch[0];
    assert_eq!(t.channel, Some(Channel::Both));
    at(t.importer.as_ref(), name, "import");
    assert_eq!(t.stage, Some(health1()));
}

fn pool_case(method: &str, relation: Relation, kind: Option<SpawnKind>) {
    let name = "pool_health.py";
    let r = run(name, &[method], 1);
    let torch = r.torch();
    assert!(!torch.is_empty(), "{method}: {:#?}", r.verdict);
    for t in torch {
        let p = t.process.as_ref().unwrap();
        assert_eq!(p.relation, relation, "{method}: {p:#?}");
        assert_eq!(p.spawn_kind, kind, "{method}: {p:#?}");
        assert_eq!(p.parent.map(|i| i.pid), Some(r.ready_pid));
        at(p.started_at.as_ref(), name, "pool");
        at(t.importer.as_ref(), name, "worker import");
        assert_eq!(t.stage, Some(health1()), "{method}");
    }
}

#[test]
fn a_spawn_pool_started_in_health_is_judged_in_its_workers() {
    pool_case("spawn", Relation::Child, Some(SpawnKind::ForkExec));
}

#[test]
fn a_fork_pool_started_in_health_is_judged_in_its_workers() {
    pool_case("fork", Relation::Fork, None);
}

#[test]
fn an_execv_into_a_second_image_is_judged_in_that_image() {
    let name = "execv_second.py";
    let r = run(name, &[], 1);
    assert!(r.verdict.missing.is_none(), "{:#?}", r.verdict.missing);
    let torch = r.torch();
    assert_eq!(torch.len(), 1, "{:#?}", r.verdict.violations);
    let t = torch[0];
    let p = t.process.as_ref().unwrap();
    assert_eq!(p.relation, Relation::Exec);
    assert_eq!((p.image.pid, p.image.exec_gen), (r.ready_pid, 1));
    at(p.started_at.as_ref(), name, "exec");
    at(t.importer.as_ref(), name, "import");
    assert_eq!(t.stage, Some(Stage::Startup));
    // The first image's records end at its exec, without an exit.
    assert!(r.recording.exit.is_none());
    assert_eq!(r.recording.spawns.last().unwrap().kind, SpawnKind::Exec);
}

#[test]
fn pep_810_lazy_import_used_in_health_fails_with_both_lines_and_untouched_passes() {
    let Some(py) = test_interpreters::required(15, "PEP 810 `lazy import` case") else {
        return;
    };
    let py = py.into_os_string();
    let name = "lazy_import315.py";
    let r = run_with(&py, name, &[], 1);
    let torch = r.torch();
    assert_eq!(torch.len(), 1, "{:#?}", r.verdict);
    let t = torch[0];
    assert_eq!(t.stage, Some(health1()));
    at(t.importer.as_ref(), name, "touched");
    let lazy = t.lazy.as_ref().expect("a lazy use");
    at(lazy.declared.as_ref(), name, "declared");
    let r = run_with(&py, name, &["--untouched"], 1);
    assert!(r.verdict.holds(), "{:#?}", r.verdict);
    assert_eq!(r.verdict.lazy, ["torch"]);
}
