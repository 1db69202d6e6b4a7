//! A child joining its cgroup between `fork` and `exec`: the files opened
//! before the fork, and the write of `0` that moves the child itself.

use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};

/// The open `cgroup.procs` files a child writes itself into, and the pipe
/// on which it says how long joining took.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(super) fds: Vec<OwnedFd>,
    pub(super) stamp_rx: OwnedFd,
    pub(super) stamp_tx: OwnedFd,
}

/// What the child's `pre_exec` needs: the `cgroup.procs` fds and the
/// pipe's write end.
#[derive(Debug, Clone)]
pub(crate) struct JoinFds {
    pub(super) procs: Vec<i32>,
    pub(super) stamp: i32,
}

impl Entry {
    /// The raw fds, for the child's `pre_exec`.
    pub(crate) fn raw(&self) -> JoinFds {
        JoinFds {
            procs: self.fds.iter().map(|f| f.as_raw_fd()).collect(),
            stamp: self.stamp_tx.as_raw_fd(),
        }
    }

    /// How long the child took to join its cgroup, once it has exec'd:
    /// the kernel's cgroup migration (on v1 it can wait out an RCU grace
    /// period, tens of ms), which a container's process does not count
    /// in its own start-up, so neither does the worker's.
    pub(crate) fn join_ns(&self) -> Option<u64> {
        let mut word = [0u8; 8];
        // SAFETY: reading at most 8 bytes into a stack buffer from an
        // open, non-blocking fd.
        let n = unsafe { libc::read(self.stamp_rx.as_raw_fd(), word.as_mut_ptr().cast(), 8) };
        (n == 8).then(|| u64::from_ne_bytes(word))
    }
}

pub(super) fn now_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a timespec on the stack; it is
    // async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Writes the calling process into each cgroup (`0` is the writer), then
/// how long that took on the stamp pipe. Async-signal-safe: `write`s and
/// `clock_gettime`, no allocation; usable between `fork` and `exec`.
pub(crate) fn join(fds: &JoinFds) -> io::Result<()> {
    let start = now_ns();
    for &fd in &fds.procs {
        // SAFETY: writing one byte from a static buffer to an open fd.
        if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
            return Err(io::Error::last_os_error());
        }
    }
    let took = now_ns().saturating_sub(start).to_ne_bytes();
    // SAFETY: 8 bytes from a stack buffer to an open pipe (below
    // PIPE_BUF: one write); a failure only loses the figure.
    unsafe { libc::write(fds.stamp, took.as_ptr().cast(), 8) };
    Ok(())
}
