//! The settings' errors: each says what is wrong and what to do.

use std::path::PathBuf;

use crate::{CONFIG_FILE, STARTER};

/// What went wrong finding or reading the settings.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("could not read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file is not TOML.
    #[error("{} is not valid TOML", path.display())]
    Toml {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// A TOML text that is not a coldstart config (no path: [`crate::parse`]).
    #[error(transparent)]
    Syntax(Box<toml::de::Error>),
    /// The file is TOML, but its tables are not a coldstart config.
    #[error("{} is not a valid coldstart config ({table}); fix it as the message says", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// Which part of it: `the file` or `[tool.coldstart]`.
        table: &'static str,
        /// The parser's message (an unknown key, a wrong type).
        #[source]
        source: Box<toml::de::Error>,
    },
    /// A target of the file is wrong.
    #[error("{} is not a valid coldstart config", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: Problem,
    },
    /// A target is wrong (no path: [`crate::parse`]).
    #[error(transparent)]
    Target(#[from] Problem),
    /// A `pyproject.toml` given by name has no `[tool.coldstart]`.
    #[error(
        "{} has no [tool.coldstart] table; add [[tool.coldstart.target]] tables, or give a coldstart.toml",
        path.display()
    )]
    NoTable {
        /// The file.
        path: PathBuf,
    },
    /// The current folder could not be read.
    #[error("the current folder is not readable")]
    Cwd(#[source] std::io::Error),
    /// Both `--target` and a command after `--`.
    #[error("give either --target or a command after `--`, not both")]
    TargetAndCommand,
    /// `--target NAME` names no target of the config.
    #[error("no target `{name}` in {}; it has: {}", path.display(), names.join(", "))]
    NoSuchTarget {
        /// The name asked for.
        name: String,
        /// The config.
        path: PathBuf,
        /// The names it has.
        names: Vec<String>,
    },
    /// `--target NAME` without a config names something else than the
    /// built-in default.
    #[error(
        "no {CONFIG_FILE} at {}, so the only target is the built-in `{default}`, not `{name}`; add a [[target]] named `{name}` or run a command after `--`",
        root.display()
    )]
    NotTheDefault {
        /// The name asked for.
        name: String,
        /// The project root.
        root: PathBuf,
        /// The built-in default's name.
        default: String,
    },
    /// No config, no default and no command.
    #[error(
        "no coldstart config found in {} or any folder above it, and no command given: add the worker's command after `--` (for one, `-- python3 -m yourworker`), or write a coldstart.toml (or a [tool.coldstart] table in pyproject.toml) such as:\n\n{STARTER}",
        cwd.display()
    )]
    NoConfig {
        /// Where the search started.
        cwd: PathBuf,
    },
    /// A task that takes one target got several.
    #[error("the config has {} targets ({}); pick one with --target NAME", names.len(), names.join(", "))]
    Several {
        /// Their names.
        names: Vec<String>,
    },
}

/// What is wrong with the targets of a config.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// The file has no `[[target]]`.
    #[error("no [[target]] tables: add one, or remove the file")]
    NoTargets,
    /// Two targets share a name.
    #[error("target `{0}` is defined twice")]
    Twice(String),
    /// A target without a command.
    #[error(
        "target `{0}`: `command` is empty; give the worker's argv, e.g. [\"python3\", \"-m\", \"myworker\"]"
    )]
    EmptyCommand(String),
    /// `processes = 0`.
    #[error("target `{0}`: `processes` must be at least 1")]
    NoProcesses(String),
    /// A `verify` request without a string `op`.
    #[error(
        "target `{name}`: `verify` request {index} has no string `op`; write each as {{ op = \"load\", ... }}"
    )]
    VerifyWithoutOp {
        /// The target.
        name: String,
        /// 1-based.
        index: usize,
    },
    /// A `verify` request that ends the worker or is the handshake itself.
    #[error(
        "target `{name}`: `verify` request {index} is `{op}`, which the verification sends itself; list the requests that exercise the model path, such as {{ op = \"load\" }}"
    )]
    VerifyProtocolOp {
        /// The target.
        name: String,
        /// 1-based.
        index: usize,
        /// `shutdown` or `health`.
        op: String,
    },
    /// `verify_command = []`.
    #[error(
        "target `{0}`: `verify_command` is empty; give the argv of your own test, e.g. [\"python\", \"-m\", \"pytest\", \"-q\", \"tests/test_models.py\"], or remove the key"
    )]
    EmptyVerifyCommand(String),
    /// `stop = { signal = ... }` names no signal a stop can be.
    #[error(
        "target `{name}`: `stop.signal` is `{got}`; give one of SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2"
    )]
    BadStopSignal {
        /// The target.
        name: String,
        /// The value given.
        got: String,
    },
    /// `setup = []`.
    #[error(
        "target `{0}`: `setup` is empty; give the argv that builds the project's extensions in a tree, e.g. [\"maturin\", \"develop\"], or remove the key"
    )]
    EmptySetup(String),
    /// `cwd` is not a folder.
    #[error(
        "target `{name}`: `cwd` {} is not a folder; paths are relative to the config file's folder {}",
        cwd.display(),
        root.display()
    )]
    CwdNotAFolder {
        /// The target.
        name: String,
        /// The resolved `cwd`.
        cwd: PathBuf,
        /// The config file's folder.
        root: PathBuf,
    },
    /// A resolved `PYTHONPATH` entry cannot be joined.
    #[error("target `{0}`: a PYTHONPATH entry holds a `:`")]
    PythonPath(String, #[source] std::env::JoinPathsError),
    /// A share (`max_slowdown`) outside (0, 1).
    #[error("target `{name}`: `{key}` must be a share between 0 and 1 (0.05 is 5%), got {got}")]
    NotAShare {
        /// The target.
        name: String,
        /// The key.
        key: &'static str,
        /// The value given.
        got: f64,
    },
    /// A container limit that cannot be used (`cpus`, `memory`).
    #[error("target `{name}`: `{key}`: {why}")]
    BadLimit {
        /// The target.
        name: String,
        /// The key.
        key: &'static str,
        /// What is wrong and what to write.
        why: timeline::LimitError,
    },
    /// A time in milliseconds that is not positive (`max_ready_ms`).
    #[error("target `{name}`: `{key}` must be a positive number of milliseconds, got {got}")]
    NotPositiveMs {
        /// The target.
        name: String,
        /// The key.
        key: &'static str,
        /// The value given.
        got: f64,
    },
    /// A duration that is not a positive number of seconds.
    #[error("target `{name}`: `{key}` must be a positive number of seconds, got {got}")]
    NotPositive {
        /// The target.
        name: String,
        /// The key.
        key: &'static str,
        /// The value given.
        got: f64,
    },
}
