//! The import recorder: a small Python bootstrap, embedded here, that a
//! worker runs as `sitecustomize` and that writes down every import attempt
//! as a JSON line; and the typed records read back from its files.
//!
//! [`Recorder::prepare`] writes the bootstrap ([`bootstrap::PRELUDE`], shared
//! with the memory view, then [`BODY`]) to a private (0700) temporary
//! folder and returns the environment that puts it first on the worker's
//! `PYTHONPATH`; the bootstrap chains to the `sitecustomize` the environment
//! already had, so a venv's or a distribution's still runs.
//!
//! The body's Python is cut by job under `py/` (the policy, the stack walks
//! of "who asked", the finder, spawns, the audit hook and lazy loading, an
//! image's start, fork and exit, and the wiring), each file a factory that
//! returns its closures; they are concatenated in order at compile time into
//! the one bootstrap, compiled once and cached, so the cut costs nothing at
//! run time and the hot paths (the finder, the hook) still read only locals
//! and closure cells.
//!
//! Every interpreter image that inherits that environment records too: the
//! worker, its subprocesses and `multiprocessing` workers (spawn and fork),
//! forked children and the images of `os.exec*` (same pid, next exec
//! generation). Each writes its own file, starting with a start record that
//! says who it is and who started it. The first image claims the file the
//! harness made (it opens it rather than creating it, and holds a lock on
//! it while it runs); it writes a short start record at once and keeps the
//! whole one back with its imports, to be written with its first record a
//! verdict needs, a fork, an exec or exit ([`Start::completes`]): the
//! worker's start pays for one short write. [`RecorderSetup::read`] reads
//! them all into one [`Recording`] (the first interpreter, with the other
//! images in [`Recording::children`]) and [`Recording::processes`] gives
//! the process tree with its parent relations ([`process`]). The first
//! image also names the processes above it up to the harness
//! ([`Start::ancestors`]): the launchers (`uv run`, a shell) it was started
//! through. Imports are seen through two channels ([`Channel`]): a
//! `sys.meta_path` finder placed first, and the `import` audit event that
//! code cannot remove.
//!
//! Where each import came from is read only for forbidden names: their
//! record holds who asked, the first-party line and the stack of executing
//! modules with the line that imported each ([`ImportAttempt::stack_by`]),
//! every link of the chain at the one moment they are all on the stack. The
//! worker's other imports are recorded by name, time, result and channel,
//! without walking a frame: that keeps the recorder's cost on a worker's
//! start within a few percent (measured by the check's `--bench`).
//!
//! [`read`] parses one record file, tolerating a truncated last line (a
//! crash keeps every record written before it), and refuses records of a
//! format version this build does not read. A [`Recording`] without a start
//! record means the recorder never ran: the worker used `-S`, `-I` or `-E`,
//! or replaced `PYTHONPATH`, and the verdict must rely on importtime alone.
//!
//! This module does not judge anything (see [`crate::verdict`]) and does not
//! start processes: the caller adds [`RecorderSetup::env`] to its command.

pub mod bootstrap;
pub mod process;
mod read;
mod record;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

pub use bootstrap::{FORMAT_VERSION, FormatMismatch};
pub use process::{ProcessInfo, PythonArgs, Relation};
pub use read::{Recording, read};
pub(crate) use record::is_python_name;
pub use record::{
    Ancestor, BootstrapError, CallSite, Chain, Channel, Exit, Flags, ImageId, ImportAttempt,
    Program, Record, Spawn, SpawnEnv, SpawnKind, Start, StartHow,
};

/// The recorder's body, in order: the first-party rule, then one file a
/// job under `py/` (see `py/policy.py`), each defining a factory that
/// `install.py`, last, wires together and runs. The one list both [`BODY`]
/// and [`BOOTSTRAP`] are made of.
macro_rules! body {
    () => {
        concat!(
            include_str!("../firstparty.py"),
            include_str!("py/policy.py"),
            include_str!("py/frames.py"),
            include_str!("py/finder.py"),
            include_str!("py/spawns.py"),
            include_str!("py/audit.py"),
            include_str!("py/lifecycle.py"),
            include_str!("py/install.py"),
        )
    };
}

/// The recorder's own part of the bootstrap, after [`bootstrap::PRELUDE`].
pub const BODY: &str = body!();

