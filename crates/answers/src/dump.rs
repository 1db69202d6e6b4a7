//! `coldstart dump --format json`'s answer: the Python stacks of every thread of
//! each process read, with its parent chain, and the processes that could
//! not be read. `harness::live::dump_answer` fills it from the readings.
//!
//! # JSON schema (`"schema": "coldstart.dump/1"`)
//! ```text
//! { "schema": "coldstart.dump/1",
//!   "processes": [ { "pid": int, "parent": int | null, "command": str,
//!                    "parent_chain": [ { "pid": int, "command": str } ],   // nearest first
//!                    "python": { "version": str, "exe": str } | null,
//!                    "threads": [ { "thread_id": int, "os_thread_id": int | null,
//!                                   "name": str | null,
//!                                   "status": "idle" | "active" | "active+gil",
//!                                   "active": bool, "owns_gil": bool,
//!                                   "frames": [ { "name", "filename", "short_filename", "line" } ] } ],
//!                    "error": str | null,           // a process seen but not read (null for the asked-for
//!                                                   // process that is not Python when `native` was read)
//!                    "native": { "exe": str, "unwound": bool,   // the asked-for process when it is not
//!                                "threads": [ thread ],         // Python: its threads (frames with --native,
//!                                "unknown_frames": int }        // the thread id the kernel's), or
//!                              | { "error": str } | null } ],   // why they could not be read
//!   "parent_wait": { "pid": int, "threads": int, "idle": int,  // that process's idle threads and
//!                    "workers": [ { "pid": int, "busy": bool,  // whether each Python process below
//!                                   "active_threads": int,     // it was busy, and where
//!                                   "at": frame | null,
//!                                   "in_python": bool } ],      // false: `at` is native, no Python
//!                                                              // frame on that thread's stack
//!                    "waits": [ { "thread": int,               // its waits on a worker that were
//!                                 "name": str | null,          // proven: a thread blocked reading
//!                                 "fd": int,                   // a pipe that worker writes to
//!                                 "worker": int } ] } | null,  // (empty: none was proven)
//!   "errors": [ { "pid": int, "error": str } ] }    // a process asked for but not reached
//! ```
//!
//! `native`, `parent_wait` and its `waits` were added to `/1` (a schema
//! only gains fields): a reader of the first fields sees what it saw
//! before. The asked-for process that is not Python has `error: null`
//! when its threads were read (`native`): it was read, as what it is.

use serde::Serialize;

/// The `schema` of the JSON answer.
pub const SCHEMA: &str = "coldstart.dump/1";

/// The whole answer.
#[derive(Debug, Clone, Serialize)]
pub struct DumpJson {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// Each process read (a selected one and its Python descendants).
    pub processes: Vec<DumpedProcess>,
    /// The first selected process's wait, when it is not Python and
    /// Python processes are below it.
    pub parent_wait: Option<ParentWait>,
    /// Each selected process that could not be read at all.
    pub errors: Vec<DumpError>,
}

/// One process of a dump.
#[derive(Debug, Clone, Serialize)]
pub struct DumpedProcess {
    /// Its pid.
    pub pid: u32,
    /// Its parent's pid, when known.
    pub parent: Option<u32>,
    /// Its command line.
    pub command: String,
    /// Its parents, nearest first.
    pub parent_chain: Vec<ChainLink>,
    /// The interpreter, when the process was read.
    pub python: Option<Python>,
    /// Each thread's stack, when the process was read.
    pub threads: Vec<DumpedThread>,
    /// Why it could not be read.
    pub error: Option<String>,
    /// For the asked-for process when it is not Python: its threads.
    pub native: Option<NativeThreads>,
}

/// The threads of a process that is not Python, or why they could not be
/// read.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum NativeThreads {
    /// Read.
    Read {
        /// Its executable.
        exe: String,
        /// Whether the stacks were unwound (`--native`).
        unwound: bool,
        /// Each thread (`thread_id` and `os_thread_id` are the kernel's;
        /// `owns_gil` is false).
        threads: Vec<DumpedThread>,
        /// Frames no symbol covers (named `[unknown]`).
        unknown_frames: usize,
    },
    /// Not read.
    Failed {
        /// What went wrong and what to do.
        error: String,
    },
}

/// The process above the workers beside them, as read: its threads'
/// states, each worker's, and its waits on a worker that were proven.
#[derive(Debug, Clone, Serialize)]
pub struct ParentWait {
    /// The parent.
    pub pid: u32,
    /// Its threads.
    pub threads: usize,
    /// Its idle threads.
    pub idle: usize,
    /// Each Python process below it.
    pub workers: Vec<WorkerState>,
    /// Its waits on a worker that were proven: a thread blocked reading a
    /// pipe the worker writes to. Empty when none was: an idle parent
    /// beside a busy worker is no proof it waits for it.
    pub waits: Vec<ProvenWait>,
}

/// A proven wait of the parent on one worker.
#[derive(Debug, Clone, Serialize)]
pub struct ProvenWait {
    /// The parent's waiting thread (the kernel's id).
    pub thread: u32,
    /// Its name, the kernel's.
    pub name: Option<String>,
    /// The file descriptor it is blocked reading.
    pub fd: i32,
    /// The worker holding the pipe's write end.
    pub worker: u32,
}

/// One worker of a [`ParentWait`].
#[derive(Debug, Clone, Serialize)]
pub struct WorkerState {
    /// Its pid.
    pub pid: u32,
    /// Some thread of it was active.
    pub busy: bool,
    /// How many of its threads were active.
    pub active_threads: usize,
    /// The innermost Python frame of its first active thread, else of its
    /// first (its innermost frame when it has no Python frame).
    pub at: Option<DumpedFrame>,
    /// Whether `at` is a Python frame: false when that thread's stack held
    /// native frames only (`--native`; the interpreter outside Python
    /// code, as in the collection of its objects at exit).
    pub in_python: bool,
}

/// A parent in a process's chain.
#[derive(Debug, Clone, Serialize)]
pub struct ChainLink {
    /// Its pid.
    pub pid: u32,
    /// Its command line.
    pub command: String,
}

/// The interpreter a process runs.
#[derive(Debug, Clone, Serialize)]
pub struct Python {
    /// Its version, `3.11.9`.
    pub version: String,
    /// Its executable.
    pub exe: String,
}

/// One thread's stack.
#[derive(Debug, Clone, Serialize)]
pub struct DumpedThread {
    /// The interpreter's thread id.
    pub thread_id: u64,
    /// The kernel's thread id, when known.
    pub os_thread_id: Option<u64>,
    /// The thread's name, when known.
    pub name: Option<String>,
    /// `idle`, `active` or `active+gil`.
    pub status: &'static str,
    /// Running (not waiting) when read.
    pub active: bool,
    /// Holding the GIL when read.
    pub owns_gil: bool,
    /// Its frames, innermost first.
    pub frames: Vec<DumpedFrame>,
}

/// One frame of a stack.
#[derive(Debug, Clone, Serialize)]
pub struct DumpedFrame {
    /// The function.
    pub name: String,
    /// Its file.
    pub filename: String,
    /// Its file, shortened as py-spy does.
    pub short_filename: String,
    /// The line.
    pub line: u32,
}

/// A selected process that could not be read.
#[derive(Debug, Clone, Serialize)]
pub struct DumpError {
    /// Its pid.
    pub pid: u32,
    /// What went wrong and what to do.
    pub error: String,
}
