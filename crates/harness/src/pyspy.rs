//! A timeout's stack text ([`timeout_stacks`]), and a `py-spy` binary as
//! an override: a target that names one with `py_spy` has its timeout
//! stacks dumped by that binary instead of by py-spy linked as a library
//! (`pystacks`, the default, which needs nothing installed).

use std::path::{Path, PathBuf};
use std::process::Command;
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
        let out = spawn::run_helper(cmd, timeout)
            .map_err(|e| format!("py-spy dump could not run ({}): {e}", self.path.display()))?;
        if out.status.success() && !out.stdout.trim().is_empty() {
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

/// How long the library's stack dump may take.
const LIBRARY_DUMP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a `py-spy dump` binary may take (it is retried without
/// `--native`, and run for each Python child when `pid` is not Python).
const BINARY_DUMP_TIMEOUT: Duration = Duration::from_secs(20);

/// The text a timeout puts into the error before the worker is killed:
/// every thread's Python stack of `pid`, read by `spy` when the target names
/// a py-spy binary, else by py-spy linked as a library (`pystacks`, which
/// also reads the Python children); or one line saying why there is none.
/// When `pid` is not Python itself (a wrapper such as `py-spy record` or a
/// launcher script that forked), the binary dumps the Python processes
/// among its children instead.
pub fn timeout_stacks(spy: Option<&PySpy>, pid: u32) -> String {
    let Some(spy) = spy else {
        let options = pystacks::DumpOptions::with_timeout(LIBRARY_DUMP_TIMEOUT);
        return match pystacks::dump(pid, &options) {
            Ok(d) => stack_text(pid, "py-spy as a library", &d.to_string()),
            Err(e) => no_stack(pid, &e.to_string()),
        };
    };
    match spy.dump(pid, BINARY_DUMP_TIMEOUT) {
        Ok(stack) => stack_text(pid, "py-spy dump", &stack),
        Err(why) => {
            let dumps: Vec<String> = children(pid)
                .into_iter()
                .filter_map(|child| {
                    spy.dump(child, BINARY_DUMP_TIMEOUT)
                        .ok()
                        .map(|s| stack_text(child, "py-spy dump", &s))
                })
                .collect();
            if dumps.is_empty() {
                no_stack(pid, &why)
            } else {
                dumps.join("\n")
            }
        }
    }
}

/// The one heading of a timeout's stacks.
fn stack_text(pid: u32, reader: &str, stacks: &str) -> String {
    format!(
        "Python stacks of the worker (pid {pid}, read with {reader}) when the timeout fired:\n{}",
        stacks.trim_end()
    )
}

/// The one line of a timeout without stacks.
fn no_stack(pid: u32, why: &str) -> String {
    format!("no Python stack of the worker (pid {pid}): {why}")
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
