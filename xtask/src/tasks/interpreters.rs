//! The Python 3.15 interpreter of the PEP 810 (`lazy import`) tests,
//! provisioned by `cargo xtask test` without installing anything
//! system-wide.
//!
//! Why: `lazy import` is a SyntaxError before 3.15, so the cases that check
//! how a lazily imported forbidden module is reported need a real 3.15 and
//! print `NOT RUN` without one. Debian's unstable suite packages CPython
//! 3.15; this module takes it from there with apt's ordinary client, in a
//! private state folder, and unpacks it under the workspace's target dir:
//!
//! 1. a private apt state under `target/interpreters/apt/` (its own
//!    sources.list naming only unstable, its own lists and cache, no dpkg
//!    status), `apt-get update` against it;
//! 2. `apt-get download` of the interpreter, its standard library and the
//!    shared libraries it loads (unstable's libc included: its own loader
//!    runs it), plus unstable's patchelf, into `target/interpreters/debs/`;
//! 3. `dpkg-deb -x` of each into [`test_interpreters::provisioned_root`];
//! 4. patchelf (run through the unpacked loader) gives the binary a DT_RPATH
//!    of `$ORIGIN/../lib/x86_64-linux-gnu` (RPATH, not RUNPATH, so the
//!    libraries' own dependencies come from there too), then, in a second
//!    call, the unpacked loader as its interpreter (one call doing both, or
//!    the interpreter first, gives a binary that segfaults);
//! 5. a check in an empty environment: the binary runs, imports ssl,
//!    sqlite3, zlib, json, starts a child through `sys.executable`, and a
//!    file with `lazy import json` runs.
//!
//! A stamp (`package=version` of every .deb unpacked) is written last;
//! when it exists and the interpreter passes the check, nothing is
//! downloaded (and `--no-provision` never downloads: it takes a working
//! interpreter already there, or none). Unstable drops old versions, so nothing is pinned: the
//! versions got are recorded in the stamp and printed.
//!
//! A 3.15 that cannot be provisioned fails the PEP 810 cases, not the
//! other tests: any step that fails (no apt-get, no network, a package gone,
//! not x86-64) prints one warning saying why, and the test runner still gets
//! `$COLDSTART_PYTHON3_15`, naming the fixed place, where nothing works; the
//! tests' lookup (`test-interpreters`) fails a case whose variable names no
//! working 3.15. NOT RUN is left to a plain `cargo test` outside this run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};

/// The minor version provisioned: 3.15, the first with PEP 810.
pub const MINOR: u32 = 15;

/// The private sources.list: Debian unstable, checked with the archive key
/// the host's apt already trusts.
const SOURCES: &str = "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian unstable main\n";

/// What is downloaded: the interpreter, its stdlib, every shared library
/// they load (from unstable, to match the loader), and patchelf.
const PACKAGES: &[&str] = &[
    "python3.15-minimal",
    "libpython3.15-minimal",
    "libpython3.15-stdlib",
    "libc6",
    "libexpat1",
    "libzstd1",
    "zlib1g",
    "libssl3t64",
    "libgcc-s1",
    "libbz2-1.0",
    "libffi8",
    "liblzma5",
    "libsqlite3-0",
    "libuuid1",
    "libstdc++6",
    "patchelf",
];

/// The multiarch library folder of the unpacked root, and its loader.
const LIB: &str = "usr/lib/x86_64-linux-gnu";
const LOADER: &str = "ld-linux-x86-64.so.2";

/// What the check runs: the modules the tests lean on, a child through
/// `sys.executable` (workers start helpers that way), and the version.
const CHECK: &str = "\
import sys, ssl, sqlite3, zlib, json, subprocess
r = subprocess.run([sys.executable, '-c', 'pass'])
assert r.returncode == 0, r
print(sys.version.split()[0])
";

/// PEP 810 itself, run from a file.
const LAZY_CHECK: &str = "lazy import json\nprint(json.dumps('lazy'))\n";

/// May the provisioning download?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Download and unpack when there is no working provisioned one.
    Download,
    /// `--no-provision`: only an already provisioned interpreter is used.
    Existing,
}

