//! The registry of live process groups, and signals sent to them.
//!
//! A group is registered when its leader is spawned and unregistered by the
//! waiter thread once the leader is reaped and the group is empty. Signals
//! go only to registered groups, so a group id is never signalled after its
//! number could have been reused. Every registered group is also announced
//! to the [`crate::guard`], which kills it should the harness die first.

use std::collections::BTreeSet;
use std::io;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());
static GONE: Condvar = Condvar::new();

/// How long [`kill_all`] waits for the killed groups to be reaped.
const KILL_ALL_BOUND: Duration = Duration::from_secs(5);

fn live() -> MutexGuard<'static, BTreeSet<i32>> {
    // A panic while holding this lock cannot leave the set inconsistent.
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn register(pgid: i32) {
    let mut live = live();
    live.insert(pgid);
    crate::guard::announce(pgid);
}

pub(crate) fn unregister(pgid: i32) {
    let mut live = live();
    if live.remove(&pgid) {
        crate::guard::withdraw(pgid);
    }
    drop(live);
    GONE.notify_all();
}

/// Sends `sig` to the whole group, if it is still live. Returns whether the
/// signal was delivered to at least one process.
pub(crate) fn signal(pgid: i32, sig: i32) -> bool {
    let live = live();
    if !live.contains(&pgid) {
        return false;
    }
    killpg(pgid, sig).is_ok()
}

/// `kill(-pgid, sig)`.
pub(crate) fn killpg(pgid: i32, sig: i32) -> io::Result<()> {
    debug_assert!(pgid > 1, "never signal process group {pgid}");
    // SAFETY: kill has no memory-safety preconditions.
    if unsafe { libc::kill(-pgid, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether any process of the group still exists (zombies included).
pub(crate) fn group_exists(pgid: i32) -> bool {
    match killpg(pgid, 0) {
        Ok(()) => true,
        Err(e) => e.raw_os_error() != Some(libc::ESRCH),
    }
}

/// Waits until no process of the group exists any more (members killed by
/// the waiter are re-parented and reaped by init), with short backing-off
/// pauses, at most `bound`. Returns whether the group is gone.
pub(crate) fn wait_group_gone(pgid: i32, bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    let mut pause = Duration::from_micros(50);
    loop {
        if !group_exists(pgid) {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

/// Kills (SIGKILL) every live worker's process group and waits, at most a
/// few seconds, until each group's leader is reaped and the group is gone.
///
/// Meant for a Ctrl-C handler: the handles ([`crate::Worker`]) held by other
/// threads stay valid and report the workers as killed.
pub fn kill_all() {
    let mut live = live();
    for &pgid in live.iter() {
        let _ = killpg(pgid, libc::SIGKILL);
    }
    let deadline = Instant::now() + KILL_ALL_BOUND;
    while !live.is_empty() {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        live = GONE
            .wait_timeout(live, deadline - now)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// Kills (SIGKILL) the process group of one live worker, `pgid` (its
/// [`crate::Worker::pid`]), from any thread: what a supervisor's kill (or
/// the OOM killer) does to a worker whose handle another thread holds. The
/// handle stays valid and reports the worker as killed; the waiter reaps
/// it. Returns whether the group was live and the signal delivered: a
/// group already reaped is never signalled, so a reused number is safe.
pub fn kill_group(pgid: u32) -> bool {
    match i32::try_from(pgid) {
        Ok(pgid) if pgid > 1 => signal(pgid, libc::SIGKILL),
        _ => false,
    }
}

/// How many process groups are live now (spawned and not yet reaped).
pub fn live_groups() -> usize {
    live().len()
}
