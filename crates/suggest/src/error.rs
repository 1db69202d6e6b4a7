//! The crate's errors.

use std::path::PathBuf;

/// What a check run on a patched copy may fail with (the caller's error).
pub type CheckError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why no suggestion could be computed, verified or applied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SuggestError {
    /// The classifier could not be run, or did not finish in time (its
    /// process group was killed).
    #[error("could not run {python}: {source}; check the target's interpreter path")]
    Spawn {
        /// The interpreter.
        python: PathBuf,
        /// What the helper runner says (not started, not written, timed out).
        source: Box<spawn::HelperError>,
    },
    /// The classifier ran but did not answer (it crashed, or printed no
    /// tagged line).
    #[error(
        "{python} -I -B classify.py ended with {status} without an answer; \
         the classifier needs a working CPython 3.8 or newer\n[stdout]\n{stdout}\n[stderr]\n{stderr}"
    )]
    Interpreter {
        /// The interpreter.
        python: PathBuf,
        /// Its exit status.
        status: String,
        /// What it printed on stdout.
        stdout: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// The classifier's tagged line is not the JSON this crate expects.
    #[error(
        "the classifier's answer from {python} could not be read ({detail}); \
         this is a bug in coldstart: please report it with the answer\n[stdout]\n{stdout}"
    )]
    Answer {
        /// The interpreter.
        python: PathBuf,
        /// The JSON error.
        detail: String,
        /// What it printed on stdout.
        stdout: String,
    },
    /// The interpreter is older than the classifier supports.
    #[error(
        "{python} is Python {version}; suggesting a cut needs Python 3.8 or newer (ast end positions): \
         point the target at a newer interpreter"
    )]
    TooOld {
        /// The interpreter.
        python: PathBuf,
        /// Its version.
        version: String,
    },
    /// A file could not be read, written or copied.
    #[error("could not {action} {path}: {source}")]
    Io {
        /// What was being done (`read`, `write`, `copy`).
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file is not what the suggestion was computed from.
    #[error(
        "{path} changed since the suggestion was computed; run the check again for a fresh suggestion"
    )]
    Changed {
        /// The file.
        path: PathBuf,
    },
    /// The classifier's edits do not fit the file (a bug, or a file that
    /// changed while it was read).
    #[error("the edits for {path} do not fit the file ({detail}); run the check again")]
    BadEdit {
        /// The file.
        path: PathBuf,
        /// What did not fit.
        detail: String,
    },
    /// The caller's check on the patched copy could not run.
    #[error("the check on the patched copy could not run: {source}")]
    Check {
        /// The caller's error.
        source: CheckError,
    },
}

impl SuggestError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        SuggestError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