/// The Python 3.15 to hand to the test runner as `$COLDSTART_PYTHON3_15`:
/// the provisioned one, or, when it could not be provisioned (one warning
/// printed), its fixed place all the same, so the PEP 810 cases fail rather
/// than print NOT RUN; `None` when that variable is already set (the runner
/// inherits it as it is).
pub fn python315(mode: Mode) -> Option<PathBuf> {
    let var = test_interpreters::var(MINOR);
    if let Some(set) = std::env::var_os(&var) {
        super::steps::step(&format!(
            "provision: Python 3.{MINOR}: ${var} is set ({}), used as it is",
            Path::new(&set).display()
        ));
        return None;
    }
    match provision(mode) {
        Ok(python) => Some(python),
        Err(e) => {
            eprintln!(
                "==> provision: WARNING: no Python 3.{MINOR}, so the PEP 810 (`lazy import`) \
                 cases will fail: {e:#}"
            );
            Some(test_interpreters::provisioned(MINOR))
        }
    }
}

fn provision(mode: Mode) -> Result<PathBuf> {
    let root = test_interpreters::provisioned_root(MINOR);
    let python = test_interpreters::provisioned(MINOR);
    let home = root.parent().context("the provisioned root has a parent")?;
    let stamp = home.join("stamp");

    let recorded = std::fs::read_to_string(&stamp).ok();
    if mode == Mode::Existing && !python.exists() {
        bail!(
            "--no-provision, and nothing is provisioned at {} yet (run `cargo xtask test` once)",
            home.display()
        );
    }
    // `--no-provision` takes a working interpreter even without its stamp
    // (the tests' lookup would find it anyway); otherwise the stamp says the
    // unpacking was complete.
    if recorded.is_some() || mode == Mode::Existing {
        match smoke_test(&python, home) {
            Ok(version) => {
                super::steps::step(&format!(
                    "provision: Python {version} at {} is provisioned (stamp {}): {}",
                    python.display(),
                    stamp.display(),
                    recorded.as_deref().map_or("missing".to_owned(), one_line)
                ));
                return Ok(python);
            }
            Err(e) if mode == Mode::Existing => {
                return Err(e.context(format!(
                    "--no-provision, and the provisioned {} does not pass the check",
                    python.display()
                )));
            }
            Err(e) => eprintln!(
                "==> provision: the provisioned {} fails its check, provisioning afresh: {e:#}",
                python.display()
            ),
        }
    }
    // Whatever is there is incomplete or broken: gone before anything else,
    // so a failure below leaves no interpreter for the tests to half-use.
    if home.exists() {
        std::fs::remove_dir_all(home)
            .with_context(|| format!("cannot remove the old {}", home.display()))?;
    }

    ensure!(
        std::env::consts::ARCH == "x86_64",
        "the provisioning unpacks Debian's amd64 packages, and this machine is {}",
        std::env::consts::ARCH
    );
    let started = Instant::now();
    super::steps::step(&format!(
        "provision: Python 3.{MINOR} from Debian unstable into {} (apt-get download, dpkg-deb -x; nothing system-wide)",
        root.display()
    ));
    let base = home
        .parent()
        .context("the interpreters folder has a parent")?
        .to_path_buf();
    let debs = download(&base)?;

    std::fs::create_dir_all(&root).with_context(|| format!("cannot create {}", root.display()))?;
    let mut recorded = String::new();
    for deb in &debs {
        let fields = run(
            Command::new("dpkg-deb")
                .arg("-f")
                .arg(deb)
                .args(["Package", "Version"]),
            "dpkg-deb -f",
        )?;
        let (mut package, mut version) = ("", "");
        for field in fields.lines() {
            if let Some(v) = field.strip_prefix("Package: ") {
                package = v.trim();
            } else if let Some(v) = field.strip_prefix("Version: ") {
                version = v.trim();
            }
        }
        ensure!(
            !package.is_empty() && !version.is_empty(),
            "{} has no Package or Version field",
            deb.display()
        );
        recorded.push_str(&format!("{package}={version}\n"));
        run(
            Command::new("dpkg-deb").arg("-x").arg(deb).arg(&root),
            "dpkg-deb -x",
        )?;
    }
    patch(&root, &python)?;
    let version = smoke_test(&python, home)?;
    std::fs::write(&stamp, &recorded)
        .with_context(|| format!("cannot write the stamp {}", stamp.display()))?;
    super::steps::step(&format!(
        "provision: Python {version} at {} in {:.1} s: {}",
        python.display(),
        started.elapsed().as_secs_f64(),
        one_line(&recorded)
    ));
    Ok(python)
}

