//! Shared helpers for the integration tests: where things are, which Python
//! to run, and how to run `cargo xtask` as a user would.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Panics unless `svg` is well-formed XML with an `<svg>` root: every SVG a
/// test has coldstart write goes through it, so a browser opens each one.
pub fn assert_well_formed_svg(svg: &str) {
    let xml = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    match roxmltree::Document::parse_with_options(svg, xml) {
        Ok(doc) => assert_eq!(doc.root_element().tag_name().name(), "svg", "the root"),
        Err(e) => panic!("not well-formed XML: {e}"),
    }
}

/// Waits, at most `bound`, until process `pid` has exited, on a pidfd the
/// kernel makes readable at its exit; true when it has (or was gone
/// already). What a test uses to see that a process it found ends, without
/// sleeping.
pub fn wait_until_gone(pid: u32, bound: std::time::Duration) -> bool {
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new fd.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return true;
    }
    let mut poll = libc::pollfd {
        fd: fd as i32,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(bound.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd; the fd is ours and closed right after.
    let ready = unsafe { libc::poll(&mut poll, 1, ms) };
    // SAFETY: closing the fd pidfd_open returned.
    unsafe { libc::close(fd as i32) };
    ready == 1
}

/// The workspace root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives one level below the workspace root")
}

/// `tests/fixtures/`.
pub fn fixtures() -> PathBuf {
    root().join("tests").join("fixtures")
}

/// The reference worker's folder (`worker/`), to put on PYTHONPATH.
pub fn worker_dir() -> PathBuf {
    root().join("worker")
}

/// The real interpreter behind `python3` (or `$COLDSTART_PYTHON`): the
/// one lookup, `test_interpreters::default_python`.
pub use test_interpreters::default_python as python;

/// The test venv's interpreter (`.venv/bin/python`), which `cargo xtask
/// test` provisions from `tests/requirements.txt` (a real transformers, no
/// torch; py-spy).
pub fn venv_python() -> PathBuf {
    let venv = std::env::var_os("COLDSTART_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv"));
    let py = venv.join("bin").join("python");
    assert!(
        py.exists(),
        "the test venv is missing ({}): run `cargo xtask test`, which provisions it from tests/requirements.txt",
        py.display()
    );
    py
}

/// `cargo xtask` as a user runs it, from the workspace root, stdin closed.
/// Uses the already-built binary of this test run, so no nested cargo build.
pub fn xtask() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::new(xtask_bin());
    cmd.current_dir(root());
    cmd
}

/// Path of the xtask binary, built on first use into this run's target dir.
pub fn xtask_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        // This test binary is <target>/debug/deps/it-HASH.
        let exe = std::env::current_exe().expect("current_exe");
        let profile_dir = exe.parent().and_then(Path::parent).expect("target/debug");
        let target_dir = profile_dir.parent().expect("target dir");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--quiet", "--package", "xtask", "--bin", "xtask"])
            .arg("--target-dir")
            .arg(target_dir)
            .current_dir(root())
            .status()
            .expect("cargo build -p xtask");
        assert!(status.success(), "building xtask failed");
        profile_dir.join("xtask")
    })
}

/// Path of the installed-style `coldstart` binary, built on first use into
/// this run's target dir.
pub fn coldstart_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("current_exe");
        let profile_dir = exe.parent().and_then(Path::parent).expect("target/debug");
        let target_dir = profile_dir.parent().expect("target dir");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "--package",
                "coldstart",
                "--bin",
                "coldstart",
            ])
            .arg("--target-dir")
            .arg(target_dir)
            .current_dir(root())
            .status()
            .expect("cargo build -p coldstart");
        assert!(status.success(), "building coldstart failed");
        profile_dir.join("coldstart")
    })
}

/// Kills the process (the harness a test started) when the test ends,
/// passed or not, so a failing test leaves no harness behind.
pub struct KillOnDrop(pub i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the test's own child (already dead: ESRCH).
        unsafe { libc::kill(self.0, libc::SIGKILL) };
    }
}
