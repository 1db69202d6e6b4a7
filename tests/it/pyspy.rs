//! py-spy in the loop (issue: a stack for every hung worker, a flame graph
//! of every slow start). Uses the test venv's pinned py-spy, found beside
//! the venv's interpreter, as a user's venv would have it.

use std::path::PathBuf;

use predicates::prelude::*;

use crate::support;

fn fixture(name: &str) -> PathBuf {
    support::fixtures().join("pyspy").join(name)
}

/// A PATH without any py-spy: the system directories only.
const BARE_PATH: &str = "/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin";

#[test]
fn profile_shows_the_function_that_burns_cpu_at_startup() {
    let out = tempfile::tempdir().unwrap();
    let venv_py = support::venv_python();
    let assert = support::xtask()
        .args(["profile", "--rate", "250", "--out"])
        .arg(out.path())
        .arg("--")
        .arg(&venv_py)
        .arg(fixture("burn_at_startup.py"))
        .env("PATH", BARE_PATH)
        .assert()
        .success()
        .stdout(predicate::str::contains("burn_cpu_in_startup"))
        .stdout(predicate::str::contains("flame graph:"));
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    // The hot frame leads the table of self samples.
    let first_row = stdout
        .lines()
        .skip_while(|l| !l.contains("frame"))
        .nth(1)
        .unwrap_or_default();
    assert!(
        first_row.contains("burn_cpu_in_startup") || first_row.contains("monotonic"),
        "the top frame should be the burner or its clock call: {stdout}"
    );
    let svg = std::fs::read_to_string(out.path().join("profile.svg")).unwrap();
    assert!(svg.contains("burn_cpu_in_startup"));
    let speedscope: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("profile.speedscope.json")).unwrap())
            .unwrap();
    let frames = speedscope["shared"]["frames"].as_array().unwrap();
    assert!(
        frames
            .iter()
            .any(|f| f["name"].as_str().unwrap().contains("burn_cpu_in_startup"))
    );
}

#[test]
fn a_hung_worker_times_out_with_its_python_stack() {
    let venv_py = support::venv_python();
    support::xtask()
        .args([
            "import-boundary",
            "--processes",
            "1",
            "--ready-timeout",
            "3",
            "--",
        ])
        .arg(&venv_py)
        .arg(fixture("hang_before_ready.py"))
        .env("PATH", BARE_PATH)
        .assert()
        .code(2)
        .stdout(predicate::str::contains("block_forever_before_ready"))
        .stdout(predicate::str::contains("hang_before_ready.py"))
        .stdout(predicate::str::contains("py-spy dump"));
}

#[test]
fn without_py_spy_the_timeout_error_says_how_to_get_it() {
    // The real interpreter has no py-spy beside it, and PATH has none.
    support::xtask()
        .args([
            "import-boundary",
            "--processes",
            "1",
            "--ready-timeout",
            "2",
            "--",
        ])
        .arg(support::python())
        .arg(fixture("hang_before_ready.py"))
        .env("PATH", BARE_PATH)
        .assert()
        .code(2)
        .stdout(predicate::str::contains("timed out").or(predicate::str::contains("timeout")))
        .stdout(predicate::str::contains("pip install py-spy==0.4.3"));
}

#[test]
fn profile_without_py_spy_fails_with_the_hint() {
    support::xtask()
        .args(["profile", "--"])
        .arg(support::python())
        .arg(fixture("burn_at_startup.py"))
        .env("PATH", BARE_PATH)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot profile"))
        .stderr(predicate::str::contains("pip install py-spy==0.4.3"));
}
