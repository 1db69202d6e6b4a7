//! Workers started through a launcher that forks and stays their parent,
//! as users start them: `uv run --no-sync --offline python -m app.MODULE`
//! in a project with its own `.venv`, and `bash -c "cd svc && python -m
//! app.MODULE; echo done"` (the `; echo done` keeps bash from exec'ing
//! Python). The project is `tests/fixtures/launcher/svc`, copied to a
//! temporary folder, with the stand-in torch of
//! `tests/fixtures/boundary/stand-ins` on `PYTHONPATH`. The check judges the
//! Python process that wrote the ready line, found below the launcher, and
//! names the launcher; where no Python below it reported, it stays an error
//! (exit 2), never a pass.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{self, code_and_text, copy_dir, fixtures, python, uv, uv_project};

/// A copy of the fixture: `svc/` (a uv project with its own `.venv`) in a
/// temporary folder, beside uv's cache.
struct Svc {
    dir: tempfile::TempDir,
}

impl Svc {
    fn new() -> Svc {
        let dir = tempfile::tempdir().unwrap();
        let svc = dir.path().join("svc");
        copy_dir(&fixtures().join("launcher/svc"), &svc);
        uv_project(&svc, "svc");
        Svc { dir }
    }

    fn svc(&self) -> PathBuf {
        self.dir.path().join("svc")
    }

    /// `coldstart ARGS -- uv run --no-sync --offline python FLAGS -m
    /// app.MODULE`, from the project's folder.
    fn under_uv(&self, args: &[&str], flags: &[&str], module: &str) -> (Option<i32>, String) {
        let mut cmd = self.coldstart(&self.svc(), args);
        cmd.arg(uv())
            .args(["run", "--no-sync", "--offline", "python"])
            .args(flags)
            .args(["-m", &format!("app.{module}")]);
        code_and_text(&mut cmd)
    }

    /// `coldstart ARGS -- bash -c "cd svc && PYTHON FLAGS -m app.MODULE;
    /// echo done"`, from the folder above the project.
    fn under_bash(&self, args: &[&str], flags: &str, module: &str) -> (Option<i32>, String) {
        let mut cmd = self.coldstart(self.dir.path(), args);
        cmd.args(["bash", "-c"]).arg(format!(
            "cd svc && '{}' {flags} -m app.{module}; echo done",
            python().display()
        ));
        code_and_text(&mut cmd)
    }

    /// `coldstart ARGS --` in `cwd`, stand-ins on `PYTHONPATH`, uv's cache
    /// in the temporary folder and no venv of the caller's active.
    fn coldstart(&self, cwd: &Path, args: &[&str]) -> Command {
        let mut cmd = crate::support::coldstart(cwd);
        cmd.args(args)
            .arg("--")
            .env(
                "PYTHONPATH",
                fixtures().join("boundary/stand-ins").as_os_str(),
            )
            .env("UV_CACHE_DIR", self.dir.path().join("uv-cache"))
            .env_remove("VIRTUAL_ENV");
        cmd
    }
}

const CHECK: &[&str] = &["check", "--processes", "2"];

/// Each process's line of the text report: answered by the Python below
/// `launcher`, named with its pid.
#[track_caller]
fn answered_through(text: &str, launcher: &str) {
    for index in 1..=2 {
        let line = text
            .lines()
            .find(|l| {
                l.trim_start()
                    .starts_with(&format!("process {index}: answered by pid "))
            })
            .unwrap_or_else(|| panic!("no answering process {index}: {text}"));
        assert!(
            line.contains(&format!(", started through {launcher} (pid ")),
            "{line}"
        );
    }
}

#[test]
fn a_clean_worker_under_uv_run_passes_answered_by_the_python_below_uv() {
    let s = Svc::new();
    let (code, text) = s.under_uv(CHECK, &[], "worker");
    assert_eq!(code, Some(0), "{text}");
    answered_through(&text, "uv");
    support::redactions().bind(|| insta::assert_snapshot!("clean_under_uv", text));

    // The JSON report: each process's answer, a pid below the one started.
    let (code, json) = s.under_uv(
        &["check", "--processes", "2", "--format", "json"],
        &[],
        "worker",
    );
    assert_eq!(code, Some(0), "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    for p in v["targets"][0]["processes"].as_array().unwrap() {
        let answered = &p["verdict"]["answered"];
        let through = answered["through"].as_array().unwrap();
        assert_eq!(through.len(), 1, "{answered:#}");
        assert_eq!(through[0]["name"], "uv", "{answered:#}");
        assert_eq!(through[0]["recorded"], false, "{answered:#}");
        assert_eq!(through[0]["pid"], p["pid"], "uv is the process started");
        assert_ne!(answered["pid"], p["pid"], "{answered:#}");
        assert_eq!(answered["command"][1], "-m", "{answered:#}");
    }
}

