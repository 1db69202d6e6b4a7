//! A `py-spy` binary as an override: a target that names one with `py_spy`
//! has its timeout stacks dumped by that binary instead of by py-spy
//! linked as a library (`pystacks`, the default, which needs nothing
//! installed).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::target::Target;

/// A py-spy executable that was found.
#[derive(Debug, Clone)]
pub struct PySpy {
    /// The executable.
    pub path: PathBuf,
}

/// The py-spy binary a target names with `py_spy` (relative to its project
/// root), when it is executable: an override of the library for stack
/// dumps.
pub fn locate(target: &Target) -> Option<PySpy> {
    let p = target.py_spy.as_ref()?;
    let p = if p.is_absolute() {
        p.clone()
    } else {
        target.root.join(p)
    };
    is_executable(&p).then_some(PySpy { path: p })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

impl PySpy {
    /// `py-spy dump` of every thread of `pid`, with native frames where
    /// that works (retried without them where it does not). `Err` is one
    /// line saying why there is no stack.
    pub fn dump(&self, pid: u32, timeout: Duration) -> Result<String, String> {
        let native = self.run_dump(pid, true, timeout);
        match native {
            Ok(out) => Ok(out),
            Err(first) => self.run_dump(pid, false, timeout).map_err(|second| {
                if second == first {
                    first
                } else {
                    format!("{second} (with --native: {first})")
                }
            }),
        }
    }

    fn run_dump(&self, pid: u32, native: bool, timeout: Duration) -> Result<String, String> {
        let mut cmd = Command::new(&self.path);
        cmd.args(["dump", "--pid", &pid.to_string()]);
        if native {
            cmd.arg("--native");
        }
        let out = run_with_timeout(cmd, timeout)
            .map_err(|e| format!("py-spy dump could not run ({}): {e}", self.path.display()))?;
        if out.status_ok && !out.stdout.trim().is_empty() {
            return Ok(out.stdout);
        }
        let why = out
            .stderr
            .lines()
            .chain(out.stdout.lines())
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("no output")
            .to_owned();
        let hint = if why.contains("ermission") || why.contains("ptrace") {
            "; py-spy needs ptrace rights over the worker (run as the same user with kernel.yama.ptrace_scope=0, or with CAP_SYS_PTRACE)"
        } else {
            ""
        };
        Err(format!("py-spy dump failed: {why}{hint}"))
    }
}

/// The text a timeout puts into an error: the stack dump, or one line
/// saying why there is none. When `pid` is not Python itself (a wrapper
/// such as `py-spy record` or a launcher script that forked), the Python
/// processes among its children are dumped instead.
pub fn timeout_diagnostic(spy: &PySpy, pid: u32) -> String {
    let timeout = Duration::from_secs(20);
    match spy.dump(pid, timeout) {
        Ok(stack) => stack_text(pid, &stack),
        Err(why) => {
            let dumps: Vec<String> = children(pid)
                .into_iter()
                .filter_map(|child| spy.dump(child, timeout).ok().map(|s| stack_text(child, &s)))
                .collect();
            if dumps.is_empty() {
                why
            } else {
                dumps.join("\n")
            }
        }
    }
}

fn stack_text(pid: u32, stack: &str) -> String {
    format!(
        "Python stacks of the worker (py-spy dump, pid {pid}) when the timeout fired:\n{}",
        stack.trim_end()
    )
}

/// The direct children of `pid`, from `/proc/PID/task/*/children` (empty
/// where that does not exist).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

struct Output {
    status_ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs a short helper command, killing it if it outlives `timeout`. Both
/// pipes are drained on their own threads so it cannot deadlock on a full
/// pipe.
fn run_with_timeout(mut cmd: Command, timeout: Duration) -> std::io::Result<Output> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    let mut so = child.stdout.take().expect("piped");
    let mut se = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = so.read_to_end(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = se.read_to_end(&mut s);
        s
    });
    let (tx, rx) = std::sync::mpsc::channel();
    let pid = child.id();
    // Wait for the exit without reaping (WNOWAIT): the pid stays ours, so a
    // kill on timeout can never hit a recycled pid.
    std::thread::spawn(move || {
        // SAFETY: waitid writes only into the zeroed siginfo we own.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        let _ = tx.send(rc);
    });
    if rx.recv_timeout(timeout).is_err() {
        let _ = child.kill();
    }
    let status = child.wait()?;
    let stdout = String::from_utf8_lossy(&t_out.join().expect("stdout thread")).into_owned();
    let stderr = String::from_utf8_lossy(&t_err.join().expect("stderr thread")).into_owned();
    Ok(Output {
        status_ok: status.success(),
        stdout,
        stderr,
    })
}
