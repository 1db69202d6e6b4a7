//! Why a process's Python stacks could not be read, in words that say what
//! to do.

use std::fmt;
use std::time::Duration;

use crate::procfs;

/// Why the stacks of a process could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kernel refused this process access to the target's memory
    /// (ptrace access mode check).
    #[error("{0}")]
    PermissionDenied(PtraceDenial),
    /// The process exited (or is a zombie) before or while it was read.
    #[error(
        "process {pid} is not running: it exited before its stacks could be read, or there is no such process"
    )]
    ProcessGone {
        /// The process.
        pid: u32,
    },
    /// The process is not a CPython interpreter and, where descendants
    /// were searched, none of them is.
    #[error(
        "process {pid} ({command}) is not a Python process{and_children}: no CPython interpreter found in its memory{detail}",
        and_children = if *.searched_children { " and none of its subprocesses is" } else { "" },
        detail = if detail.is_empty() { String::new() } else { format!(" ({detail})") }
    )]
    NotPython {
        /// The process.
        pid: u32,
        /// Its command line.
        command: String,
        /// Whether its descendants were searched too.
        searched_children: bool,
        /// What py-spy said, if anything.
        detail: String,
    },
    /// A CPython whose version py-spy 0.4.3 does not know.
    #[error(
        "process {pid} runs a Python version the stack reader does not support ({detail}); it reads CPython 2.7 and 3.3 to 3.15"
    )]
    UnsupportedPython {
        /// The process.
        pid: u32,
        /// What py-spy said, with the version.
        detail: String,
    },
    /// Reading took longer than allowed (the target may be stopped in the
    /// kernel, or its memory is being paged in).
    #[error(
        "reading the Python stacks of process {pid} took longer than {after:?} and was abandoned; retry with a longer timeout"
    )]
    Timeout {
        /// The process.
        pid: u32,
        /// The time allowed.
        after: Duration,
    },
    /// Any other failure of the reader (memory changed under it, an
    /// interpreter layout it could not follow).
    #[error(
        "could not read the Python stacks of process {pid}: {detail}; it may have been changing too fast to read, retry"
    )]
    Read {
        /// The process.
        pid: u32,
        /// What py-spy said (its whole chain of causes).
        detail: String,
    },
    /// This process could not start a thread to read from.
    #[error("could not start the stack reader's thread: {0}; the system may be out of threads")]
    Thread(#[source] std::io::Error),
    /// A sampling rate of zero.
    #[error("the sampling rate must be at least 1 sample per second")]
    ZeroRate,
    /// Native frames were asked of a build without the `native` feature.
    #[error("{}", crate::NATIVE_UNAVAILABLE)]
    NativeUnavailable,
    /// Native frames were asked of a child of this process: unwinding
    /// stops the process, and that stop's wait could collect the child's
    /// exit status from its parent (this process).
    #[error(
        "native frames of process {pid} cannot be read from its own parent (stopping it to unwind could take its exit status); read it from another process, e.g. `coldstart dump {pid} --native` in another shell"
    )]
    NativeOfChild {
        /// The process.
        pid: u32,
    },
    /// The native stacks of a process that is not Python could not be
    /// unwound (a thread that would not stop, a stack libunwind could not
    /// follow).
    #[error(
        "could not unwind the native stacks of process {pid}: {detail}; it may have been exiting or changing too fast, retry"
    )]
    NativeRead {
        /// The process.
        pid: u32,
        /// What the unwinder said.
        detail: String,
    },
}

