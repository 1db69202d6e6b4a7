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
//! says who it is and who started it; [`RecorderSetup::read`] reads them all
//! into one [`Recording`] (the first interpreter, with the other images in
//! [`Recording::children`]) and [`Recording::processes`] gives the process
//! tree with its parent relations ([`process`]). The first image also names
//! the processes above it up to the harness ([`Start::ancestors`]): the
//! launchers (`uv run`, a shell) it was started through. Imports are seen through two
//! channels ([`Channel`]): a `sys.meta_path` finder placed first, and the
//! `import` audit event that code cannot remove.
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

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use bootstrap::{FORMAT_VERSION, FormatMismatch};
pub use process::{ImageId, ProcessInfo, PythonArgs, Relation};

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
        let boot = bootstrap::Bootstrap::prepare("coldstart-recorder-", BODY)?;
        let record_path = boot.dir().join("records.jsonl");
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

/// A source position the bootstrap saw on the stack: a call site (file,
/// line, function). `pystacks::Frame` is a frame of a sampled stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallSite {
    /// The code's file name as Python has it (`<string>` for `-c`).
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// The function (`<module>` for top-level code).
    #[serde(default)]
    pub func: String,
}

impl std::fmt::Display for CallSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// How an image came to be, as it saw it at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartHow {
    /// The first recorded image: the interpreter the harness started.
    Root,
    /// Another interpreter started by a recorded image (subprocess,
    /// `multiprocessing` spawn, through a shell or not).
    Child,
    /// A forked child of a recorded image.
    Fork,
    /// The image an `os.exec*` of a recorded image became (same pid).
    Exec,
}

/// `sys.flags` that decide what evidence an interpreter can give.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Flags {
    /// `-I`.
    pub isolated: u8,
    /// `-E`.
    pub ignore_environment: u8,
    /// `-S`.
    pub no_site: u8,
    /// `-s`.
    pub no_user_site: u8,
    /// `-P` (3.11+).
    pub safe_path: u8,
}

/// The bootstrap ran: when, in which image, with which policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Start {
    /// `time.monotonic_ns()` when the bootstrap ran.
    pub t_ns: u64,
    /// The image's pid.
    pub pid: u32,
    /// The record format version ([`FORMAT_VERSION`]); 0 when absent.
    #[serde(default)]
    pub version: u32,
    /// The parent pid at start.
    #[serde(default)]
    pub ppid: Option<u32>,
    /// The exec generation: 0 for a new process, +1 per `os.exec*`.
    #[serde(default, rename = "gen")]
    pub exec_gen: u32,
    /// The recorded image that started this one (`[pid, gen]`), when the
    /// environment said so.
    #[serde(default, with = "image_pair")]
    pub parent: Option<ImageId>,
    /// How it came to be (absent before format 2).
    #[serde(default)]
    pub how: Option<StartHow>,
    /// `major.minor.micro`.
    #[serde(default)]
    pub python: Option<String>,
    /// `cpython`, `pypy`.
    #[serde(default)]
    pub implementation: Option<String>,
    /// `sys.executable`.
    #[serde(default)]
    pub executable: Option<String>,
    /// `sys.argv` at start (`["-c"]`, `["-m"]` before they are resolved).
    #[serde(default)]
    pub argv: Vec<String>,
    /// `sys.orig_argv` (3.10+): the command line as the OS gave it.
    #[serde(default)]
    pub orig_argv: Vec<String>,
    /// `sys.flags` that matter for evidence.
    #[serde(default)]
    pub flags: Option<Flags>,
    /// Whether `-X importtime` is on in this image.
    #[serde(default)]
    pub importtime: Option<bool>,
    /// Whether the audit hook was installed (Python 3.8+).
    #[serde(default)]
    pub audit: Option<bool>,
    /// The policy: refuse forbidden imports.
    #[serde(default)]
    pub block: bool,
    /// The policy's forbidden prefixes.
    #[serde(default)]
    pub forbid: Vec<String>,
    /// The policy's allowed prefixes.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Modules already loaded when the bootstrap ran.
    #[serde(default)]
    pub modules: Option<u32>,
    /// Set in a forked child's own record file.
    #[serde(default)]
    pub forked: bool,
    /// For a forked child: the line that called fork (the worker's where
    /// known).
    #[serde(default)]
    pub by: Option<CallSite>,
    /// For a forked child: the thread that forked, when not the main one.
    #[serde(default)]
    pub thread: Option<u64>,
    /// `sys.path` when the bootstrap ran (its string entries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<String>,
    /// For the first recorded image: the processes above it, its parent
    /// first, up to and with the first one outside its process group (the
    /// harness, which starts each worker as a group of its own), read from
    /// `/proc` at start. Every one before that is a launcher that stood
    /// between (`uv run`, a shell, `make`); empty where `/proc` is not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ancestors: Vec<Ancestor>,
}

