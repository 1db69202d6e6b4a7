//! The environment of a bench run: the tool and its git revision, the
//! machine (CPU, kernel, load average, CPU pressure), and what the
//! interpreter behind a target's `command[0]` really is (a pyenv-style shim
//! is flagged: it starts a second process on every spawn).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use phases::run::{MachineLoad, Pressure, PythonInfo, Tool};

/// The embedded interpreter query, run with `-I -B` (uv style).
const PYINFO: &str = include_str!("pyinfo.py");
const PYINFO_TAG: &str = "COLDSTART_PYINFO ";
/// The embedded query of the installed distributions, run with `-I -B`.
const PACKAGES: &str = include_str!("packages.py");
const PACKAGES_TAG: &str = "COLDSTART_PACKAGES ";

/// The tool and the git revision of the workspace.
pub fn tool(root: &Path) -> Tool {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(root)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    Tool {
        name: "coldstart".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        git_revision: git(&["rev-parse", "HEAD"]),
        git_dirty: git(&["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty()),
    }
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// `model name` from /proc/cpuinfo.
pub fn cpu_model() -> Option<String> {
    read("/proc/cpuinfo")?
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
}

/// CPUs this process may run on.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The kernel release.
pub fn kernel() -> Option<String> {
    read("/proc/sys/kernel/osrelease").map(|s| s.trim().to_owned())
}

/// Load average and CPU pressure now.
pub fn load() -> MachineLoad {
    MachineLoad {
        loadavg: read("/proc/loadavg").and_then(|s| parse_loadavg(&s)),
        pressure: read("/proc/pressure/cpu").and_then(|s| parse_pressure(&s)),
    }
}

fn parse_loadavg(s: &str) -> Option<[f64; 3]> {
    let mut it = s.split_whitespace().map(|x| x.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// The `some` line of `/proc/pressure/cpu`.
fn parse_pressure(s: &str) -> Option<Pressure> {
    let line = s.lines().find(|l| l.starts_with("some "))?;
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
    };
    Some(Pressure {
        some_avg10: field("avg10")?.parse().ok()?,
        some_avg60: field("avg60")?.parse().ok()?,
        some_total_us: field("total")?.parse().ok()?,
    })
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// RFC 3339 UTC from Unix milliseconds (civil-from-days, no time zone data).
pub fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A folder-name-safe stamp: `20260102-030405`.
pub fn folder_stamp(ms: u64) -> String {
    rfc3339(ms)
        .trim_end_matches('Z')
        .replace(['-', ':'], "")
        .replace('T', "-")
}

/// Whether `program`'s file name looks like a Python interpreter
/// (`python`, `python3`, `python3.13t`, `pypy3`, ...).
pub fn looks_like_python(program: &str) -> bool {
    let name = Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let rest = name
        .strip_prefix("python")
        .or_else(|| name.strip_prefix("pypy"));
    rest.is_some_and(|r| {
        r.trim_end_matches(['t', 'd'])
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.')
    })
}

/// `program` resolved as `execvp` would: a path with a `/` as is (from
/// `cwd`), otherwise the first executable file named so on `path`.
pub fn which(program: &str, path: Option<&OsString>, cwd: &Path) -> Option<PathBuf> {
    if program.contains('/') {
        let p = cwd.join(program);
        return p.is_file().then_some(p);
    }
    use std::os::unix::fs::PermissionsExt as _;
    let path = path.cloned().or_else(|| std::env::var_os("PATH"))?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn starts_with_shebang(path: &Path) -> bool {
    let mut head = [0u8; 2];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && &head == b"#!"
}

/// Asks the interpreter behind `program` what it is, and flags a shim:
/// `program` resolves to a script (`#!`) or to a different file than the
/// interpreter's own `sys.executable`.
pub fn python_info(program: &str, env: &BTreeMap<String, String>, cwd: &Path) -> PythonInfo {
    let path = env.get("PATH").map(OsString::from);
    let resolved = which(program, path.as_ref(), cwd);
    let mut info = PythonInfo {
        requested: program.to_owned(),
        resolved: resolved.as_ref().map(|p| p.display().to_string()),
        ..PythonInfo::default()
    };
    let Some(resolved) = resolved else {
        info.note = Some(format!("`{program}` was not found on PATH"));
        return info;
    };
    match ask(&resolved, env, cwd) {
        Ok(answer) => {
            info.executable = answer.executable;
            info.version = answer.version;
            info.implementation = answer.implementation;
            info.free_threaded = answer.free_threaded;
        }
        Err(e) => {
            info.note = Some(format!("could not ask the interpreter: {e}"));
            return info;
        }
    }
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if starts_with_shebang(&resolved) {
        info.shim = true;
        info.note = Some(format!(
            "{} is a script (#!), not the interpreter",
            resolved.display()
        ));
    } else if let Some(exe) = info
        .executable
        .clone()
        .filter(|e| !e.is_empty() && real(Path::new(e)) != real(&resolved))
    {
        info.shim = true;
        info.note = Some(format!(
            "{} is not the interpreter it runs ({exe})",
            resolved.display()
        ));
    }
    info
}

/// What the embedded query answers, one tagged JSON line.
#[derive(Debug, Clone, serde::Deserialize)]
struct Answer {
    executable: Option<String>,
    version: Option<String>,
    implementation: Option<String>,
    free_threaded: Option<bool>,
}

/// Why an interpreter could not be asked what it is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The query could not be run, or did not finish in time (its process
    /// group was killed).
    #[error(transparent)]
    Run(Box<spawn::HelperError>),
    /// It ran but gave no tagged answer, or failed.
    #[error("{} -I -B {script} ended with {status}\n[stdout]\n{stdout}\n[stderr]\n{stderr}", python.display())]
    NoAnswer {
        /// The interpreter.
        python: PathBuf,
        /// The embedded query's name.
        script: &'static str,
        /// Its exit status.
        status: spawn::ExitStatus,
        /// What it printed.
        stdout: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// The tagged line is not the expected JSON.
    #[error("the interpreter's answer is not the expected JSON ({source}): {line}")]
    BadAnswer {
        /// The tagged line.
        line: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// How long the query may take: it imports nothing beyond `sys` and
/// `sysconfig`, so far longer than this is a hang (a `.pth` file or
/// sitecustomize of the environment).
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs the embedded interpreter query with `-I -B` and parses its tagged line.
fn ask(python: &Path, env: &BTreeMap<String, String>, cwd: &Path) -> Result<Answer, QueryError> {
    query(("pyinfo.py", PYINFO, PYINFO_TAG), python, env, cwd)
}

/// The `name==version` lines of the distributions installed for the
/// interpreter `python`, sorted (names normalized as pip does).
pub fn installed_packages(
    python: &Path,
    env: &BTreeMap<String, String>,
    cwd: &Path,
) -> Result<Vec<String>, QueryError> {
    query(("packages.py", PACKAGES, PACKAGES_TAG), python, env, cwd)
}

/// Runs an embedded query `(name, body, tag)` with `-I -B` and parses
/// its tagged JSON line.
fn query<T: serde::de::DeserializeOwned>(
    (name, body, tag): (&'static str, &'static str, &str),
    python: &Path,
    env: &BTreeMap<String, String>,
    cwd: &Path,
) -> Result<T, QueryError> {
    let out = spawn::Script::new(name, body)
        .envs(env)
        .current_dir(cwd)
        .timeout(QUERY_TIMEOUT)
        .run(python)
        .map_err(|e| QueryError::Run(Box::new(e)))?;
    match out.tagged(tag) {
        Some(json) => serde_json::from_str(json).map_err(|source| QueryError::BadAnswer {
            line: json.to_owned(),
            source,
        }),
        None => Err(QueryError::NoAnswer {
            python: python.to_path_buf(),
            script: name,
            status: out.status,
            stdout: out.stdout.trim_end().to_owned(),
            stderr: out.stderr.trim_end().to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_767_323_045_999), "2026-01-02T03:04:05Z");
        assert_eq!(folder_stamp(1_767_323_045_000), "20260102-030405");
    }

    #[test]
    fn proc_files_parse() {
        assert_eq!(
            parse_loadavg("0.52 0.58 0.59 2/345 12345\n"),
            Some([0.52, 0.58, 0.59])
        );
        let p = parse_pressure(
            "some avg10=1.50 avg60=2.25 avg300=0.10 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        )
        .unwrap();
        assert_eq!(
            (p.some_avg10, p.some_avg60, p.some_total_us),
            (1.5, 2.25, 123_456)
        );
        assert_eq!(parse_pressure("garbage"), None);
    }

    #[test]
    fn a_shim_script_is_flagged_and_the_real_interpreter_is_not() {
        // The real interpreter behind `python3`: the tests' one lookup.
        let real = test_interpreters::default_python();
        let dir = tempfile::tempdir().unwrap();
        let shim = dir.path().join("python3");
        std::fs::write(
            &shim,
            format!("#!/bin/sh\nexec {} \"$@\"\n", real.display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
        let env: BTreeMap<String, String> =
            [("PATH".to_owned(), dir.path().display().to_string())].into();
        let info = python_info("python3", &env, dir.path());
        assert!(info.shim, "{info:?}");
        assert_eq!(info.resolved.as_deref(), Some(shim.to_str().unwrap()));
        assert_eq!(
            std::fs::canonicalize(info.executable.as_deref().unwrap()).unwrap(),
            std::fs::canonicalize(real).unwrap()
        );
        assert!(info.note.unwrap().contains("script"));
        assert_eq!(info.implementation.as_deref(), Some("cpython"));
        assert!(info.version.unwrap().starts_with('3'));

        let direct = python_info(real.to_str().unwrap(), &BTreeMap::new(), dir.path());
        assert!(!direct.shim, "{direct:?}");
        assert!(direct.free_threaded.is_some());

        let gone = python_info("python9.99", &env, dir.path());
        assert!(gone.note.unwrap().contains("not found"));
    }

    #[test]
    fn python_names() {
        for yes in [
            "python",
            "python3",
            "/usr/bin/python3.12",
            "python3.13t",
            "pypy3",
        ] {
            assert!(looks_like_python(yes), "{yes}");
        }
        for no in ["uv", "pythonista", "node", "/opt/python/bin/worker"] {
            assert!(!looks_like_python(no), "{no}");
        }
    }
}
