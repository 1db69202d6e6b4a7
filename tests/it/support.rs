//! Shared helpers for the integration tests, the one place for them: where
//! things are, which Python to run, how to run `cargo xtask` and
//! `coldstart` as a user would, git, bench records, and processes (found by
//! marker, waited for, their groups proved gone).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ::trace::perfetto::PbTrace;
use prost::Message as _;
use serde_json::Value;
use timeline::TrialRecord;

/// Panics unless `svg` is well-formed XML with an `<svg>` root: every SVG a
/// test has coldstart write goes through it, so a browser opens each one.
pub use report::assert_well_formed_svg;

/// Waits, at most a bound, until a process has exited (on a pidfd): the
/// one wait, `test_interpreters::wait_until_gone`.
pub use test_interpreters::wait_until_gone;

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

/// The folder outside the clone where the suite keeps the builds that
/// do not depend on the clone (`coldstart-tests` in the user's cache
/// folder, found by the rule `diff`'s setup cache follows: on Linux
/// `$XDG_CACHE_HOME` when absolute, else `~/.cache`; None without a home),
/// so that a clean clone does not compile the same dependencies again.
/// Cargo's fingerprints decide what is rebuilt (a new clone rebuilds its
/// own crates in place: cargo names them by their path inside their
/// workspace, so the folders do not grow by clone), and its lock on a
/// folder lets two suites share it. `rm -rf` it to reclaim the space
/// (about 1 GB).
pub fn build_cache() -> Option<PathBuf> {
    dirs::cache_dir().map(|c| c.join("coldstart-tests"))
}

/// The cargo target folder of the wheel test's build (the zig target, the
/// `wheel-test` profile): `wheel-target` in [`build_cache`], else the
/// workspace's own `target/`. Only a clone at the path of the last build
/// (CI's clone is always at one) finds its dependencies built: maturin's
/// zig wrapper, which every C build script sees as its compiler, names the
/// clone's venv, so at another path they are built again.
pub fn wheel_test_target() -> PathBuf {
    build_cache()
        .map(|c| c.join("wheel-target"))
        .unwrap_or_else(|| root().join("target"))
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
    BIN.get_or_init(|| built("xtask"))
}

/// `coldstart` as a user runs it: the installed-style binary, from `dir`,
/// stdin closed. The one runner of the tool: a topic's helpers add their
/// arguments and environment to it.
pub fn coldstart(dir: &Path) -> Command {
    let mut cmd = Command::new(coldstart_bin());
    cmd.current_dir(dir).stdin(Stdio::null());
    cmd
}

/// [`coldstart`] as an `assert_cmd` command whose run is ended after
/// `timeout` (a bound on a hang, never an expectation of speed).
pub fn coldstart_bounded(dir: &Path, timeout: std::time::Duration) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::from_std(coldstart(dir));
    cmd.timeout(timeout);
    cmd
}