/// A process above the first recorded image: its pid and its name
/// (`/proc/PID/comm`, at most 15 bytes). `[pid, "name"]` on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "(u32, String)", into = "(u32, String)")]
pub struct Ancestor {
    /// Its pid.
    pub pid: u32,
    /// Its name (`uv`, `bash`, `make`, `python3`).
    pub name: String,
}

impl From<(u32, String)> for Ancestor {
    fn from((pid, name): (u32, String)) -> Self {
        Ancestor { pid, name }
    }
}

impl From<Ancestor> for (u32, String) {
    fn from(a: Ancestor) -> Self {
        (a.pid, a.name)
    }
}

impl Ancestor {
    /// Whether its name is a Python interpreter's (`python3.12`, `pypy3`).
    pub fn is_python(&self) -> bool {
        is_python_name(&self.name)
    }
}

impl Start {
    /// How the image came to be; records before format 2 only tell a fork.
    pub fn how(&self) -> StartHow {
        match self.how {
            Some(h) => h,
            None if self.forked => StartHow::Fork,
            None => StartHow::Root,
        }
    }

    /// The command line: `orig_argv` where Python has it, else the
    /// executable and `argv`.
    pub fn command(&self) -> Vec<String> {
        if !self.orig_argv.is_empty() {
            return self.orig_argv.clone();
        }
        let mut out: Vec<String> = self.executable.iter().cloned().collect();
        out.extend(self.argv.iter().cloned());
        out
    }
}

/// `[pid, gen]` on the wire.
mod image_pair {
    use super::ImageId;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<ImageId>, s: S) -> Result<S::Ok, S::Error> {
        v.map(|i| [i.pid, i.exec_gen]).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ImageId>, D::Error> {
        Ok(Option::<[u32; 2]>::deserialize(d)?.map(|[pid, exec_gen]| ImageId { pid, exec_gen }))
    }
}

/// The pre-existing `sitecustomize` the bootstrap ran after itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chain {
    /// When it was found.
    pub t_ns: u64,
    /// Its file, or `None` when the environment had none.
    pub file: Option<String>,
}

/// Which of the recorder's two channels saw an import.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    /// Only the `sys.meta_path` finder: an import the audit event does not
    /// announce (a parent package loaded on the way to a submodule,
    /// `importlib.import_module`), or Python 3.7.
    #[default]
    Finder,
    /// Only the `import` audit event: the finder was removed from, or
    /// displaced in, `sys.meta_path`; or the body of a lazy module ran.
    Audit,
    /// Both.
    Both,
}

impl std::fmt::Display for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Channel::Finder => "the import finder",
            Channel::Audit => "the audit hook",
            Channel::Both => "the import finder and the audit hook",
        })
    }
}

