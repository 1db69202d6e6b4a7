//! pystacks: a live CPython process's Python stacks, read from outside.
//!
//! This crate owns one job: given a pid, read what its Python threads are
//! doing, the way `py-spy` does (it *is* py-spy 0.4.3, linked as a library
//! with its `cli` feature off, so nothing has to be installed): the
//! interpreter's structures are read from the process's memory with
//! `process_vm_readv`. By default the process is not paused while it is
//! read (`py-spy --nonblocking`; see [`SamplerOptions::pause`] for why).
//! CPython 2.7 and 3.3 to 3.15, Linux. Before CPython 3.11 the kernel id
//! of a thread other than the main one is unknown, so whether such a
//! thread is idle is guessed from its frames.
//!
//! - [`dump`]: every thread's stack of a process and of its Python
//!   descendants, once, in bounded time: typed ([`Dump`], [`ThreadStack`],
//!   [`Frame`]) and rendered as `py-spy dump` writes it (what a timeout
//!   error shows of a hung worker; the harness words the error).
//! - [`Sampler`]: samples a process and its subprocesses at a rate until
//!   stopped ([`StopHandle`], a deadline, or the processes' exit); every
//!   sample is stamped on CLOCK_MONOTONIC (`timeline::monotonic_ns`'s clock, the
//!   clock of Python's `time.monotonic_ns()`), so a caller can keep the
//!   samples before the ready line. The [`Profile`] aggregates into
//!   collapsed stacks ([`CollapsedStack`], the lines of `py-spy record
//!   --function --format raw` that `report::profile::parse_collapsed`
//!   reads) and states the sampler's own cost ([`SamplerCost`]). Each
//!   sample carries the interval its read stood for and whether its
//!   thread was on CPU, so [`SampledTime`] counts CPU time at the rate
//!   actually used (lowered, or with late rounds) and none from idle
//!   samples.
//! - [`import_share`]: how much of a start-up profile was spent inside
//!   imports (importlib's `_find_and_load` on the stack) and which frames
//!   took the rest.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use pystacks::{DumpOptions, Sampler, SamplerOptions, collapsed_text, dump, import_share};
//!
//! # fn ready_line_stamp() -> u64 { 0 }
//! let worker_pid = 4242;
//! // A hung worker: its stacks (or why there are none) for the error.
//! let text = match dump(worker_pid, &DumpOptions::with_timeout(Duration::from_secs(5))) {
//!     Ok(d) => d.to_string(),
//!     Err(e) => format!("no Python stack: {e}"),
//! };
//!
//! // Its start-up: sample from spawn to the ready line.
//! let sampler = Sampler::start(worker_pid, SamplerOptions::at_rate(500))?;
//! let ready_ns = ready_line_stamp(); // CLOCK_MONOTONIC, as spawn stamps lines
//! let profile = sampler.stop();
//! let start_up = profile.collapsed_before(ready_ns);
//! let raw = collapsed_text(&start_up); // what report::profile::parse_collapsed reads
//! let share = import_share(&start_up, 15);
//! println!(
//!     "{} samples, {:.0}% inside imports, sampler cost {:.1} ms of reading",
//!     share.samples,
//!     share.share_inside() * 100.0,
//!     profile.cost.read_ns as f64 / 1e6
//! );
//! # Ok::<(), pystacks::Error>(())
//! ```
//!
//! When the kernel refuses (Yama's `kernel.yama.ptrace_scope`, no
//! `CAP_SYS_PTRACE` in a container, a process of another user, a
//! non-dumpable process), the error is [`Error::PermissionDenied`], whose
//! message says which of those applies and how to allow it.
//!
//! It deliberately does not start, drive or end workers (that is the
//! harness's, through `spawn`), does not render flame graphs, speedscope
//! files or tables (that is `report`). Native (C/C++) frames are read only
//! with the `native` feature ([`NATIVE`]; [`NATIVE_UNAVAILABLE`] says how
//! to get them): a native frame's file is its shared object, e.g.
//! `deflate (libz.so.1.2.13)`.
//!
//! - The process above the workers, when it is not Python (the Rust
//!   service): [`dump`] lists its threads with their names and states
//!   ([`NativeStacks`], [`Dump::parent_wait`]: each worker's state beside
//!   the parent's threads, and the parent's waits on a worker only where
//!   one is proven, a thread blocked reading a pipe that worker writes
//!   to: [`ProvenWait`]), and with [`DumpOptions::native`] unwinds each
//!   thread's native stack (remoteprocess, the crate py-spy unwinds with:
//!   the system's libunwind, symbols and DWARF through addr2line, Rust
//!   names demangled); [`SamplerOptions::native`] samples it beside its
//!   Python workers, each process a root of its own.
//! - [`tree`]: the process tree around a pid: which processes match a
//!   command-line pattern (what `pgrep -f` is for), and each process's
//!   chain of parents with their command lines.

#![warn(missing_docs)]

mod collapsed;
mod dump;
mod error;
mod native;
mod procfs;
mod sampler;
mod spy;
mod stack;
#[cfg(test)]
mod testing;
pub mod tree;

pub use collapsed::{
    CollapsedStack, FrameTotal, ImportShare, collapsed_text, import_share, is_import_frame,
    is_label_frame, top_frames, write_collapsed,
};
pub use dump::{
    Dump, DumpOptions, ParentWait, ProcessDump, ProvenWait, PythonStacks, WorkerState, dump,
    proven_waits,
};
pub use error::{Error, PtraceDenial};
pub use native::{NativeStacks, UNKNOWN_FRAME};
pub use sampler::{
    Profile, Sample, SampleWindow, SampledProcess, SampledThread, SampledTime, Sampler,
    SamplerCost, SamplerOptions, SamplingEnd, StopHandle,
};
pub use spy::Lines;
pub use stack::{Frame, ThreadStack, UNREADABLE_NAME};
pub use tree::{BadPattern, ProcessLabel};

/// Whether this build reads native (C/C++) frames: the crate's `native`
/// feature, py-spy's `unwind`, which links the system's libunwind.
pub const NATIVE: bool = cfg!(feature = "native");

/// Why there are no native (C) frames in a build without the `native`
/// feature, for a `--native` option to print ([`Error::NativeUnavailable`]).
///
/// py-spy's `unwind` feature unwinds native stacks with libunwind, which
/// its `remoteprocess` dependency links from the system
/// (`-lunwind -lunwind-ptrace -lunwind-x86_64 -llzma`): it does not build
/// from crates alone, so it is a feature of its own.
pub const NATIVE_UNAVAILABLE: &str = "native (C) frames are not in this build: install the system's libunwind (Debian/Ubuntu: `apt-get install libunwind-dev`) and build coldstart with `--features native` (`cargo install --path crates/coldstart --features native`); or run without --native: the Python frames alone are complete";
