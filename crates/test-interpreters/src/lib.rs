//! The one lookup of a Python `3.<minor>` interpreter for coldstart's tests
//! (the PEP 810 cases want 3.15; the suggest tests compare 3.7 to 3.13).
//!
//! In order:
//! 1. `$COLDSTART_PYTHON3_<minor>` (`COLDSTART_PYTHON3_15` for 3.15), which
//!    `cargo xtask test` sets for the test runner (to the 3.15 it
//!    provisioned, or to its fixed place when that failed); when set, it is
//!    the only candidate, and it must be a working `3.<minor>`: a case that
//!    wants it fails instead of printing NOT RUN, which is left to a plain
//!    `cargo test` outside the provisioned run;
//! 2. the interpreter `cargo xtask test` provisions at its fixed place,
//!    [`provisioned`] (so a plain `cargo nextest run` after one
//!    `cargo xtask test` finds it too);
//! 3. `python3.<minor>` on PATH;
//! 4. a pyenv installation `$PYENV_ROOT/versions/3.<minor>.*` (or
//!    `$HOME/.pyenv`), the newest first.
//!
//! A candidate counts only when it runs and reports `3.<minor>`; the answer
//! is its `sys.executable` (a pyenv shim resolved to the real binary).
//! [`default_python`] is the suite's default interpreter (`python3` or
//! `$COLDSTART_PYTHON`), the same way resolved.
//!
//! The rule for a case that needs something the machine may lack (an
//! interpreter, a shell): it asks [`required`] (or [`installed`], or
//! [`or_not_run`] for anything else). Under `cargo xtask test`, which
//! provisions what the suite needs and says so through [`PROVISIONED`], a
//! missing one fails the case; outside it, the case prints one plain
//! `NOT RUN: …` line and returns. No case passes silently without running.
//! [`wait_until_gone`] is the suites' one wait for a process they started
//! (an interpreter, mostly) to end.
//! Used by tests only (and by xtask for [`provisioned`] and
//! [`PROVISIONED`]); std and libc only.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The environment variable naming the `3.<minor>` interpreter:
/// `COLDSTART_PYTHON3_15` for 3.15.
pub fn var(minor: u32) -> String {
    format!("COLDSTART_PYTHON3_{minor}")
}

/// The workspace root (this crate lives at `crates/test-interpreters`).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/test-interpreters lives two levels below the workspace root")
        .to_path_buf()
}

/// Where `cargo xtask test` unpacks a provisioned `3.<minor>` (its
/// filesystem root): `<workspace>/target/interpreters/python3.<minor>/root`.
pub fn provisioned_root(minor: u32) -> PathBuf {
    workspace_root()
        .join("target")
        .join("interpreters")
        .join(format!("python3.{minor}"))
        .join("root")
}

/// The provisioned `3.<minor>` executable, under [`provisioned_root`].
pub fn provisioned(minor: u32) -> PathBuf {
    provisioned_root(minor)
        .join("usr/bin")
        .join(format!("python3.{minor}"))
}

/// A working Python `3.<minor>`, or `None` (see the crate doc for the
/// order). Panics when `$COLDSTART_PYTHON3_<minor>` is set to something that
/// is not a working `3.<minor>`: an explicit choice must not silently turn
/// into a NOT RUN.
pub fn interpreter(minor: u32) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var(minor)) {
        let p = PathBuf::from(p);
        return Some(version_checked(&p, minor).unwrap_or_else(|| {
            panic!(
                "${} is {} but that is not a working Python 3.{minor} (`cargo xtask test` sets \
                 it to the interpreter it provisions: its provision step says why that failed)",
                var(minor),
                p.display()
            )
        }));
    }
    let mut wanted = vec![
        provisioned(minor),
        PathBuf::from(format!("python3.{minor}")),
    ];
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
    if let Some(entries) = pyenv.and_then(|p| std::fs::read_dir(p.join("versions")).ok()) {
        let prefix = format!("3.{minor}.");
        let mut found: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path().join("bin").join(format!("python3.{minor}")))
            .collect();
        found.sort();
        wanted.extend(found.into_iter().rev());
    }
    wanted.iter().find_map(|p| version_checked(p, minor))
}

