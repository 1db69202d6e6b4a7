//! `coldstart.toml`: the targets a user checks and benchmarks, and the
//! built-in default (the reference worker) when there is no file.
//!
//! ```toml
//! [[target]]
//! name = "ner-worker"
//! command = ["python3", "-m", "myapp.worker", "--task", "ner"]
//! env = { PYTHONPATH = "src" }          # on top of the inherited environment
//! cwd = "."                              # relative to the workspace root
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
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// The modules no worker may import at start-up unless told otherwise.
pub const DEFAULT_FORBIDDEN: &[&str] = &["torch", "transformers", "stanza"];

/// The config file's name at the workspace root.
pub const CONFIG_FILE: &str = "coldstart.toml";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default, rename = "target")]
    targets: Vec<RawTarget>,
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
    allowed: Vec<Allowed>,
    processes: Option<usize>,
    health: Option<usize>,
    ready_timeout: Option<f64>,
    request_timeout: Option<f64>,
    shutdown_timeout: Option<f64>,
    grace: Option<f64>,
    py_spy: Option<PathBuf>,
    request: Option<serde_json::Map<String, serde_json::Value>>,
}

/// An allowed module (package prefix) with the reason it is allowed.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Allowed {
    pub module: String,
    pub reason: String,
}

/// One worker to check or benchmark, fully resolved.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    /// argv; `command[0]` is looked up on PATH as usual.
    pub command: Vec<String>,
    /// Set on top of the inherited environment.
    pub env: BTreeMap<String, String>,
    /// Absolute working directory.
    pub cwd: PathBuf,
    pub forbidden: Vec<String>,
    pub allowed: Vec<Allowed>,
    /// Fresh workers per check.
    pub processes: usize,
    /// Health round trips per worker.
    pub health: usize,
    pub ready_timeout: Duration,
    pub request_timeout: Duration,
    pub shutdown_timeout: Duration,
    pub grace: Duration,
    pub py_spy: Option<PathBuf>,
    /// The serve phase's request (`{"op": ..., ...}`), if the target has one.
    pub request: Option<serde_json::Map<String, serde_json::Value>>,
    /// Where this target came from, for messages: `coldstart.toml`, `built-in default`, `command line`.
    pub origin: &'static str,
}

impl Target {
    /// The built-in default: the reference worker in `worker/`, loading no
    /// models, forbidding torch, transformers and stanza.
    pub fn reference_worker(root: &Path) -> Target {
        let mut env = BTreeMap::new();
        env.insert(
            "PYTHONPATH".to_owned(),
            root.join("worker").display().to_string(),
        );
        Target {
            command: [
                "python3",
                "-m",
                "refworker",
                "--test-echo",
                "--profile",
                "gpu",
                "--force-cpu",
            ]
            .map(String::from)
            .to_vec(),
            env,
            ..Target::ad_hoc(root, Vec::new(), "refworker")
        }
        .with_origin("built-in default")
    }

    /// A command given after `--`, with the default policy and timeouts.
    pub fn ad_hoc(root: &Path, command: Vec<String>, name: &str) -> Target {
        Target {
            name: name.to_owned(),
            command,
            env: BTreeMap::new(),
            cwd: root.to_path_buf(),
            forbidden: DEFAULT_FORBIDDEN.iter().map(|s| s.to_string()).collect(),
            allowed: Vec::new(),
            processes: 3,
            health: 1,
            ready_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(10),
            shutdown_timeout: Duration::from_secs(10),
            grace: Duration::from_secs(2),
            py_spy: None,
            request: None,
            origin: "command line",
        }
    }

    fn with_origin(mut self, origin: &'static str) -> Self {
        self.origin = origin;
        self
    }

