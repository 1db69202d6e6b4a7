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
    let assert = support::xtask()
        .args(["profile", "--rate", "250", "--until", "ready", "--out"])
        .arg(out.path())
        .arg("--")
        .arg(support::python())
        .arg(fixture("burn_at_startup.py"))
        .env("PATH", BARE_PATH)
        .assert()
        .success()
        .stdout(predicate::str::contains("burn_cpu_in_startup"))
        .stdout(predicate::str::contains("flame graph:"));
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    // Outside imports, the burner is the widest frame of the start-up.
    let widest = stdout
        .lines()
        .skip_while(|l| !l.contains("widest frames outside imports"))
        .nth(1)
        .unwrap_or_default();
    assert!(widest.contains("burn_cpu_in_startup"), "{stdout}");
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
    // The rate printed is the one used, the same as the table's, with the
    // one asked beside it (a lowered rate must not read as the asked one).
    let used = |line: &str| -> Option<String> {
        let at = line.find(" Hz used")?;
        let start = line[..at].rfind([' ', '('])? + 1;
        Some(line[start..at].to_owned())
    };
    let sampler = stdout.lines().find(|l| l.starts_with("sampler: ")).unwrap();
    assert!(sampler.contains("Hz used (250 Hz asked)"), "{stdout}");
    let table = stdout
        .lines()
        .find(|l| l.contains(" rounds over "))
        .unwrap();
    assert_eq!(used(sampler), used(table), "{stdout}");
    let svg = std::fs::read_to_string(out.path().join("profile.svg")).unwrap();
    assert!(svg.contains("burn_cpu_in_startup"));
    crate::support::assert_well_formed_svg(&svg);
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
fn a_hung_worker_times_out_with_its_python_stack_with_no_py_spy_installed() {
    // The real interpreter has no py-spy beside it, and PATH has none:
    // py-spy is linked into coldstart as a library.
    support::xtask()
        .args(["check", "--processes", "1", "--ready-timeout", "2", "--"])
        .arg(support::python())
        .arg(fixture("hang_before_ready.py"))
        .env("PATH", BARE_PATH)
        .assert()
        .code(2)
        .stdout(predicate::str::contains("read with py-spy as a library"))
        .stdout(predicate::str::contains(
            "block_forever_before_ready (hang_before_ready.py:13)",
        ));
}

#[test]
fn an_import_heavy_start_up_spends_most_samples_inside_imports() {
    let out = tempfile::tempdir().unwrap();
    let assert = support::xtask()
        .args(["profile", "--rate", "200", "--until", "ready", "--out"])
        .arg(out.path())
        .arg("--")
        .arg(support::python())
        .arg(fixture("import_heavy_worker.py"))
        .env("PATH", BARE_PATH)
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let share: f64 = stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("start-up (spawn to ready): ")?
                .split(", ")
                .nth(1)?
                .strip_suffix("% inside imports")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no start-up line: {stdout}"));
    assert!(share > 50.0, "{stdout}");
}

#[test]
fn native_frames_say_why_they_are_not_available() {
    support::xtask()
        .args(["profile", "--native", "--"])
        .arg(support::python())
        .arg(fixture("burn_at_startup.py"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("libunwind"));
}
