//! `cargo xtask test`: the whole suite, as CI runs it (`.ci/run` calls
//! exactly this).
//!
//! Three steps, each printed as it starts:
//! 1. provision: the test venv `.venv` at the workspace root, from
//!    `tests/requirements.txt`, made with the real interpreter behind
//!    `python3` (or `$COLDSTART_PYTHON`); nothing runs when a stamp in the
//!    venv records the same requirements and base interpreter, otherwise
//!    the venv is made afresh (`venv --clear`), pip installs uv at its pin
//!    and uv the rest from its own cache outside the clone;
//!    then a Python 3.15 for the PEP 810 (`lazy import`) cases, unpacked
//!    from Debian unstable's packages under `target/interpreters/` (see
//!    [`super::interpreters`]; skipped when its stamp is there and it runs;
//!    a failure there is a warning here, and the PEP 810 cases fail); then
//!    the Debian packages of [`super::system`] (zsh and fish, whose
//!    completions are run for real; PostgreSQL's server, which the history
//!    store's tests start themselves; Chromium, which opens pages), with
//!    `apt-get` when missing; then the trace viewers of [`super::viewers`]
//!    (speedscope, pinned, `npm ci` into `tests/viewers`);
//! 2. check: `cargo xtask modcycles` and `cargo xtask dupnames` (in
//!    process, no build), then `cargo fmt --all --check`, then
//!    `cargo clippy --workspace --all-targets -- -D warnings`, then
//!    `cargo doc --no-deps --workspace` with rustdoc's warnings as errors;
//! 3. test: `cargo nextest run --workspace --features NATIVE --test-threads
//!    2xCORES --profile ci` where cargo-nextest is installed (two tests a
//!    core: much of the suite waits on workers; a thread count given after
//!    `--` is kept), `cargo test --workspace --features
//!    NATIVE` otherwise, with any arguments given after `--`, and
//!    `$COLDSTART_PYTHON3_15` naming the provisioned 3.15 (the tests' lookup
//!    is the `test-interpreters` crate, which fails a case whose variable
//!    names no working one: no NOT RUN in this run). NATIVE is the `native`
//!    features (native frames through the system's libunwind, which the
//!    provision step installs): one build runs every test, `pystacks`'s
//!    native frames and the integration tests' `native_stacks` module
//!    among them (the coldstart they run built with its `native` feature:
//!    a Rust parent's stacks through the command line). A build without
//!    them is still tested end to end: the wheel test's coldstart is one,
//!    and it checks that `--native` there says how to get native frames.
//!
//! Exit codes: 0 all green, 1 a check or a test failed, 2 a step could not
//! run (no python3, pip failed, cargo missing).

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

use anyhow::Result;

use super::interpreters::{self, Mode};
use super::project_root;
use super::steps::{run_step, step};
use super::{system, venv, viewers};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Do not create or refresh the test venv (.venv) nor download Python
    /// 3.15; use what is there as it is.
    #[arg(long)]
    no_provision: bool,
    /// Skip `cargo fmt --check` and `cargo clippy`.
    #[arg(long)]
    skip_lint: bool,
    /// Passed to the test runner (`cargo nextest run` or `cargo test`).
    #[arg(last = true)]
    runner_args: Vec<OsString>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let started = std::time::Instant::now();
    let root = project_root();
    let python315 = if args.no_provision {
        step("provision: skipped (--no-provision)");
        interpreters::python315(Mode::Existing)
    } else {
        venv::provision(&root)?;
        system::provision()?;
        viewers::provision(&root)?;
        interpreters::python315(Mode::Download)
    };

    if args.skip_lint {
        step("check: skipped (--skip-lint)");
    } else if let Some(code) = lint(&root)? {
        return Ok(code);
    }

    let nextest = has_nextest(&root);
    let threads = test_threads().to_string();
    let mut selection = vec!["--workspace", "--features", NATIVE_FEATURES];
    if nextest && !sets_threads(&args.runner_args) {
        selection.extend(["--test-threads", &threads]);
    }
    let (label, mut test) = runner(&root, nextest, &selection);
    test.args(&args.runner_args);
    // The binaries the tests build (`support::built`) are this build's.
    test.env(TEST_FEATURES, NATIVE_FEATURES);
    // A test that needs a Debian package of `system`, or an interpreter,
    // fails when it is missing here, instead of saying NOT RUN (the rule of
    // `test_interpreters::or_not_run`).
    test.env(system::PROVISIONED, "1");
    if let Some(python) = &python315 {
        test.env(test_interpreters::var(interpreters::MINOR), python);
    }
    let label = with_args(&label, &args.runner_args);
    if !run_step(&label, test)? {
        return Ok(failed(
            "tests failed (a build that does not link needs the system's libunwind: `apt-get install libunwind-dev`)",
        ));
    }
    step(&format!(
        "all steps passed in {:.0} s (not counting the build of xtask itself)",
        started.elapsed().as_secs_f64()
    ));
    Ok(ExitCode::SUCCESS)
}

