//! The import recorder: a small Python bootstrap, embedded here, that a
//! worker runs as `sitecustomize` and that writes down every import attempt
//! as a JSON line; and the typed records read back from its file.
//!
//! [`Recorder::prepare`] writes the bootstrap to a private (0700) temporary
//! folder and returns the environment that puts it first on the worker's
//! `PYTHONPATH`; the bootstrap chains to the `sitecustomize` the environment
//! already had, so a venv's or a distribution's still runs. [`read`] parses
//! the record file, tolerating a truncated last line (a crash keeps every
//! record written before it). A [`Recording`] without a start record means
//! the recorder never ran: the worker used `-S`, `-I` or `-E`, or replaced
//! `PYTHONPATH`, and the verdict must rely on importtime alone.
//!
//! This module does not judge anything (see [`crate::verdict`]) and does not
//! start processes: the caller adds [`RecorderSetup::env`] to its command.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The bootstrap's source, written as `sitecustomize.py`.
pub const BOOTSTRAP: &str = include_str!("sitecustomize.py");

/// The environment variable naming the record file.
pub const RECORD_ENV: &str = "COLDSTART_RECORD";

/// The environment variable holding the policy the bootstrap enforces:
/// `block=1;forbid=torch,transformers;allow=transformers.utils`.
pub const POLICY_ENV: &str = "COLDSTART_RECORD_POLICY";

/// The bootstrap's record format version, the `version` of its start record.
pub const FORMAT_VERSION: u32 = 1;

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
}

