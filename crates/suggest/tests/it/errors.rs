//! What a user meets when something is off: an interpreter that does not
//! run, crashes, is too old, or answers nonsense; links that are not
//! first-party; cuts that verification rejects; other interpreters
//! classifying the same way.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use importguard::recorder::CallSite;
use importguard::verdict::Violation;
use suggest::{RejectReason, SuggestError, Suggester, Verification};

use crate::support::{check, project, python, required, violation};

/// A STAND-IN interpreter: a shell script that prints `stdout` and `stderr`
/// and exits with `code`, to see how the crate treats a broken answer.
fn stand_in_interpreter(dir: &Path, stdout: &str, stderr: &str, code: i32) -> PathBuf {
    let path = dir.join("python-stand-in");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nprintf '%s\\n' '{stdout}'\nprintf '%s\\n' '{stderr}' >&2\nexit {code}\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn frame(file: &str, line: u32) -> Option<CallSite> {
    Some(CallSite {
        file: file.to_owned(),
        line,
        func: "<module>".to_owned(),
    })
}

fn hand_made(chain: &[&str], lines: Vec<Option<CallSite>>) -> Violation {
    let chain = chain.iter().map(|s| (*s).to_owned()).collect();
    Violation {
        recorded: true,
        ..Violation::loaded("torch", "torch", chain, lines)
    }
}

#[test]
fn a_missing_interpreter_is_named() {
    let v = hand_made(&["torch"], vec![None]);
    let s = Suggester::new(project("seed"), "/nonexistent/python3").unwrap();
    let err = s.suggest(&v).unwrap_err();
    assert!(matches!(err, SuggestError::Spawn { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("could not run /nonexistent/python3: ")
            && err
                .to_string()
                .ends_with("check the target's interpreter path"),
        "{err}"
    );
}

#[test]
fn a_crashing_interpreter_shows_its_stdout_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let py = stand_in_interpreter(dir.path(), "half an answer", "Traceback: boom", 3);
    let v = hand_made(&["torch"], vec![None]);
    let err = Suggester::new(project("seed"), &py)
        .unwrap()
        .suggest(&v)
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, SuggestError::Interpreter { .. }), "{err:?}");
    assert!(
        text.contains("ended with exit code 3")
            && text.contains("\n[stdout]\nhalf an answer\n[stderr]\nTraceback: boom"),
        "{text}"
    );
}

#[test]
fn an_unreadable_answer_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let py = stand_in_interpreter(dir.path(), "COLDSTART_SUGGEST {\"links\": 7}", "", 0);
    let v = hand_made(&["torch"], vec![None]);
    let err = Suggester::new(project("seed"), &py)
        .unwrap()
        .suggest(&v)
        .unwrap_err();
    assert!(matches!(err, SuggestError::Answer { .. }), "{err:?}");
    assert!(
        err.to_string().contains("[stdout]\nCOLDSTART_SUGGEST"),
        "{err}"
    );
}

#[test]
fn an_interpreter_older_than_3_8_is_refused() {
    let Some(py37) = required(7, "an interpreter older than 3.8 is refused") else {
        return;
    };
    let v = hand_made(&["torch"], vec![None]);
    let err = Suggester::new(project("seed"), &py37)
        .unwrap()
        .suggest(&v)
        .unwrap_err();
    assert!(matches!(err, SuggestError::TooOld { .. }), "{err:?}");
    assert!(err.to_string().contains("is Python 3.7."), "{err}");
}

#[test]
fn links_outside_the_project_are_not_cuttable_and_relative_lines_resolve() {
    let root = project("seed");
    let json_init =
        crate::support::python_code(python(), &root, "import json; print(json.__file__)");
    let v = hand_made(
        &[
            "json",
            "seedworker.models",
            "seedworker.models.ner",
            "torch",
        ],
        vec![
            frame("<frozen runpy>", 88),
            frame(json_init.trim(), 1),
            // relative to the worker's working directory
            frame("seedworker/models/__init__.py", 3),
            None,
        ],
    );
    let s = Suggester::new(&root, python()).unwrap().with_cwd(&root);
    let sug = s.suggest(&v).unwrap();
    let reasons: Vec<(usize, &str)> = sug
        .not_cuttable
        .iter()
        .map(|u| (u.link, u.reason.as_str()))
        .collect();
    assert!(reasons[0].1.contains("is not a source file"), "{reasons:?}");
    assert!(
        reasons[1].1.contains("is outside the project"),
        "{reasons:?}"
    );
    // No recorder line for the torch link: the line is found by reading
    // the importer, and said so.
    let cut = sug.cut.as_ref().expect("the re-export is cuttable");
    assert_eq!(
        (cut.file.as_str(), cut.line),
        ("seedworker/models/__init__.py", 3)
    );
    let ner = sug.not_cuttable.iter().find(|u| u.link == 3).unwrap();
    assert_eq!(
        (ner.file.as_deref(), ner.line),
        (Some("seedworker/models/ner.py"), Some(3))
    );
    assert!(ner.reason.contains("base class"), "{}", ner.reason);
}