/// A change [`coldstart_run`] makes to what the run inherits: a topic's
/// own variable set or removed, or a right taken away.
#[derive(Clone, Debug)]
pub enum Env<'a> {
    /// The variable set to the value.
    Set(&'a str, OsString),
    /// The variable removed.
    Unset(&'a str),
    /// No right to read another process's memory: as root (the suite's
    /// machines), CAP_SYS_PTRACE dropped from the bounding set before exec,
    /// so the new program never gets it.
    WithoutPtraceRights,
}

/// A run of [`coldstart_run`] to its end: its pid (what its cgroups are
/// named by) and its output, which it stands for (`run.status`,
/// `run.stdout`, `&run` where an `&Output` is asked for).
#[derive(Debug)]
pub struct Ran {
    pub pid: u32,
    pub output: Output,
}

impl std::ops::Deref for Ran {
    type Target = Output;

    fn deref(&self) -> &Output {
        &self.output
    }
}

/// `coldstart ARGS [-- ARGV]` run to its end from `dir`, as [`coldstart`]
/// starts it, with `env` applied in order (`ARGV`, a worker's command line,
/// and the `--` before it only when `argv` is not empty); the command line
/// and then what it printed are [`printed`]. The one way to run the tool
/// to its end for an `Output`: a topic's differences are its arguments.
pub fn coldstart_run(dir: &Path, args: &[&str], argv: &[String], env: &[Env<'_>]) -> Ran {
    eprintln!(
        "$ cd {} && coldstart {}{}",
        dir.display(),
        args.join(" "),
        if argv.is_empty() {
            String::new()
        } else {
            format!(" -- {}", argv.join(" "))
        }
    );
    let mut cmd = coldstart(dir);
    cmd.args(args);
    if !argv.is_empty() {
        cmd.arg("--").args(argv);
    }
    for change in env {
        match change {
            Env::Set(name, value) => {
                cmd.env(name, value);
            }
            Env::Unset(name) => {
                cmd.env_remove(name);
            }
            Env::WithoutPtraceRights => without_ptrace_rights(&mut cmd),
        }
    }
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("coldstart runs");
    let pid = child.id();
    let output = printed(child.wait_with_output().expect("coldstart's output"));
    Ran { pid, output }
}

/// Has `cmd`'s program start without CAP_SYS_PTRACE when run as root: the
/// capability dropped from the bounding set between fork and exec.
fn without_ptrace_rights(cmd: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: only geteuid(2) and prctl(2), async-signal-safe, between
    // fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            const CAP_SYS_PTRACE: libc::c_ulong = 19;
            if libc::geteuid() == 0 && libc::prctl(libc::PR_CAPBSET_DROP, CAP_SYS_PTRACE) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The stand-in worker of a topic: `tests/fixtures/<topic>/standin.py`
/// (each says what it simulates).
pub fn standin(topic: &str) -> PathBuf {
    fixtures().join(topic).join("standin.py")
}

/// Path of the installed-style `coldstart` binary, built on first use into
/// this run's target dir; with this crate's `native` feature (the tests of
/// native stacks, which `cargo xtask test` turns on), built with
/// coldstart's `native` feature.
pub fn coldstart_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| built("coldstart"))
}

/// The example project's service (`examples/ml-service`), built on first
/// use into this run's target dir (the build `tokio_front` also makes).
pub fn example_service_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = printed(example_cargo(&["build", "-q", "-p", "ml-service"]));
        assert!(out.status.success(), "building the example service failed");
        run_target_dir().join("debug").join("ml-service")
    })
}

/// The variable naming the `--features` of the test build running us, set
/// by `cargo xtask test` for its test step (which owns the list).
const TEST_FEATURES: &str = "COLDSTART_TEST_FEATURES";

/// The workspace's binary `bin` in this run's target dir, built on first
/// use as the test build selects and configures the workspace: `cargo
/// build --workspace --bins --tests`, with the features in
/// `$COLDSTART_TEST_FEATURES` (else, with this crate's `native` feature,
/// coldstart's). The same package selection and
/// features as `cargo nextest run --workspace` (dev-dependencies included)
/// mean every library is the test build's and only the binaries are new;
/// selecting `-p coldstart` alone resolves other features (tokio's, clap's)
/// and compiles half the graph again. The test-only features this turns on
/// (history's `test-server`, spawn's `tokio`) add modules the binary
/// never calls.
fn built(bin: &str) -> PathBuf {
    // This test binary is <target>/debug/deps/it-HASH.
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/debug");
    let target_dir = profile_dir.parent().expect("target dir");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "--quiet", "--workspace", "--bins", "--tests"]);
    if let Some(features) = std::env::var_os(TEST_FEATURES) {
        build.arg("--features").arg(features);
    } else if cfg!(feature = "native") {
        build.args(["--features", "coldstart/native,coldstart-tests/native"]);
    }
    let status = build
        .arg("--target-dir")
        .arg(target_dir)
        .current_dir(root())
        .status()
        .unwrap_or_else(|e| panic!("cargo build --workspace --bins --tests: {e}"));
    assert!(status.success(), "building the workspace's binaries failed");
    profile_dir.join(bin)
}

/// `cargo ARGS` in `examples/ml-service`, its own workspace, sharing this
/// run's target folder so coldstart's compiled crates are reused; stdin
/// closed, PYTHONPATH unset. Prints what it ran.
pub fn example_cargo(args: &[&str]) -> Output {
    cargo_in(&root().join("examples/ml-service"), args)
}

/// `cargo ARGS` in `dir`, a workspace of its own (the example project, a
/// Rust fixture), with this run's target folder; stdin closed, PYTHONPATH
/// unset. Prints what it ran.
fn cargo_in(dir: &Path, args: &[&str]) -> Output {
    cargo_into(dir, &run_target_dir(), args)
}