/// The lint steps: `modcycles`, `dupnames`, `cargo fmt --check`, clippy
/// with warnings as errors, rustdoc with warnings as errors; `Some(code)`
/// when one failed.
fn lint(root: &Path) -> Result<Option<ExitCode>> {
    step("check: cargo xtask modcycles");
    if !super::modcycles::check(root)? {
        return Ok(Some(ExitCode::from(1)));
    }
    step("check: cargo xtask dupnames");
    if !super::dupnames::check(root)? {
        return Ok(Some(ExitCode::from(1)));
    }
    let fmt = cargo(root, ["fmt", "--all", "--check"]);
    if !run_step("check: cargo fmt --all --check", fmt)? {
        return Ok(Some(failed(
            "cargo fmt found unformatted code: run `cargo fmt --all`",
        )));
    }
    let clippy = [
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ];
    if !run_step(
        "check: cargo clippy --workspace --all-targets -- -D warnings",
        cargo(root, clippy),
    )? {
        return Ok(Some(failed(
            "clippy found warnings: fix them, they are errors here",
        )));
    }
    // The crates are embedded by other projects: their documentation
    // must build without a broken or private link.
    let mut doc = cargo(root, ["doc", "--no-deps", "--workspace"]);
    doc.env("RUSTDOCFLAGS", "-D warnings");
    if !run_step(
        "check: RUSTDOCFLAGS='-D warnings' cargo doc --no-deps --workspace",
        doc,
    )? {
        return Ok(Some(failed(
            "rustdoc found warnings (a broken or private link, bad HTML): fix them, they are errors here",
        )));
    }
    Ok(None)
}

/// The test runner over `args` (`--workspace` and its features), with its
/// label: `cargo nextest run ARGS --profile ci` where cargo-nextest is
/// installed (`nextest`), else `cargo test ARGS`.
fn runner(root: &Path, nextest: bool, args: &[&str]) -> (String, Command) {
    let mut argv: Vec<&str> = Vec::new();
    let mut label = String::from("test: cargo ");
    if nextest {
        argv.extend(["nextest", "run"]);
        argv.extend(args);
        argv.extend(["--profile", "ci"]);
        label.push_str(&argv.join(" "));
    } else {
        argv.push("test");
        argv.extend(args);
        label.push_str(&argv.join(" "));
        label.push_str(" (cargo-nextest is not installed)");
    }
    (label, cargo(root, &argv))
}

