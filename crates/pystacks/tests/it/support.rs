//! The one support module of pystacks's integration tests: a real CPython (not the pyenv shim)
//! started on a fixture, lines awaited with a deadline, the process group
//! killed and reaped on drop.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

/// How long a fixture may take to print an awaited line.
pub const LINE_TIMEOUT: Duration = Duration::from_secs(30);

/// The real interpreter behind `python3` (`sys.executable`): the one
/// lookup, `test_interpreters::default_python`.
pub use test_interpreters::default_python as python;

/// A fixture file's path.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The 1-based line of `fixture` holding `marker`.
pub fn line_of(fixture_name: &str, marker: &str) -> u32 {
    let text = std::fs::read_to_string(fixture(fixture_name)).expect("fixture");
    let i = text
        .lines()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("{marker} not in {fixture_name}"));
    i as u32 + 1
}

/// A Python process on a fixture, in its own process group.
pub struct Py {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Py {
    /// Starts `python fixture args...`, stdin and stdout piped.
    pub fn start(fixture_name: &str, args: &[&str]) -> Py {
        let mut child = Command::new(python())
            .arg(fixture(fixture_name))
            .args(args)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env_remove("PYTHONPROFILEIMPORTTIME")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("python starts");
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Py {
            stdin: child.stdin.take(),
            child,
            lines: rx,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the next line on stdout.
    pub fn next_line(&self) -> String {
        self.lines
            .recv_timeout(LINE_TIMEOUT)
            .unwrap_or_else(|e| panic!("no line from the fixture: {e}"))
    }

    /// Waits for the next line on stdout and checks it.
    pub fn expect_line(&self, want: &str) {
        assert_eq!(self.next_line(), want);
    }

    /// Writes one line to its stdin.
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").expect("write to the fixture");
        stdin.flush().expect("flush");
    }

    /// Closes stdin and waits for the exit; the exit code.
    pub fn finish(mut self) -> Option<i32> {
        self.stdin = None;
        let status = self.child.wait().expect("wait");
        status.code()
    }
}

impl Drop for Py {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's group; the leader is not yet
        // reaped (or already reaped, then ESRCH is harmless).
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// `/proc/PID/status`'s `State:` letter and `TracerPid:`.
pub fn state_and_tracer(pid: u32) -> (char, u32) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let get = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .expect("field")
            .trim()
            .to_owned()
    };
    let state = get("State:").chars().next().expect("state letter");
    let tracer = get("TracerPid:").parse().expect("tracer pid");
    (state, tracer)
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
const CAP_SYS_PTRACE: u32 = 19;

/// Drops CAP_SYS_PTRACE from the calling thread's effective set (and from
/// threads it starts afterwards). Capabilities are per thread on Linux, so
/// the rest of the test process keeps its rights.
pub fn drop_cap_sys_ptrace_in_this_thread() {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget/capset with a v3 header and two data structs, as the
    // kernel ABI requires; pid 0 is the calling thread.
    unsafe {
        assert_eq!(
            libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()),
            0,
            "capget"
        );
        data[0].effective &= !(1 << CAP_SYS_PTRACE);
        assert_eq!(
            libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()),
            0,
            "capset"
        );
    }
    let status = std::fs::read_to_string("/proc/thread-self/status").expect("status");
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .expect("CapEff");
    let eff = u64::from_str_radix(eff.trim(), 16).expect("hex");
    assert_eq!(
        eff & (1 << CAP_SYS_PTRACE),
        0,
        "CAP_SYS_PTRACE still effective"
    );
}

/// Whether the test runs as root (only root can start a fixture that
/// drops to another user).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Waits (at most [`LINE_TIMEOUT`]) until `pid` has exited, on a pidfd
/// (`test_interpreters::wait_until_gone`, the one wait); true when it has
/// (or was gone already).
pub fn wait_until_gone(pid: u32) -> bool {
    test_interpreters::wait_until_gone(pid, LINE_TIMEOUT)
}