/// One import attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportAttempt {
    /// The fully qualified module name.
    pub name: String,
    /// `time.monotonic_ns()` when the attempt started.
    pub t_ns: u64,
    /// Whether a finder found it; `None` when it was blocked before asking,
    /// or only the audit hook saw it.
    #[serde(default)]
    pub found: Option<bool>,
    /// Refused by the policy (`--block`).
    #[serde(default)]
    pub blocked: bool,
    /// An availability probe (`importlib.util.find_spec`), not an import.
    #[serde(default)]
    pub probe: bool,
    /// The first frame outside the import machinery: who asked. Recorded
    /// for forbidden names (and lazy bodies, probes' declarations, attempts
    /// the audit hook saw alone of a forbidden name); the worker's other
    /// imports carry no frame since format 2 (their lines, where a chain
    /// needs them, are in the forbidden record's `stack_by`).
    #[serde(default)]
    pub by: Option<CallSite>,
    /// For a forbidden name: the first frame outside the import machinery,
    /// the standard library and the forbidden packages' own code (the
    /// first-party line that started it), when it is not `by` itself.
    #[serde(default)]
    pub first_party: Option<CallSite>,
    /// For a forbidden name: how many modules' top-level code was running
    /// (the import nesting, the length of `stack`); `None` for other names,
    /// whose stack the recorder does not walk to the top (it costs every
    /// import of the worker's start-up).
    #[serde(default)]
    pub depth: Option<u32>,
    /// The innermost module whose top-level code was running, if any: the
    /// importing module (recorded with `by`).
    #[serde(default)]
    pub parent: Option<String>,
    /// For a forbidden name: all the modules whose top-level code was
    /// running, outermost first (empty for other names, to keep records small).
    #[serde(default)]
    pub stack: Vec<String>,
    /// Beside `stack`, the line that imported each of those modules (the
    /// first frame outside the import machinery above the module's own
    /// frame), read while they were all executing: the lines of a chain's
    /// links. Empty in records that predate it; `None` where no frame was
    /// above (the interpreter's own start of `__main__`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stack_by: Vec<Option<CallSite>>,
    /// Set when the attempt came from a thread other than the main one.
    #[serde(default)]
    pub thread: Option<u64>,
    /// A finder raised this.
    #[serde(default)]
    pub error: Option<String>,
    /// The channel that saw it (absent before format 2: the finder).
    #[serde(default)]
    pub channel: Channel,
    /// The body of a lazily imported module ran now: `importlib.util.LazyLoader`
    /// on first attribute access (`by` is the line that touched it), or a
    /// PEP 810 `lazy import` made real.
    #[serde(default, skip_serializing_if = "is_false")]
    pub reified: bool,
    /// For a reified module: the line that declared it lazy (the
    /// `find_spec` behind a LazyLoader, or the `lazy import` statement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared: Option<CallSite>,
    /// Set by the finder on an attempt the audit hook also wrote itself
    /// (at this time); the reader merges the two into one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_t_ns: Option<u64>,
    /// For one of the project's own modules ([`RecorderPolicy::own`]): the
    /// file its spec names (a namespace package's first folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// For one of the project's own modules: the finder that answered
    /// (`module.QualName`: `importlib._bootstrap_external.PathFinder`, an
    /// editable install's own finder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finder: Option<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl ImportAttempt {
    /// The first-party frame that started this import: `first_party` if the
    /// bootstrap saw a distinct one, else `by`.
    pub fn origin(&self) -> Option<&CallSite> {
        self.first_party.as_ref().or(self.by.as_ref())
    }
}

/// What kind of start a [`Spawn`] record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpawnKind {
    /// `subprocess.Popen` (and `run`, `call`, `check_output`).
    Subprocess,
    /// `os.posix_spawn`.
    PosixSpawn,
    /// `os.exec*`: this image is replaced (same pid, next generation).
    Exec,
    /// `os.spawn*`.
    Spawn,
    /// `os.system` (through `/bin/sh -c`).
    System,
    /// `_posixsubprocess.fork_exec` without an audit event:
    /// `multiprocessing` spawn workers and its resource tracker.
    ForkExec,
}

impl std::fmt::Display for SpawnKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SpawnKind::Subprocess => "subprocess",
            SpawnKind::PosixSpawn => "posix_spawn",
            SpawnKind::Exec => "exec",
            SpawnKind::Spawn => "os.spawn",
            SpawnKind::System => "os.system",
            SpawnKind::ForkExec => "multiprocessing spawn",
        })
    }
}

/// What a spawned image's environment carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SpawnEnv {
    /// The environment is inherited (`env=None`).
    pub inherited: bool,
    /// `COLDSTART_RECORD` still names this recording.
    pub record: bool,
    /// `PYTHONPATH` still has the recorder's folder.
    pub pythonpath: bool,
    /// `PYTHONPROFILEIMPORTTIME` is set.
    pub importtime: bool,
}

impl SpawnEnv {
    /// The variables the new image lost that the recorder needs.
    pub fn dropped(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if !self.record {
            out.push(RECORD_ENV);
        }
        if !self.pythonpath {
            out.push("PYTHONPATH");
        }
        out
    }
}

/// A recorded image started another: the line, the command and its
/// environment, before the start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spawn {
    /// When, before the new image existed.
    pub t_ns: u64,
    /// How.
    pub kind: SpawnKind,
    /// The new image's argv.
    #[serde(default)]
    pub argv: Vec<String>,
    /// The executable, where given apart from argv.
    #[serde(default)]
    pub executable: Option<String>,
    /// What its environment carries.
    #[serde(default)]
    pub env: SpawnEnv,
    /// The line that started it: the first frame outside the import
    /// machinery and the standard library, else the first outside the
    /// machinery.
    #[serde(default)]
    pub by: Option<CallSite>,
    /// Set when not started from the main thread.
    #[serde(default)]
    pub thread: Option<u64>,
}

/// What a started program is, as far as its command line and its file tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// A Python interpreter (its name, or a script whose `#!` line names
    /// one): the executable as given.
    Python(String),
    /// Something else (a binary not named like an interpreter, a script of
    /// another language): it has no imports to see.
    Other(String),
    /// It cannot be told apart: a shell command line, a shell script, a
    /// program that could not be found or read; the executable as given.
    Unknown(String),
}

