//! The one place that talks to py-spy: attach to a process, read its
//! threads, and turn py-spy's types into this crate's.

use py_spy::config::{LineNo, LockingStrategy};
use py_spy::{Config, PythonSpy};

use crate::error::Error;
use crate::procfs;
use crate::stack::{Frame, ThreadStack};

/// Runs one call into py-spy with a panic inside it turned into an error.
///
/// py-spy reads a live process's memory without stopping it (or between
/// two of its own reads), so a pointer it follows may be torn, and its
/// arithmetic on such a pointer overflows: a panic in a build with
/// overflow checks (where a release build wraps and fails the read
/// later). One torn read is a failed read, counted as any other, never
/// the end of the reading thread. The process stopped for the read is let
/// go by its guard's drop as the panic unwinds.
fn unpanicked<T>(read: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)).unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_owned());
        Err(anyhow::anyhow!(
            "the stack reader stopped on memory that changed under it ({what})"
        ))
    })
}

/// Which line a frame reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Lines {
    /// The line being executed (what a stack dump wants).
    #[default]
    Current,
    /// The function's first line, so all samples in one function
    /// aggregate into one frame (`py-spy record --function`).
    Function,
}

/// An attached py-spy reader of one process.
pub(crate) struct Spy {
    inner: PythonSpy,
    /// With `native` on Python 3.11 or later: the native frames unwound
    /// by this crate, py-spy reading the Python ones in the same stop.
    #[cfg(feature = "native")]
    native: Option<crate::native::PythonNative>,
}

impl Spy {
    /// Attaches to `pid` and reads its stacks once to prove the attachment
    /// works (an interpreter still starting up has no readable threads).
    /// With `pause`, each read ptrace-stops the process, except for a
    /// child of this process (see [`SamplerOptions::pause`]). With
    /// `native`, native frames are unwound and merged under the Python
    /// ones, which needs the process stopped: `native` implies `pause`
    /// (and is refused for a child of this process, for the same reason).
    ///
    /// [`SamplerOptions::pause`]: crate::SamplerOptions::pause
    pub(crate) fn attach(pid: u32, lines: Lines, pause: bool, native: bool) -> Result<Spy, Error> {
        let own_child = procfs::parent_of(pid) == Some(std::process::id());
        if native {
            if !cfg!(feature = "native") {
                return Err(Error::NativeUnavailable);
            }
            if own_child {
                return Err(Error::NativeOfChild { pid });
            }
        }
        let pause = (pause || native) && !own_child;
        let config = |native, blocking| Config {
            blocking,
            native,
            lineno: match lines {
                Lines::Current => LineNo::LastInstruction,
                Lines::Function => LineNo::First,
            },
            collect_thread_names: true,
            ..Config::default()
        };
        let new = |config: &Config| {
            unpanicked(|| PythonSpy::new(pid as py_spy::Pid, config))
                .map_err(|e| Error::classify(pid, &e))
        };
        #[cfg(feature = "native")]
        if native {
            // From 3.11 on a thread's state names its kernel thread, which
            // is what is unwound: py-spy reads the Python frames without
            // stopping anything itself, the stop is this crate's.
            let inner = new(&config(false, LockingStrategy::NonBlocking))?;
            if (inner.version.major, inner.version.minor) >= (3, 11) {
                let native = crate::native::PythonNative::attach(pid)?;
                return Spy::first_read(Spy {
                    inner,
                    native: Some(native),
                });
            }
        }
        let blocking = if pause {
            LockingStrategy::Lock
        } else {
            LockingStrategy::NonBlocking
        };
        Spy::first_read(Spy {
            inner: new(&config(native, blocking))?,
            #[cfg(feature = "native")]
            native: None,
        })
    }

    fn first_read(mut spy: Spy) -> Result<Spy, Error> {
        spy.threads()?;
        Ok(spy)
    }

    /// The interpreter's version, e.g. `3.11.7`.
    pub(crate) fn version(&self) -> String {
        self.inner.version.to_string()
    }

    /// The interpreter's executable.
    pub(crate) fn exe(&self) -> String {
        self.inner.process.exe().unwrap_or_default()
    }