/// `apt-get update` and `apt-get download` with the private state under
/// `base/apt`; the .debs land in `base/debs` (emptied first), sorted.
fn download(base: &Path) -> Result<Vec<PathBuf>> {
    let apt = base.join("apt");
    let lists = apt.join("lists");
    let cache = apt.join("cache");
    let etc = apt.join("etc");
    for dir in [
        lists.join("partial"),
        cache.join("archives/partial"),
        etc.clone(),
    ] {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let sources = etc.join("sources.list");
    std::fs::write(&sources, SOURCES)
        .with_context(|| format!("cannot write {}", sources.display()))?;

    let mut options = vec![
        format!("Dir::Etc::sourcelist={}", sources.display()),
        "Dir::Etc::sourceparts=-".to_owned(),
        format!("Dir::State::Lists={}", lists.display()),
        format!("Dir::Cache={}", cache.display()),
        "Dir::State::status=/dev/null".to_owned(),
    ];
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    if unsafe { libc::geteuid() } == 0 {
        // apt would drop to `_apt` for the download and warn that it cannot
        // write our folders.
        options.push("APT::Sandbox::User=root".to_owned());
    }
    let apt_get = |what: &[&str]| {
        let mut cmd = Command::new("apt-get");
        for o in &options {
            cmd.arg("-o").arg(o);
        }
        cmd.args(what);
        cmd
    };

    run(&mut apt_get(&["-q", "update"]), "apt-get update")?;

    let debs = base.join("debs");
    if debs.exists() {
        std::fs::remove_dir_all(&debs)
            .with_context(|| format!("cannot empty {}", debs.display()))?;
    }
    std::fs::create_dir_all(&debs).with_context(|| format!("cannot create {}", debs.display()))?;
    let mut cmd = apt_get(&["-q", "download"]);
    cmd.args(PACKAGES).current_dir(&debs);
    run(&mut cmd, "apt-get download")?;

    let mut found: Vec<PathBuf> = std::fs::read_dir(&debs)
        .with_context(|| format!("cannot read {}", debs.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "deb"))
        .collect();
    found.sort();
    ensure!(
        found.len() == PACKAGES.len(),
        "apt-get download gave {} .deb files for {} packages",
        found.len(),
        PACKAGES.len()
    );
    Ok(found)
}

/// The binary made self-contained: RPATH first, the loader second, in two
/// patchelf calls (see the module doc), patchelf run by the unpacked loader.
fn patch(root: &Path, python: &Path) -> Result<()> {
    let lib = root.join(LIB);
    let loader = lib.join(LOADER);
    let patchelf = root.join("usr/bin/patchelf");
    let call = |args: &[&std::ffi::OsStr], what: &str| -> Result<()> {
        let mut cmd = Command::new(&loader);
        cmd.arg("--library-path")
            .arg(&lib)
            .arg(&patchelf)
            .args(args)
            .arg(python);
        run(&mut cmd, what).map(drop)
    };
    call(
        &[
            "--force-rpath".as_ref(),
            "--set-rpath".as_ref(),
            "$ORIGIN/../lib/x86_64-linux-gnu".as_ref(),
        ],
        "patchelf --force-rpath --set-rpath",
    )?;
    call(
        &["--set-interpreter".as_ref(), loader.as_os_str()],
        "patchelf --set-interpreter",
    )
}

/// Runs the checks in an empty environment; the interpreter's version.
fn smoke_test(python: &Path, home: &Path) -> Result<String> {
    ensure!(python.exists(), "{} does not exist", python.display());
    let version = run(
        Command::new(python)
            .args(["-I", "-B", "-c", CHECK])
            .env_clear(),
        "the interpreter check",
    )?;
    let version = version.trim().to_owned();
    ensure!(
        version.starts_with(&format!("3.{MINOR}.")),
        "{} reports version {version:?}",
        python.display()
    );
    let file = home.join("lazy_check.py");
    std::fs::write(&file, LAZY_CHECK)
        .with_context(|| format!("cannot write {}", file.display()))?;
    let out = run(
        Command::new(python)
            .args(["-I", "-B"])
            .arg(&file)
            .env_clear(),
        "the `lazy import` check",
    )?;
    ensure!(
        out.trim() == "\"lazy\"",
        "the `lazy import` check printed {out:?}"
    );
    Ok(version)
}

/// Runs `cmd` with captured output: its stdout, or an error with its exit
/// status and the end of its stderr.
fn run(cmd: &mut Command, what: &str) -> Result<String> {
    let out: Output = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {what} ({:?})", cmd.get_program()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!("{what} failed ({}): {}", out.status, tail.join(" | "));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The stamp's `package=version` lines as one line.
fn one_line(stamp: &str) -> String {
    stamp.lines().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamp_is_printed_on_one_line() {
        assert_eq!(one_line("a=1\nb=2\n"), "a=1 b=2");
    }

    #[test]
    fn the_sources_list_names_only_unstable_main() {
        assert_eq!(SOURCES.lines().count(), 1);
        assert!(SOURCES.ends_with(" unstable main\n"), "{SOURCES}");
    }
}
