//! A process that is not Python (the Rust service above the workers, a
//! launcher): its threads with their names and states from `/proc`, and,
//! with the `native` feature, each thread's native stack: the process
//! stopped by ptrace, every thread at once (`stop`), each thread unwound
//! from its files' DWARF CFI by framehop (samply's unwinder; `modules`:
//! the files and their unwind sections) and symbolized by remoteprocess
//! from the binary's own symbols and DWARF (addr2line), Rust names
//! demangled (`unwind`).
//!
//! Not the system's libunwind, which py-spy's native frames use: libunwind
//! 1.6 finds no CFI in a binary linked by rust-lld (Rust's default linker
//! on x86_64 Linux), whose segments do not start on page boundaries in the
//! file, so a Rust service's stacks would end after its first frame
//! without a frame pointer.
//!
//! With the `native` feature a Python 3.11+ process's native frames come
//! from the same unwinder and symbolizer (`python`), merged under the
//! Python frames py-spy reads as py-spy merges them (`cython`: Cython's
//! frames as py-spy names them).
//!
//! A thread is idle when it was not running, or when its innermost frames
//! are a wait (a futex, `epoll_wait`, `poll`, a blocking read, a sleep):
//! a tokio worker parked on its futex, a reactor in `epoll_wait`.

use std::fmt;

use crate::error::Error;
use crate::procfs;
use crate::stack::{Frame, ThreadStack};

/// The name of a frame whose address no symbol covers (a stripped binary,
/// JIT code, a stack libunwind read wrong): kept, so a reader can count
/// them ([`NativeStacks::unknown_frames`]).
pub const UNKNOWN_FRAME: &str = "[unknown]";

/// How many innermost frames are looked at for a wait.
const WAIT_DEPTH: usize = 6;

/// The most frames one thread's stack is unwound to (a corrupt stack can
/// make an unwinder walk on).
#[cfg_attr(not(feature = "native"), allow(dead_code))]
const MAX_FRAMES: usize = 512;

/// The threads of a process that is not Python.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NativeStacks {
    /// The executable.
    pub exe: String,
    /// Every thread, the leader first; [`ThreadStack::thread_id`] and
    /// [`ThreadStack::os_thread_id`] are the kernel's thread id, the name
    /// the kernel's (15 bytes of it), and [`ThreadStack::owns_gil`] is
    /// always false.
    pub threads: Vec<ThreadStack>,
    /// Whether the stacks were unwound (`--native`, the process stopped
    /// while it was read); without, each thread has no frames and its
    /// state alone says whether it ran.
    pub unwound: bool,
}

impl NativeStacks {
    /// Frames named [`UNKNOWN_FRAME`], over every thread.
    pub fn unknown_frames(&self) -> usize {
        self.threads
            .iter()
            .flat_map(|t| &t.frames)
            .filter(|f| f.name == UNKNOWN_FRAME)
            .count()
    }

    /// Frames over every thread.
    pub fn frames(&self) -> usize {
        self.threads.iter().map(|t| t.frames.len()).sum()
    }

    /// Threads that were idle when read.
    pub fn idle_threads(&self) -> usize {
        self.threads.iter().filter(|t| !t.active).count()
    }
}

impl fmt::Display for NativeStacks {
    /// `Native (not Python): EXE, N threads (I idle)`, each thread as a
    /// Python one is written, then how many frames had no symbol.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Native (not Python): {}, {} thread{} ({} idle){}",
            self.exe,
            self.threads.len(),
            if self.threads.len() == 1 { "" } else { "s" },
            self.idle_threads(),
            if self.unwound {
                ", stopped while unwound"
            } else {
                "; --native unwinds their stacks"
            }
        )?;
        for t in &self.threads {
            writeln!(f)?;
            write!(f, "{t}")?;
        }
        if self.unwound {
            writeln!(
                f,
                "\n{} of {} frames {UNKNOWN_FRAME} (no symbol covers their address)",
                self.unknown_frames(),
                self.frames()
            )?;
        }
        Ok(())
    }
}

impl NativeStacks {
    /// The threads of `pid` with their names and states, read from
    /// `/proc` without stopping it (no frames): what is known of a process
    /// that is not unwound.
    pub fn list(pid: u32) -> Result<NativeStacks, Error> {
        listed(pid)
    }
}

