//! The one place that talks to py-spy: attach to a process, read its
//! threads, and turn py-spy's types into this crate's.

use py_spy::config::{LineNo, LockingStrategy};
use py_spy::{Config, PythonSpy};

use crate::error::Error;
use crate::procfs;
use crate::stack::{Frame, ThreadStack};

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
}

impl Spy {
    /// Attaches to `pid` and reads its stacks once to prove the attachment
    /// works (an interpreter still starting up has no readable threads).
    /// With `pause`, each read ptrace-stops the process, except for a
    /// child of this process (see [`SamplerOptions::pause`]).
    ///
    /// [`SamplerOptions::pause`]: crate::SamplerOptions::pause
    pub(crate) fn attach(pid: u32, lines: Lines, pause: bool) -> Result<Spy, Error> {
        let pause = pause && procfs::parent_of(pid) != Some(std::process::id());
        let config = Config {
            blocking: if pause {
                LockingStrategy::Lock
            } else {
                LockingStrategy::NonBlocking
            },
            native: false,
            lineno: match lines {
                Lines::Current => LineNo::LastInstruction,
                Lines::Function => LineNo::First,
            },
            collect_thread_names: true,
            ..Config::default()
        };
        let inner =
            PythonSpy::new(pid as py_spy::Pid, &config).map_err(|e| Error::classify(pid, &e))?;
        let mut spy = Spy { inner };
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
        let traces = self
            .inner
            .get_stack_traces()
            .map_err(|e| Error::classify(pid, &e))?;
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
                        let short = f.short_filename.unwrap_or_else(|| f.filename.clone());
                        let line = u32::try_from(f.line).unwrap_or(0);
                        Frame::from_read(f.name, f.filename, short, line)
                    })
                    .collect(),
            })
            .collect())
    }
}