#[test]
fn an_eager_worker_under_uv_run_fails_with_its_chain() {
    let s = Svc::new();
    let (code, text) = s.under_uv(CHECK, &[], "eager");
    assert_eq!(code, Some(1), "{text}");
    answered_through(&text, "uv");
    support::redactions().bind(|| insta::assert_snapshot!("eager_under_uv", text));

    // --suggest reads the files with the Python below uv (the command
    // names uv) and verifies the cut through uv on a patched copy.
    let (code, text) = s.under_uv(&["check", "--processes", "1", "--suggest"], &[], "eager");
    assert_eq!(code, Some(1), "{text}");
    support::redactions().bind(|| insta::assert_snapshot!("eager_under_uv_suggest", text));
}

#[test]
fn a_shell_that_stays_the_parent_is_the_launcher_of_a_clean_and_an_eager_worker() {
    let s = Svc::new();
    let (code, text) = s.under_bash(CHECK, "", "worker");
    assert_eq!(code, Some(0), "{text}");
    answered_through(&text, "bash");

    let (code, text) = s.under_bash(CHECK, "", "eager");
    assert_eq!(code, Some(1), "{text}");
    answered_through(&text, "bash");
    support::redactions().bind(|| insta::assert_snapshot!("eager_under_bash", text));
}

#[test]
fn below_a_launcher_no_python_that_reported_is_never_a_pass() {
    let s = Svc::new();
    // -E: the Python below uv ignores PYTHONPATH, so no recorder and no
    // importtime in it; the flags are read after uv's own words.
    let (code, text) = s.under_uv(&["check", "--processes", "1"], &["-E"], "worker");
    assert_eq!(code, Some(2), "{text}");
    support::redactions().bind(|| insta::assert_snapshot!("isolated_under_uv", text));

    let (code, text) = s.under_bash(&["check", "--processes", "1"], "-E", "worker");
    assert_eq!(code, Some(2), "{text}");
    support::redactions().bind(|| insta::assert_snapshot!("isolated_under_bash", text));

    // The recorder ran below uv, but the ready line gives no pid: nothing
    // says which process answered.
    let (code, text) = s.under_uv(&["check", "--processes", "1"], &[], "nopid");
    assert_eq!(code, Some(2), "{text}");
    support::redactions().bind(|| insta::assert_snapshot!("no_pid_under_uv", text));
}

/// `check --output chrome-json=`: the process started (uv) holds the
/// worker's phases and the protocol's messages, named as the launcher it
/// is; the Python below it, whose imports they are, holds the imports on a
/// track of its own, the forbidden one apart.
#[test]
fn a_check_trace_under_uv_run_draws_the_python_below_uv_with_its_imports() {
    let s = Svc::new();
    let trace = s.dir.path().join("t.json");
    let output = format!("chrome-json={}", trace.display());
    let (code, text) = s.under_uv(
        &["check", "--processes", "1", "--output", &output],
        &[],
        "eager",
    );
    assert_eq!(code, Some(1), "{text}");
    let events = crate::support::chrome_events(&trace);
    let (processes, _) = crate::support::names(&events);
    let pid_named = |prefix: &str| -> u64 {
        let found: Vec<u64> = processes
            .iter()
            .filter(|(_, name)| name.starts_with(prefix))
            .map(|(pid, _)| *pid)
            .collect();
        assert_eq!(found.len(), 1, "one {prefix}: {processes:?}");
        found[0]
    };
    let uv = pid_named("uv ");
    let python = pid_named("python ");
    assert_eq!(processes[&uv], format!("uv {uv} (launcher)"));
    assert_eq!(
        processes[&python],
        format!("python {python} (below uv {uv})")
    );
    let on = |pid: u64, cat: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["pid"] == pid && e["cat"] == cat)
            .map(|e| e["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(on(uv, "phase"), ["start-up", "ready", "shutting down"]);
    assert!(on(uv, "import").is_empty(), "uv imports nothing");
    assert!(
        on(python, "phase").is_empty(),
        "the phases are the launcher's"
    );
    let imports = on(python, "import");
    for module in ["app", "app.model", "app.protocol"] {
        assert!(imports.iter().any(|m| m == module), "{module}: {imports:?}");
    }
    assert_eq!(on(python, "forbidden"), ["torch", "torch._C"]);
    // The report says the same processes.
    assert!(
        text.contains(&format!(
            "answered by pid {python} (python), started through uv (pid {uv})"
        )),
        "{text}"
    );
}
