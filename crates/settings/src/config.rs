//! The config: the targets a user checks and benchmarks, found where the
//! user stands:
//! `--config FILE`, else the nearest config file of either kind, searching
//! from the current folder up to the filesystem root (the way ruff finds
//! its own): in each folder a `coldstart.toml` first, then a
//! `pyproject.toml` with a `[tool.coldstart]` table (one without it is
//! passed over). Both hold the same tables:
//!
//! ```toml
//! history = ".coldstart/history.db"      # before any table: where `history record` stores runs
//! # history = "postgres://ci@db.internal/coldstart"   # or a shared PostgreSQL database
//!
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
//! transport = "tcp"                      # ready line on stderr, protocol over TCP (default "stdio")
//! snapshot = true                        # `check` also fails when the import tree drifts
//! verify = [{ op = "load" }]             # a patched copy's model path: each reply must not be an error
//! verify_command = ["python3", "-m", "pytest", "-q", "tests/test_models.py"]  # must pass in the copy
//! import_roots = ["src"]                 # where the project's packages are (default: its build config's)
//! setup = ["maturin", "develop"]         # run in each tree of a diff first (COLDSTART_SIDE=base|head)
//! stop = { signal = "SIGINT", after = 2.0 }  # a daemon that outlives its shutdown reply (tcp's default)
//! ```
//!
//! `history` (a top-level key, `[tool.coldstart] history` in pyproject.toml)
//! is a file path relative to the config's folder, or a `postgres://` URL
//! (its password, if written there, is never shown; `PGPASSWORD` and
//! `~/.pgpass` are read as libpq reads them).
//!
//! Relative paths in a target (`cwd`, a relative program in `command`,
//! `PYTHONPATH` entries in `env`, `py_spy`) are resolved against the folder
//! of the file that defines them, so a check gives the same answer from any
//! subfolder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use answers::diff::Budgets;
use harness::{Origin, Target};
use importguard::verdict::Allowance;
use serde::Deserialize;

use crate::{CONFIG_FILE, Error, Problem};

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
    /// What `diff` judges each target against, by name.
    pub budgets: BTreeMap<String, Budgets>,
    /// Where the start-up history is stored, when the file says.
    pub history: Option<history::Location>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default, rename = "target")]
    targets: Vec<RawTarget>,
    history: Option<String>,
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
    transport: harness::Transport,
    #[serde(default)]
    verify: Vec<serde_json::Map<String, serde_json::Value>>,
    verify_command: Option<Vec<String>>,
    import_roots: Option<Vec<PathBuf>>,
    setup: Option<Vec<String>>,
    stop: Option<RawStop>,
    #[serde(default)]
    snapshot: bool,
    max_slowdown: Option<f64>,
    max_modules: Option<usize>,
    max_ready_ms: Option<f64>,
    cpus: Option<RawNumber>,
    memory: Option<RawNumber>,
}

/// A limit as TOML holds it: a number (`cpus = 0.5`, `memory = 1073741824`)
/// or text (`memory = "1G"`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawNumber {
    Number(f64),
    Text(String),
}

impl RawNumber {
    fn text(&self) -> String {
        match self {
            RawNumber::Number(n) => n.to_string(),
            RawNumber::Text(t) => t.clone(),
        }
    }
}

/// A target's `cpus` and `memory`, read as `--cpus` and `--memory` read them.
fn limits_of(
    cpus: Option<&RawNumber>,
    memory: Option<&RawNumber>,
    name: &str,
) -> Result<timeline::Limits, Problem> {
    let bad = |key, why| Problem::BadLimit {
        name: name.to_owned(),
        key,
        why,
    };
    Ok(timeline::Limits {
        cpus: cpus
            .map(|c| timeline::Limits::parse_cpus(&c.text()))
            .transpose()
            .map_err(|e| bad("cpus", e))?,
        memory_bytes: memory
            .map(|m| timeline::Limits::parse_memory(&m.text()))
            .transpose()
            .map_err(|e| bad("memory", e))?,
    })
}

/// `stop = { signal = "SIGINT", after = 2.0 }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStop {
    signal: String,
    after: Option<f64>,
}

fn secs(
    v: Option<f64>,
    default: Duration,
    key: &'static str,
    name: &str,
) -> Result<Duration, Problem> {
    match v {
        None => Ok(default),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Duration::from_secs_f64(s)),
        Some(got) => Err(Problem::NotPositive {
            name: name.to_owned(),
            key,
            got,
        }),
    }
}