impl Spawn {
    /// What the started program is: `env` and its options are looked
    /// through; a name like `python3.11`, `python3.13t`, `pypy3` is an
    /// interpreter; otherwise the file (a path, or the first match on the
    /// harness's `PATH`) is read: a `#!` line naming Python is one, an ELF
    /// binary or a script of another interpreter is not, a shell's `-c` or
    /// script or an unreadable file cannot be told.
    pub fn program(&self) -> Program {
        let mut words = self.argv.iter().map(String::as_str);
        let mut exe = self
            .executable
            .as_deref()
            .or(self.argv.first().map(String::as_str));
        words.next();
        if exe.is_some_and(|e| base_name(e) == "env") {
            exe = words.find(|w| !w.starts_with('-') && !w.contains('='));
        }
        let Some(exe) = exe else {
            return Program::Unknown(String::new());
        };
        let name = base_name(exe);
        if is_python_name(name) {
            return Program::Python(exe.to_owned());
        }
        if matches!(name, "sh" | "bash" | "dash" | "zsh" | "ksh") {
            return Program::Unknown(exe.to_owned());
        }
        let path = if exe.contains('/') {
            Some(PathBuf::from(exe))
        } else {
            std::env::var_os("PATH").and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join(exe))
                    .find(|c| c.is_file())
            })
        };
        let mut head = [0u8; 256];
        let read = path.and_then(|p| {
            use std::io::Read as _;
            let mut f = std::fs::File::open(p).ok()?;
            f.read(&mut head).ok()
        });
        let Some(n) = read else {
            return Program::Unknown(exe.to_owned());
        };
        let head = &head[..n];
        if head.starts_with(b"\x7fELF") {
            return Program::Other(exe.to_owned());
        }
        if let Some(line) = head.strip_prefix(b"#!") {
            let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
            let line = String::from_utf8_lossy(line);
            let mut parts = line.split_whitespace().map(base_name);
            let interp = match parts.next() {
                Some("env") => parts.find(|w| !w.starts_with('-') && !w.contains('=')),
                other => other,
            };
            return match interp {
                Some(i) if is_python_name(i) => Program::Python(exe.to_owned()),
                Some("sh" | "bash" | "dash" | "zsh" | "ksh") | None => {
                    Program::Unknown(exe.to_owned())
                }
                Some(_) => Program::Other(exe.to_owned()),
            };
        }
        Program::Unknown(exe.to_owned())
    }
}

fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `python`, `python3`, `python3.11`, `python3.13t`, `pythonw`, `pypy3`.
pub(crate) fn is_python_name(name: &str) -> bool {
    name.strip_prefix("python")
        .or_else(|| name.strip_prefix("pypy"))
        .is_some_and(|rest| {
            rest.trim_end_matches(['t', 'd', 'm', 'w'])
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.')
        })
}

/// Something went wrong inside the bootstrap (and was swallowed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootstrapError {
    /// When.
    pub t_ns: u64,
    /// In which part of the bootstrap.
    #[serde(rename = "where")]
    pub place: String,
    /// The exception, `Type: message`.
    pub error: String,
}

/// `sys.modules` at exit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    /// When.
    pub t_ns: u64,
    /// `sys.modules`' names.
    pub modules: Vec<String>,
    /// Modules imported lazily and never executed: still
    /// `importlib.util._LazyModule`, or PEP 810 `lazy import`s never made
    /// real (`sys.lazy_modules`).
    #[serde(default)]
    pub lazy: Vec<String>,
}

/// One JSON line of a record file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Record {
    /// The image started.
    Start(Start),
    /// The environment's own sitecustomize.
    Chain(Chain),
    /// An import attempt.
    Import(ImportAttempt),
    /// The image started another.
    Spawn(Spawn),
    /// A swallowed bootstrap error.
    Error(BootstrapError),
    /// `sys.modules` at exit.
    Exit(Exit),
}

/// Everything one interpreter image recorded, and for the first one the
/// other images it and its descendants started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recording {
    /// `None`: the recorder never ran (`-S`, `-I`, `-E`, or `PYTHONPATH`
    /// replaced), or the record file is missing.
    pub start: Option<Start>,
    /// The environment's own sitecustomize, run after the recorder.
    pub chain: Option<Chain>,
    /// In the order they happened (an attempt both channels wrote is one).
    pub imports: Vec<ImportAttempt>,
    /// The images this one started, in order.
    pub spawns: Vec<Spawn>,
    /// Swallowed bootstrap errors.
    pub errors: Vec<BootstrapError>,
    /// `None` when the interpreter did not reach exit normally (crash,
    /// `os._exit`, killed, or replaced by `os.exec*`).
    pub exit: Option<Exit>,
    /// Lines that were not records: a truncated last line, or a line of an
    /// unknown type (newer bootstrap). 1-based line numbers.
    pub skipped_lines: Vec<u32>,
    /// Record files of the other images.
    pub child_files: Vec<PathBuf>,
    /// The other images (children, forked children, exec'd images, and
    /// theirs), each read from its file, in start order. Empty in a child.
    pub children: Vec<Recording>,
}

