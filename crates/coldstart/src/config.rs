//! The targets a user checks and benchmarks, found where the user stands:
//! `--config FILE`, else the nearest `coldstart.toml`, else the nearest
//! `pyproject.toml` with a `[tool.coldstart]` table, searching from the
//! current folder up to the filesystem root (the way ruff and uv find
//! theirs). Both hold the same tables:
//!
//! ```toml
//! [[target]]                             # [[tool.coldstart.target]] in pyproject.toml
//! name = "ner-worker"
//! command = ["python3", "-m", "myapp.worker", "--task", "ner"]
//! env = { PYTHONPATH = "src" }          # on top of the inherited environment
//! cwd = "."                              # relative to this file's folder
//! forbidden = ["torch", "transformers", "stanza"]
//! allowed = [{ module = "transformers.utils.versions", reason = "tiny, no torch" }]
//! processes = 3                          # fresh workers per check, run concurrently
//! health = 1                             # health round trips per worker
//! ready_timeout = 60.0                   # seconds
//! request_timeout = 10.0
//! shutdown_timeout = 10.0
//! grace = 2.0                            # SIGTERM to SIGKILL
//! py_spy = "/opt/py-spy"                 # optional: where py-spy is
//! request = { op = "infer", text = "hello" }   # the bench serve phase's request
//! snapshot = true                        # `check` also fails when the import tree drifts
//! ```
//!
//! Relative paths in a target (`cwd`, a relative program in `command`,
//! `PYTHONPATH` entries in `env`, `py_spy`) are resolved against the folder
//! of the file that defines them, so a check gives the same answer from any
//! subfolder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use harness::{Origin, Target};
use importguard::verdict::Allowance;
use serde::Deserialize;

/// The config file's own name.
pub const CONFIG_FILE: &str = "coldstart.toml";

/// A commented starter config: what `coldstart init` writes and the
/// missing-config error shows.
pub const STARTER: &str = r#"# coldstart: the workers to check (`coldstart check`) and benchmark (`coldstart bench`).
# Paths are relative to this file's folder. In pyproject.toml, write the same
# tables as [[tool.coldstart.target]].

[[target]]
name = "worker"
# The worker's command line, as your service starts it.
command = ["python3", "-m", "myapp.worker"]
# Set on top of the inherited environment.
env = { PYTHONPATH = "src" }
# Modules the worker must not import before a model is requested.
forbidden = ["torch", "transformers", "stanza"]
# allowed = [{ module = "transformers.utils.versions", reason = "tiny, no torch" }]
# processes = 3        # fresh workers per check, run concurrently
# ready_timeout = 60.0 # seconds
"#;

/// A config file that was found, and its targets.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file.
    pub path: PathBuf,
    /// Its folder: the project root.
    pub root: PathBuf,
    /// Its targets, resolved.
    pub targets: Vec<Target>,
    /// Targets with `snapshot = true`, by name.
    pub snapshot: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default, rename = "target")]
    targets: Vec<RawTarget>,
}

#[derive(Debug, Deserialize)]
struct Pyproject {
    #[serde(default)]
    tool: PyprojectTool,
}

#[derive(Debug, Default, Deserialize)]
struct PyprojectTool {
    coldstart: Option<toml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    name: String,
    command: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    forbidden: Option<Vec<String>>,
    #[serde(default)]
    allowed: Vec<Allowance>,
    processes: Option<usize>,
    health: Option<usize>,
    ready_timeout: Option<f64>,
    request_timeout: Option<f64>,
    shutdown_timeout: Option<f64>,
    grace: Option<f64>,
    py_spy: Option<PathBuf>,
    request: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    snapshot: bool,
}

fn secs(v: Option<f64>, default: Duration, what: &str, name: &str) -> Result<Duration> {
    match v {
        None => Ok(default),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Duration::from_secs_f64(s)),
        Some(s) => bail!("target `{name}`: `{what}` must be a positive number of seconds, got {s}"),
    }
}

