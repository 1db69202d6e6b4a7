//! Evidence that cannot be dodged, through the check as users run it: the
//! stand-in workers of `tests/fixtures/evidence` (each says what it
//! simulates) with the stand-in torch of `tests/fixtures/boundary/stand-ins`.

use crate::support::{fixtures, python, xtask};

/// `cargo xtask import-boundary --processes 1 -- python FIXTURE`: exit code
/// and the text report.
fn check(fixture: &str) -> (i32, String) {
    check_args(fixture, &[])
}

fn check_args(fixture: &str, args: &[&str]) -> (i32, String) {
    let dir = fixtures().join("evidence");
    let out = xtask()
        .current_dir(&dir)
        .env(
            "PYTHONPATH",
            format!(".:{}", fixtures().join("boundary/stand-ins").display()),
        )
        .args(["import-boundary", "--processes", "1", "--"])
        .arg(python())
        .arg(fixture)
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{fixture}: exit {:?}\n{text}", out.status.code());
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn a_re_exec_with_a_scrubbed_environment_is_an_error_that_says_why_never_a_pass() {
    let (code, text) = check("reexec_scrubbed.py");
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("no import evidence from pid"), "{text}");
    assert!(text.contains("replaced itself with os.exec at"), "{text}");
    assert!(text.contains("without COLDSTART_RECORD"), "{text}");
}

#[test]
fn a_helper_interpreter_and_a_forked_child_are_judged_in_their_own_processes() {
    let (code, text) = check("helper_startup.py");
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
    let (code, text) = check("lazy_health.py");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("phase: health request #1"), "{text}");
    assert!(
        text.contains("lazy:  declared at lazy_health.py:14, made real at lazy_health.py:27"),
        "{text}"
    );
}

#[test]
fn imports_around_the_finder_still_name_their_line() {
    for fixture in ["metapath_rewrite.py", "computed_import.py"] {
        let (code, text) = check(fixture);
        assert_eq!(code, 1, "{fixture}: {text}");
        assert!(text.contains(&format!("from:  {fixture}:")), "{text}");
        assert!(!text.contains("no recorder evidence"), "{text}");
    }
}

#[test]
fn pool_workers_and_a_second_exec_image_are_judged() {
    for method in ["spawn", "fork"] {
        let (code, text) = check_args("pool_health.py", &[method]);
        assert_eq!(code, 1, "{method}: {text}");
        assert!(text.contains("phase: health request #1"), "{text}");
        assert!(
            text.contains("pool_health.py:19"),
            "the pool's line: {text}"
        );
    }
    let (code, text) = check("execv_second.py");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("phase: start-up"), "{text}");
}