/// Each `verify` request names an op of the model path: a string `op`,
/// neither `health` nor `shutdown` (the verification sends those itself).
fn check_verify(
    name: &str,
    verify: &[serde_json::Map<String, serde_json::Value>],
) -> Result<(), Problem> {
    for (i, req) in verify.iter().enumerate() {
        match req.get("op").and_then(serde_json::Value::as_str) {
            None => {
                return Err(Problem::VerifyWithoutOp {
                    name: name.to_owned(),
                    index: i + 1,
                });
            }
            Some(op @ ("health" | "shutdown")) => {
                return Err(Problem::VerifyProtocolOp {
                    name: name.to_owned(),
                    index: i + 1,
                    op: op.to_owned(),
                });
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Finds the config for a user standing in `start`: the nearest config
/// file of either kind, from `start` up to the root, the way ruff finds
/// its own. In each folder a `coldstart.toml` comes first (a
/// `pyproject.toml` beside it is not read), then a `pyproject.toml` with a
/// `[tool.coldstart]` table; a `pyproject.toml` without one is passed
/// over. `Ok(None)` when there is none.
pub fn discover(start: &Path) -> Result<Option<Config>, Error> {
    for dir in start.ancestors() {
        let toml_path = dir.join(CONFIG_FILE);
        if toml_path.is_file() {
            return load(&toml_path).map(Some);
        }
        let py_path = dir.join("pyproject.toml");
        if py_path.is_file()
            && let Some(table) = pyproject_table(&py_path)?
        {
            return from_table(table, &py_path, Origin::Pyproject).map(Some);
        }
    }
    Ok(None)
}

/// The `[tool.coldstart]` table of a `pyproject.toml`, if it has one.
fn pyproject_table(path: &Path) -> Result<Option<toml::Value>, Error> {
    let py: Pyproject = read_toml(path)?;
    Ok(py.tool.coldstart)
}

/// A TOML file read and parsed.
fn read_toml<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    toml::from_str(&text).map_err(|source| Error::Toml {
        path: path.to_path_buf(),
        source: Box::new(source),
    })
}

/// The names of the targets the config file at `path` declares; none when
/// it is absent or cannot be read (a checkout of an old commit, from
/// before the config or its target existed).
pub fn target_names(path: &Path) -> Vec<String> {
    load(path)
        .map(|c| c.targets.into_iter().map(|t| t.name).collect())
        .unwrap_or_default()
}

/// Reads a config file given by name: a `coldstart.toml`, or a
/// `pyproject.toml` whose `[tool.coldstart]` table holds the targets.
pub fn load(path: &Path) -> Result<Config, Error> {
    if path.file_name().is_some_and(|n| n == "pyproject.toml") {
        let table = pyproject_table(path)?.ok_or_else(|| Error::NoTable {
            path: path.to_path_buf(),
        })?;
        return from_table(table, path, Origin::Pyproject);
    }
    let value: toml::Value = read_toml(path)?;
    // Its targets are labelled with the file's own name (`tcp.toml` for
    // `--config tcp.toml`), never a name it does not have.
    let name = path.file_name().map_or_else(
        || CONFIG_FILE.to_owned(),
        |n| n.to_string_lossy().into_owned(),
    );
    from_table(value, path, Origin::TomlFile(name))
}

fn from_table(value: toml::Value, path: &Path, origin: Origin) -> Result<Config, Error> {
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
    let file: File = match value.try_into() {
        Ok(file) => file,
        Err(source) => {
            return Err(Error::Shape {
                path,
                table,
                source: Box::new(source),
            });
        }
    };
    let history = file
        .history
        .as_deref()
        .map(|h| history::Location::parse(h, &root));
    let (targets, snapshot, budgets) = match resolve_targets(file, &root, &origin) {
        Ok(resolved) => resolved,
        Err(source) => return Err(Error::Invalid { path, source }),
    };
    Ok(Config {
        path,
        root,
        targets,
        snapshot,
        budgets,
        history,
    })
}

/// A path from the config, against the folder of the file.
fn against(root: &Path, p: &Path) -> PathBuf {
    // `./run.sh` loses its `.`, and `../shared` beside the project is
    // named as what it is, outside the project.
    importguard::firstparty::lexical(&root.join(p))
}

/// Parses a `coldstart.toml` text whose folder is `root` (tests, embedding).
pub fn parse(text: &str, root: &Path) -> Result<Vec<Target>, Error> {
    let file: File = toml::from_str(text).map_err(|e| Error::Syntax(Box::new(e)))?;
    Ok(resolve_targets(file, root, &Origin::TomlFile(CONFIG_FILE.to_owned()))?.0)
}

/// What `resolve_targets` gives: the targets, the snapshot names, the budgets.
type Resolved = (Vec<Target>, Vec<String>, BTreeMap<String, Budgets>);

/// The file's targets resolved, with the names of those kept as
/// snapshots and each one's budgets.
fn resolve_targets(file: File, root: &Path, origin: &Origin) -> Result<Resolved, Problem> {
    if file.targets.is_empty() {
        return Err(Problem::NoTargets);
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    let mut snapshot = Vec::new();
    let mut budgets = BTreeMap::new();
    for raw in file.targets {
        let name = raw.name.clone();
        budgets.insert(name.clone(), budgets_of(&raw)?);
        if !seen.insert(name.clone()) {
            return Err(Problem::Twice(name));
        }
        let snapshotted = raw.snapshot;
        out.push(resolve_target(raw, root, origin)?);
        if snapshotted {
            snapshot.push(name);
        }
    }
    Ok((out, snapshot, budgets))
}

/// What `diff` judges a target against, its shares and times checked.
fn budgets_of(raw: &RawTarget) -> Result<Budgets, Problem> {
    if let Some(got) = raw.max_slowdown
        && !(got.is_finite() && got > 0.0 && got < 1.0)
    {
        return Err(Problem::NotAShare {
            name: raw.name.clone(),
            key: "max_slowdown",
            got,
        });
    }
    if let Some(got) = raw.max_ready_ms
        && !(got.is_finite() && got > 0.0)
    {
        return Err(Problem::NotPositiveMs {
            name: raw.name.clone(),
            key: "max_ready_ms",
            got,
        });
    }
    Ok(Budgets {
        max_slowdown: raw
            .max_slowdown
            .unwrap_or(answers::diff::DEFAULT_MAX_SLOWDOWN),
        max_modules: raw.max_modules,
        max_ready_ms: raw.max_ready_ms,
    })
}

/// One target of the file checked, its paths resolved against `root`
/// and its defaults filled in.
fn resolve_target(raw: RawTarget, root: &Path, origin: &Origin) -> Result<Target, Problem> {
    let name = raw.name;
    if raw.command.is_empty() {
        return Err(Problem::EmptyCommand(name));
    }
    if raw.processes == Some(0) {
        return Err(Problem::NoProcesses(name));
    }
    let command = program_against(root, raw.command);
    check_verify(&name, &raw.verify)?;
    let verify_command = match raw.verify_command {
        Some(argv) if argv.is_empty() => return Err(Problem::EmptyVerifyCommand(name)),
        argv => program_against(root, argv.unwrap_or_default()),
    };
    let cwd = raw
        .cwd
        .map_or_else(|| root.to_path_buf(), |c| against(root, &c));
    if !cwd.is_dir() {
        return Err(Problem::CwdNotAFolder {
            name,
            cwd,
            root: root.to_path_buf(),
        });
    }
    let env = pythonpath_against(root, raw.env, &name)?;
    let import_roots = match raw.import_roots {
        Some(dirs) => dirs.iter().map(|d| against(root, d)).collect(),
        None => crate::layout::import_roots(root)
            .into_iter()
            .map(|r| r.dir)
            .collect(),
    };
    let setup = match raw.setup {
        Some(argv) if argv.is_empty() => return Err(Problem::EmptySetup(name)),
        argv => program_against(root, argv.unwrap_or_default()),
    };
    let stop = raw.stop.map(|st| stop_of(st, &name)).transpose()?;
    let limits = limits_of(raw.cpus.as_ref(), raw.memory.as_ref(), &name)?;
    let base = Target::ad_hoc(root, command, &name);
    Ok(Target {
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
        transport: raw.transport,
        verify: raw.verify,
        verify_command,
        import_roots,
        setup,
        stop,
        limits,
        origin: origin.clone(),
        ..base
    })
}

/// `argv` with its program resolved against `root` when it is a path
/// (holds a `/`); a bare name is left for `PATH`.
fn program_against(root: &Path, mut argv: Vec<String>) -> Vec<String> {
    if argv.first().is_some_and(|p| p.contains('/')) {
        argv[0] = against(root, Path::new(&argv[0])).display().to_string();
    }
    argv
}

/// `env` with each `PYTHONPATH` entry resolved against `root`.
fn pythonpath_against(
    root: &Path,
    mut env: BTreeMap<String, String>,
    name: &str,
) -> Result<BTreeMap<String, String>, Problem> {
    if let Some(pp) = env.get_mut("PYTHONPATH") {
        let joined =
            std::env::join_paths(std::env::split_paths(pp.as_str()).map(|p| against(root, &p)))
                .map_err(|e| Problem::PythonPath(name.to_owned(), e))?;
        *pp = joined.to_string_lossy().into_owned();
    }
    Ok(env)
}

/// A target's `stop` table: its signal by name, its wait checked.
fn stop_of(st: RawStop, name: &str) -> Result<harness::Stop, Problem> {
    let Some(signal) = harness::Stop::signal_named(&st.signal) else {
        return Err(Problem::BadStopSignal {
            name: name.to_owned(),
            got: st.signal,
        });
    };
    Ok(harness::Stop {
        signal,
        after: secs(st.after, harness::TCP_STOP_AFTER, "stop.after", name)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error and its causes, as the command line prints them.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut out = e.to_string();
        let mut cause = e.source();
        while let Some(c) = cause {
            out.push_str(": ");
            out.push_str(&c.to_string());
            cause = c.source();
        }
        out
    }

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
        assert_eq!(t[0].transport, harness::Transport::Stdio);
    }

    #[test]
    fn a_target_may_serve_over_tcp() {
        let dir = tempfile::tempdir().unwrap();
        let t = parse(
            "[[target]]\nname='w'\ncommand=['x']\ntransport='tcp'\n",
            dir.path(),
        )
        .unwrap();
        assert_eq!(t[0].transport, harness::Transport::Tcp);
        assert_eq!(
            t[0].spawn_command().get_transport(),
            harness::Transport::Tcp
        );
        let err = chain(
            &parse(
                "[[target]]\nname='w'\ncommand=['x']\ntransport='udp'\n",
                dir.path(),
            )
            .unwrap_err(),
        );
        assert!(err.contains("udp") && err.contains("tcp"), "{err}");
    }

    #[test]
    fn a_target_may_run_under_container_limits() {
        let dir = tempfile::tempdir().unwrap();
        let t = parse(
            "[[target]]\nname='w'\ncommand=['x']\ncpus=0.5\nmemory='1.5G'\n\n\
             [[target]]\nname='v'\ncommand=['x']\ncpus=2\nmemory=67108864\n\n\
             [[target]]\nname='u'\ncommand=['x']\n",
            dir.path(),
        )
        .unwrap();
        let limits = |c, m| timeline::Limits {
            cpus: c,
            memory_bytes: m,
        };
        assert_eq!(t[0].limits, limits(Some(0.5), Some(3 << 29)));
        assert_eq!(t[1].limits, limits(Some(2.0), Some(64 << 20)));
        assert_eq!(t[2].limits, timeline::Limits::default());
        assert_eq!(t[0].spawn_command().get_limits(), &t[0].limits);
        let root = Path::new("/");
        let err = |s: &str| chain(&parse(s, root).unwrap_err());
        assert!(
            err("[[target]]\nname='a'\ncommand=['x']\ncpus=0")
                .contains("target `a`: `cpus`: `0` is not a CPU quota")
        );
        assert!(
            err("[[target]]\nname='a'\ncommand=['x']\nmemory='1Q'")
                .contains("target `a`: `memory`: `1Q` is not a memory size")
        );
    }

    #[test]
    fn bad_configs_say_what_to_fix() {
        let root = Path::new("/");
        let err = |s: &str| chain(&parse(s, root).unwrap_err());
        assert!(err("").contains("no [[target]]"));
        assert!(err("[[target]]\nname='a'\ncommand=[]").contains("`command` is empty"));
        assert!(err("[[target]]\nname='a'\ncommand=['x']\nready_timeout=-1").contains("positive"));
        assert!(err("[[target]]\nname='a'\ncommand=['x']\nbogus=1").contains("bogus"));
        assert!(
            err("[[target]]\nname='a'\ncommand=['x']\n[[target]]\nname='a'\ncommand=['y']")
                .contains("twice")
        );
        assert!(err("[[target]]\nname='a'\ncommand=['x']\ncwd='nope'").contains("not a folder"));
        assert!(err("[[target]]\nname='a'\ncommand=['x']\nmax_slowdown=5").contains("0.05 is 5%"));
        assert!(
            err("[[target]]\nname='a'\ncommand=['x']\nmax_ready_ms=0").contains("milliseconds")
        );
    }

    #[test]
    fn the_model_path_is_read_per_target_and_a_wrong_one_says_what_to_fix() {
        let dir = tempfile::tempdir().unwrap();
        let t = parse(
            "[[target]]\nname='w'\ncommand=['python3', 'w.py']\nverify=[{ op = 'load', model = 'ner' }, { op = 'infer' }]\nverify_command=['./run-tests.sh', '-q']\n",
            dir.path(),
        )
        .unwrap();
        let ops: Vec<_> = t[0].verify.iter().map(|r| r["op"].clone()).collect();
        assert_eq!(ops, ["load", "infer"]);
        assert_eq!(t[0].verify[0]["model"], "ner");
        assert_eq!(
            t[0].verify_command,
            [
                dir.path().join("run-tests.sh").display().to_string(),
                "-q".into()
            ]
        );
        let plain = parse("[[target]]\nname='w'\ncommand=['x']\n", dir.path()).unwrap();
        assert!(plain[0].verify.is_empty() && plain[0].verify_command.is_empty());

        let err = |s: &str| chain(&parse(s, dir.path()).unwrap_err());
        let base = "[[target]]\nname='a'\ncommand=['x']\n";
        let e = err(&format!(
            "{base}verify=[{{ op = 'load' }}, {{ model = 'ner' }}]"
        ));
        assert!(e.contains("`verify` request 2 has no string `op`"), "{e}");
        let e = err(&format!("{base}verify=[{{ op = 'shutdown' }}]"));
        assert!(e.contains("sends itself"), "{e}");
        let e = err(&format!("{base}verify_command=[]"));
        assert!(e.contains("`verify_command` is empty"), "{e}");
        let e = err(&format!("{base}verify='load'"));
        assert!(e.contains("verify"), "{e}");
    }

    #[test]
    fn diff_budgets_are_read_per_target() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CONFIG_FILE);
        std::fs::write(
            &path,
            "[[target]]\nname='a'\ncommand=['x']\nmax_slowdown=0.1\nmax_modules=300\nmax_ready_ms=250.0\n[[target]]\nname='b'\ncommand=['y']\n",
        )
        .unwrap();
        let c = load(&path).unwrap();
        assert_eq!(
            c.budgets["a"],
            Budgets {
                max_slowdown: 0.1,
                max_modules: Some(300),
                max_ready_ms: Some(250.0),
            }
        );
        assert_eq!(c.budgets["b"], Budgets::default());
    }

    #[test]
    fn a_config_file_labels_its_targets_with_its_own_name() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["tcp.toml", CONFIG_FILE] {
            let path = dir.path().join(name);
            std::fs::write(&path, "[[target]]\nname='a'\ncommand=['x']\n").unwrap();
            let c = load(&path).unwrap();
            assert_eq!(c.targets[0].origin, Origin::TomlFile(name.to_owned()));
            assert_eq!(c.targets[0].origin.to_string(), name);
        }
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
    }

    #[test]
    fn in_one_folder_coldstart_toml_comes_first() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("pyproject.toml"),
            "[project]\nname='x'\n[[tool.coldstart.target]]\nname='from-pyproject'\ncommand=['x']\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join(CONFIG_FILE),
            "[[target]]\nname='from-toml'\ncommand=['x']\n",
        )
        .unwrap();
        let c = discover(dir.path()).unwrap().unwrap();
        assert_eq!(c.path, dir.path().join(CONFIG_FILE));
        assert_eq!(c.targets[0].name, "from-toml");
        assert_eq!(
            c.targets[0].origin,
            Origin::TomlFile(CONFIG_FILE.to_owned())
        );
    }

    #[test]
    fn the_nearest_file_of_either_kind_wins() {
        // A monorepo: a coldstart.toml at the top, a service below it
        // with its own [tool.coldstart].
        let dir = tempfile::tempdir().unwrap();
        let service = dir.path().join("services/ner");
        let deep = service.join("src/ner");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(
            dir.path().join(CONFIG_FILE),
            "[[target]]\nname='top'\ncommand=['x']\n",
        )
        .unwrap();
        std::fs::write(
            service.join("pyproject.toml"),
            "[project]\nname='ner'\n[[tool.coldstart.target]]\nname='ner'\ncommand=['x']\n",
        )
        .unwrap();
        let c = discover(&deep).unwrap().unwrap();
        assert_eq!(c.root, service);
        assert_eq!(c.targets[0].name, "ner");
        // A pyproject.toml without [tool.coldstart] is passed over.
        std::fs::write(deep.join("pyproject.toml"), "[project]\nname='inner'\n").unwrap();
        assert_eq!(discover(&deep).unwrap().unwrap().targets[0].name, "ner");
        std::fs::write(service.join("pyproject.toml"), "[project]\nname='ner'\n").unwrap();
        let c = discover(&deep).unwrap().unwrap();
        assert_eq!(c.path, dir.path().join(CONFIG_FILE));
    }
}