impl Recording {
    /// Whether the bootstrap ran in this interpreter.
    pub fn ran(&self) -> bool {
        self.start.is_some()
    }

    /// This image's identity, when it ran.
    pub fn image(&self) -> Option<ImageId> {
        self.start.as_ref().map(|s| ImageId {
            pid: s.pid,
            exec_gen: s.exec_gen,
        })
    }

    /// This image then its children.
    pub fn images(&self) -> impl Iterator<Item = &Recording> {
        std::iter::once(self).chain(self.children.iter())
    }

    /// The process tree: one [`ProcessInfo`] per image that ran the
    /// recorder (this one first, then the children in start order), with
    /// the image that started it and the line that did.
    pub fn processes(&self) -> Vec<ProcessInfo> {
        process::tree(self)
    }

    /// Parses record lines (one image's; a second start record is kept as
    /// the first's, see [`Recording::parse_images`]).
    pub fn parse(text: &[u8]) -> Recording {
        let mut rec = Recording::default();
        for (n, r) in lines(text) {
            match r {
                Some(r) => rec.push(r),
                None => rec.skipped_lines.push(n),
            }
        }
        rec
    }

    /// Parses a file that may hold several images (a pid reused): a new
    /// image at each start record.
    pub fn parse_images(text: &[u8]) -> Vec<Recording> {
        let mut out: Vec<Recording> = Vec::new();
        let mut cur = Recording::default();
        for (n, r) in lines(text) {
            match r {
                Some(Record::Start(s)) if cur.start.is_some() => {
                    out.push(std::mem::take(&mut cur));
                    cur.push(Record::Start(s));
                }
                Some(r) => cur.push(r),
                None => cur.skipped_lines.push(n),
            }
        }
        if cur.start.is_some() || !cur.imports.is_empty() || !cur.skipped_lines.is_empty() {
            out.push(cur);
        }
        out
    }

    /// Refuses records of a format version this build does not read.
    fn check_format(&self, path: &Path) -> Result<(), RecorderError> {
        match &self.start {
            Some(s) => bootstrap::check_format(s.version).map_err(|source| RecorderError::Format {
                path: path.to_path_buf(),
                source,
            }),
            None => Ok(()),
        }
    }

    fn push(&mut self, r: Record) {
        match r {
            Record::Start(s) => {
                if self.start.is_none() {
                    self.start = Some(s);
                }
            }
            Record::Chain(c) => self.chain = Some(c),
            Record::Import(mut i) => {
                // The audit hook wrote this attempt first (the finder was
                // not first on sys.meta_path): one attempt, both channels.
                if let Some(t) = i.audit_t_ns.take()
                    && let Some(prev) =
                        self.imports.iter_mut().rev().find(|p| {
                            p.t_ns == t && p.name == i.name && p.channel == Channel::Audit
                        })
                {
                    i.t_ns = t;
                    i.channel = Channel::Both;
                    if i.by.is_none() {
                        i.by = prev.by.take();
                    }
                    *prev = i;
                    return;
                }
                self.imports.push(i);
            }
            Record::Spawn(s) => self.spawns.push(s),
            Record::Error(e) => self.errors.push(e),
            Record::Exit(e) => self.exit = Some(e),
        }
    }
}

/// Each non-blank line with its 1-based number, parsed or not.
fn lines(text: &[u8]) -> impl Iterator<Item = (u32, Option<Record>)> + '_ {
    text.split(|&b| b == b'\n')
        .enumerate()
        .filter_map(|(i, line)| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                return None;
            }
            let n = u32::try_from(i + 1).unwrap_or(u32::MAX);
            Some((n, serde_json::from_slice::<Record>(line).ok()))
        })
}

/// Reads a record file; a missing file is an empty [`Recording`] (the
/// recorder did not run). Records of a format this build does not read are
/// an error.
pub fn read(path: &Path) -> Result<Recording, RecorderError> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let rec = Recording::parse(&bytes);
            rec.check_format(path)?;
            Ok(rec)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Recording::default()),
        Err(source) => Err(RecorderError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests;