/// This run's target folder (this test binary is `<target>/debug/deps/it-HASH`).
fn run_target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).expect("target dir").to_path_buf()
}

/// `cargo ARGS` in `dir` with `target_dir` as its target folder; stdin
/// closed, PYTHONPATH unset. Prints what it ran.
fn cargo_into(dir: &Path, target_dir: &Path, args: &[&str]) -> Output {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("$ cd {} && cargo {}", dir.display(), args.join(" "));
    Command::new(cargo)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir)
        .env_remove("PYTHONPATH")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The dispatcher fixture (`tests/fixtures/trace/dispatcher`: a tokio
/// program that exports OTLP spans with the opentelemetry crates and
/// dispatches to two Python workers over pipes), built on first use from
/// its own workspace and lock file, which share nothing with this one's:
/// into `fixture-target` in [`build_cache`] (else this run's target dir).
pub fn dispatcher_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let dir = fixtures().join("trace/dispatcher");
        let target_dir = build_cache()
            .map(|c| c.join("fixture-target"))
            .unwrap_or_else(run_target_dir);
        let out = printed(cargo_into(&dir, &target_dir, &["build", "-q", "--locked"]));
        assert!(
            out.status.success(),
            "building the dispatcher fixture failed"
        );
        target_dir.join("debug").join("dispatcher")
    })
}

