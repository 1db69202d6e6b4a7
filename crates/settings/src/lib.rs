//! coldstart's settings: the config found where the user stands
//! ([`config`]: `--config FILE`, else the nearest `coldstart.toml` or
//! `pyproject.toml` with `[tool.coldstart]`, a `coldstart.toml` first in a
//! folder, resolved into
//! [`harness::Target`]s), the [`Project`] a command runs in (its root,
//! its config, its built-in default, which targets a task runs) and the
//! [`Overrides`] a command line puts over the targets it selects.
//!
//! Owns the file format and its discovery, nothing else: it runs no worker,
//! parses no flags, prints nothing and picks no exit code. The `coldstart`
//! command line and an embedding project's own xtask both read their
//! targets here, so neither depends on the other.

#![warn(missing_docs)]

pub mod config;
mod error;
pub mod layout;
mod overrides;
mod project;

pub use config::{Config, discover, load, parse, target_names};
pub use error::{Error, Problem};
pub use overrides::Overrides;
pub use project::Project;

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
# transport = "tcp"    # a worker that prints its ready line on stderr and serves over TCP
# cpus = 1.0           # each worker under a CPU quota and a memory limit, as in its container
# memory = "1G"
# `coldstart diff` (the working tree against a git revision) fails when:
# max_slowdown = 0.05  # start-up is slower by more than this (the whole interval)
# max_modules = 400    # more modules are imported at ready
# max_ready_ms = 500.0 # ready's lower bound is above this (depends on the machine)
# A cut that `check --suggest` offers must keep the model path working on a patched copy:
# verify = [{ op = "load", model = "ner" }]   # sent after ready; no reply may be an error
# verify_command = ["python3", "-m", "pytest", "-q", "tests/test_models.py"]  # must pass
"#;