/// The dynamic fixture: start-up reads `loader.NerModel` by name. Moving the
/// loader's import makes start-up fail; the lazy re-export is reified at
/// once, so torch stays. Neither is offered.
#[test]
fn verification_rejects_cuts_that_break_start_up_or_leave_the_violation() {
    let root = project("dynamic");
    let v = violation(python(), &root, "dynworker");
    let s = Suggester::new(&root, python()).unwrap();
    let mut sug = s.suggest(&v).unwrap();
    assert_eq!(sug.cuts().count(), 2, "{sug}");
    s.verify(&mut sug, 5, |copy| {
        Ok(check(python(), copy, "dynworker").outcome())
    })
    .unwrap();
    assert_eq!(sug.verification, Verification::Rejected, "{sug}");
    assert!(sug.cut.is_none() && sug.candidates.is_empty(), "{sug}");
    let reasons: Vec<(&str, &RejectReason)> = sug
        .rejections
        .iter()
        .map(|r| (r.file.as_str(), &r.reason))
        .collect();
    assert!(
        matches!(reasons[0], ("dynworker/loader.py", RejectReason::HandshakeFailed { detail })
            if detail.contains("has no attribute 'NerModel'")),
        "{reasons:?}"
    );
    assert!(
        matches!(reasons[1], ("dynworker/models/__init__.py", RejectReason::ViolationRemains { chain })
            if chain.last().map(String::as_str) == Some("torch")),
        "{reasons:?}"
    );
    let text = sug.to_string();
    assert!(
        text.contains("no cut is offered") && text.contains("rejected after verification"),
        "{text}"
    );
    // The JSON says the same.
    let json = serde_json::to_value(&sug).unwrap();
    assert_eq!(json["verification"], "rejected");
    assert_eq!(json["cut"], serde_json::Value::Null);
    assert_eq!(json["rejections"][0]["reason"], "handshake_failed");
    assert_eq!(json["rejections"][1]["reason"], "violation_remains");
}

#[test]
fn an_attempt_budget_leaves_the_untried_cuts_listed_unverified() {
    let root = project("dynamic");
    let v = violation(python(), &root, "dynworker");
    let s = Suggester::new(&root, python()).unwrap();
    let mut sug = s.suggest(&v).unwrap();
    s.verify(&mut sug, 0, |_| panic!("no attempt was allowed"))
        .unwrap();
    assert_eq!(sug.verification, Verification::NotRun);
    assert!(sug.cut.is_some());
    let mut runs = 0;
    s.verify(&mut sug, 1, |copy| {
        runs += 1;
        Ok(check(python(), copy, "dynworker").outcome())
    })
    .unwrap();
    assert_eq!(runs, 1);
    assert_eq!(sug.verification, Verification::Rejected);
    assert_eq!(
        (sug.rejections.len(), sug.candidates.len()),
        (1, 1),
        "{sug}"
    );
}

#[test]
fn a_check_that_cannot_run_is_an_error_not_a_rejection() {
    let root = project("seed");
    let v = violation(python(), &root, "seedworker");
    let s = Suggester::new(&root, python()).unwrap();
    let mut sug = s.suggest(&v).unwrap();
    let err = s
        .verify(&mut sug, 3, |_| Err("the harness lost its temp dir".into()))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the check on the patched copy could not run: the harness lost its temp dir"
    );
}

/// Every interpreter from 3.8 to 3.13 reads the fixtures the same way (the
/// grammar differs, the cuts must not). Under `cargo xtask test` each one
/// must be found; elsewhere a missing one says NOT RUN.
#[test]
fn every_interpreter_from_3_8_to_3_13_suggests_the_same_cuts() {
    let interpreters: Vec<(u32, PathBuf)> = (8..=13)
        .filter_map(|minor| {
            let case = format!("the same cuts with Python 3.{minor}");
            Some((minor, required(minor, &case)?))
        })
        .collect();
    let fixtures = [
        ("seed", "seedworker"),
        ("basemodel", "bmworker"),
        ("reexport", "rxworker"),
        ("annotations", "annworker"),
    ];
    let mut ran = Vec::new();
    for (name, worker) in fixtures {
        let root = project(name);
        let v = violation(python(), &root, worker);
        let reference = Suggester::new(&root, python())
            .unwrap()
            .suggest(&v)
            .unwrap();
        for (minor, py) in &interpreters {
            let sug = Suggester::new(&root, py).unwrap().suggest(&v).unwrap();
            let diffs = |s: &suggest::Suggestion| -> Vec<String> {
                s.cuts().map(|c| c.diff.clone()).collect()
            };
            assert_eq!(
                diffs(&sug),
                diffs(&reference),
                "{name} with Python 3.{minor}"
            );
            let reasons = |s: &suggest::Suggestion| -> Vec<String> {
                s.not_cuttable.iter().map(|u| u.reason.clone()).collect()
            };
            assert_eq!(
                reasons(&sug),
                reasons(&reference),
                "{name} with Python 3.{minor}"
            );
            ran.push(format!("{name}@3.{minor}"));
        }
    }
    println!("compared: {}", ran.join(", "));
}