/// Finds the config for a user standing in `start`: the nearest
/// `coldstart.toml`, else the nearest `pyproject.toml` with
/// `[tool.coldstart]`, from `start` up to the root. `Ok(None)` when there
/// is none. A folder holding both is an error: the user must pick one.
pub fn discover(start: &Path) -> Result<Option<Config>> {
    for dir in start.ancestors() {
        let toml_path = dir.join(CONFIG_FILE);
        let py_path = dir.join("pyproject.toml");
        let has_toml = toml_path.is_file();
        let py_table = if py_path.is_file() {
            pyproject_table(&py_path)?
        } else {
            None
        };
        match (has_toml, py_table) {
            (true, Some(_)) => bail!(
                "{} and {} both configure coldstart; keep one (move the targets into one file and remove the other table or file)",
                toml_path.display(),
                py_path.display()
            ),
            (true, None) => return load(&toml_path).map(Some),
            (false, Some(table)) => {
                return from_table(table, &py_path, Origin::Pyproject).map(Some);
            }
            (false, None) => {}
        }
    }
    Ok(None)
}

/// The `[tool.coldstart]` table of a `pyproject.toml`, if it has one.
fn pyproject_table(path: &Path) -> Result<Option<toml::Value>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("could not read {}", path.display()))?;
    let py: Pyproject =
        toml::from_str(&text).with_context(|| format!("{} is not valid TOML", path.display()))?;
    Ok(py.tool.coldstart)
}

/// Reads a config file given by name: a `coldstart.toml`, or a
/// `pyproject.toml` whose `[tool.coldstart]` table holds the targets.
pub fn load(path: &Path) -> Result<Config> {
    if path.file_name().is_some_and(|n| n == "pyproject.toml") {
        let table = pyproject_table(path)?.with_context(|| {
            format!(
                "{} has no [tool.coldstart] table; add [[tool.coldstart.target]] tables, or give a coldstart.toml",
                path.display()
            )
        })?;
        return from_table(table, path, Origin::Pyproject);
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("could not read the config {}", path.display()))?;
    let value: toml::Value =
        toml::from_str(&text).with_context(|| format!("{} is not valid TOML", path.display()))?;
    from_table(value, path, Origin::ColdstartToml)
}

fn from_table(value: toml::Value, path: &Path, origin: Origin) -> Result<Config> {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let root = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    let table = if origin == Origin::Pyproject {
        "[tool.coldstart]"
    } else {
        "the file"
    };
    let file: File = value.try_into().with_context(|| {
        format!(
            "{} is not a valid coldstart config ({table}); fix it as the message says",
            path.display()
        )
    })?;
    let (targets, snapshot) = resolve_targets(file, &root, origin)
        .with_context(|| format!("{} is not a valid coldstart config", path.display()))?;
    Ok(Config {
        path,
        root,
        targets,
        snapshot,
    })
}

/// A path from the config, against the folder of the file.
fn against(root: &Path, p: &Path) -> PathBuf {
    // `components` drops the `.` of `./run.sh`.
    root.join(p).components().collect()
}

/// Parses a `coldstart.toml` text whose folder is `root` (tests, embedding).
pub fn parse(text: &str, root: &Path) -> Result<Vec<Target>> {
    let file: File = toml::from_str(text)?;
    Ok(resolve_targets(file, root, Origin::ColdstartToml)?.0)
}

