//! What `/proc` says about a process: alive or not, its command line and
//! owner, its descendants, whether the kernel lets this thread read its
//! memory, and this thread's own ptrace rights.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;

/// Linux's number for `CAP_SYS_PTRACE`.
const CAP_SYS_PTRACE: u32 = 19;

/// True when `pid` no longer runs: no `/proc/PID`, or a zombie (exited,
/// not yet reaped) or dead task.
pub(crate) fn is_gone(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => matches!(state_of(&stat), Some('Z' | 'X' | 'x')),
        Err(_) => true,
    }
}

/// Whether the thread `tid` (or a process's leader thread, `tid` = pid)
/// is running or runnable (`R`) rather than sleeping; `None` when gone.
pub(crate) fn is_running(tid: u32) -> Option<bool> {
    let stat = fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    Some(state_of(&stat)? == 'R')
}

/// The CPU time the kernel has counted for process `pid`, all its threads
/// (`utime + stime` of `/proc/PID/stat`, in ns; the kernel counts in clock
/// ticks, 10 ms at the usual 100 Hz); `None` when it is gone.
pub(crate) fn cpu_ns(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    cpu_ticks_of(&stat).map(|ticks| ticks.saturating_mul(1_000_000_000) / clock_ticks_per_second())
}

/// The resident set size of process `pid` in bytes (the second field of
/// `/proc/PID/statm`, in pages); `None` when it is gone.
pub(crate) fn rss_bytes(pid: u32) -> Option<u64> {
    let statm = fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).unwrap_or(4096))
}

/// `utime + stime` of a `/proc/PID/stat` line, in clock ticks (fields 14
/// and 15, counted from 1; the 12th and 13th after the command name).
fn cpu_ticks_of(stat: &str) -> Option<u64> {
    let mut after = stat[stat.rfind(')')? + 1..].split_whitespace().skip(11);
    let utime: u64 = after.next()?.parse().ok()?;
    let stime: u64 = after.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The kernel's clock ticks per second (`sysconf(_SC_CLK_TCK)`).
fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf reads a constant of the running system.
    match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        n if n > 0 => n as u64,
        _ => 100,
    }
}

/// The state letter of a `/proc/PID/stat` line (the field after the
/// parenthesised command name, which may itself hold spaces and parens).
fn state_of(stat: &str) -> Option<char> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().next()?.chars().next()
}

#[cfg(test)]
#[test]
fn the_cpu_ticks_are_utime_plus_stime_after_a_command_with_parens() {
    let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 37 0 0 20 0 1 0";
    assert_eq!(cpu_ticks_of(stat), Some(287));
    assert_eq!(cpu_ticks_of("7 (x) R 1"), None);
}

/// One thread of a process, as `/proc/PID/task` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Task {
    /// The kernel's thread id.
    pub(crate) tid: u32,
    /// Its name (`comm`: the kernel keeps 15 bytes of it, so tokio's
    /// `tokio-runtime-worker` reads `tokio-runtime-w`).
    pub(crate) name: String,
    /// Its state letter (`R` running, `S` sleeping, `D` in the kernel, ...).
    pub(crate) state: char,
}

/// Every thread of `pid`, the leader (tid = pid) first, then by tid;
/// empty when it is gone.
pub(crate) fn tasks(pid: u32) -> Vec<Task> {
    task_states(pid)
        .into_iter()
        .map(|(tid, state)| Task {
            tid,
            name: fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                .map(|c| c.trim_end_matches('\n').to_owned())
                .unwrap_or_default(),
            state,
        })
        .collect()
}

/// The id and state letter of every thread of `pid`, in [`tasks`]'s
/// order, without their names: what a sampler reads before each stop.
pub(crate) fn task_states(pid: u32) -> Vec<(u32, char)> {
    task_ids(pid)
        .into_iter()
        .filter_map(|tid| {
            let stat = fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
            Some((tid, state_of(&stat)?))
        })
        .collect()
}

/// The ids of every thread of `pid`, the leader (tid = pid) first, then
/// by tid; empty when it is gone.
pub(crate) fn task_ids(pid: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut tids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_by_key(|tid| (*tid != pid, *tid));
    tids
}

