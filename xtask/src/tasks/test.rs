//! `cargo xtask test`: the whole suite, as CI runs it (`.ci/run` calls
//! exactly this).
//!
//! Three steps, each printed as it starts:
//! 1. provision: the test venv `.venv` at the workspace root, from
//!    `tests/requirements.txt`, made with the real interpreter behind
//!    `python3` (or `$COLDSTART_PYTHON`); nothing runs when a stamp in the
//!    venv records the same requirements and base interpreter, otherwise
//!    the venv is made afresh (`venv --clear`) and pip installs the pins;
//!    then a Python 3.15 for the PEP 810 (`lazy import`) cases, unpacked
//!    from Debian unstable's packages under `target/interpreters/` (see
//!    [`super::interpreters`]; skipped when its stamp is there and it runs;
//!    a failure there is a warning here, and the PEP 810 cases fail);
//! 2. check: `cargo fmt --all --check`, then
//!    `cargo clippy --workspace --all-targets -- -D warnings`;
//! 3. test: `cargo nextest run --workspace --profile ci` where cargo-nextest
//!    is installed, `cargo test --workspace` otherwise, with any arguments
//!    given after `--`, and `$COLDSTART_PYTHON3_15` naming the provisioned
//!    3.15 (the tests' lookup is the `test-interpreters` crate, which fails a
//!    case whose variable names no working one: no NOT RUN in this run).
//!
//! Exit codes: 0 all green, 1 a check or a test failed, 2 a step could not
//! run (no python3, pip failed, cargo missing).

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, Result, bail};

use super::interpreters::{self, Mode};
use super::project_root;

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

/// The requirements file the venv is provisioned from, relative to the root.
const REQUIREMENTS: &str = "tests/requirements.txt";
/// The venv, relative to the root (`tests/it/support.rs` looks there).
const VENV: &str = ".venv";
/// What the last successful provisioning installed, inside the venv.
const STAMP: &str = ".coldstart-provisioned";

pub fn run(args: Args) -> Result<ExitCode> {
    let root = project_root();
    let python315 = if args.no_provision {
        step("provision: skipped (--no-provision)");
        interpreters::python315(Mode::Existing)
    } else {
        provision(&root)?;
        interpreters::python315(Mode::Download)
    };

    if args.skip_lint {
        step("check: skipped (--skip-lint)");
    } else {
        let fmt = cargo(&root, ["fmt", "--all", "--check"]);
        if !run_step("check: cargo fmt --all --check", fmt)? {
            return Ok(failed(
                "cargo fmt found unformatted code: run `cargo fmt --all`",
            ));
        }
        let clippy = cargo(
            &root,
            [
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        );
        if !run_step(
            "check: cargo clippy --workspace --all-targets -- -D warnings",
            clippy,
        )? {
            return Ok(failed(
                "clippy found warnings: fix them, they are errors here",
            ));
        }
    }

    let (label, mut test) = if has_nextest(&root) {
        let cmd = cargo(&root, ["nextest", "run", "--workspace", "--profile", "ci"]);
        ("test: cargo nextest run --workspace --profile ci", cmd)
    } else {
        let cmd = cargo(&root, ["test", "--workspace"]);
        (
            "test: cargo test --workspace (cargo-nextest is not installed)",
            cmd,
        )
    };
    test.args(&args.runner_args);
    if let Some(python) = &python315 {
        test.env(test_interpreters::var(interpreters::MINOR), python);
    }
    let label = with_args(label, &args.runner_args);
    if !run_step(&label, test)? {
        return Ok(failed("tests failed"));
    }
    step("all steps passed");
    Ok(ExitCode::SUCCESS)
}

pub(super) fn step(text: &str) {
    eprintln!("==> {text}");
}

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

/// Prints the step, runs it with inherited streams; `Ok(false)` when it ran
/// and failed.
fn run_step(label: &str, mut cmd: Command) -> Result<bool> {
    step(label);
    let status = cmd
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("cannot run {cmd:?}: is it installed and on PATH?"))?;
    if !status.success() {
        eprintln!("==> {label}: failed ({status})");
    }
    Ok(status.success())
}

