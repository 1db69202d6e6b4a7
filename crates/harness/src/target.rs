//! A worker to check or benchmark, fully resolved: what every task of the
//! harness takes as input. Reading a config file into targets is the
//! caller's job (the `coldstart` CLI); this module only holds the resolved
//! values and the defaults.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use importguard::verdict::Allowance;

/// How long a tcp worker may take to exit by itself after its shutdown
/// reply before it is sent SIGINT (its default stop signal).
pub const TCP_STOP_AFTER: Duration = Duration::from_secs(2);

/// The modules no worker may import at start-up unless told otherwise.
pub const DEFAULT_FORBIDDEN: &[&str] = &["torch", "transformers", "stanza"];

/// Where a target came from, for messages and the JSON reports.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Origin {
    /// A `[[target]]` of a coldstart config file: the file's name
    /// (`coldstart.toml`, or the one `--config FILE` named).
    TomlFile(String),
    /// A `[[tool.coldstart.target]]` of a `pyproject.toml`.
    Pyproject,
    /// The built-in default: the reference worker of the coldstart workspace.
    BuiltinDefault,
    /// A command given after `--`.
    CommandLine,
    /// `--module PKG`: `import PKG` alone.
    Module,
    /// `--log FILE`: a recorded importtime log, nothing run.
    Log,
}