/// The whole recorder bootstrap, written as `bootstrap.py` beside the
/// `site/` folder whose `sitecustomize.py` ([`bootstrap::STUB`]) runs it:
/// the prelude, then [`BODY`].
pub const BOOTSTRAP: &str = concat!(include_str!("prelude.py"), body!());

/// The environment variable naming the record file.
pub const RECORD_ENV: &str = "COLDSTART_RECORD";

/// The environment variable naming the project root (empty: none), whose
/// first-party rule ([`crate::firstparty`]) picks a record's first-party
/// line.
pub const ROOT_ENV: &str = "COLDSTART_RECORD_ROOT";

/// The environment variable holding the policy the bootstrap enforces:
/// `block=1;forbid=torch,transformers;allow=transformers.utils`.
pub const POLICY_ENV: &str = "COLDSTART_RECORD_POLICY";

/// The environment variable each image sets for the images it starts
/// (`PID:GEN`); [`Recorder::prepare`] clears it for the worker.
pub const IMAGE_ENV: &str = "COLDSTART_RECORD_IMAGE";

/// Errors preparing the recorder or reading its records.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecorderError {
    /// The private folder or the bootstrap file could not be written.
    #[error(
        "could not write the import recorder to {path}: {source}; check that the temporary folder ($TMPDIR) is writable"
    )]
    Write {
        /// The folder or file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A module pattern cannot be passed to the bootstrap.
    #[error(
        "`{pattern}` is not a module name or package prefix (letters, digits, `_` and `.` only)"
    )]
    BadPattern {
        /// The pattern as given.
        pattern: String,
    },
    /// The record file exists but could not be read.
    #[error("could not read the import records {path}: {source}")]
    Read {
        /// The record file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The record file was written by a bootstrap of another format.
    #[error("could not read the import records {path}: {source}")]
    Format {
        /// The record file.
        path: PathBuf,
        /// The versions found and read.
        source: FormatMismatch,
    },
}

/// What the bootstrap is told to enforce.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecorderPolicy {
    /// Forbidden package prefixes (only used when `block` is set).
    pub forbid: Vec<String>,
    /// Allowed package prefixes, exempt from blocking.
    pub allow: Vec<String>,
    /// Refuse forbidden imports with an ImportError that names the policy.
    pub block: bool,
    /// The project root: the "first-party line" of a record is the first
    /// frame that is first party by [`crate::firstparty`] under it (without
    /// one: the first outside the standard library and the forbidden
    /// packages).
    pub root: Option<PathBuf>,
    /// The project's own top-level package names: each import of one of
    /// them is written with the file it was found at and the finder that
    /// answered ([`ImportAttempt::file`], [`ImportAttempt::finder`]).
    pub own: Vec<String>,
}

impl RecorderPolicy {
    fn encode(&self) -> Result<String, RecorderError> {
        for p in self.forbid.iter().chain(&self.allow) {
            if !is_module_pattern(p) {
                return Err(RecorderError::BadPattern { pattern: p.clone() });
            }
        }
        // A name that is not an identifier cannot be imported: nothing to
        // record for it.
        let own: Vec<&str> = self
            .own
            .iter()
            .map(String::as_str)
            .filter(|n| is_module_pattern(n) && !n.contains('.'))
            .collect();
        Ok(format!(
            "block={};forbid={};allow={};own={}",
            u8::from(self.block),
            self.forbid.join(","),
            self.allow.join(","),
            own.join(",")
        ))
    }
}

/// `torch`, `transformers.models`: dotted identifiers.
pub fn is_module_pattern(p: &str) -> bool {
    !p.is_empty()
        && p.split('.').all(|part| {
            !part.is_empty()
                && !part.starts_with(|c: char| c.is_ascii_digit())
                && part.chars().all(|c| c.is_alphanumeric() || c == '_')
        })
}

/// Entry point: prepares one worker's recorder.
#[derive(Debug, Clone, Copy)]
pub struct Recorder;

/// The start of the name of a worker's private folder (its records) in
/// the system's temporary folder.
pub const PRIVATE_PREFIX: &str = "coldstart-recorder-";