fn has_nextest(root: &Path) -> bool {
    cargo(root, ["nextest", "--version"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Creates or refreshes `.venv`, skipping pip when the stamp matches.
fn provision(root: &Path) -> Result<()> {
    let requirements = root.join(REQUIREMENTS);
    let text = std::fs::read(&requirements)
        .with_context(|| format!("cannot read {}", requirements.display()))?;
    let base = base_python()?;
    let stamp_text = format!(
        "requirements fnv1a64 {:016x}\nbase interpreter {}\n",
        fnv1a64(&text),
        base.display()
    );
    let venv = root.join(VENV);
    let venv_python = venv.join("bin").join("python");
    let stamp = venv.join(STAMP);

    let current = std::fs::read_to_string(&stamp).ok();
    let works = venv_python.exists() && python_runs(&venv_python);
    if works && current.as_deref() == Some(stamp_text.as_str()) {
        step(&format!(
            "provision: {VENV} is up to date with {REQUIREMENTS} (base {})",
            base.display()
        ));
        return Ok(());
    }

    // Anything else than an exact match starts from a clean venv, so a
    // package dropped from the pins cannot linger and hide a missing one.
    let mut venv_cmd = Command::new(&base);
    venv_cmd.args(["-m", "venv"]);
    if venv.exists() {
        venv_cmd.arg("--clear");
    }
    venv_cmd.arg(&venv);
    let label = format!("provision: {} -m venv {}", base.display(), venv.display());
    if !run_step(&label, venv_cmd)? {
        bail!(
            "creating the test venv {} with {} failed; check that the interpreter has the venv module (Debian: apt-get install python3-venv)",
            venv.display(),
            base.display()
        );
    }

    // A stale stamp must not survive a failed install.
    let _ = std::fs::remove_file(&stamp);
    let mut pip = Command::new(&venv_python);
    pip.args(["-m", "pip", "install", "--disable-pip-version-check", "-r"])
        .arg(&requirements)
        .current_dir(root);
    let label = format!(
        "provision: {} -m pip install --disable-pip-version-check -r {REQUIREMENTS}",
        venv_python.display()
    );
    if !run_step(&label, pip)? {
        bail!(
            "pip could not install {REQUIREMENTS} into {}; read pip's message above (network, index, pins)",
            venv.display()
        );
    }
    std::fs::write(&stamp, stamp_text)
        .with_context(|| format!("cannot write the provisioning stamp {}", stamp.display()))?;
    Ok(())
}

/// The real interpreter behind `python3` (or `$COLDSTART_PYTHON`): a
/// pyenv-style shim resolves to the executable it runs.
fn base_python() -> Result<PathBuf> {
    let wanted = std::env::var_os("COLDSTART_PYTHON").unwrap_or_else(|| "python3".into());
    let out = Command::new(&wanted)
        .args(["-c", "import sys; print(sys.executable)"])
        .stdin(Stdio::null())
        .output()
        .with_context(|| {
            format!(
                "cannot run {}: install python3 or set COLDSTART_PYTHON",
                wanted.to_string_lossy()
            )
        })?;
    if !out.status.success() {
        bail!(
            "{} -c 'print(sys.executable)' failed ({}): {}",
            wanted.to_string_lossy(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let path = String::from_utf8(out.stdout)
        .context("the interpreter's path is not UTF-8")?
        .trim()
        .to_owned();
    if path.is_empty() {
        bail!(
            "{} reports no sys.executable; point COLDSTART_PYTHON at a real interpreter",
            wanted.to_string_lossy()
        );
    }
    Ok(PathBuf::from(path))
}

fn python_runs(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", ""])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// FNV-1a, 64 bits: a stable fingerprint of the requirements file (not a
/// security measure; it only decides whether pip must run again).
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_reference_values() {
        // From the FNV reference test vectors.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn runner_args_are_shown_in_the_step() {
        let args = [OsString::from("-E"), OsString::from("test(/^conformance/)")];
        assert_eq!(
            with_args("test: cargo test --workspace", &args),
            "test: cargo test --workspace -E test(/^conformance/)"
        );
    }
}
