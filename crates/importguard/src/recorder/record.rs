//! The record schema: each JSON line the bootstrap writes (a start, the
//! chained `sitecustomize`, an import attempt, a spawn, a swallowed error,
//! the exit) as a typed [`Record`], and an image's identity ([`ImageId`]).

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::RECORD_ENV;

/// One interpreter image: a pid and its exec generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ImageId {
    /// The process.
    pub pid: u32,
    /// 0 for a new process, +1 per `os.exec*`.
    pub exec_gen: u32,
}

impl fmt::Display for ImageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.exec_gen == 0 {
            write!(f, "pid {}", self.pid)
        } else {
            write!(f, "pid {} after exec #{}", self.pid, self.exec_gen)
        }
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
    /// The record format version ([`FORMAT_VERSION`](super::FORMAT_VERSION)); 0 when absent.
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
    /// between (`uv run`, a shell, `make`). Empty where `/proc` is not, and
    /// when the image leads its own process group (started straight by the
    /// harness): then there is no launcher, and its parent is `ppid`.
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
    /// Whether this start record is the whole of `first`, which the image
    /// wrote short at once (format 3): the same pid, exec generation and
    /// time. An image keeps its whole start record back while the worker
    /// starts, so a worker that dies before anything else is written
    /// leaves only the short one (who, how, the format, the channels).
    pub fn completes(&self, first: &Start) -> bool {
        self.pid == first.pid && self.exec_gen == first.exec_gen && self.t_ns == first.t_ns
    }

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
    /// For one of the project's own modules ([`RecorderPolicy::own`](super::RecorderPolicy::own)): the
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