impl Error {
    /// The process the error is about, where there is one.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Error::PermissionDenied(d) => Some(d.pid),
            Error::ProcessGone { pid }
            | Error::NotPython { pid, .. }
            | Error::UnsupportedPython { pid, .. }
            | Error::Timeout { pid, .. }
            | Error::Read { pid, .. }
            | Error::NativeRead { pid, .. }
            | Error::NativeOfChild { pid } => Some(*pid),
            Error::Thread(_) | Error::ZeroRate | Error::NativeUnavailable => None,
        }
    }

    /// Turns what py-spy said about `pid` into the error a person can act
    /// on, asking `/proc` and the kernel what is really the matter.
    pub(crate) fn classify(pid: u32, err: &anyhow::Error) -> Error {
        let detail = format!("{err:#}");
        if let Some(lasting) = Error::gone_or_denied(pid, err, &detail) {
            return lasting;
        }
        if detail.contains("Unsupported version of Python") {
            return Error::UnsupportedPython { pid, detail };
        }
        if procfs::maps_mention_python(pid) == Some(false) {
            return Error::NotPython {
                pid,
                command: procfs::cmdline(pid),
                searched_children: false,
                detail,
            };
        }
        Error::Read { pid, detail }
    }

    /// Turns what the native unwinder said about `pid` (a process that is
    /// not Python) into the error a person can act on.
    #[cfg_attr(not(feature = "native"), allow(dead_code))]
    pub(crate) fn classify_native(pid: u32, err: &anyhow::Error) -> Error {
        let detail = format!("{err:#}");
        Error::gone_or_denied(pid, err, &detail).unwrap_or(Error::NativeRead { pid, detail })
    }

    /// The process gone, or the kernel refusing: the causes of a failed
    /// read that retrying does not cure.
    fn gone_or_denied(pid: u32, err: &anyhow::Error, detail: &str) -> Option<Error> {
        if procfs::is_gone(pid) {
            return Some(Error::ProcessGone { pid });
        }
        let permission_in_chain = err.chain().any(|cause| {
            cause
                .downcast_ref::<std::io::Error>()
                .is_some_and(procfs::is_permission_error)
        }) || detail.contains("Permission denied")
            || detail.contains("Operation not permitted")
            || detail.contains("EPERM")
            || detail.contains("EACCES");
        if permission_in_chain || procfs::memory_access_denied(pid).is_some() {
            return Some(Error::PermissionDenied(PtraceDenial::inspect(
                pid,
                detail.to_owned(),
            )));
        }
        None
    }

    /// The error for `pid` when the kernel refuses access before py-spy
    /// is even asked, if it does.
    pub(crate) fn check_access(pid: u32) -> Result<(), Error> {
        if procfs::is_gone(pid) {
            return Err(Error::ProcessGone { pid });
        }
        match procfs::memory_access_denied(pid) {
            Some(e) => Err(Error::PermissionDenied(PtraceDenial::inspect(
                pid,
                format!("opening /proc/{pid}/mem: {e}"),
            ))),
            None => Ok(()),
        }
    }
}

/// The facts behind a refused ptrace access and the way to allow it.
///
/// Reading another process's memory passes the kernel's ptrace access
/// check: the reader needs the target's uid and a dumpable target, or
/// `CAP_SYS_PTRACE`; Yama's `kernel.yama.ptrace_scope` (where present)
/// narrows it further (1: only descendants, 2: only with
/// `CAP_SYS_PTRACE`, 3: never).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PtraceDenial {
    /// The process that could not be read.
    pub pid: u32,
    /// What the kernel (through py-spy or `/proc`) said.
    pub detail: String,
    /// `kernel.yama.ptrace_scope`, where the Yama module is present.
    pub ptrace_scope: Option<u8>,
    /// Whether the reading thread has `CAP_SYS_PTRACE` (None: unknown).
    pub has_cap_sys_ptrace: Option<bool>,
    /// The reader's real uid.
    pub own_uid: u32,
    /// The target's real uid, where `/proc` tells.
    pub target_uid: Option<u32>,
}

impl PtraceDenial {
    /// Gathers the facts about this thread and `pid` right now.
    pub(crate) fn inspect(pid: u32, detail: String) -> PtraceDenial {
        PtraceDenial {
            pid,
            detail,
            ptrace_scope: procfs::yama_ptrace_scope(),
            has_cap_sys_ptrace: procfs::has_cap_sys_ptrace(),
            own_uid: procfs::own_uid(),
            target_uid: procfs::uid_of(pid),
        }
    }

    /// Why the kernel refused, as far as the facts tell: one clause per
    /// reason that applies.
    pub fn reasons(&self) -> Vec<String> {
        let mut out = Vec::new();
        let cap = self.has_cap_sys_ptrace == Some(true);
        match self.ptrace_scope {
            Some(3) => out.push(
                "kernel.yama.ptrace_scope is 3 (no process may be traced until reboot)".to_owned(),
            ),
            Some(2) if !cap => out.push(
                "kernel.yama.ptrace_scope is 2 (only a process with CAP_SYS_PTRACE may trace)"
                    .to_owned(),
            ),
            Some(1) if !cap => out.push(
                "kernel.yama.ptrace_scope is 1 (a process may trace only its own descendants)"
                    .to_owned(),
            ),
            _ => {}
        }
        if let Some(target) = self.target_uid
            && target != self.own_uid
            && !cap
        {
            out.push(format!(
                "the process runs as uid {target}, this one as uid {} without CAP_SYS_PTRACE",
                self.own_uid
            ));
        }
        if out.is_empty() && !cap {
            out.push(
                "this process lacks CAP_SYS_PTRACE and the target is not dumpable (it called prctl(PR_SET_DUMPABLE, 0), or changed its uid or gid, or runs a setuid program)"
                    .to_owned(),
            );
        }
        if out.is_empty() {
            out.push("a security module (SELinux, AppArmor, seccomp) denied it".to_owned());
        }
        out
    }