/// The suite's default interpreter: `$COLDSTART_PYTHON`, else `python3`,
/// resolved once to its `sys.executable` (a pyenv-style shim would add a
/// process to every spawn). Panics, saying what to install or set, when it
/// does not run: every test that starts a worker needs it.
pub fn default_python() -> &'static Path {
    static PY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PY.get_or_init(|| {
        let wanted = std::env::var_os("COLDSTART_PYTHON").unwrap_or_else(|| "python3".into());
        let out = Command::new(&wanted)
            .args(["-c", "import sys; print(sys.executable)"])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run {wanted:?} to find the interpreter: {e}; install python3 or set COLDSTART_PYTHON")
            });
        assert!(
            out.status.success(),
            "{wanted:?} -c 'print(sys.executable)' failed: {out:?}"
        );
        let exe = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(!exe.is_empty(), "{wanted:?} has no sys.executable");
        PathBuf::from(exe)
    })
}

/// Set (to `1`) by `cargo xtask test` for the test runner: this run is the
/// provisioned one, so whatever a case needs is there, and a missing one is
/// a failure, not a `NOT RUN`.
pub const PROVISIONED: &str = "COLDSTART_SYSTEM_PROVISIONED";

/// Whether this is `cargo xtask test`'s run (see [`PROVISIONED`]).
pub fn provisioned_run() -> bool {
    std::env::var_os(PROVISIONED).is_some()
}

/// `found`, when it is something; when it is `None`: a panic under
/// `cargo xtask test` (which provisions what the suite needs, so a missing
/// one is a fault of that run), else one `NOT RUN: {case}: {why}` line and
/// `None`, for the case to return at once.
#[track_caller]
pub fn or_not_run<T>(found: Option<T>, case: &str, why: impl FnOnce() -> String) -> Option<T> {
    if found.is_some() {
        return found;
    }
    let why = why();
    assert!(
        !provisioned_run(),
        "{case}: {why}; `cargo xtask test` provisions it, so here it is a failure, not a NOT RUN"
    );
    println!("NOT RUN: {case}: {why}");
    None
}

/// Python `3.<minor>` for `case`, through [`interpreter`] and the rule of
/// [`or_not_run`]: under `cargo xtask test` a missing one fails the case.
#[track_caller]
pub fn required(minor: u32, case: &str) -> Option<PathBuf> {
    or_not_run(interpreter(minor), case, || not_found(minor))
}

/// The program at `path` (a shell that `cargo xtask test` installs) for
/// `case`, through the rule of [`or_not_run`].
#[track_caller]
pub fn installed<'a>(path: &'a str, case: &str) -> Option<&'a Path> {
    let path = Path::new(path);
    or_not_run(path.exists().then_some(path), case, || {
        format!("{} is not installed", path.display())
    })
}

/// Why [`interpreter`] found none, for a test's `NOT RUN:` line.
pub fn not_found(minor: u32) -> String {
    format!(
        "no Python 3.{minor} interpreter found (set {}, run `cargo xtask test` which provisions \
         one at {}, or put python3.{minor} on PATH or under pyenv)",
        var(minor),
        provisioned(minor).display()
    )
}

/// `sys.executable` of `python` when it runs and is `3.<minor>`.
fn version_checked(python: &Path, minor: u32) -> Option<PathBuf> {
    let out = Command::new(python)
        .args([
            "-c",
            "import sys; print('%d.%d' % sys.version_info[:2]); print(sys.executable)",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let mut lines = text.lines();
    let version = lines.next()?;
    let exe = lines.next()?;
    (out.status.success() && version == format!("3.{minor}") && !exe.is_empty())
        .then(|| PathBuf::from(exe))
}

/// Waits, at most `bound`, until process `pid` has exited, on a pidfd the
/// kernel makes readable at its exit; true when it has (or was gone
/// already). What a test uses to see that a process it found ends, without
/// sleeping.
pub fn wait_until_gone(pid: u32, bound: Duration) -> bool {
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