impl Recorder {
    /// Writes the bootstrap to a fresh private folder and returns the
    /// environment to give one worker. `pythonpath` is the `PYTHONPATH` the
    /// worker would have had (its target's, else the inherited one); the
    /// recorder's folder goes in front of it.
    pub fn prepare(
        policy: &RecorderPolicy,
        pythonpath: Option<&OsStr>,
    ) -> Result<RecorderSetup, RecorderError> {
        Recorder::prepare_in(bootstrap::temp_dir(PRIVATE_PREFIX)?, policy, pythonpath)
    }

    /// As [`Recorder::prepare`], with `dir` as the worker's private folder
    /// (see [`bootstrap::Bootstrap::prepare_in`]); name it with
    /// [`PRIVATE_PREFIX`].
    pub fn prepare_in(
        dir: tempfile::TempDir,
        policy: &RecorderPolicy,
        pythonpath: Option<&OsStr>,
    ) -> Result<RecorderSetup, RecorderError> {
        let encoded = policy.encode()?;
        let boot = bootstrap::Bootstrap::prepare_in(dir, BODY)?;
        let record_path = boot.dir().join("records.jsonl");
        make_record_file(&record_path)?;
        let env = vec![
            (OsString::from("PYTHONPATH"), boot.pythonpath(pythonpath)),
            (
                OsString::from(RECORD_ENV),
                record_path.clone().into_os_string(),
            ),
            (OsString::from(POLICY_ENV), OsString::from(encoded)),
            (
                OsString::from(ROOT_ENV),
                policy
                    .root
                    .as_ref()
                    .map_or_else(OsString::new, |r| r.clone().into_os_string()),
            ),
            // The worker is the first image, whatever started the harness.
            (OsString::from(IMAGE_ENV), OsString::new()),
        ];
        Ok(RecorderSetup {
            env,
            record_path,
            boot,
        })
    }
}

/// Makes the first image's record file (private, holding one blank line,
/// which readers skip), so that the worker claims it rather than creating
/// it: a file's creation and its first block cost the worker's start about
/// ten times what opening it costs (`_CsRecords` in `prelude.py`).
fn make_record_file(path: &Path) -> Result<(), RecorderError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(b"\n"))
        .map_err(|source| RecorderError::Write {
            path: path.to_path_buf(),
            source,
        })
}

/// One worker's recorder: the environment to set and the private folder,
/// removed when this value drops.
#[derive(Debug)]
pub struct RecorderSetup {
    env: Vec<(OsString, OsString)>,
    record_path: PathBuf,
    boot: bootstrap::Bootstrap,
}

impl RecorderSetup {
    /// Variables to set on the worker, on top of its environment:
    /// `PYTHONPATH`, [`RECORD_ENV`], [`POLICY_ENV`], [`IMAGE_ENV`] (empty).
    pub fn env(&self) -> &[(OsString, OsString)] {
        &self.env
    }

    /// The main interpreter's record file.
    pub fn record_path(&self) -> &Path {
        &self.record_path
    }

    /// The private folder (bootstrap and records).
    pub fn dir(&self) -> &Path {
        self.boot.dir()
    }

    /// Reads what the worker and every image it started recorded so far
    /// (also while they still run): the first interpreter's records, with
    /// the other images in [`Recording::children`] in start order.
    pub fn read(&self) -> Result<Recording, RecorderError> {
        let mut rec = read(&self.record_path)?;
        rec.child_files = self.child_files();
        for file in &rec.child_files {
            let bytes = match std::fs::read(file) {
                Ok(b) => b,
                // A child that is still opening its file.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(RecorderError::Read {
                        path: file.clone(),
                        source,
                    });
                }
            };
            for image in Recording::parse_images(&bytes) {
                image.check_format(file)?;
                rec.children.push(image);
            }
        }
        rec.children
            .sort_by_key(|c| c.start.as_ref().map_or(u64::MAX, |s| s.t_ns));
        Ok(rec)
    }

    /// Record files written by other images (`records.jsonl.PID.GEN`).
    fn child_files(&self) -> Vec<PathBuf> {
        let Some(name) = self
            .record_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
        else {
            return Vec::new();
        };
        let prefix = format!("{name}.");
        let mut out: Vec<PathBuf> = std::fs::read_dir(self.boot.dir())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .collect();
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests;
