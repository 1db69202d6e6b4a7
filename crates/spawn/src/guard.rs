//! The guard: what kills every live worker group when the harness itself
//! dies, however it dies (SIGKILL from a CI job's hard timeout or the OOM
//! killer included), so no worker outlives it.
//!
//! At the first spawn the harness forks one small process, the guard, that
//! holds the read end of a pipe; the harness alone holds the write end
//! (close-on-exec, so no worker inherits it). Each group registered in
//! [`crate::group`] is announced to the guard, and each group unregistered
//! (its leader reaped, the group empty) is withdrawn, in the registry's
//! order. When the harness process ends, the kernel closes the write end
//! whatever ended it; the guard then reads end-of-file, sends SIGKILL to
//! every group still announced, and exits.
//!
//! This does not depend on which thread spawned a worker (unlike
//! `PR_SET_PDEATHSIG`, which fires when the spawning thread ends, and the
//! harness spawns from short-lived scoped threads), and it reaches the
//! whole group, grandchildren included, not only the leader.
//!
//! The guard runs in a process group of its own and ignores the terminal's
//! signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT), so a signal to the harness's
//! group does not end it before the harness. Between `fork` and `exit` it
//! runs only async-signal-safe system calls on memory set up before the
//! fork: it allocates nothing and takes no lock.
//!
//! It also removes the cgroups of workers started under limits
//! ([`crate::cgroup`]): after the kills it kills whatever is left in each
//! cgroup under this harness's `coldstart-<pid>` folders, removes them
//! (waiting, a bounded time, for the killed to leave), and the folders.
//!
//! One window remains: a worker forked by the harness that is killed in the
//! microseconds before [`announce`] wrote its group is not announced.

use std::fs::File;
use std::io::Write as _;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::sync::{Mutex, OnceLock};

/// How many groups the guard can hold at once; more live groups than this
/// (far beyond any concurrency the harness uses) are not guarded.
const CAPACITY: usize = 1 << 16;

/// The write end of the guard's pipe, or `None` when the guard could not be
/// started (no pipe or no fork: the harness then runs unguarded).
static GUARD: OnceLock<Option<Mutex<File>>> = OnceLock::new();

fn guard() -> Option<&'static Mutex<File>> {
    GUARD.get_or_init(start).as_ref()
}

/// Tells the guard that group `pgid` is live. Called under the registry's
/// lock, so the guard sees announcements and withdrawals in their order.
pub(crate) fn announce(pgid: i32) {
    send(pgid);
}

/// Tells the guard that group `pgid` is gone (its leader reaped).
pub(crate) fn withdraw(pgid: i32) {
    send(-pgid);
}

fn send(word: i32) {
    if let Some(pipe) = guard() {
        let mut pipe = pipe.lock().unwrap_or_else(|e| e.into_inner());
        // Four bytes, below PIPE_BUF: one atomic write. A guard that is
        // gone (EPIPE) leaves nothing to tell.
        let _ = pipe.write_all(&word.to_ne_bytes());
    }
}

/// Forks the guard; returns the write end of its pipe.
fn start() -> Option<Mutex<File>> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two fds into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return None;
    }
    let [rx, tx] = fds;
    // Everything the guard uses is allocated before the fork.
    let mut table = vec![0i32; CAPACITY];
    let mut buf = [0u8; 4096];
    let roots = crate::cgroup::guard_roots();
    let root_ptrs: Vec<*const libc::c_char> = roots.iter().map(|c| c.as_ptr()).collect();
    // SAFETY: fork has no memory-safety preconditions; the child runs only
    // `guard_main`, which makes async-signal-safe calls and never returns.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: in the forked child, on memory owned by this frame.
        unsafe { guard_main(rx, &mut table, &mut buf, &root_ptrs) }
    }
    // SAFETY: both fds are ours; the read end is the guard's now.
    unsafe { libc::close(rx) };
    // SAFETY: tx is an open fd owned by nothing else.
    let tx = unsafe { OwnedFd::from_raw_fd(tx) };
    if pid < 0 {
        return None;
    }
    Some(Mutex::new(File::from(tx)))
}