    /// The worker command for `spawn`: the argv, the target's environment
    /// on top of the inherited one, and its working directory. Callers add
    /// what their task needs (importtime, the recorder, a stderr file).
    pub fn spawn_command(&self) -> spawn::Command {
        let mut cmd = spawn::Command::new(&self.command[0]);
        cmd.args(&self.command[1..]).current_dir(&self.cwd);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// How long the worker's polite end may take: the shutdown timeout for
    /// the ack and again for the exit, then the grace after SIGTERM.
    pub fn shutdown_policy(&self) -> spawn::ShutdownPolicy {
        spawn::ShutdownPolicy {
            ack_timeout: self.shutdown_timeout,
            exit_timeout: self.shutdown_timeout,
            grace: self.grace,
        }
    }

    /// The command as a person would type it, for messages.
    pub fn display_command(&self) -> String {
        self.command
            .iter()
            .map(|a| {
                if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"')
                {
                    format!("'{}'", a.replace('\'', r"'\''"))
                } else {
                    a.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn secs(v: Option<f64>, default: Duration, what: &str, name: &str) -> Result<Duration> {
    match v {
        None => Ok(default),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Duration::from_secs_f64(s)),
        Some(s) => bail!("target `{name}`: `{what}` must be a positive number of seconds, got {s}"),
    }
}

/// Reads `coldstart.toml` at `root`; `Ok(None)` when there is none.
pub fn load(root: &Path) -> Result<Option<Vec<Target>>> {
    let path = root.join(CONFIG_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("could not read {}", path.display())),
    };
    parse(&text, root)
        .with_context(|| format!("{} is not a valid coldstart config; fix it or remove it to use the built-in default", path.display()))
        .map(Some)
}

/// Parses a config text; relative `cwd`s are taken from `root`.
pub fn parse(text: &str, root: &Path) -> Result<Vec<Target>> {
    let file: File = toml::from_str(text)?;
    if file.targets.is_empty() {
        bail!("no [[target]] tables: add one, or remove the file");
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
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
        let base = Target::ad_hoc(root, raw.command, &name);
        if raw.processes == Some(0) {
            bail!("target `{name}`: `processes` must be at least 1");
        }
        out.push(Target {
            env: raw.env,
            cwd: raw.cwd.map(|c| root.join(c)).unwrap_or(base.cwd.clone()),
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
            py_spy: raw.py_spy,
            request: raw.request,
            origin: CONFIG_FILE,
            ..base
        });
    }
    Ok(out)
}

/// How a task picks its targets: `-- CMD...` wins (run in the current
/// directory), then `--target NAME` from the config, then every target of
/// the config, then the built-in default (both run from the workspace root,
/// or the target's `cwd`).
pub fn resolve(root: &Path, target: Option<&str>, command: &[String]) -> Result<Vec<Target>> {
    if !command.is_empty() {
        if target.is_some() {
            bail!("give either --target or a command after `--`, not both");
        }
        // A command line runs where the user typed it, like any command.
        let here = std::env::current_dir()
            .context("could not read the current directory to run the command in")?;
        return Ok(vec![Target::ad_hoc(&here, command.to_vec(), "command")]);
    }
    let configured = load(root)?;
    match (target, configured) {
        (Some(name), Some(targets)) => {
            let names: Vec<_> = targets.iter().map(|t| t.name.clone()).collect();
            targets
                .into_iter()
                .find(|t| t.name == name)
                .map(|t| vec![t])
                .with_context(|| {
                    format!(
                        "no target `{name}` in {CONFIG_FILE}; it has: {}",
                        names.join(", ")
                    )
                })
        }
        (Some("refworker"), None) => Ok(vec![Target::reference_worker(root)]),
        (Some(name), None) => bail!(
            "no {CONFIG_FILE} at {}, so the only target is the built-in `refworker`, not `{name}`; add a [[target]] named `{name}` or run a command after `--`",
            root.display()
        ),
        (None, Some(targets)) => Ok(targets),
        (None, None) => Ok(vec![Target::reference_worker(root)]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_target_parses_with_defaults_filled() {
        let t = parse(
            r#"
[[target]]
name = "w"
command = ["python3", "-m", "w"]
env = { A = "1" }
cwd = "sub"
allowed = [{ module = "transformers.utils", reason = "light" }]
ready_timeout = 1.5
"#,
            Path::new("/root"),
        )
        .unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].cwd, Path::new("/root/sub"));
        assert_eq!(t[0].forbidden, ["torch", "transformers", "stanza"]);
        assert_eq!(t[0].ready_timeout, Duration::from_millis(1500));
        assert_eq!(t[0].processes, 3);
        assert_eq!(t[0].allowed[0].reason, "light");
    }

    #[test]
    fn bad_configs_say_what_to_fix() {
        let root = Path::new("/r");
        let err = |s: &str| format!("{:#}", parse(s, root).unwrap_err());
        assert!(err("").contains("no [[target]]"));
        assert!(err("[[target]]\nname='a'\ncommand=[]").contains("`command` is empty"));
        assert!(err("[[target]]\nname='a'\ncommand=['x']\nready_timeout=-1").contains("positive"));
        assert!(err("[[target]]\nname='a'\ncommand=['x']\nbogus=1").contains("bogus"));
        assert!(
            err("[[target]]\nname='a'\ncommand=['x']\n[[target]]\nname='a'\ncommand=['y']")
                .contains("twice")
        );
    }

    #[test]
    fn display_command_quotes_what_needs_it() {
        let t = Target::ad_hoc(
            Path::new("/"),
            vec!["python3".into(), "-c".into(), "import x".into()],
            "c",
        );
        assert_eq!(t.display_command(), "python3 -c 'import x'");
    }
}