impl RecorderPolicy {
    fn encode(&self) -> Result<String, RecorderError> {
        for p in self.forbid.iter().chain(&self.allow) {
            if !is_module_pattern(p) {
                return Err(RecorderError::BadPattern { pattern: p.clone() });
            }
        }
        Ok(format!(
            "block={};forbid={};allow={}",
            u8::from(self.block),
            self.forbid.join(","),
            self.allow.join(",")
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

impl Recorder {
    /// Writes the bootstrap to a fresh private folder and returns the
    /// environment to give one worker. `pythonpath` is the `PYTHONPATH` the
    /// worker would have had (its target's, else the inherited one); the
    /// recorder's folder goes in front of it.
    pub fn prepare(
        policy: &RecorderPolicy,
        pythonpath: Option<&OsStr>,
    ) -> Result<RecorderSetup, RecorderError> {
        let encoded = policy.encode()?;
        let dir = tempfile::Builder::new()
            .prefix("coldstart-recorder-")
            .tempdir()
            .map_err(|source| RecorderError::Write {
                path: std::env::temp_dir(),
                source,
            })?;
        set_private(dir.path())?;
        let site = dir.path().join("site");
        std::fs::create_dir(&site).map_err(|source| RecorderError::Write {
            path: site.clone(),
            source,
        })?;
        set_private(&site)?;
        let file = site.join("sitecustomize.py");
        std::fs::write(&file, BOOTSTRAP).map_err(|source| RecorderError::Write {
            path: file.clone(),
            source,
        })?;
        let record_path = dir.path().join("records.jsonl");

        let mut path = OsString::from(site.as_os_str());
        if let Some(rest) = pythonpath.filter(|p| !p.is_empty()) {
            path.push(":");
            path.push(rest);
        }
        let env = vec![
            (OsString::from("PYTHONPATH"), path),
            (
                OsString::from(RECORD_ENV),
                record_path.clone().into_os_string(),
            ),
            (OsString::from(POLICY_ENV), OsString::from(encoded)),
        ];
        Ok(RecorderSetup {
            env,
            record_path,
            dir,
        })
    }
}

fn set_private(path: &Path) -> Result<(), RecorderError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(|source| {
        RecorderError::Write {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// One worker's recorder: the environment to set and the private folder,
/// removed when this value drops.
#[derive(Debug)]
pub struct RecorderSetup {
    env: Vec<(OsString, OsString)>,
    record_path: PathBuf,
    dir: tempfile::TempDir,
}

impl RecorderSetup {
    /// Variables to set on the worker, on top of its environment:
    /// `PYTHONPATH`, [`RECORD_ENV`], [`POLICY_ENV`].
    pub fn env(&self) -> &[(OsString, OsString)] {
        &self.env
    }

    /// The main interpreter's record file.
    pub fn record_path(&self) -> &Path {
        &self.record_path
    }

    /// The private folder (bootstrap and records).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Reads what the worker recorded so far (also while it still runs).
    pub fn read(&self) -> Result<Recording, RecorderError> {
        let mut rec = read(&self.record_path)?;
        rec.child_files = self.child_files();
        Ok(rec)
    }

    /// Record files written by child interpreters (`records.jsonl.PID`).
    fn child_files(&self) -> Vec<PathBuf> {
        let Some(name) = self
            .record_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
        else {
            return Vec::new();
        };
        let prefix = format!("{name}.");
        let mut out: Vec<PathBuf> = std::fs::read_dir(self.dir.path())
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

/// A source position the bootstrap saw on the stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// The code's file name as Python has it (`<string>` for `-c`).
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// The function (`<module>` for top-level code).
    #[serde(default)]
    pub func: String,
}

impl std::fmt::Display for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// The bootstrap ran: when, in which interpreter, with which policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Start {
    /// `time.monotonic_ns()` when the bootstrap ran.
    pub t_ns: u64,
    pub pid: u32,
    #[serde(default)]
    pub version: u32,
    #[serde(default)]
    pub python: Option<String>,
    #[serde(default)]
    pub implementation: Option<String>,
    #[serde(default)]
    pub executable: Option<String>,
    #[serde(default)]
    pub argv: Vec<String>,
    #[serde(default)]
    pub block: bool,
    #[serde(default)]
    pub forbid: Vec<String>,
    #[serde(default)]
    pub allow: Vec<String>,
    /// Modules already loaded when the bootstrap ran.
    #[serde(default)]
    pub modules: Option<u32>,
    /// Set in a forked child's own record file.
    #[serde(default)]
    pub forked: bool,
}

/// The pre-existing `sitecustomize` the bootstrap ran after itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chain {
    pub t_ns: u64,
    /// Its file, or `None` when the environment had none.
    pub file: Option<String>,
}

/// One import attempt that reached `sys.meta_path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportAttempt {
    /// The fully qualified module name.
    pub name: String,
    /// `time.monotonic_ns()` when the attempt started.
    pub t_ns: u64,
    /// Whether a finder found it; `None` when it was blocked before asking.
    #[serde(default)]
    pub found: Option<bool>,
    /// Refused by the policy (`--block`).
    #[serde(default)]
    pub blocked: bool,
    /// An availability probe (`importlib.util.find_spec`), not an import.
    #[serde(default)]
    pub probe: bool,
    /// The first frame outside the import machinery: who asked.
    #[serde(default)]
    pub by: Option<Frame>,
    /// For a forbidden name: the first frame outside the import machinery,
    /// the standard library and the forbidden packages' own code (the
    /// first-party line that started it), when it is not `by` itself.
    #[serde(default)]
    pub first_party: Option<Frame>,
    /// How many modules' top-level code was running (the import nesting).
    #[serde(default)]
    pub depth: u32,
    /// The innermost module whose top-level code was running, if any: the
    /// importing module, from which a chain can be rebuilt link by link.
    #[serde(default)]
    pub parent: Option<String>,
    /// For a forbidden name: all the modules whose top-level code was
    /// running, outermost first (empty for other names, to keep records small).
    #[serde(default)]
    pub stack: Vec<String>,
    /// Set when the attempt came from a thread other than the main one.
    #[serde(default)]
    pub thread: Option<u64>,
    /// A finder raised this.
    #[serde(default)]
    pub error: Option<String>,
}

impl ImportAttempt {
    /// The first-party frame that started this import: `first_party` if the
    /// bootstrap saw a distinct one, else `by`.
    pub fn origin(&self) -> Option<&Frame> {
        self.first_party.as_ref().or(self.by.as_ref())
    }
}

/// Something went wrong inside the bootstrap (and was swallowed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootstrapError {
    pub t_ns: u64,
    #[serde(rename = "where")]
    pub place: String,
    pub error: String,
}

/// `sys.modules` at exit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    pub t_ns: u64,
    pub modules: Vec<String>,
    /// Modules still `importlib.util._LazyModule`: imported lazily, never executed.
    #[serde(default)]
    pub lazy: Vec<String>,
}

/// One JSON line of the record file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Record {
    Start(Start),
    Chain(Chain),
    Import(ImportAttempt),
    Error(BootstrapError),
    Exit(Exit),
}

/// Everything one interpreter recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recording {
    /// `None`: the recorder never ran (`-S`, `-I`, `-E`, or `PYTHONPATH`
    /// replaced), or the record file is missing.
    pub start: Option<Start>,
    pub chain: Option<Chain>,
    /// In the order they happened.
    pub imports: Vec<ImportAttempt>,
    pub errors: Vec<BootstrapError>,
    /// `None` when the interpreter did not reach exit normally (crash,
    /// `os._exit`, killed).
    pub exit: Option<Exit>,
    /// Lines that were not records: a truncated last line, or a line of an
    /// unknown type (newer bootstrap). 1-based line numbers.
    pub skipped_lines: Vec<u32>,
    /// Record files of child interpreters, not read.
    pub child_files: Vec<PathBuf>,
}

impl Recording {
    /// Whether the bootstrap ran in this interpreter.
    pub fn ran(&self) -> bool {
        self.start.is_some()
    }

    /// Parses record lines.
    pub fn parse(text: &[u8]) -> Recording {
        let mut rec = Recording::default();
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let n = u32::try_from(i + 1).unwrap_or(u32::MAX);
            match serde_json::from_slice::<Record>(line) {
                Ok(r) => rec.push(r),
                Err(_) => rec.skipped_lines.push(n),
            }
        }
        rec
    }

    fn push(&mut self, r: Record) {
        match r {
            Record::Start(s) => {
                if self.start.is_none() {
                    self.start = Some(s);
                }
            }
            Record::Chain(c) => self.chain = Some(c),
            Record::Import(i) => self.imports.push(i),
            Record::Error(e) => self.errors.push(e),
            Record::Exit(e) => self.exit = Some(e),
        }
    }
}

/// Reads a record file; a missing file is an empty [`Recording`] (the
/// recorder did not run).
pub fn read(path: &Path) -> Result<Recording, RecorderError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Recording::parse(&bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Recording::default()),
        Err(source) => Err(RecorderError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests;