    /// How to allow it.
    pub fn advice(&self) -> String {
        let mut ways = Vec::new();
        if matches!(self.ptrace_scope, Some(1..=2)) {
            ways.push(format!(
                "set `sudo sysctl kernel.yama.ptrace_scope=0` (it is {} here)",
                self.ptrace_scope.unwrap_or_default()
            ));
        }
        ways.push(
            "grant CAP_SYS_PTRACE to the process that reads (in a container: `docker run --cap-add SYS_PTRACE`, or `securityContext.capabilities.add: [SYS_PTRACE]` on Kubernetes; on a host: run it as root, or `sudo setcap cap_sys_ptrace+ep` on its binary)"
                .to_owned(),
        );
        if self.target_uid.is_some_and(|t| t != self.own_uid) {
            ways.push("run it as the same user as the Python process".to_owned());
        }
        ways.join(", or ")
    }
}

impl fmt::Display for PtraceDenial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the kernel does not let this process read the memory of process {} (ptrace access denied: {}): {}; to allow it, {}",
            self.pid,
            self.detail,
            self.reasons().join("; "),
            self.advice()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial(scope: Option<u8>, cap: Option<bool>, target_uid: Option<u32>) -> PtraceDenial {
        PtraceDenial {
            pid: 42,
            detail: "Permission denied (os error 13)".to_owned(),
            ptrace_scope: scope,
            has_cap_sys_ptrace: cap,
            own_uid: 1000,
            target_uid,
        }
    }

    #[test]
    fn each_reason_is_named_with_its_remedy() {
        // (facts, words the message must hold)
        let cases: [(PtraceDenial, &[&str]); 5] = [
            (
                denial(Some(1), Some(false), Some(1000)),
                &[
                    "ptrace_scope is 1",
                    "kernel.yama.ptrace_scope=0",
                    "--cap-add SYS_PTRACE",
                ],
            ),
            (
                denial(Some(2), Some(false), Some(1000)),
                &["ptrace_scope is 2", "(it is 2 here)", "CAP_SYS_PTRACE"],
            ),
            (
                denial(Some(3), Some(true), Some(1000)),
                &["ptrace_scope is 3", "until reboot"],
            ),
            (
                denial(None, Some(false), Some(65534)),
                &["uid 65534", "same user", "--cap-add SYS_PTRACE"],
            ),
            (
                denial(None, Some(false), Some(1000)),
                &["not dumpable", "PR_SET_DUMPABLE", "--cap-add SYS_PTRACE"],
            ),
        ];
        for (d, words) in cases {
            let text = d.to_string();
            assert!(
                text.starts_with(
                    "the kernel does not let this process read the memory of process 42"
                )
            );
            for w in words {
                assert!(text.contains(w), "{w:?} missing from: {text}");
            }
            assert!(!text.ends_with('.'));
        }
    }

    #[test]
    fn no_sysctl_advice_where_yama_is_absent_or_open() {
        for scope in [None, Some(0)] {
            let text = denial(scope, Some(false), Some(1000)).to_string();
            assert!(!text.contains("sysctl"), "{text}");
        }
    }

    #[test]
    fn errors_name_their_process() {
        let e = Error::ProcessGone { pid: 7 };
        assert_eq!(e.pid(), Some(7));
        assert_eq!(
            e.to_string(),
            "process 7 is not running: it exited before its stacks could be read, or there is no such process"
        );
        let e = Error::NotPython {
            pid: 8,
            command: "sleep 100".into(),
            searched_children: true,
            detail: String::new(),
        };
        assert_eq!(
            e.to_string(),
            "process 8 (sleep 100) is not a Python process and none of its subprocesses is: no CPython interpreter found in its memory"
        );
    }
}