fn resolve_targets(file: File, root: &Path, origin: Origin) -> Result<(Vec<Target>, Vec<String>)> {
    if file.targets.is_empty() {
        bail!("no [[target]] tables: add one, or remove the file");
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    let mut snapshot = Vec::new();
    for raw in file.targets {
        let name = raw.name;
        if !seen.insert(name.clone()) {
            bail!("target `{name}` is defined twice");
        }
        if raw.command.is_empty() {
            bail!(
                "target `{name}`: `command` is empty; give the worker's argv, e.g. [\"python3\", \"-m\", \"myworker\"]"
            );
        }
        if raw.processes == Some(0) {
            bail!("target `{name}`: `processes` must be at least 1");
        }
        let mut command = raw.command;
        if command[0].contains('/') {
            command[0] = against(root, Path::new(&command[0])).display().to_string();
        }
        let cwd = raw
            .cwd
            .map_or_else(|| root.to_path_buf(), |c| against(root, &c));
        if !cwd.is_dir() {
            bail!(
                "target `{name}`: `cwd` {} is not a folder; paths are relative to the config file's folder {}",
                cwd.display(),
                root.display()
            );
        }
        let mut env = raw.env;
        if let Some(pp) = env.get_mut("PYTHONPATH") {
            let joined =
                std::env::join_paths(std::env::split_paths(pp.as_str()).map(|p| against(root, &p)))
                    .with_context(|| format!("target `{name}`: a PYTHONPATH entry holds a `:`"))?;
            *pp = joined.to_string_lossy().into_owned();
        }
        let base = Target::ad_hoc(root, command, &name);
        if raw.snapshot {
            snapshot.push(name.clone());
        }
        out.push(Target {
            env,
            cwd,
            forbidden: raw.forbidden.unwrap_or(base.forbidden.clone()),
            allowed: raw.allowed,
            processes: raw.processes.unwrap_or(base.processes),
            health: raw.health.unwrap_or(base.health),
            ready_timeout: secs(
                raw.ready_timeout,
                base.ready_timeout,
                "ready_timeout",
                &name,
            )?,
            request_timeout: secs(
                raw.request_timeout,
                base.request_timeout,
                "request_timeout",
                &name,
            )?,
            shutdown_timeout: secs(
                raw.shutdown_timeout,
                base.shutdown_timeout,
                "shutdown_timeout",
                &name,
            )?,
            grace: secs(raw.grace, base.grace, "grace", &name)?,
            py_spy: raw.py_spy.map(|p| against(root, &p)),
            request: raw.request,
            origin,
            ..base
        });
    }
    Ok((out, snapshot))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_target_parses_with_defaults_filled() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let t = parse(
            r#"
[[target]]
name = "w"
command = ["python3", "-m", "w"]
env = { A = "1", PYTHONPATH = "src:/abs" }
cwd = "sub"
allowed = [{ module = "transformers.utils", reason = "light" }]
ready_timeout = 1.5
"#,
            dir.path(),
        )
        .unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].cwd, dir.path().join("sub"));
        assert_eq!(
            t[0].env["PYTHONPATH"],
            format!("{}:/abs", dir.path().join("src").display())
        );
        assert_eq!(t[0].forbidden, ["torch", "transformers", "stanza"]);
        assert_eq!(t[0].ready_timeout, Duration::from_millis(1500));
        assert_eq!(t[0].processes, 3);
        assert_eq!(t[0].allowed[0].reason, "light");
    }

    #[test]
    fn bad_configs_say_what_to_fix() {
        let root = Path::new("/");
        let err = |s: &str| format!("{:#}", parse(s, root).unwrap_err());
        assert!(err("").contains("no [[target]]"));
        assert!(err("[[target]]\nname='a'\ncommand=[]").contains("`command` is empty"));
        assert!(err("[[target]]\nname='a'\ncommand=['x']\nready_timeout=-1").contains("positive"));
        assert!(err("[[target]]\nname='a'\ncommand=['x']\nbogus=1").contains("bogus"));
        assert!(
            err("[[target]]\nname='a'\ncommand=['x']\n[[target]]\nname='a'\ncommand=['y']")
                .contains("twice")
        );
        assert!(err("[[target]]\nname='a'\ncommand=['x']\ncwd='nope'").contains("not a folder"));
    }

    #[test]
    fn the_nearest_config_is_found_from_a_subfolder() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        assert!(discover(&deep).unwrap().is_none());
        std::fs::write(
            dir.path().join("pyproject.toml"),
            "[project]\nname='x'\n[[tool.coldstart.target]]\nname='w'\ncommand=['./run.sh']\n",
        )
        .unwrap();
        let c = discover(&deep).unwrap().unwrap();
        assert_eq!(c.root, dir.path());
        assert_eq!(c.targets[0].origin, Origin::Pyproject);
        assert_eq!(
            c.targets[0].command[0],
            dir.path().join("run.sh").display().to_string()
        );
        std::fs::write(
            dir.path().join(CONFIG_FILE),
            "[[target]]\nname='w'\ncommand=['x']\n",
        )
        .unwrap();
        let err = format!("{:#}", discover(&deep).unwrap_err());
        assert!(err.contains("both configure coldstart"), "{err}");
    }
}
