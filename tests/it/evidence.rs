//! Evidence that cannot be dodged, through the check as users run it: the
//! stand-in workers of `tests/fixtures/evidence` (each says what it
//! simulates) with the stand-in torch of `tests/fixtures/boundary/stand-ins`.
//! Every case runs with the default interpreter, and once more with Python
//! 3.15 (PEP 810 `lazy import` and the recorder's hooks on 3.15) where one is
//! found.

use std::path::Path;

use crate::support::{fixtures, python, xtask};

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
    assert!(text.contains("no import evidence from pid"), "{text}");
    assert!(text.contains("replaced itself with os.exec at"), "{text}");
    assert!(text.contains("without COLDSTART_RECORD"), "{text}");
}

#[test]
fn a_helper_interpreter_and_a_forked_child_are_judged_in_their_own_processes() {
    helper_and_fork(python());
}

fn helper_and_fork(py: &Path) {
    let (code, text) = check_with(py, "helper_startup.py", &[]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("-c 'import torch'), a subprocess child of pid"),
        "{text}"
    );
    assert!(text.contains("helper_startup.py:12"), "{text}");
    assert!(text.contains("forked from pid"), "{text}");
    assert!(text.contains("helper_startup.py:13"), "{text}");
    assert!(!text.contains("phase: unknown"), "{text}");
}

#[test]
fn a_lazy_module_made_real_in_health_is_loaded_there_from_the_touching_line() {
    lazy_loader_in_health(python());
}

fn lazy_loader_in_health(py: &Path) {
    let (code, text) = check_with(py, "lazy_health.py", &[]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("phase: health request #1"), "{text}");
    assert!(
        text.contains("lazy:  declared at lazy_health.py:14, made real at lazy_health.py:27"),
        "{text}"
    );
    assert!(
        text.contains(
            "seen by: the audit hook only (its body ran on first use, through a lazy loader"
        ),
        "{text}"
    );
}

#[test]
fn imports_around_the_finder_still_name_their_line() {
    around_the_finder(python());
}

fn around_the_finder(py: &Path) {
    for fixture in ["metapath_rewrite.py", "computed_import.py"] {
        let (code, text) = check_with(py, fixture, &[]);
        assert_eq!(code, 1, "{fixture}: {text}");
        assert!(text.contains(&format!("from:  {fixture}:")), "{text}");
        assert!(!text.contains("no recorder evidence"), "{text}");
    }
    // The finder list rewritten: only the audit hook saw the import, and
    // the report says which channel and why.
    let (_, text) = check_with(py, "metapath_rewrite.py", &[]);
    assert!(
        text.contains(
            "seen by: the audit hook only (the import bypassed the finder on sys.meta_path)"
        ),
        "{text}"
    );
}

#[test]
fn pool_workers_and_a_second_exec_image_are_judged() {
    pools_and_exec(python());
}

fn pools_and_exec(py: &Path) {
    for method in ["spawn", "fork"] {
        let (code, text) = check_with(py, "pool_health.py", &[method]);
        assert_eq!(code, 1, "{method}: {text}");
        assert!(text.contains("phase: health request #1"), "{text}");
        assert!(
            text.contains("pool_health.py:19"),
            "the pool's line: {text}"
        );
    }
    let (code, text) = check_with(py, "execv_second.py", &[]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("phase: start-up"), "{text}");
}

#[test]
fn pep_810_lazy_import_made_real_in_health_fails_there_and_untouched_passes() {
    let Some(py) = test_interpreters::required(15, "PEP 810 `lazy import` through the check")
    else {
        return;
    };
    let (code, text) = check_with(&py, "lazy_import315.py", &[]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("phase: health request #1"), "{text}");
    assert!(
        text.contains("lazy:  declared at lazy_import315.py:10, made real at lazy_import315.py:14"),
        "{text}"
    );
    let (code, text) = check_with(&py, "lazy_import315.py", &["--untouched"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("lazy, never executed: torch"), "{text}");
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