/// See [`NativeStacks::list`].
pub(crate) fn listed(pid: u32) -> Result<NativeStacks, Error> {
    let tasks = procfs::tasks(pid);
    if tasks.is_empty() {
        return Err(Error::ProcessGone { pid });
    }
    Ok(NativeStacks {
        exe: exe_of(pid),
        threads: tasks.into_iter().map(|t| thread(&t, Vec::new())).collect(),
        unwound: false,
    })
}

fn exe_of(pid: u32) -> String {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn thread(task: &procfs::Task, frames: Vec<Frame>) -> ThreadStack {
    ThreadStack {
        thread_id: u64::from(task.tid),
        os_thread_id: Some(u64::from(task.tid)),
        name: Some(crate::stack::printable(task.name.clone())).filter(|n| !n.is_empty()),
        active: task.state == 'R' && !waits(&frames),
        owns_gil: false,
        frames,
    }
}

/// Whether a stack, innermost first, is in a wait.
pub(crate) fn waits(frames: &[Frame]) -> bool {
    frames
        .iter()
        .take(WAIT_DEPTH)
        .any(|f| is_wait_function(&f.name))
}

/// A function that waits: a futex (tokio's park, a mutex, a condvar,
/// `std::thread::park`), the reactor's `epoll_wait`, `poll`/`select`, a
/// sleep, a blocking read, accept or wait for a child.
fn is_wait_function(name: &str) -> bool {
    let bare = name.trim_start_matches('_');
    let bare = bare
        .strip_prefix("GI_")
        .unwrap_or(bare)
        .trim_start_matches('_');
    let bare = bare.strip_prefix("libc_").unwrap_or(bare);
    const WAITS: [&str; 16] = [
        "epoll_wait",
        "epoll_pwait",
        "poll",
        "ppoll",
        "select",
        "pselect",
        "nanosleep",
        "clock_nanosleep",
        "read",
        "accept",
        "recv",
        "wait4",
        "waitpid",
        "waitid",
        "pthread_cond_",
        "sigtimedwait",
    ];
    name.contains("futex")
        || bare.starts_with("lll_lock_wait")
        || WAITS
            .iter()
            .any(|w| bare == *w || (w.ends_with('_') && bare.starts_with(w)))
}

/// A source path shortened from its crate's folder: `.../tokio-1.47.1/src/
/// runtime/park.rs` to `tokio-1.47.1/src/runtime/park.rs`, the standard
/// library's `/rustc/HASH/library/std/src/thread/mod.rs` to
/// `std/src/thread/mod.rs`; a path without `src/` to its file name.
#[cfg_attr(not(feature = "native"), allow(dead_code))]
fn short_source(path: &str) -> String {
    if let Some(at) = path.rfind("/src/") {
        let crate_dir = path[..at].rsplit('/').next().unwrap_or_default();
        return format!("{crate_dir}{}", &path[at..]);
    }
    path.rsplit('/').next().unwrap_or(path).to_owned()
}

/// A symbol demangled: a Rust name without its hash
/// (`tokio::runtime::park::Inner::park`), any other name as it is.
#[cfg_attr(not(feature = "native"), allow(dead_code))]
fn demangle(name: &str) -> String {
    #[cfg(feature = "native")]
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    name.to_owned()
}

/// A reader of one process's native stacks, kept between reads (its
/// symbols are loaded once, its frames cached by address).
pub(crate) struct NativeReader {
    #[cfg_attr(not(feature = "native"), allow(dead_code))]
    pid: u32,
    #[cfg(feature = "native")]
    inner: unwind::Inner,
}

impl NativeReader {
    /// Ready to unwind `pid` (`Err` without the `native` feature, or for
    /// a child of this process: stopping it to unwind could take its exit
    /// status from its own parent).
    pub(crate) fn attach(pid: u32) -> Result<NativeReader, Error> {
        if !crate::NATIVE {
            return Err(Error::NativeUnavailable);
        }
        if procfs::parent_of(pid) == Some(std::process::id()) {
            return Err(Error::NativeOfChild { pid });
        }
        Error::check_access(pid)?;
        Ok(NativeReader {
            pid,
            #[cfg(feature = "native")]
            inner: unwind::Inner::new(pid)?,
        })
    }

    /// Every thread's stack now: the process stopped (every thread), each
    /// thread unwound, then let go. With `running_only` (a sampler that
    /// leaves idle threads out), only the threads running at that moment
    /// are stopped and unwound, each on its own; the others are listed
    /// idle, without frames.
    pub(crate) fn read(&mut self, running_only: bool) -> Result<NativeStacks, Error> {
        #[cfg(feature = "native")]
        {
            let threads = self.inner.threads(self.pid, running_only)?;
            Ok(NativeStacks {
                exe: exe_of(self.pid),
                threads,
                unwound: true,
            })
        }
        #[cfg(not(feature = "native"))]
        {
            let _ = running_only;
            Err(Error::NativeUnavailable)
        }
    }
}

#[cfg(feature = "native")]
mod cython;
#[cfg(all(feature = "native", target_arch = "x86_64"))]
mod modules;
#[cfg(feature = "native")]
mod python;
#[cfg(feature = "native")]
mod stop;
#[cfg(feature = "native")]
mod unwind;

#[cfg(feature = "native")]
pub(crate) use python::PythonNative;

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(name: &str) -> Frame {
        crate::testing::frame(name, "", 0)
    }

    #[test]
    fn waits_are_futexes_epoll_poll_sleeps_and_blocking_reads() {
        for name in [
            "std::sys::pal::unix::futex::futex_wait",
            "__GI___futex_abstimed_wait_cancelable64",
            "epoll_wait",
            "__GI_epoll_wait",
            "__poll",
            "__libc_read",
            "read",
            "clock_nanosleep",
            "__lll_lock_wait",
            "pthread_cond_timedwait",
            "wait4",
        ] {
            assert!(is_wait_function(name), "{name}");
        }
        for name in [
            "syscall",
            "ml_service::checksum",
            "readline_in_a_loop",
            "tokio::runtime::task::raw::poll",
            "select_best",
            UNKNOWN_FRAME,
        ] {
            assert!(!is_wait_function(name), "{name}");
        }
    }

    #[test]
    fn a_parked_tokio_worker_is_idle_and_a_spinning_thread_active() {
        let task = |state| procfs::Task {
            tid: 7,
            name: "tokio-runtime-w".into(),
            state,
        };
        let parked = vec![
            frame("syscall"),
            frame("std::sys::pal::unix::futex::futex_wait"),
            frame("std::sys::sync::condvar::futex::Condvar::wait_optional_timeout"),
            frame("tokio::runtime::park::Inner::park"),
        ];
        // Caught on CPU on its way into the wait: still idle.
        assert!(!thread(&task('R'), parked.clone()).active);
        assert!(!thread(&task('S'), parked).active);
        let spinning = vec![frame("ml_service::checksum"), frame("main")];
        assert!(thread(&task('R'), spinning.clone()).active);
        assert!(!thread(&task('S'), spinning).active);
        // Listed only (no --native): the state alone.
        assert!(thread(&task('R'), Vec::new()).active);
    }

    #[test]
    fn sources_are_shortened_from_their_crate_folder() {
        let cases = [
            (
                "/home/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/tokio-1.47.1/src/runtime/park.rs",
                "tokio-1.47.1/src/runtime/park.rs",
            ),
            (
                "/rustc/29483883eed69d5fb4db01964cdf2af4d86e9cb2/library/std/src/thread/mod.rs",
                "std/src/thread/mod.rs",
            ),
            (
                "/work/examples/ml-service/service/src/main.rs",
                "service/src/main.rs",
            ),
            ("/usr/include/x86_64-linux-gnu/bits/stdio.h", "stdio.h"),
            ("main.c", "main.c"),
        ];
        for (path, short) in cases {
            assert_eq!(short_source(path), short, "{path}");
        }
    }

    #[cfg(feature = "native")]
    #[test]
    fn rust_names_are_demangled_without_their_hash() {
        assert_eq!(
            demangle("_ZN5tokio7runtime4park5Inner4park17h0123456789abcdefE"),
            "tokio::runtime::park::Inner::park"
        );
        assert_eq!(demangle("epoll_wait"), "epoll_wait");
    }

    #[test]
    fn a_listed_process_names_its_threads_and_counts_the_idle() {
        let me = std::process::id();
        let listed = listed(me).expect("this process is listed");
        assert!(!listed.unwound);
        assert_eq!(listed.threads[0].os_thread_id, Some(u64::from(me)));
        assert!(listed.threads.iter().all(|t| t.frames.is_empty()));
        let text = listed.to_string();
        assert!(text.starts_with("Native (not Python): "), "{text}");
        assert!(text.contains("--native unwinds"), "{text}");
        assert!(matches!(
            super::listed(u32::MAX - 1),
            Err(Error::ProcessGone { .. })
        ));
    }
}