/// Tests run at once under nextest: two per core. Much of the suite waits
/// on Python workers, pipes and timeouts. On 2 cores, with the builds
/// inside tests already done, one test a core left 12% of the CPU idle
/// over the run; two a core left 2% (over the run and a build before
/// it), and the tests took 330 s against 386.
fn test_threads() -> usize {
    2 * std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Whether the arguments for the runner set its number of test threads.
fn sets_threads(runner_args: &[OsString]) -> bool {
    runner_args.iter().any(|a| {
        let a = a.to_string_lossy();
        a.starts_with("-j") || a.starts_with("--test-threads")
    })
}

/// The `native` features, which the test step's one build has.
const NATIVE_FEATURES: &str = "pystacks/native,coldstart/native,coldstart-tests/native";

/// The variable telling the integration tests which features their test
/// build has, so the binaries they build (`support::built`) are the same
/// build's rather than a second compile of the graph.
const TEST_FEATURES: &str = "COLDSTART_TEST_FEATURES";

fn failed(what: &str) -> ExitCode {
    eprintln!("error: {what}");
    ExitCode::from(1)
}

fn with_args(label: &str, extra: &[OsString]) -> String {
    let mut out = label.to_owned();
    for arg in extra {
        let _ = write!(out, " {}", arg.to_string_lossy());
    }
    out
}

/// `cargo` as the one running us (`$CARGO`), from the root.
fn cargo<I, S>(root: &Path, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.args(args).current_dir(root);
    cmd
}

fn has_nextest(root: &Path) -> bool {
    cargo(root, ["nextest", "--version"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runner_is_labelled_as_it_runs() {
        let root = Path::new(".");
        let args = ["--workspace", "--features", NATIVE_FEATURES];
        let (label, cmd) = runner(root, true, &args);
        assert_eq!(
            label,
            format!(
                "test: cargo nextest run --workspace --features {NATIVE_FEATURES} --profile ci"
            )
        );
        assert_eq!(cmd.get_args().last().unwrap(), "ci");
        let (label, _) = runner(root, false, &args);
        assert_eq!(
            label,
            format!(
                "test: cargo test --workspace --features {NATIVE_FEATURES} (cargo-nextest is not installed)"
            )
        );
    }

    #[test]
    fn the_runner_s_own_thread_count_is_kept() {
        let given =
            |args: &[&str]| sets_threads(&args.iter().map(OsString::from).collect::<Vec<_>>());
        assert!(given(&["--test-threads", "1"]));
        assert!(given(&["--test-threads=3"]));
        assert!(given(&["-j", "2"]));
        assert!(given(&["-j2"]));
        assert!(!given(&["-E", "test(/^conformance/)"]));
        assert!(!given(&[]));
        assert!(test_threads() >= 2);
    }

    #[test]
    fn runner_args_are_shown_in_the_step() {
        let args = [OsString::from("-E"), OsString::from("test(/^conformance/)")];
        assert_eq!(
            with_args("test: cargo test --workspace", &args),
            "test: cargo test --workspace -E test(/^conformance/)"
        );
    }

    /// Each package with its features as `cargo tree ARGS` resolves them, as
    /// (package, features) pairs: a package built for the host (a build
    /// script's, a proc macro's) and for the target may have two.
    fn resolved_features(args: &[&str]) -> std::collections::BTreeSet<(String, String)> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out = Command::new(cargo)
            .arg("tree")
            .args(args)
            .args(["--prefix", "none", "--format", "{p}|{f}"])
            .current_dir(root)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cargo tree {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|line| line.trim_end_matches(" (*)").split_once('|'))
            .map(|(package, features)| (package.to_owned(), features.to_owned()))
            .collect()
    }

    #[test]
    fn xtask_builds_its_dependencies_as_the_suite_does() {
        // `cargo xtask` builds xtask alone; the suite's build is the whole
        // workspace with its tests. Where a shared package's features differ,
        // the test build compiles it and every crate above it again.
        let xtask = resolved_features(&["-p", "xtask", "-e", "normal,build"]);
        let suite = resolved_features(&["--workspace", "-e", "normal,build,dev"]);
        let drifted: Vec<String> = xtask
            .difference(&suite)
            .map(|(package, features)| {
                let theirs: Vec<&str> = suite
                    .iter()
                    .filter(|(p, _)| p == package)
                    .map(|(_, f)| f.as_str())
                    .collect();
                format!("{package}: xtask [{features}], the suite {theirs:?}")
            })
            .collect();
        assert!(
            drifted.is_empty(),
            "xtask/Cargo.toml should ask for these features as the suite does:\n{}",
            drifted.join("\n")
        );
    }
}