/// The file descriptor a thread is blocked reading (`read`, `readv`,
/// `recvfrom` or `recvmsg` in `/proc/PID/task/TID/syscall`), on x86_64;
/// `None` when it runs, is in another call, or the kernel does not say
/// (the file needs the right to ptrace the process).
pub(crate) fn blocked_read_fd(pid: u32, tid: u32) -> Option<i32> {
    let line = fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall")).ok()?;
    blocked_read_fd_of(&line)
}

/// [`blocked_read_fd`] of one `syscall` line: `NR ARG0 ...`.
fn blocked_read_fd_of(line: &str) -> Option<i32> {
    // x86_64's read, readv, recvfrom and recvmsg.
    const READS: [u64; 4] = [0, 19, 45, 47];
    if !cfg!(target_arch = "x86_64") {
        return None;
    }
    let mut fields = line.split_whitespace();
    let nr: u64 = fields.next()?.parse().ok()?;
    if !READS.contains(&nr) {
        return None;
    }
    let fd = u64::from_str_radix(fields.next()?.strip_prefix("0x")?, 16).ok()?;
    i32::try_from(fd).ok()
}

/// A pipe (or named pipe) by its device and inode.
pub(crate) type PipeId = (u64, u64);

/// The pipe `fd` of `pid` is the read end of (a pipe or a named pipe,
/// opened for reading).
pub(crate) fn pipe_read_end(pid: u32, fd: i32) -> Option<PipeId> {
    let (pipe, mode) = pipe_end(pid, &fd.to_string())?;
    (mode == libc::O_RDONLY).then_some(pipe)
}

/// Whether `pid` holds the write end of `pipe`.
pub(crate) fn writes_to_pipe(pid: u32, pipe: PipeId) -> bool {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|e| {
        e.file_name().to_str().and_then(|fd| pipe_end(pid, fd)) == Some((pipe, libc::O_WRONLY))
    })
}

/// The pipe `fd` of `pid` is an end of, and its access mode
/// (`O_RDONLY`, `O_WRONLY`, `O_RDWR`); `None` for anything else.
fn pipe_end(pid: u32, fd: &str) -> Option<(PipeId, i32)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = fs::metadata(format!("/proc/{pid}/fd/{fd}")).ok()?;
    if !meta.file_type().is_fifo() {
        return None;
    }
    let info = fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
    let flags = i32::from_str_radix(field(&info, "flags:")?, 8).ok()?;
    Some(((meta.dev(), meta.ino()), flags & libc::O_ACCMODE))
}

/// The parent pid of a `/proc/PID/stat` line.
fn ppid_of(stat: &str) -> Option<u32> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// The parent of `pid`, while it runs.
pub(crate) fn parent_of(pid: u32) -> Option<u32> {
    ppid_of(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The command line, its arguments joined by spaces (empty for a kernel
/// thread, a zombie, or a process that is gone), on one line: see
/// [`one_line`].
pub(crate) fn cmdline(pid: u32) -> String {
    let Ok(raw) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return String::new();
    };
    one_line(&raw)
}

/// The NUL-separated arguments of a `/proc/PID/cmdline` joined by spaces,
/// with every control character written as its escape (`\n`, `\t`,
/// `\u{1b}`): a shell's `bash -c 'SCRIPT'` carries whole scripts as one
/// argument, and a newline in a header or a parent chain would break the
/// line it sits on.
fn one_line(raw: &[u8]) -> String {
    let mut line = String::new();
    for arg in raw.split(|b| *b == 0).filter(|a| !a.is_empty()) {
        if !line.is_empty() {
            line.push(' ');
        }
        for c in String::from_utf8_lossy(arg).chars() {
            if c.is_control() {
                line.extend(c.escape_default());
            } else {
                line.push(c);
            }
        }
    }
    line
}

/// The real uid of `pid` (from `/proc/PID/status`).
pub(crate) fn uid_of(pid: u32) -> Option<u32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    field(&status, "Uid:")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn field<'a>(status: &'a str, name: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(str::trim)
}

/// Whether the calling thread has `CAP_SYS_PTRACE` in its effective set
/// (capabilities are per thread on Linux, so `/proc/thread-self`).
pub(crate) fn has_cap_sys_ptrace() -> Option<bool> {
    let status = fs::read_to_string("/proc/thread-self/status").ok()?;
    let eff = u64::from_str_radix(field(&status, "CapEff:")?, 16).ok()?;
    Some(eff & (1 << CAP_SYS_PTRACE) != 0)
}

/// The calling thread's real uid.
pub(crate) fn own_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// `kernel.yama.ptrace_scope`, where the Yama security module is present.
pub(crate) fn yama_ptrace_scope() -> Option<u8> {
    fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Asks the kernel whether this thread may read `pid`'s memory: opening
/// `/proc/PID/mem` runs the same ptrace access check as
/// `process_vm_readv` and `PTRACE_ATTACH` (uid, dumpable flag,
/// `CAP_SYS_PTRACE`, Yama). `Some(error)` when it refuses.
pub(crate) fn memory_access_denied(pid: u32) -> Option<io::Error> {
    match fs::File::open(format!("/proc/{pid}/mem")) {
        Ok(_) => None,
        Err(e) if is_permission_error(&e) => Some(e),
        Err(_) => None,
    }
}

/// EPERM or EACCES.
pub(crate) fn is_permission_error(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied
        || matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES))
}

