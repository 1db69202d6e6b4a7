//! A process the kernel does not let this one read: the typed permission
//! error with its advice, and the target left running, untouched.
//!
//! Runs as root here, so the test thread first drops CAP_SYS_PTRACE from
//! its own effective set (capabilities are per thread; the reader threads
//! it starts inherit that), and the target is one a tracer without that
//! capability may not read: non-dumpable, or of another user.

use crate::support::{Py, drop_cap_sys_ptrace_in_this_thread, is_root, state_and_tracer};
use pystacks::{DumpOptions, Error, Sampler, SamplerOptions, dump};

fn cases() -> Vec<(&'static str, &'static [&'static str])> {
    let mut cases: Vec<(&'static str, &'static [&'static str])> = vec![(
        "not-dumpable",
        &[
            "not dumpable",
            "PR_SET_DUMPABLE",
            "CAP_SYS_PTRACE",
            "--cap-add SYS_PTRACE",
        ],
    )];
    if is_root() {
        // Only root can start a fixture that becomes another user.
        cases.push((
            "nobody",
            &["runs as uid 65534", "same user", "--cap-add SYS_PTRACE"],
        ));
    }
    cases
}

#[test]
fn a_refused_read_is_a_typed_error_with_advice_and_nothing_is_left_behind() {
    drop_cap_sys_ptrace_in_this_thread();
    for (mode, words) in cases() {
        let mut py = Py::start("protected.py", &[mode]);
        py.expect_line("ready");
        let pid = py.pid();

        let err = dump(pid, &DumpOptions::default()).expect_err("the read must be refused");
        let Error::PermissionDenied(denial) = &err else {
            panic!("{mode}: not a permission error: {err}");
        };
        assert_eq!(denial.pid, pid);
        assert_eq!(denial.has_cap_sys_ptrace, Some(false));
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "the kernel does not let this process read the memory of process {pid}"
            )),
            "{text}"
        );
        for w in words {
            assert!(text.contains(w), "{mode}: {w:?} missing from: {text}");
        }
        let err = dump(pid, &DumpOptions::default()).expect_err("refused");
        assert!(err.to_string().starts_with("the kernel"), "{err}");

        let err = Sampler::start(pid, SamplerOptions::default()).expect_err("refused");
        assert!(matches!(err, Error::PermissionDenied(_)), "{err}");

        // Untouched: not stopped, not traced, still answering.
        let (state, tracer) = state_and_tracer(pid);
        assert_eq!(tracer, 0, "{mode}: left traced");
        assert!(state == 'S' || state == 'R', "{mode}: state {state}");
        py.send("ping");
        py.expect_line("pong");
        assert_eq!(py.finish(), Some(0), "{mode}: exits by itself");
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "{mode}: process still there"
        );
    }
    let readers: Vec<String> = std::fs::read_dir("/proc/self/task")
        .expect("tasks")
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .filter(|c| c.starts_with("pystacks"))
        .collect();
    assert!(readers.is_empty(), "reader threads left: {readers:?}");
}