    /// Every thread's stack right now (the process paused while it is
    /// read, if the spy pauses).
    pub(crate) fn threads(&mut self) -> Result<Vec<ThreadStack>, Error> {
        let pid = self.inner.pid as u32;
        let traces = unpanicked(|| {
            #[cfg(feature = "native")]
            if let Some(native) = self.native.as_mut() {
                return native.traces(&mut self.inner);
            }
            self.inner.get_stack_traces()
        });
        let traces = traces.map_err(|e| Error::classify(pid, &e))?;
        // Before 3.11 the interpreter does not record a thread's kernel id
        // and py-spy (without `unwind`) guesses activity from the frames
        // alone. The main thread (the oldest, so last in the interpreter's
        // list) is the process's leader thread, whose kernel id is the
        // pid: its state is known.
        let leader_running = procfs::is_running(pid);
        let last = traces.len().saturating_sub(1);
        Ok(traces
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                let is_main = t.os_thread_id.is_none() && i == last;
                let (os_thread_id, active) = match (is_main, leader_running) {
                    (true, Some(running)) => (Some(u64::from(pid)), t.active && running),
                    _ => (t.os_thread_id, t.active),
                };
                let active = active && !waits_natively(&t.frames);
                (t, os_thread_id, active)
            })
            .map(|(t, os_thread_id, active)| ThreadStack {
                thread_id: t.thread_id,
                os_thread_id,
                name: t.thread_name.map(crate::stack::printable),
                active,
                owns_gil: t.owns_gil,
                frames: t
                    .frames
                    .into_iter()
                    .map(|f| {
                        // A native frame names its shared object or binary
                        // (`deflate (libz.so.1)`), a Python frame its file.
                        let short = match (&f.module, f.short_filename) {
                            (Some(module), _) => {
                                module.rsplit('/').next().unwrap_or(module).to_owned()
                            }
                            (None, short) => short.unwrap_or_else(|| f.filename.clone()),
                        };
                        let line = if f.module.is_some() { 0 } else { f.line };
                        let line = u32::try_from(line).unwrap_or(0);
                        Frame::from_read(f.name, f.filename, short, line)
                    })
                    .collect(),
            })
            .collect())
    }
}

/// Whether a stack read with `native` is in a wait at its innermost native
/// frames (`read (libc.so.6)` under a thread blocked on a pipe, a futex
/// under a condition variable). The kernel can call such a thread running
/// for a moment: stopping the process to unwind it (the read before this
/// one, or another tool's) restarts its system call, and on a loaded
/// machine the restarted thread waits in the run queue. Such a thread is
/// idle, as `py-spy` itself judges `select` calls. Without `native` a
/// stack has no native frames and nothing is judged here.
fn waits_natively(frames: &[py_spy::Frame]) -> bool {
    let native: Vec<Frame> = frames
        .iter()
        .take_while(|f| f.module.is_some())
        .map(|f| Frame::from_read(f.name.clone(), String::new(), String::new(), 0))
        .collect();
    crate::native::waits(&native)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(name: &str, module: Option<&str>) -> py_spy::Frame {
        crate::testing::spy_frame(name, module, true)
    }

    #[test]
    fn a_thread_blocked_in_a_native_read_is_idle_whatever_the_kernel_said() {
        let blocked = [
            frame("read", Some("/usr/lib/libc.so.6")),
            frame("exit_when_stdin_closes", None),
        ];
        assert!(waits_natively(&blocked));
        let futex = [
            frame("__futex_abstimed_wait_common", Some("/usr/lib/libc.so.6")),
            frame("take_gil", Some("/usr/lib/libpython3.11.so.1.0")),
            frame("collect_in_a_loop", None),
        ];
        assert!(waits_natively(&futex));
    }

    #[test]
    fn a_thread_computing_or_without_native_frames_is_judged_by_the_kernel() {
        let collecting = [
            frame("gc_collect_main", Some("/usr/lib/libpython3.11.so.1.0")),
            frame("collect_in_a_loop", None),
        ];
        assert!(!waits_natively(&collecting));
        // A Python function named like a wait is not a native wait.
        assert!(!waits_natively(&[frame("read", None)]));
        assert!(!waits_natively(&[]));
    }

    #[test]
    fn a_panic_inside_a_read_is_a_failed_read_and_lets_the_process_go() {
        struct Stopped<'a>(&'a std::cell::Cell<bool>);
        impl Drop for Stopped<'_> {
            fn drop(&mut self) {
                self.0.set(true);
            }
        }
        let resumed = std::cell::Cell::new(false);
        let read = unpanicked(|| -> anyhow::Result<u32> {
            let _stopped = Stopped(&resumed);
            let torn = std::hint::black_box(usize::MAX);
            panic!("attempt to add with overflow at {torn:#x} + 16")
        });
        let err = read.expect_err("a panic is an error");
        assert_eq!(
            err.to_string(),
            "the stack reader stopped on memory that changed under it \
             (attempt to add with overflow at 0xffffffffffffffff + 16)"
        );
        assert!(resumed.get(), "the stop's guard was dropped");
        assert!(matches!(
            Error::classify(u32::MAX, &err),
            Error::ProcessGone { .. } | Error::Read { .. }
        ));
        // A read that returns is untouched, an error as much as a value.
        assert_eq!(unpanicked(|| Ok(7)).unwrap(), 7);
        let failed = unpanicked(|| -> anyhow::Result<()> { anyhow::bail!("no threads") });
        assert_eq!(failed.unwrap_err().to_string(), "no threads");
    }
}
