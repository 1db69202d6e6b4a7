//! Every thread of a process stopped at once, for as long as one read
//! takes: each thread seized and interrupted by ptrace before any is
//! waited for, so the threads stop together, and the reader sleeps about
//! once a stop rather than once a thread; or one running thread on its
//! own, the same way. The one way this crate stops what it unwinds.
//!
//! remoteprocess's own lock seizes, interrupts and waits for one thread
//! after another: each wait can put the reader to sleep until the thread
//! next runs, which on a machine whose cores the target keeps busy is a
//! scheduling delay a thread, the process stopped all along. Not kept
//! between reads: a thread seized between reads would stop at every
//! signal sent to it until the reader let it go.

use std::collections::HashSet;

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::wait::{self, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::procfs;

/// The threads of a process stopped by ptrace, let go (detached) when
/// this is dropped.
#[derive(Debug)]
pub(super) struct Stopped {
    seized: Vec<Pid>,
}

impl Stopped {
    /// Stops every thread of `pid`, those it starts meanwhile included:
    /// `Err` when the kernel refuses (no right to trace it) or no thread
    /// could be stopped (the process is gone).
    pub(super) fn all(pid: u32) -> anyhow::Result<Stopped> {
        let mut stopped = Stopped { seized: Vec::new() };
        let mut seen = HashSet::new();
        loop {
            let mut interrupted = Vec::new();
            for tid in procfs::task_ids(pid)
                .into_iter()
                .map(|t| Pid::from_raw(t as i32))
            {
                if seen.insert(tid) && stopped.interrupt(pid, tid)? {
                    interrupted.push(tid);
                }
            }
            if interrupted.is_empty() {
                break;
            }
            for tid in interrupted {
                stop_of(tid)?;
            }
        }
        if stopped.seized.is_empty() {
            anyhow::bail!("no thread of process {pid} could be stopped (it exited)");
        }
        Ok(stopped)
    }

    /// Stops the one thread `tid` of `pid` (a running thread read on its
    /// own): `Err` when it is gone or exiting, or the kernel refuses.
    pub(super) fn thread(pid: u32, tid: u32) -> anyhow::Result<Stopped> {
        let mut stopped = Stopped { seized: Vec::new() };
        let tid = Pid::from_raw(tid as i32);
        if !stopped.interrupt(pid, tid)? {
            anyhow::bail!("thread {tid} of process {pid} could not be stopped (it exited)");
        }
        stop_of(tid)?;
        Ok(stopped)
    }

    /// Seizes `tid` and asks it to stop: `false` when it is gone, or
    /// exiting (the kernel refuses to trace an exiting thread).
    fn interrupt(&mut self, pid: u32, tid: Pid) -> anyhow::Result<bool> {
        // Without PTRACE_O_TRACEEXIT a thread exiting while seized can be
        // left a zombie that the wait below never sees stop.
        match ptrace::seize(tid, ptrace::Options::PTRACE_O_TRACEEXIT) {
            Ok(()) => {}
            Err(Errno::ESRCH) => return Ok(false),
            Err(Errno::EPERM)
                if !std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists() =>
            {
                return Ok(false);
            }
            Err(e) => return Err(failed(tid, e)),
        }
        self.seized.push(tid);
        match ptrace::interrupt(tid) {
            Ok(()) => Ok(true),
            Err(Errno::ESRCH) => Ok(false),
            Err(e) => Err(failed(tid, e)),
        }
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        for &tid in &self.seized {
            // A thread that exited meanwhile: nothing to let go.
            let _ = ptrace::detach(tid, None);
        }
    }
}

/// Waits until the interrupted thread `tid` is stopped (or gone); a signal
/// that arrives first is delivered (the thread then stops for the
/// interrupt still pending).
fn stop_of(tid: Pid) -> anyhow::Result<()> {
    loop {
        match wait::waitpid(tid, Some(WaitPidFlag::WSTOPPED | WaitPidFlag::__WALL)) {
            Ok(WaitStatus::PtraceEvent(_, _, event))
                if event == ptrace::Event::PTRACE_EVENT_STOP as i32
                    || event == ptrace::Event::PTRACE_EVENT_EXIT as i32 =>
            {
                return Ok(());
            }
            Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(Errno::ECHILD) => {
                return Ok(());
            }
            Ok(WaitStatus::Stopped(_, signal)) => {
                ptrace::cont(tid, signal).map_err(|e| failed(tid, e))?;
            }
            Err(Errno::EINTR) => {}
            Ok(other) => anyhow::bail!("unexpected wait status of thread {tid}: {other:?}"),
            Err(e) => return Err(failed(tid, e)),
        }
    }
}

/// A failed ptrace call or wait on `tid`, as the error chain says it.
fn failed(tid: Pid, e: Errno) -> anyhow::Error {
    anyhow::Error::new(e).context(format!("stopping thread {tid}"))
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead as _, BufReader};
    use std::process::{Command, Stdio};

    use super::*;

    /// Three threads spinning besides the main one, which waits on stdin.
    const SPINNERS: &str = "import sys, threading\n\
        def spin():\n    while True: pass\n\
        for _ in range(3): threading.Thread(target=spin, daemon=True).start()\n\
        print('ready', flush=True)\nsys.stdin.read()\n";

    fn tracer_of(pid: u32) -> u32 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status
            .lines()
            .find(|l| l.starts_with("TracerPid:"))
            .unwrap();
        line["TracerPid:".len()..].trim().parse().unwrap()
    }

    #[test]
    fn every_thread_is_stopped_while_held_and_let_go_after() {
        let mut child = Command::new(test_interpreters::default_python())
            .args(["-c", SPINNERS])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "ready\n");
        for _ in 0..20 {
            let stopped = Stopped::all(pid).expect("a child of this process can be stopped");
            let states = procfs::task_states(pid);
            assert_eq!(states.len(), 4, "{states:?}");
            assert_eq!(stopped.seized.len(), 4);
            // `t`: stopped by its tracer, every thread at once.
            assert!(states.iter().all(|&(_, s)| s == 't'), "{states:?}");
            // Traced by this thread (the kernel names the tracing thread).
            assert_ne!(tracer_of(pid), 0);
            drop(stopped);
            let states = procfs::task_states(pid);
            assert!(states.iter().all(|&(_, s)| s != 't'), "{states:?}");
            assert_eq!(tracer_of(pid), 0, "let go");
        }
        // One thread held on its own: it alone is stopped.
        let (leader, spinner) = (pid, procfs::task_ids(pid)[1]);
        let stopped = Stopped::thread(pid, spinner).expect("one thread can be stopped");
        let states = procfs::task_states(pid);
        let state = |tid| states.iter().find(|&&(t, _)| t == tid).unwrap().1;
        assert_eq!(state(spinner), 't', "{states:?}");
        assert_ne!(state(leader), 't', "{states:?}");
        drop(stopped);
        assert_ne!(procfs::task_states(pid)[1].1, 't');
        child.kill().unwrap();
        child.wait().unwrap();
        let gone = Stopped::all(pid).expect_err("a reaped process has no thread");
        assert!(gone.to_string().contains("could be stopped"), "{gone}");
    }
}