/// `out`, once printed (exit code, stdout, stderr) for a failure's log.
pub fn printed(out: Output) -> Output {
    eprintln!(
        "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Sends `sig` to `child` (started with stdout and stderr piped) and reads
/// both to their end, then waits for it: (exit code, stdout, stderr).
pub fn signal_and_wait(child: &mut Child, sig: i32) -> (Option<i32>, String, String) {
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .expect("stdout piped")
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .expect("stderr piped")
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    (status.code(), out, err)
}

/// The stdout of a run that must have succeeded: a failure panics with
/// both its stdout and its stderr.
#[track_caller]
pub fn succeeded(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A run's stdout as text (lossy).
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `cmd` (stdin closed) to its end: its exit code and its stdout then
/// stderr as one text, both printed.
pub fn code_and_text(cmd: &mut Command) -> (Option<i32>, String) {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("exit {:?}\n{text}", out.status.code());
    (out.status.code(), text)
}

/// `git ARGS` in `dir`, with a committer set and signing off; panics when
/// it fails.
pub fn git(dir: &Path, args: &[&str]) {
    git_out(dir, args);
}

/// `git ARGS` in `dir` as [`git`] runs it (through
/// [`test_history::git`], the tests' one git runner): what it printed,
/// trimmed.
pub fn git_out(dir: &Path, args: &[&str]) -> String {
    test_history::git(dir, args).unwrap_or_else(|e| panic!("{e}"))
}

/// Copies the folder `from` to `to`, `__pycache__` left out.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.path().is_dir() {
            if e.file_name() != "__pycache__" {
                copy_dir(&e.path(), &dest);
            }
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// The test venv's `uv` (pinned in `tests/requirements.txt`): the
/// launcher most Python projects start their workers through.
pub fn uv() -> PathBuf {
    let uv = venv_python().with_file_name("uv");
    assert!(
        uv.exists(),
        "the test venv has no uv ({}): run `cargo xtask test`, which provisions it from tests/requirements.txt",
        uv.display()
    );
    uv
}

/// Makes `dir` a project as `uv run` finds it: its own `.venv` (the
/// default interpreter's, `--without-pip`), and a `pyproject.toml` naming
/// it `name` where it has none.
pub fn uv_project(dir: &Path, name: &str) {
    let pyproject = dir.join("pyproject.toml");
    if !pyproject.exists() {
        std::fs::write(
            &pyproject,
            format!("[project]\nname = {name:?}\nversion = \"0.1.0\"\ndependencies = []\n"),
        )
        .unwrap();
    }
    let out = Command::new(python())
        .args(["-m", "venv", "--without-pip"])
        .arg(dir.join(".venv"))
        .output()
        .unwrap();
    assert!(out.status.success(), "python -m venv: {out:?}");
}

/// The `purelib` site-packages folder of the interpreter `python` (a
/// venv's `bin/python`: that venv's).
pub fn site_packages(python: &Path) -> PathBuf {
    let out = Command::new(python)
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The records of a bench run's `trials.jsonl` in `out`, every line whole.
pub fn trials(out: &Path) -> Vec<TrialRecord> {
    let text = std::fs::read_to_string(out.join("trials.jsonl")).expect("trials.jsonl");
    assert!(text.ends_with('\n'), "every record line is complete");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad record {l}: {e}")))
        .collect()
}

/// How many lines the file at `path` has so far (0 before it exists).
pub fn lines_in(path: &Path) -> usize {
    std::fs::read(path)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count())
        .unwrap_or(0)
}

/// Polls `done` until it gives a value, while `child` runs: the test
/// fails when `child` ends first (with its stderr) or `bound` passes
/// (with `what`, and what `ps` shows). The one wait of the suites on a
/// process they watch.
pub fn wait_while_running<T>(
    child: &mut Child,
    what: &str,
    bound: Duration,
    mut done: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(v) = done() {
            return v;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("it ended before {what} ({status}): {err}");
        }
        assert!(
            Instant::now() < deadline,
            "not {what} within {bound:?}:\n{}",
            ps()
        );
        // Watching /proc or a file: a short pause between looks, not a
        // fixed wait.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Polls `done` until it holds, failing the test after `bound` with `what`.
pub fn wait_until(what: &str, bound: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + bound;
    while !done() {
        assert!(Instant::now() < deadline, "not {what} within {bound:?}");
        // Watching /proc or a folder: a short pause between looks.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits (at most two minutes) until the bench `child` has written `n`
/// records to `log` (its `trials.jsonl`), while it still runs.
pub fn wait_for_trials(child: &mut Child, log: &Path, n: usize) {
    wait_while_running(
        child,
        &format!("{n} trials were written"),
        Duration::from_secs(120),
        || (lines_in(log) >= n).then_some(()),
    );
}

/// A marker no other process on the machine has in its argv: the suite's
/// `topic`, the test's `name`, this test process's pid.
pub fn marker(topic: &str, name: &str) -> String {
    format!("coldstart-{topic}-{name}-{}", std::process::id())
}

/// Every live process whose argv holds `marker`: (pid, argv).
pub fn running_with(marker: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let argv = String::from_utf8_lossy(&raw).replace('\0', " ");
        if argv.contains(marker) {
            found.push((pid, argv));
        }
    }
    found
}

/// `ps`'s view of every process (pid, group, state, command), for a
/// failure's message.
pub fn ps() -> String {
    Command::new("ps")
        .args(["-eo", "pid,pgid,stat,cmd"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// No process of the group exists any more, not even a zombie.
#[track_caller]
pub fn assert_group_gone(pgid: u32) {
    // SAFETY: kill with signal 0 only checks for existence.
    let rc = unsafe { libc::kill(-(pgid as i32), 0) };
    let err = std::io::Error::last_os_error();
    assert!(
        rc == -1 && err.raw_os_error() == Some(libc::ESRCH),
        "process group {pgid} still has processes:\n{}",
        ps()
    );
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

/// The one redaction of a whole output before it is compared or
/// snapshotted: what changes from run to run or machine to machine becomes
/// a placeholder, everything else stays as printed. The default
/// interpreter's path becomes `[PYTHON]`, the workspace's place (or a
/// page's `<project>`) `[ROOT]`, a path in the temporary folder (or a
/// page's `<tmp>/...`) `[TMP]`, a pid or a thread's id (three digits or
/// more after `pid`, `pid:`, `process`, `Process`, `worker`, `Thread`,
/// `chain:`, a parent chain's `<`, or a JSON `"pid"`; a log's `name[PID]`)
/// `[PID]`, the interpreter py-spy names (`Python v3.11.7
/// (PATH)`) `Python [INTERPRETER]`, a line of the standard library's
/// `threading.py` in a stack (which moves with the interpreter's version)
/// `threading.py:[LINE]`, a loopback port (also a JSON `"port"`) `[PORT]`,
/// a JSON `"t_ns"` clock reading `[NS]`, a commit's id (12 or 40 hex
/// digits, as git shortens and prints it) `[COMMIT]`, the CPUs a bench
/// may use `CPUs [CPUS] available`, the harness's own overhead `([RATIO])`,
/// a warning of the machine's load (which comes and goes with other work)
/// nothing, an interpreter's full version
/// (`Python 3.11.7`) `Python [VERSION]`, a duration `[DURATION]`, a size
/// `[SIZE]`; a list ranked by time (lines each a duration, two spaces and
/// a name: which names make it and their order change from run to run)
/// becomes one line `  [RANKED BY TIME]`. The rules, in the order applied:
/// one list for [`redact`] and [`redactions`].
pub fn redaction_rules() -> Vec<(String, &'static str)> {
    let root = regex::escape(&root().display().to_string());
    let tmp = std::env::temp_dir().display().to_string();
    let tmp = regex::escape(tmp.trim_end_matches('/'));
    vec![
        (
            format!(
                r"{}([^\w.]|$)",
                regex::escape(&python().display().to_string())
            ),
            "[PYTHON]$1",
        ),
        (format!("{root}|<project>"), "[ROOT]"),
        (format!(r#"({tmp}|<tmp>)/[^\s:;'"()]+"#), "[TMP]"),
        (r"\b([0-9a-f]{40}|[0-9a-f]{12})\b".into(), "[COMMIT]"),
        (r"\bCPUs [0-9,-]+ available".into(), "CPUs [CPUS] available"),
        (
            r"(?m)^warning: (some task waited for a CPU|the 1-minute load average).*\n".into(),
            "",
        ),
        (
            r"of worker lifecycles \(\d+\.\d+x\)".into(),
            "of worker lifecycles ([RATIO])",
        ),
        (
            r#"(\bpid|\bprocess|\bProcess|\bworker|\bPID|\bThread|\bchain|"pid")(:?) \d{3,}\b"#
                .into(),
            "$1$2 [PID]",
        ),
        (r"< \d{3,} \(".into(), "< [PID] ("),
        (r"(\w)\[\d{3,}\]".into(), "$1[[PID]]"),
        (
            r"\bPython v\d+\.\d+\.\d+\S* \([^()\n]+\)".into(),
            "Python [INTERPRETER]",
        ),
        (r"\(threading\.py:\d+\)".into(), "(threading.py:[LINE])"),
        (r"\b(127\.0\.0\.1|localhost):\d+\b".into(), "$1:[PORT]"),
        (r#""port": \d+"#.into(), r#""port": [PORT]"#),
        (r#""t_ns": \d+"#.into(), r#""t_ns": [NS]"#),
        (
            r"\bPython 3\.\d+\.\d+((a|b|rc)\d+)?\+?".into(),
            "Python [VERSION]",
        ),
        (
            r"\b\d+(\.\d+)?(e[-+]?\d+)? ?(ns|µs|us|ms|s|min)\b".into(),
            "[DURATION]",
        ),
        (
            r"\b\d+(\.\d+)? ?(B|KiB|MiB|GiB|kB|KB|MB|GB)\b".into(),
            "[SIZE]",
        ),
        (
            r"(?m)^ +\[DURATION\]  \S.*(\n +\[DURATION\]  \S.*)*".into(),
            "  [RANKED BY TIME]",
        ),
    ]
}

/// `text` through [`redaction_rules`].
pub fn redact(text: &str) -> String {
    let mut out = text.to_owned();
    for (pattern, replacement) in redaction_rules() {
        let re = regex::Regex::new(&pattern).expect("a redaction rule is a regex");
        out = re.replace_all(&out, replacement).into_owned();
    }
    out
}

/// insta's settings with [`redaction_rules`] as its filters: bind a
/// snapshot of a whole output to it,
/// `support::redactions().bind(|| insta::assert_snapshot!(text))`.
pub fn redactions() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    for (pattern, replacement) in redaction_rules() {
        settings.add_filter(&pattern, replacement);
    }
    settings
}

/// Headless Chromium (`chromium`, the path the case found installed) with
/// what every page test needs: no sandbox, no GPU, no network or update
/// of its own, no scroll bars, and a profile of its own under `tmp`, kept
/// while the returned folder lives. The case adds its window size, its
/// time budget and what to do with the page.
pub fn headless_chromium(chromium: &Path, tmp: &Path) -> (Command, tempfile::TempDir) {
    let profile = tempfile::tempdir_in(tmp).unwrap();
    let mut cmd = Command::new(chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()));
    (cmd, profile)
}

/// The events of a Chrome JSON trace, after checking it by the rules.
pub fn chrome_events(path: &Path) -> Vec<Value> {
    let json = std::fs::read_to_string(path).unwrap();
    ::trace::chrome::validate(&json).unwrap_or_else(|e| panic!("{e}"));
    let doc: Value = serde_json::from_str(&json).unwrap();
    doc["traceEvents"].as_array().unwrap().clone()
}

/// `process_name` and `thread_name` metadata: pid -> name, (pid, tid) -> name.
pub fn names(events: &[Value]) -> (BTreeMap<u64, String>, BTreeMap<(u64, u64), String>) {
    let (mut processes, mut threads) = (BTreeMap::new(), BTreeMap::new());
    for e in events.iter().filter(|e| e["ph"] == "M") {
        let (pid, tid) = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        let name = e["args"]["name"].as_str().unwrap().to_owned();
        if e["name"] == "process_name" {
            processes.insert(pid, name);
        } else {
            threads.insert((pid, tid), name);
        }
    }
    (processes, threads)
}

/// The Perfetto file decoded: each track's begins and ends pair up, and
/// (process names, thread names) of its descriptors.
pub fn perfetto_names(path: &Path) -> (Vec<String>, Vec<String>) {
    let bytes = std::fs::read(path).unwrap();
    let trace = PbTrace::decode(bytes.as_slice()).expect("the Perfetto file decodes");
    let mut depth = BTreeMap::<u64, i64>::new();
    for e in trace.packet.iter().filter_map(|p| p.track_event.as_ref()) {
        let d = depth.entry(e.track_uuid.unwrap()).or_default();
        match e.r#type {
            Some(1) => *d += 1,
            Some(2) => *d -= 1,
            _ => {}
        }
        assert!(*d >= 0, "a slice ends before it begins");
    }
    assert!(depth.values().all(|d| *d == 0), "{depth:?}");
    let tracks = trace
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref());
    let mut processes = Vec::new();
    let mut threads = Vec::new();
    for t in tracks {
        if let Some(p) = &t.process {
            processes.push(p.process_name.clone().unwrap_or_default());
        }
        if let Some(th) = &t.thread {
            threads.push(th.thread_name.clone().unwrap_or_default());
        }
    }
    (processes, threads)
}

#[test]
fn the_redaction_folds_a_page_placeholder_and_the_real_place_alike() {
    let root = root().display().to_string();
    let tmp = std::env::temp_dir().join("coldstart-bootstrap-0/518e/site");
    let real = format!("ROOT={root} PYTHONPATH={}", tmp.display());
    let page = "ROOT=<project> PYTHONPATH=<tmp>/coldstart-bootstrap-0/518e/site";
    assert_eq!(redact(&real), "ROOT=[ROOT] PYTHONPATH=[TMP]");
    assert_eq!(redact(page), redact(&real));
    // A folder that is neither stays.
    assert_eq!(redact("in <prefix>/bin"), "in <prefix>/bin");
}

#[test]
fn the_redaction_folds_a_pid_or_thread_id_after_each_word() {
    let text = "process 1 (pid 7947)\npid: 7947 (still running)\n\
                Process 7947: python3 w.py\nThread 7950 (idle): \"MainThread\"\n\
                worker 12345, PID 999\nprocess 1 of 3, Thread 12 (idle)\n";
    assert_eq!(
        redact(text),
        "process 1 (pid [PID])\npid: [PID] (still running)\n\
         Process [PID]: python3 w.py\nThread [PID] (idle): \"MainThread\"\n\
         worker [PID], PID [PID]\nprocess 1 of 3, Thread 12 (idle)\n"
    );
}

#[test]
fn the_redaction_folds_the_interpreter_py_spy_names() {
    for line in [
        "Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)",
        "Python v3.13.0rc1 (<prefix>/bin/python3.13)",
        "Python v3.8.20 (/usr/bin/python3.8)",
    ] {
        assert_eq!(redact(line), "Python [INTERPRETER]", "{line}");
    }
    // Only a version with its interpreter's path in brackets.
    assert_eq!(redact("Python 3.11 is old"), "Python 3.11 is old");
}

#[test]
fn the_redaction_folds_a_line_of_threading_py_and_keeps_the_workers() {
    let stack = "    Condition.wait (threading.py:327)\n    Event.wait (threading.py:629)\n    \
                 block_forever_before_ready (hang_before_ready.py:13)\n    \
                 serve (mythreading.py:4)\n";
    assert_eq!(
        redact(stack),
        "    Condition.wait (threading.py:[LINE])\n    Event.wait (threading.py:[LINE])\n    \
         block_forever_before_ready (hang_before_ready.py:13)\n    \
         serve (mythreading.py:4)\n"
    );
}