impl Origin {
    /// As printed and serialised: the config file's name
    /// (`coldstart.toml`, `tcp.toml`), `pyproject.toml`, `built-in
    /// default`, `command line`, `--module`, `--log`.
    pub fn as_str(&self) -> &str {
        match self {
            Origin::TomlFile(name) => name,
            Origin::Pyproject => "pyproject.toml",
            Origin::BuiltinDefault => "built-in default",
            Origin::CommandLine => "command line",
            Origin::Module => "--module",
            Origin::Log => "--log",
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Origin {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One worker to check or benchmark, fully resolved.
#[derive(Debug, Clone)]
pub struct Target {
    /// The target's name, unique within its config.
    pub name: String,
    /// argv; `command[0]` is looked up on PATH as usual.
    pub command: Vec<String>,
    /// Set on top of the inherited environment.
    pub env: BTreeMap<String, String>,
    /// Absolute working directory.
    pub cwd: PathBuf,
    /// The project this target belongs to: relative paths in reports are
    /// shown from here, and a relative `py_spy` is resolved against it.
    pub root: PathBuf,
    /// Forbidden package prefixes.
    pub forbidden: Vec<String>,
    /// Modules allowed despite a forbidden prefix, with the reason.
    pub allowed: Vec<Allowance>,
    /// Fresh workers per check.
    pub processes: usize,
    /// Health round trips per worker.
    pub health: usize,
    /// How long to wait for the ready line.
    pub ready_timeout: Duration,
    /// How long to wait for each reply.
    pub request_timeout: Duration,
    /// How long to wait for the shutdown acknowledgement, and again for the exit.
    pub shutdown_timeout: Duration,
    /// SIGTERM to SIGKILL.
    pub grace: Duration,
    /// Where py-spy is, when set (relative to `root`).
    pub py_spy: Option<PathBuf>,
    /// The serve phase's request (`{"op": ..., ...}`), if the target has one.
    pub request: Option<serde_json::Map<String, serde_json::Value>>,
    /// How the worker speaks the protocol: stdio (the default, which also
    /// takes a worker whose ready line on stderr names `"transport":
    /// "tcp"`), or tcp (the ready line on stderr only).
    pub transport: spawn::Transport,
    /// The model path: requests (`{"op": ..., ...}`) sent after ready when
    /// a patched copy is verified; each must get a reply that is not an
    /// error.
    pub verify: Vec<serde_json::Map<String, serde_json::Value>>,
    /// The user's own command (argv), run in the patched copy's working
    /// directory when a cut is verified; it must exit 0.
    pub verify_command: Vec<String>,
    /// The folders the project's own top-level packages are imported
    /// from (its build config's, else `src/` or the project's folder);
    /// absolute. A second tree of the project (a `diff`'s base, a patched
    /// copy) puts its own first on its path ([`Target::own_roots_first`]),
    /// so an editable install that points at the working tree loses.
    pub import_roots: Vec<PathBuf>,
    /// A command run in each tree of a `diff` before anything is measured
    /// (argv, in the tree's counterpart of `cwd`, with `COLDSTART_SIDE` set
    /// to `base` or `head`): what builds the project's extensions. Empty
    /// when the target has none.
    pub setup: Vec<String>,
    /// How the worker is ended after its shutdown reply when it does not
    /// exit by itself (a daemon that goes back to `accept`): its stop
    /// signal. `None`: the default of the transport it served over
    /// ([`Target::shutdown_policy`]).
    pub stop: Option<spawn::Stop>,
    /// The CPU quota and memory limit each worker runs under, in a cgroup
    /// of its own (config `cpus`, `memory`; bench's `--cpus`, `--memory`).
    /// Default: none, the bare machine.
    pub limits: timeline::Limits,
    /// Where this target came from.
    pub origin: Origin,
}

impl Target {
    /// The top-level module names of the project's own code for this
    /// target ([`importguard::firstparty::top_level_names`] of its folder,
    /// its `src/` and the `PYTHONPATH` entries inside the project: the
    /// target's own, else the one the worker inherits).
    pub fn first_party(&self) -> Vec<String> {
        let inherited = std::env::var_os("PYTHONPATH");
        let pythonpath = match self.env.get("PYTHONPATH") {
            Some(p) => Some(std::ffi::OsStr::new(p)),
            None => inherited.as_deref(),
        };
        let mut dirs = importguard::firstparty::source_dirs(&self.cwd, pythonpath, &self.root);
        dirs.extend(self.import_roots.iter().cloned());
        importguard::firstparty::top_level_names(dirs, &self.root)
    }

    /// This target with its import roots first on `PYTHONPATH` (before its
    /// own entries and the inherited ones, after nothing), each once: what
    /// makes a tree's worker import that tree's packages whatever the
    /// environment has installed (a static `.pth`, an editable finder on
    /// `sys.meta_path`, a copy in site-packages).
    pub fn own_roots_first(&self) -> Target {
        let mut m = self.clone();
        if self.import_roots.is_empty() {
            return m;
        }
        let mut entries: Vec<PathBuf> = self.import_roots.clone();
        if let Some(old) = self.pythonpath() {
            for p in std::env::split_paths(&old) {
                if !p.as_os_str().is_empty() && !entries.contains(&p) {
                    entries.push(p);
                }
            }
        }
        if let Ok(joined) = std::env::join_paths(entries) {
            m.env.insert(
                "PYTHONPATH".to_owned(),
                joined.to_string_lossy().into_owned(),
            );
        }
        m
    }

    /// The built-in default of the coldstart workspace at `root`: the
    /// reference worker in `worker/`, loading no models, forbidding torch,
    /// transformers and stanza.
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
            origin: Origin::BuiltinDefault,
            ..Target::ad_hoc(root, Vec::new(), "refworker")
        }
    }

    /// A command with the default policy and timeouts, run in `cwd` (which
    /// is also its project root).
    pub fn ad_hoc(cwd: &Path, command: Vec<String>, name: &str) -> Target {
        Target {
            name: name.to_owned(),
            command,
            env: BTreeMap::new(),
            cwd: cwd.to_path_buf(),
            root: cwd.to_path_buf(),
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
            transport: spawn::Transport::Stdio,
            verify: Vec::new(),
            verify_command: Vec::new(),
            import_roots: Vec::new(),
            setup: Vec::new(),
            stop: None,
            limits: timeline::Limits::default(),
            origin: Origin::CommandLine,
        }
    }

    /// The worker command for `spawn`: the argv, the target's environment
    /// on top of the inherited one, and its working directory. Callers add
    /// what their task needs (importtime, the recorder, a stderr file).
    pub fn spawn_command(&self) -> spawn::Command {
        let mut cmd = spawn::Command::new(&self.command[0]);
        cmd.args(&self.command[1..])
            .current_dir(&self.cwd)
            .transport(self.transport)
            .limits(self.limits);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// How long the worker's polite end may take: the shutdown timeout for
    /// the ack and again for the exit, then the grace after SIGTERM; and
    /// its stop signal: the target's, else, for a worker that served over
    /// tcp (its target said so, or its ready line did), SIGINT
    /// [`TCP_STOP_AFTER`] after the ack (a daemon built to outlive its
    /// shutdown reply stops on SIGINT; one that exits by itself never
    /// gets it).
    pub fn shutdown_policy(&self) -> spawn::ShutdownPolicy {
        spawn::ShutdownPolicy {
            ack_timeout: self.shutdown_timeout,
            exit_timeout: self.shutdown_timeout,
            grace: self.grace,
            stop: self.stop,
            tcp_stop: Some(spawn::Stop {
                signal: libc::SIGINT,
                after: TCP_STOP_AFTER,
            }),
        }
    }

    /// The command as a person would type it, for messages.
    pub fn display_command(&self) -> String {
        display_argv(&self.command)
    }

    /// The `PYTHONPATH` this target's worker would have: its own, else the
    /// one it inherits from us.
    pub fn pythonpath(&self) -> Option<OsString> {
        self.env
            .get("PYTHONPATH")
            .map(OsString::from)
            .or_else(|| std::env::var_os("PYTHONPATH"))
    }

    /// This target with every project path under `from` moved under `to`
    /// (a copy or another checkout of the same tree): its working
    /// directory, its root (the config's folder), its `py_spy`, every
    /// `PYTHONPATH` entry (its own or the inherited one; a relative entry
    /// is made absolute against the working directory first), and each
    /// argument of its command and its `verify_command` that names a path
    /// under `from` which exists under `to` (a program in an untracked
    /// virtualenv that the other tree does not have stays where it is).
    /// Paths outside `from` are left where they are: a `../shared` entry
    /// of a project beside a shared folder names the real `../shared`
    /// from either tree.
    pub fn moved(&self, from: &Path, to: &Path) -> Target {
        let mut m = self.clone();
        m.cwd = moved_path(&self.cwd, from, to);
        m.root = moved_path(&self.root, from, to);
        m.py_spy = self.py_spy.as_deref().map(|p| moved_path(p, from, to));
        m.import_roots = self
            .import_roots
            .iter()
            .map(|p| moved_path(p, from, to))
            .collect();
        let moved_arg = |a: &String| {
            let p = moved_path(Path::new(a), from, to);
            if p.as_path() != Path::new(a) && p.exists() {
                p.display().to_string()
            } else {
                a.clone()
            }
        };
        m.command = self.command.iter().map(moved_arg).collect();
        m.verify_command = self.verify_command.iter().map(moved_arg).collect();
        m.setup = self.setup.iter().map(moved_arg).collect();
        if let Some(old) = self.pythonpath() {
            let entries: Vec<PathBuf> = std::env::split_paths(&old)
                .map(|p| {
                    if p.as_os_str().is_empty() {
                        p
                    } else {
                        let entry = importguard::firstparty::lexical(&self.cwd.join(p));
                        moved_path(&entry, from, to)
                    }
                })
                .collect();
            if let Ok(joined) = std::env::join_paths(entries) {
                m.env.insert(
                    "PYTHONPATH".to_owned(),
                    joined.to_string_lossy().into_owned(),
                );
            }
        }
        m
    }
}

/// `p` with the prefix `from` replaced by `to`; `p` itself when it is not
/// under `from`. Whether it is, is told by name once its `.` and `..` are
/// resolved ([`importguard::firstparty::lexical`]): `from/../shared` is
/// beside `from`, not under it, and stays where it is.
pub fn moved_path(p: &Path, from: &Path, to: &Path) -> PathBuf {
    let named = importguard::firstparty::lexical(p);
    match named.strip_prefix(importguard::firstparty::lexical(from)) {
        Ok(rest) if rest.as_os_str().is_empty() => to.to_path_buf(),
        Ok(rest) => to.join(rest),
        Err(_) => p.to_path_buf(),
    }
}

/// An argv as a person would type it in a POSIX shell: words that need it
/// in single quotes.
pub fn display_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_command_quotes_what_needs_it() {
        let t = Target::ad_hoc(
            Path::new("/"),
            vec!["python3".into(), "-c".into(), "import x".into()],
            "c",
        );
        assert_eq!(t.display_command(), "python3 -c 'import x'");
    }

    #[test]
    fn project_paths_move_and_others_stay() {
        let from = tempfile::tempdir().unwrap();
        let to = tempfile::tempdir().unwrap();
        let (f, t) = (from.path(), to.path());
        std::fs::write(t.join("run.py"), "").unwrap();
        let mut w = Target::ad_hoc(
            f,
            vec![
                "python3".into(),
                f.join("run.py").display().to_string(),
                f.join(".venv/x").display().to_string(),
            ],
            "w",
        );
        w.env.insert(
            "PYTHONPATH".into(),
            format!("{}:/opt/lib", f.join("src").display()),
        );
        w.cwd = f.join("sub");
        let m = w.moved(f, t);
        assert_eq!(m.command[1], t.join("run.py").display().to_string());
        // Not in the other tree: kept.
        assert_eq!(m.command[2], w.command[2]);
        assert_eq!(m.cwd, t.join("sub"));
        assert_eq!(m.root, t);
        assert_eq!(
            m.env["PYTHONPATH"],
            format!("{}:/opt/lib", t.join("src").display())
        );
    }

    #[test]
    fn a_pythonpath_entry_beside_the_project_stays_where_it_is() {
        // A monorepo: `service/` beside `shared/`, the service's
        // PYTHONPATH `src:../shared` (relative, as inherited, and absolute
        // with its `..`, as a config resolves it).
        let repo = tempfile::tempdir().unwrap();
        let copy = tempfile::tempdir().unwrap();
        let service = repo.path().join("service");
        let shared = repo.path().join("shared");
        for pythonpath in [
            "src:../shared".to_owned(),
            format!(
                "{}:{}/../shared",
                service.join("src").display(),
                service.display()
            ),
        ] {
            let mut w = Target::ad_hoc(&service, vec!["python3".into()], "w");
            w.env.insert("PYTHONPATH".into(), pythonpath);
            let m = w.moved(&service, copy.path());
            assert_eq!(
                m.env["PYTHONPATH"],
                format!("{}:{}", copy.path().join("src").display(), shared.display())
            );
        }
    }

    #[test]
    fn origins_print_as_the_reports_name_them() {
        assert_eq!(Origin::BuiltinDefault.to_string(), "built-in default");
        assert_eq!(
            serde_json::to_string(&Origin::TomlFile("tcp.toml".to_owned())).unwrap(),
            "\"tcp.toml\""
        );
    }
}