/// Whether any file mapped into `pid` has `python` in its name (the
/// interpreter binary or a `libpython` shared library): a cheap test of
/// whether a process can be a CPython before asking py-spy to parse it.
/// `None` when the maps cannot be read.
pub(crate) fn maps_mention_python(pid: u32) -> Option<bool> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    Some(maps.lines().any(|l| {
        l.split_whitespace()
            .nth(5)
            .and_then(|path| path.rsplit('/').next())
            .is_some_and(|name| name.to_ascii_lowercase().contains("python"))
    }))
}

/// Every descendant of `root` with its parent, parents before children
/// (breadth first), from one look at `/proc`.
pub(crate) fn descendants(root: u32) -> Vec<(u32, u32)> {
    ProcessTree::default().descendants(root)
}

/// The parent of every process, kept between looks so that a new look
/// reads only the `/proc/PID/stat` of processes it has not seen yet (the
/// sampler looks every few tens of milliseconds).
#[derive(Debug, Default)]
pub struct ProcessTree {
    parent_of: BTreeMap<u32, u32>,
}

impl ProcessTree {
    /// Every descendant of `root` with its parent, parents before children
    /// (breadth first). A process keeps the parent it had when first seen,
    /// so an orphan re-parented to init stays under the process that
    /// started it.
    pub fn descendants(&mut self, root: u32) -> Vec<(u32, u32)> {
        let Ok(entries) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        let mut present = BTreeSet::new();
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            present.insert(pid);
            if self.parent_of.contains_key(&pid) {
                continue;
            }
            if let Some(ppid) = fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| ppid_of(&stat))
            {
                self.parent_of.insert(pid, ppid);
            }
        }
        self.parent_of.retain(|pid, _| present.contains(pid));
        let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (&pid, &ppid) in &self.parent_of {
            children.entry(ppid).or_default().push(pid);
        }
        let mut out = Vec::new();
        let mut queue = std::collections::VecDeque::from([root]);
        let mut seen = BTreeSet::from([root]);
        while let Some(parent) = queue.pop_front() {
            for &child in children.get(&parent).into_iter().flatten() {
                if seen.insert(child) {
                    out.push((child, parent));
                    queue.push_back(child);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_read_is_told_from_its_syscall_line() {
        if !cfg!(target_arch = "x86_64") {
            return;
        }
        assert_eq!(
            blocked_read_fd_of("0 0x5 0x7ffd3c1e0a90 0x2000 0x0 0x0 0x0 0x7ffd 0x7f\n"),
            Some(5)
        );
        assert_eq!(
            blocked_read_fd_of("45 0xc 0x1 0x2 0x0 0x0 0x0 0x7ffd 0x7f"),
            Some(12)
        );
        // wait4, epoll_wait: a wait, but on no one file.
        assert_eq!(
            blocked_read_fd_of("61 0xffffffffffffffff 0x0 0x0 0x0 0x0 0x0 0x1 0x2"),
            None
        );
        assert_eq!(
            blocked_read_fd_of("232 0x3 0x1 0x2 0x3 0x0 0x0 0x1 0x2"),
            None
        );
        assert_eq!(blocked_read_fd_of("running"), None);
        assert_eq!(blocked_read_fd_of("-1 0x7ffd 0x7f"), None);
    }

    /// `cat` reading a pipe this process writes to: its read end is the
    /// pipe this process holds the write end of.
    #[test]
    fn the_writer_of_a_pipe_a_child_reads_is_found() {
        let mut cat = std::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("cat runs");
        let pid = cat.id();
        let pipe = pipe_read_end(pid, 0).expect("cat's stdin is the read end of a pipe");
        assert!(writes_to_pipe(std::process::id(), pipe));
        assert!(!writes_to_pipe(pid, pipe), "cat only reads it");
        drop(cat.stdin.take());
        let _ = cat.wait();
    }

    #[test]
    fn stat_fields_survive_odd_command_names() {
        let cases = [
            ("12 (python3) S 7 12 12 0", Some('S'), Some(7)),
            ("12 (a b) c) R 1 12 12 0", Some('R'), Some(1)),
            ("12 (x) Z 99 0", Some('Z'), Some(99)),
            ("garbage", None, None),
        ];
        for (line, state, ppid) in cases {
            assert_eq!(state_of(line), state, "{line}");
            assert_eq!(ppid_of(line), ppid, "{line}");
        }
    }

    #[test]
    fn this_process_is_alive_and_readable() {
        let me = std::process::id();
        assert!(!is_gone(me));
        assert!(memory_access_denied(me).is_none());
        assert_eq!(uid_of(me), Some(own_uid()));
        // SAFETY: getppid has no preconditions.
        assert_eq!(parent_of(me), Some(unsafe { libc::getppid() } as u32));
        assert!(!cmdline(me).is_empty());
    }

    #[test]
    fn the_resident_set_grows_with_memory_touched_and_a_gone_process_has_none() {
        let me = std::process::id();
        let before = rss_bytes(me).expect("this process's RSS");
        let touched = vec![1u8; 64 << 20];
        let after = rss_bytes(me).expect("this process's RSS");
        assert!(
            after >= before + (32 << 20),
            "{before} -> {after} with 64 MiB touched"
        );
        drop(std::hint::black_box(touched));
        assert_eq!(rss_bytes(u32::MAX), None);
    }

    #[test]
    fn this_process_lists_its_threads_leader_first_with_their_names() {
        let me = std::process::id();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (started_tx, started) = std::sync::mpsc::channel::<()>();
        let named = std::thread::Builder::new()
            .name("procfs-task-test".into())
            .spawn(move || {
                // Its name is set before its body runs.
                let _ = started_tx.send(());
                rx.recv()
            })
            .expect("a thread");
        started.recv().expect("the thread started");
        let found = tasks(me);
        drop(tx);
        let _ = named.join();
        assert_eq!(found.first().map(|t| t.tid), Some(me), "{found:?}");
        // The kernel keeps 15 bytes of a thread's name.
        assert!(
            found.iter().any(|t| t.name == "procfs-task-tes"),
            "the named thread is listed: {found:?}"
        );
    }

    #[test]
    fn a_command_line_is_one_line_whatever_its_arguments_hold() {
        let cases: [(&[u8], &str); 5] = [
            (b"python3\0-m\0worker\0", "python3 -m worker"),
            (
                b"bash\0-c\0a=1\n\nexec python3\0",
                r"bash -c a=1\n\nexec python3",
            ),
            (b"x\0tab\there\0\x1b[0m\0", r"x tab\there \u{1b}[0m"),
            (b"caf\xc3\xa9\0\xff\0", "caf\u{e9} \u{fffd}"),
            (b"", ""),
        ];
        for (raw, line) in cases {
            assert_eq!(one_line(raw), line, "{raw:?}");
        }
        // A real process whose argument holds a newline.
        let (mut child, _out) = crate::testing::shell("read x\n", &["line\nbreak"]);
        let shown = cmdline(child.id());
        drop(child.stdin.take());
        let _ = child.wait();
        assert_eq!(shown, r"sh -c echo up\nread x\n line\nbreak");
    }

    #[test]
    fn a_pid_that_cannot_exist_is_gone() {
        // Above the kernel's hard maximum pid (2^22).
        assert!(is_gone(u32::MAX - 1));
        assert_eq!(cmdline(u32::MAX - 1), "");
    }

    #[test]
    fn descendants_lists_a_child_with_its_parent() {
        let mut child = std::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("cat runs");
        let me = std::process::id();
        let found = descendants(me);
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.contains(&(child.id(), me)), "{found:?}");
    }
}
