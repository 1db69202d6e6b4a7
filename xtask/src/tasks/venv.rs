//! The test venv `.venv` at the workspace root, from `tests/requirements.txt`:
//! made with the real interpreter behind `python3` (or `$COLDSTART_PYTHON`);
//! nothing runs when a stamp in the venv records the same requirements and
//! base interpreter, otherwise the venv is made afresh (`venv --clear`), pip
//! installs uv at its pin and uv the rest from its cache. `cargo xtask test` provisions it for the suite,
//! `cargo xtask dist` for maturin.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use super::steps::{run_step, step};

/// The requirements file the venv is provisioned from, relative to the root.
pub const REQUIREMENTS: &str = "tests/requirements.txt";
/// The venv, relative to the root (`tests/it/support.rs` looks there).
pub const VENV: &str = ".venv";
/// What the last successful provisioning installed, inside the venv.
pub const STAMP: &str = ".coldstart-provisioned";

/// Creates or refreshes `.venv` at `root` from its `tests/requirements.txt`,
/// skipping pip when the stamp matches.
pub fn provision(root: &Path) -> Result<()> {
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
    install(root, &venv, &String::from_utf8_lossy(&text))?;
    std::fs::write(&stamp, stamp_text)
        .with_context(|| format!("cannot write the provisioning stamp {}", stamp.display()))?;
    Ok(())
}

/// Installs the pins into `venv`: uv first, at its pin, with pip; then the
/// whole file with uv, which links each package from its own cache
/// (`~/.cache/uv`, outside any clone, content-addressed and checked against
/// each wheel's hash) instead of unpacking every wheel again as pip does:
/// on a clean clone with both caches warm, about 11 s where pip took 38 s
/// (the 786 MB venv; 2 cores with builds running). Without a uv pin in the
/// file, pip installs it all.
fn install(root: &Path, venv: &Path, requirements: &str) -> Result<()> {
    let python = venv.join("bin").join("python");
    let uv_pin = requirements
        .lines()
        .map(str::trim)
        .find(|line| line.starts_with("uv=="));
    let mut pip = Command::new(&python);
    pip.args(["-m", "pip", "install", "--disable-pip-version-check"])
        .current_dir(root);
    match uv_pin {
        Some(pin) => pip.arg(pin),
        None => pip.arg("-r").arg(REQUIREMENTS),
    };
    let what = uv_pin.unwrap_or(REQUIREMENTS);
    let label = format!(
        "provision: {} -m pip install --disable-pip-version-check {}{what}",
        python.display(),
        if uv_pin.is_some() { "" } else { "-r " }
    );
    if !run_step(&label, pip)? {
        bail!(
            "pip could not install {what} into {}; read pip's message above (network, index, pins)",
            venv.display()
        );
    }
    if uv_pin.is_none() {
        return Ok(());
    }
    let mut uv = Command::new(venv.join("bin").join("uv"));
    uv.args(["pip", "install", "--python"])
        .arg(&python)
        .args(["-r", REQUIREMENTS])
        .current_dir(root);
    let label = format!(
        "provision: {} pip install --python {} -r {REQUIREMENTS}",
        venv.join("bin/uv").display(),
        python.display()
    );
    if !run_step(&label, uv)? {
        bail!(
            "uv could not install {REQUIREMENTS} into {}; read its message above (network, index, pins)",
            venv.display()
        );
    }
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

/// A Python with `packages` (pinned, from PyPI) importable, for a
/// benchmark's contenders: a venv cached in the temp directory under
/// `coldstart-NAME`, made from `python` and filled with pip on first use;
/// `probe` is the Python that must run in it (an import) for it to count.
pub fn tool_python(python: &str, name: &str, packages: &[&str], probe: &str) -> Result<PathBuf> {
    let venv = std::env::temp_dir().join(format!("coldstart-{name}"));
    let py = venv.join("bin/python");
    let ready = |py: &Path| {
        Command::new(py)
            .args(["-c", probe])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if py.exists() && ready(&py) {
        return Ok(py);
    }
    let status = Command::new(python)
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .with_context(|| format!("running `{python} -m venv`"))?;
    if !status.success() {
        bail!("`{python} -m venv {}` failed", venv.display());
    }
    let out = Command::new(&py)
        .args("-m pip install --quiet --disable-pip-version-check".split(' '))
        .args(packages)
        .output()
        .context("running pip")?;
    if !out.status.success() || !ready(&py) {
        bail!(
            "could not install {} with pip: {}",
            packages.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(py)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root whose pins hold uv: pip installs uv, uv the rest, and the
    /// stamp is written only after both.
    #[test]
    fn uv_installs_the_pins_once_pip_has_installed_uv() {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let pins = std::fs::read_to_string(workspace.join(REQUIREMENTS)).unwrap();
        let uv = pins.lines().find(|l| l.starts_with("uv==")).unwrap();
        let iniconfig = pins.lines().find(|l| l.starts_with("iniconfig==")).unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("tests")).unwrap();
        std::fs::write(
            root.path().join(REQUIREMENTS),
            format!("{uv}\n{iniconfig}\n"),
        )
        .unwrap();
        provision(root.path()).unwrap();
        let venv = root.path().join(VENV);
        let freeze = Command::new(venv.join("bin/python"))
            .args(["-m", "pip", "freeze"])
            .output()
            .unwrap();
        let freeze = String::from_utf8(freeze.stdout).unwrap();
        assert!(
            freeze.lines().any(|l| l == iniconfig) && freeze.lines().any(|l| l == uv),
            "{freeze}"
        );
        assert!(venv.join(STAMP).is_file());
    }

    #[test]
    fn fnv1a64_matches_the_reference_values() {
        // From the FNV reference test vectors.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
