//! Evidence that cannot be dodged, through the check as users run it: the
//! stand-in workers of `tests/fixtures/evidence` (each says what it
//! simulates) with the stand-in torch of `tests/fixtures/boundary/stand-ins`.
//! Every case runs with the default interpreter, and once more with Python
//! 3.15 (PEP 810 `lazy import` and the recorder's hooks on 3.15) where one is
//! found. Each report is checked whole, as a snapshot through the one
//! redaction (`support::redactions`) with the interpreter's path as
//! `[PYTHON]`: both interpreters must print the same report.

use std::path::Path;

use crate::support::{self, fixtures, python, xtask};

/// `text`, the report of the check run with `py`, against the snapshot
/// `name`.
#[track_caller]
fn assert_report(name: &str, py: &Path, text: &str) {
    let py = py.display().to_string();
    let mut text = text.replace(&py, "[PYTHON]");
    // A command line shortens a long argument to its start and `…`.
    for end in (8..py.len()).rev().filter(|&e| py.is_char_boundary(e)) {
        text = text.replace(&format!("{}…", &py[..end]), "[PYTHON]");
    }
    support::redactions().bind(|| insta::assert_snapshot!(name, text));
}

/// `cargo xtask check --processes 1 -- PY FIXTURE ARGS`: exit
/// code and the text report.
fn check_with(py: &Path, fixture: &str, args: &[&str]) -> (i32, String) {
    let dir = fixtures().join("evidence");
    let out = xtask()
        .current_dir(&dir)
        .env(
            "PYTHONPATH",
            format!(".:{}", fixtures().join("boundary/stand-ins").display()),
        )
        // A multiprocessing child's command line, which the reports quote,
        // carries `-B` when the parent writes no bytecode: set here, not
        // taken from whoever runs the suite (and no `.pyc` lands in the
        // fixtures).
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args(["check", "--processes", "1", "--"])
        .arg(py)
        .arg(fixture)
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!(
        "{} {fixture}: exit {:?}\n{text}",
        py.display(),
        out.status.code()
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn a_re_exec_with_a_scrubbed_environment_is_an_error_that_says_why_never_a_pass() {
    re_exec_scrubbed(python());
}

fn re_exec_scrubbed(py: &Path) {
    let (code, text) = check_with(py, "reexec_scrubbed.py", &[]);
    assert_eq!(code, 2, "{text}");
    assert_report("reexec_scrubbed", py, &text);
}

#[test]
fn a_helper_interpreter_and_a_forked_child_are_judged_in_their_own_processes() {
    helper_and_fork(python());
}

fn helper_and_fork(py: &Path) {
    let (code, text) = check_with(py, "helper_startup.py", &[]);
    assert_eq!(code, 1, "{text}");
    assert_report("helper_startup", py, &text);
}

#[test]
fn a_lazy_module_made_real_in_health_is_loaded_there_from_the_touching_line() {
    lazy_loader_in_health(python());
}

fn lazy_loader_in_health(py: &Path) {
    let (code, text) = check_with(py, "lazy_health.py", &[]);
    assert_eq!(code, 1, "{text}");
    assert_report("lazy_health", py, &text);
}

#[test]
fn imports_around_the_finder_still_name_their_line() {
    around_the_finder(python());
}

fn around_the_finder(py: &Path) {
    for fixture in ["metapath_rewrite.py", "computed_import.py"] {
        let (code, text) = check_with(py, fixture, &[]);
        assert_eq!(code, 1, "{fixture}: {text}");
        // The finder list rewritten: only the audit hook saw the import,
        // and the report says which channel and why.
        assert_report(fixture.trim_end_matches(".py"), py, &text);
    }
}

#[test]
fn pool_workers_and_a_second_exec_image_are_judged() {
    pools_and_exec(python());
}

fn pools_and_exec(py: &Path) {
    let children = regex::Regex::new(r"note: \d+ child interpreter").unwrap();
    for method in ["spawn", "fork"] {
        let (code, text) = check_with(py, "pool_health.py", &[method]);
        assert_eq!(code, 1, "{method}: {text}");
        // The pool's exit terminates its workers: one that took no task
        // may be killed before its recorder wrote, so how many children
        // are counted varies from run to run.
        let text = children.replace(&text, "note: [N] child interpreter");
        assert_report(&format!("pool_health_{method}"), py, &text);
    }
    let (code, text) = check_with(py, "execv_second.py", &[]);
    assert_eq!(code, 1, "{text}");
    assert_report("execv_second", py, &text);
}

#[test]
fn pep_810_lazy_import_made_real_in_health_fails_there_and_untouched_passes() {
    let Some(py) = test_interpreters::required(15, "PEP 810 `lazy import` through the check")
    else {
        return;
    };
    let (code, text) = check_with(&py, "lazy_import315.py", &[]);
    assert_eq!(code, 1, "{text}");
    assert_report("lazy_import315", &py, &text);
    let (code, text) = check_with(&py, "lazy_import315.py", &["--untouched"]);
    assert_eq!(code, 0, "{text}");
    assert_report("lazy_import315_untouched", &py, &text);
}

#[test]
fn every_evidence_case_holds_with_python_3_15() {
    let Some(py) = test_interpreters::required(15, "the evidence cases with Python 3.15") else {
        return;
    };
    re_exec_scrubbed(&py);
    helper_and_fork(&py);
    lazy_loader_in_health(&py);
    around_the_finder(&py);
    pools_and_exec(&py);
}
