//! The harness's one error type. Every message says what happened and,
//! where the user can act, what to do; each carries its cause in its own
//! text, so `{}` prints the whole story once.

use std::path::{Path, PathBuf};

/// What went wrong in a task of the harness.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bad input: the message says what to fix.
    #[error("{0}")]
    Invalid(String),
    /// A pool run's workers did not all become ready (`bench --pool`):
    /// which one and why, or the interrupt that came first; every worker
    /// was shut down.
    #[error("{0}")]
    PoolStart(String),
    /// A live process's stacks could not be read (the kernel refused,
    /// not Python, gone, ...): the message says which and what to do.
    #[error("{0}")]
    Stacks(pystacks::Error),
    /// A command-line pattern that is not a regular expression.
    #[error("{0}")]
    Pattern(pystacks::BadPattern),
    /// A trace that breaks the rules its writers rely on.
    #[error("{0}")]
    Trace(trace::Error),
    /// A file or folder could not be read, written or created.
    #[error("could not {what} {}: {cause}", path.display())]
    Io {
        /// `read`, `write`, `create`, ...
        what: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The operating system's word.
        cause: std::io::Error,
    },
    /// A target's CPU quota or memory limit cannot be set on this machine.
    #[error("target `{target}` runs under {limits}, but {cause}")]
    Limits {
        /// The target.
        target: String,
        /// Its limits.
        limits: timeline::Limits,
        /// Why they cannot be set, and what to do.
        cause: spawn::cgroup::CgroupError,
    },
    /// One side of a comparison could not be prepared: which (`A` or
    /// `B`), and why.
    #[error("side {side} ({name}): {cause}")]
    Side {
        /// The side.
        side: timeline::Variant,
        /// Its target's name.
        name: String,
        /// Why.
        cause: Box<Error>,
    },
    /// A helper process (an embedded script) failed or hung.
    #[error("{what}: {cause}")]
    Helper {
        /// Which helper.
        what: &'static str,
        /// What the runner says.
        cause: Box<spawn::HelperError>,
    },
    /// A worker failed where the task needed it to work.
    #[error("{context}: {cause}")]
    Worker {
        /// What the task was doing.
        context: String,
        /// The worker's error, with its phase, stderr and diagnostics.
        cause: Box<spawn::Error>,
    },
    /// The import recorder could not be prepared or read.
    #[error("{context}: {cause}")]
    Recorder {
        /// What the task was doing.
        context: &'static str,
        /// Why.
        cause: importguard::recorder::RecorderError,
    },
    /// The import policy cannot be used.
    #[error(
        "the import policy is not usable ({0}); fix --forbid or the target's forbidden/allowed"
    )]
    Policy(importguard::verdict::PolicyError),
    /// The start-up history store failed (its message names the store,
    /// redacted, and what to do).
    #[error(transparent)]
    History(#[from] history::Error),
    /// Statistics could not be computed (no samples, bad input).
    #[error("{context}: {cause}")]
    Stats {
        /// What was being summarised.
        context: &'static str,
        /// Why.
        cause: phases::stats::StatsError,
    },
    /// A JSONL record file could not be written or read.
    #[error("{0}")]
    Records(phases::jsonl::JsonlError),
    /// A record or a report did not serialise, or a saved one did not parse.
    #[error("{context}: {cause}")]
    Json {
        /// What was being read or written.
        context: String,
        /// Why.
        cause: serde_json::Error,
    },
}

impl Error {
    /// Whether a live process's stacks could not be read because it is
    /// not Python (its descendants may be).
    pub fn is_not_python(&self) -> bool {
        matches!(self, Error::Stacks(pystacks::Error::NotPython { .. }))
    }

    /// An I/O error on `path`.
    pub fn io(what: &'static str, path: &Path, cause: std::io::Error) -> Error {
        Error::Io {
            what,
            path: path.to_path_buf(),
            cause,
        }
    }

    /// A worker's error where the task needed it to work.
    pub fn worker(context: impl Into<String>, cause: spawn::Error) -> Error {
        Error::Worker {
            context: context.into(),
            cause: Box::new(cause),
        }
    }

    /// A lifecycle that failed: the worker's error, or what the task
    /// refused to go on with.
    pub fn lifecycle(context: impl Into<String>, failure: crate::lifecycle::Failure) -> Error {
        let context = context.into();
        match failure.into_worker_error() {
            Ok(e) => Error::worker(context, e),
            Err(message) => Error::Invalid(format!("{context}: {message}")),
        }
    }

    /// Whether this is a broken pipe (a reader that went away): the CLI
    /// ends quietly then.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Io { cause, .. } if cause.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

/// A JSONL error as the harness's.
pub(crate) fn jsonl(e: phases::jsonl::JsonlError) -> Error {
    Error::Records(e)
}

/// The harness's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `Error::Invalid` from a format string, returned at once.
macro_rules! invalid {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::Invalid(format!($($arg)*)))
    };
}
pub(crate) use invalid;