/// The guard's whole life: keep only the pipe, read announcements until
/// end-of-file, then kill every group still live, remove the cgroup
/// folders `roots` (NUL-terminated paths), and exit.
///
/// # Safety
///
/// Only in the child of `fork`, with `rx` the pipe's read end and `roots`
/// valid C strings.
unsafe fn guard_main(
    rx: libc::c_int,
    table: &mut [i32],
    buf: &mut [u8],
    roots: &[*const libc::c_char],
) -> ! {
    // SAFETY (whole body): async-signal-safe system calls only, on memory
    // owned by the caller's frame; nothing allocates, nothing locks.
    unsafe {
        libc::setpgid(0, 0);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_IGN);
        }
        let _ = libc::chdir(c"/".as_ptr());
        // Keep the read end alone, as fd 0: a copy of any other fd (a
        // worker's stdin, the write end) would keep it open.
        if rx != 0 {
            libc::dup2(rx, 0);
        }
        if libc::syscall(libc::SYS_close_range, 1u32, u32::MAX, 0u32) != 0 {
            let mut lim: libc::rlimit = std::mem::zeroed();
            let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
                lim.rlim_cur.min(1 << 20) as libc::c_int
            } else {
                1024
            };
            for fd in 1..max {
                libc::close(fd);
            }
        }
        let mut len = 0usize;
        let mut word = [0u8; 4];
        let mut have = 0usize;
        loop {
            let n = libc::read(0, buf.as_mut_ptr().cast(), buf.len());
            if n < 0 {
                if *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                break;
            }
            if n == 0 {
                break;
            }
            for &b in &buf[..n as usize] {
                word[have] = b;
                have += 1;
                if have < 4 {
                    continue;
                }
                have = 0;
                let w = i32::from_ne_bytes(word);
                if w > 0 && len < table.len() {
                    table[len] = w;
                    len += 1;
                } else if w < 0
                    && let Some(i) = table[..len].iter().position(|&p| p == w.wrapping_neg())
                {
                    len -= 1;
                    table[i] = table[len];
                }
            }
        }
        for &pgid in &table[..len] {
            libc::kill(-pgid, libc::SIGKILL);
        }
        for &root in roots {
            remove_root(root, buf);
        }
        libc::_exit(0)
    }
}

/// Empties and removes one harness cgroup folder: each cgroup in it has
/// its processes killed and is removed, then the folder; retried every
/// 10 ms for up to 5 s while a killed process has not left yet. A folder
/// that does not exist is left alone at once.
///
/// # Safety
///
/// `root` is a valid C string; async-signal-safe calls only, `buf` the
/// only memory written.
unsafe fn remove_root(root: *const libc::c_char, buf: &mut [u8]) {
    const RETRIES: usize = 500;
    // SAFETY (whole body): raw system calls on fds opened here and on
    // `buf`; names from getdents64 are NUL-terminated inside `buf`.
    unsafe {
        for _ in 0..RETRIES {
            let dir = libc::open(root, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
            if dir < 0 {
                return;
            }
            let mut offset = 0;
            let mut filled = 0;
            loop {
                if offset >= filled {
                    let n = libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len());
                    if n <= 0 {
                        break;
                    }
                    filled = n as usize;
                    offset = 0;
                }
                // struct linux_dirent64: ino u64, off i64, reclen u16,
                // type u8, then the name.
                let rec = buf.as_ptr().add(offset);
                let reclen = u16::from_ne_bytes([*rec.add(16), *rec.add(17)]) as usize;
                let kind = *rec.add(18);
                let name = rec.add(19).cast::<libc::c_char>();
                offset += reclen.max(1);
                let dot = *name == b'.' as libc::c_char
                    && (*name.add(1) == 0
                        || (*name.add(1) == b'.' as libc::c_char && *name.add(2) == 0));
                if kind == libc::DT_DIR && !dot {
                    kill_members(dir, name);
                    libc::unlinkat(dir, name, libc::AT_REMOVEDIR);
                }
            }
            libc::close(dir);
            if libc::rmdir(root) == 0 || *libc::__errno_location() == libc::ENOENT {
                return;
            }
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 10_000_000,
            };
            libc::nanosleep(&pause, std::ptr::null_mut());
        }
    }
}

/// SIGKILL to every process listed in `<dir>/<name>/cgroup.procs`, read
/// into a buffer on the stack.
///
/// # Safety
///
/// `dir` an open folder fd, `name` a valid C string.
unsafe fn kill_members(dir: libc::c_int, name: *const libc::c_char) {
    // SAFETY (whole body): raw system calls on fds opened here and on a
    // stack buffer.
    unsafe {
        let cg = libc::openat(
            dir,
            name,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if cg < 0 {
            return;
        }
        let procs = libc::openat(
            cg,
            c"cgroup.procs".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        libc::close(cg);
        if procs < 0 {
            return;
        }
        let mut text = [0u8; 4096];
        let mut pid: i32 = 0;
        loop {
            let n = libc::read(procs, text.as_mut_ptr().cast(), text.len());
            if n <= 0 {
                break;
            }
            for &b in &text[..n as usize] {
                if b.is_ascii_digit() {
                    pid = pid.wrapping_mul(10).wrapping_add((b - b'0') as i32);
                } else {
                    if pid > 0 {
                        libc::kill(pid, libc::SIGKILL);
                    }
                    pid = 0;
                }
            }
        }
        if pid > 0 {
            libc::kill(pid, libc::SIGKILL);
        }
        libc::close(procs);
    }
}
