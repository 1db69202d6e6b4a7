//! The check, as far as these tests need it: a worker run with the import
//! recorder and `-X importtime`, sent `health` and `shutdown` (and any other
//! request), judged by importguard with `torch` forbidden. Also the fixture
//! paths and the interpreters.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use importguard::importtime;
use importguard::recorder::Recorder;
use importguard::verdict::{self, Evidence, Policy, Violation};
use suggest::VerifyOutcome;

/// `tests/fixtures/suggest` of the workspace.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/suggest")
}

/// One fixture project's root.
pub fn project(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// The real interpreter behind `python3` (or `$COLDSTART_PYTHON`): the
/// one lookup, `test_interpreters::default_python`.
pub use test_interpreters::default_python as python;

/// A Python `3.<minor>` for a case: the workspace's one lookup
/// (`$COLDSTART_PYTHON3_<minor>`, the one `cargo xtask test` provisions,
/// PATH, pyenv), failing the case under `cargo xtask test` when missing.
pub use test_interpreters::required;

/// What one worker run gave.
#[derive(Debug)]
pub struct Run {
    /// The judged violations.
    pub violations: Vec<Violation>,
    /// The worker's replies, one JSON value per stdout line.
    pub replies: Vec<serde_json::Value>,
    /// `None` when the handshake was right (ready, the replies, shutdown
    /// acknowledged, exit 0); else what went wrong.
    pub handshake_error: Option<String>,
}

impl Run {
    /// As the verification callback reports it.
    pub fn outcome(self) -> VerifyOutcome {
        match self.handshake_error {
            Some(e) => VerifyOutcome::handshake_failed(e),
            None => VerifyOutcome::checked(self.violations),
        }
    }
}

/// Runs `python -m worker` in `root` (the project on PYTHONPATH, with the
/// fixtures' protocol loop and stand-in torch), sends `requests` then
/// `shutdown`, and judges what it imported with `torch` forbidden.
pub fn run_worker(python: &Path, root: &Path, worker: &str, requests: &[&str]) -> Run {
    let policy = Policy::new(vec!["torch".into()], vec![]).unwrap();
    let path = std::env::join_paths([
        root.to_path_buf(),
        fixtures().join("support"),
        fixtures().join("stand-ins"),
    ])
    .unwrap();
    let setup = Recorder::prepare(&policy.recorder_policy(false), Some(&path)).unwrap();
    let mut cmd = Command::new(python);
    cmd.args(["-B", "-m", worker])
        .current_dir(root)
        .env("PYTHONPROFILEIMPORTTIME", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in setup.env() {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        for r in requests.iter().chain(&[r#"{"op": "shutdown"}"#]) {
            // A worker that died early closes the pipe: the run says so below.
            let _ = writeln!(stdin, "{r}");
        }
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let replies: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let ready = replies.first().is_some_and(|r| r["ready"] == true);
    let acked = replies.last().is_some_and(|r| r["op"] == "shutdown");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let handshake_error = (!(ready && acked && out.status.success())
        || replies.len() != requests.len() + 2)
        .then(|| {
            let own: Vec<&str> = stderr
                .lines()
                .filter(|l| !l.starts_with("import time:"))
                .collect();
            format!(
                "{} exited {}; stdout: {stdout}; stderr: {}",
                worker,
                out.status,
                own.join("\n")
            )
        });
    let log = importtime::parse(&out.stderr);
    let recording = setup.read().unwrap();
    let v = verdict::judge(
        &policy,
        &Evidence {
            importtime: Some(&log),
            recording: Some(&recording),
            timeline: None,
        },
    );
    Run {
        violations: v.violations,
        replies,
        handshake_error,
    }
}

/// The check on a project: its worker through ready, health and shutdown.
pub fn check(python: &Path, root: &Path, worker: &str) -> Run {
    run_worker(python, root, worker, &[r#"{"op": "health"}"#])
}

/// The single torch violation of a project's worker.
pub fn violation(python: &Path, root: &Path, worker: &str) -> Violation {
    let run = check(python, root, worker);
    assert_eq!(
        run.handshake_error, None,
        "the fixture worker must work as it is"
    );
    assert_eq!(run.violations.len(), 1, "{:#?}", run.violations);
    run.violations.into_iter().next().unwrap()
}

/// Runs `code` with the project (or its patched copy) on PYTHONPATH and
/// returns stdout; panics with stderr when it fails.
pub fn python_code(python: &Path, root: &Path, code: &str) -> String {
    let path = std::env::join_paths([
        root.to_path_buf(),
        fixtures().join("support"),
        fixtures().join("stand-ins"),
    ])
    .unwrap();
    let out = Command::new(python)
        .args(["-B", "-c", code])
        .current_dir(root)
        .env("PYTHONPATH", path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python -c failed:\n{code}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `git apply --check` and `patch -p1 --dry-run` of `diff` in a plain copy
/// of `root` (outside any repository).
pub fn tools_accept(root: &Path, diff: &str) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("p");
    copy_py(root, &copy);
    let patch = dir.path().join("cut.diff");
    std::fs::write(&patch, diff).unwrap();
    for args in [
        vec!["git", "apply", "--check"],
        vec!["patch", "-p1", "--dry-run", "--quiet", "-i"],
    ] {
        let out = Command::new(args[0])
            .args(&args[1..])
            .arg(&patch)
            .current_dir(&copy)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} refused the patch:\n{diff}\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A plain copy of a fixture project (no `__pycache__`).
pub fn copy_tree(from: &Path, to: &Path) {
    copy_py(from, to);
}

fn copy_py(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            if e.file_name() != "__pycache__" {
                copy_py(&p, &to.join(e.file_name()));
            }
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}
