//! The waiter thread: one per worker, blocked in the kernel until the
//! worker's leader exits, then it kills what is left of the group and reaps
//! the leader with `wait4`, collecting the leader's own resource usage.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread;
use std::time::Duration;

use crate::group;
use crate::readers::Event;
use crate::{ExitStatus, monotonic_ns};

/// How long the waiter waits for the rest of a group to disappear after the
/// leader exited and the group was killed.
const GROUP_GONE_BOUND: Duration = Duration::from_secs(2);

/// Decodes a `wait4` status word.
pub(crate) fn exit_status_from_raw(status: i32) -> ExitStatus {
    if libc::WIFEXITED(status) {
        ExitStatus::Code(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        ExitStatus::Signal(libc::WTERMSIG(status))
    } else {
        ExitStatus::Unknown
    }
}

/// The worker's own resource usage, from `wait4` on that child (never
/// `RUSAGE_CHILDREN`, so earlier workers do not leak into later figures).
/// As the kernel accounts it, this includes the descendants the worker
/// itself waited for (a pyenv-style shim's interpreter, for instance), and
/// `max_rss_bytes` is the largest peak among them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rusage {
    /// User CPU time.
    pub user: Duration,
    /// System CPU time.
    pub sys: Duration,
    /// Peak resident set size in bytes (`ru_maxrss` is in KiB on Linux).
    pub max_rss_bytes: u64,
}

impl Rusage {
    fn from_raw(ru: &libc::rusage) -> Self {
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        Rusage {
            user: tv(ru.ru_utime),
            sys: tv(ru.ru_stime),
            max_rss_bytes: (ru.ru_maxrss.max(0) as u64) * 1024,
        }
    }
}

/// Makes this process a child subreaper (Linux): processes orphaned when a
/// worker's leader exits are re-parented here instead of to init, so the
/// waiter can reap them at once rather than leave zombies for init to
/// collect whenever it gets to it. Done once, at the first spawn.
pub(crate) fn become_subreaper() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[cfg(target_os = "linux")]
        // SAFETY: prctl(PR_SET_CHILD_SUBREAPER) only sets a process flag.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0);
        }
    });
}

/// What the waiter learnt.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ExitInfo {
    pub status: ExitStatus,
    pub rusage: Option<Rusage>,
    /// Monotonic stamp taken when the kernel reported the leader's exit.
    pub exited_at_ns: u64,
    /// Whether every process of the group was gone before the report.
    pub group_gone: bool,
}

/// Starts the waiter for the leader `pid` (also the group id). The result
/// arrives on the returned channel once the leader is reaped and its group
/// is gone; the group is unregistered just before.
///
/// `leader_exited` is set as soon as the kernel reports the leader's exit,
/// before the rest of the group is killed and reaped: from then on the
/// harness has nothing left to signal.
///
/// `notify` (the stdout channel) gets [`Event::LeaderExited`] after the
/// report, so a harness waiting for a line learns of the exit even when a
/// process outside the group keeps stdout open.
pub(crate) fn spawn_waiter(
    pid: i32,
    notify: SyncSender<Event>,
) -> io::Result<(Receiver<ExitInfo>, Arc<AtomicBool>)> {
    let (tx, rx) = mpsc::channel();
    let leader_exited = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&leader_exited);
    thread::Builder::new()
        .name(format!("spawn-wait-{pid}"))
        .spawn(move || {
            let info = wait_kill_reap(pid, &flag);
            group::unregister(pid);
            let _ = tx.send(info);
            let _ = notify.send(Event::LeaderExited);
        })?;
    Ok((rx, leader_exited))
}

fn wait_kill_reap(pid: i32, leader_exited: &AtomicBool) -> ExitInfo {
    // 1. Wait for the leader's exit WITHOUT reaping it: while it is a zombie
    //    its pid, hence the group id, cannot be reused.
    loop {
        // SAFETY: an all-zero siginfo_t is valid; waitid writes into it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointer to a siginfo_t owned by this frame.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break;
        }
    }
    let exited_at_ns = monotonic_ns();
    leader_exited.store(true, Ordering::SeqCst);
    // 2. Whatever the leader left behind in its group goes with it.
    let _ = group::killpg(pid, libc::SIGKILL);
    // 3. Reap the leader, with its own rusage.
    let (status, rusage) = loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is valid; wait4 writes into it.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers to locals.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if rc == pid {
            break (exit_status_from_raw(status), Some(Rusage::from_raw(&ru)));
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break (ExitStatus::Unknown, None);
        }
    };
    // 4. The killed members were orphaned to this process (a subreaper,
    //    see `become_subreaper`): reap every one of them.
    loop {
        // SAFETY: as above.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointer to a siginfo_t owned by this frame.
        let rc = unsafe { libc::waitid(libc::P_PGID, pid as libc::id_t, &mut info, libc::WEXITED) };
        if rc != 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break; // ECHILD: no child of ours is left in the group
        }
    }
    // 5. Members that are not our children (no subreaper): wait until
    //    their own parent or init reaped them, for a bounded time.
    let group_gone = group::wait_group_gone(pid, GROUP_GONE_BOUND);
    ExitInfo {
        status,
        rusage,
        exited_at_ns,
        group_gone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_wait_status_words() {
        assert_eq!(exit_status_from_raw(0), ExitStatus::Code(0));
        assert_eq!(exit_status_from_raw(3 << 8), ExitStatus::Code(3));
        assert_eq!(exit_status_from_raw(libc::SIGKILL), ExitStatus::Signal(9));
        assert_eq!(exit_status_from_raw(libc::SIGTERM), ExitStatus::Signal(15));
    }

    #[test]
    fn status_text() {
        assert_eq!(ExitStatus::Code(1).to_string(), "exit code 1");
        assert_eq!(ExitStatus::Signal(9).to_string(), "killed by SIGKILL (9)");
        assert_eq!(
            ExitStatus::Signal(64).to_string(),
            "killed by signal 64 (64)"
        );
        assert!(ExitStatus::Code(0).success());
        assert!(!ExitStatus::Signal(15).success());
    }

    #[test]
    fn rusage_converts_kib_and_timevals() {
        // SAFETY: an all-zero rusage is valid.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        ru.ru_utime.tv_sec = 1;
        ru.ru_utime.tv_usec = 500_000;
        ru.ru_stime.tv_usec = 250;
        ru.ru_maxrss = 2048;
        let r = Rusage::from_raw(&ru);
        assert_eq!(r.user, Duration::from_millis(1500));
        assert_eq!(r.sys, Duration::from_micros(250));
        assert_eq!(r.max_rss_bytes, 2 * 1024 * 1024);
    }
}
