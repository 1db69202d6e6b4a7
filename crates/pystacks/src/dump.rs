//! One look at every thread of a process and of its Python descendants,
//! in bounded time: the stack of a hung worker.

use std::fmt;
use std::sync::mpsc;
use std::time::Duration;

use crate::error::Error;
use crate::procfs;
use crate::spy::{Lines, Spy};
use crate::stack::ThreadStack;
use crate::tree::{ProcessLabel, parent_chain};

/// How to dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpOptions {
    /// The most the whole dump may take; past it, [`Error::Timeout`].
    pub timeout: Duration,
    /// Also dump the process's descendants (the Python ones; the others
    /// are listed as not Python).
    pub subprocesses: bool,
    /// Pause each process (ptrace) while it is read; see
    /// [`SamplerOptions::pause`](crate::SamplerOptions::pause). Off by
    /// default: a hung process's stacks do not change under the reader.
    pub pause: bool,
    /// Native (C/C++) frames merged under the Python ones (the `native`
    /// feature; [`Error::NativeUnavailable`] without it). Unwinding needs
    /// the process stopped, so it implies [`pause`](Self::pause).
    pub native: bool,
    /// Fill [`ProcessDump::chain`]: every process's parents up to the
    /// first process, with their command lines (who started this worker).
    pub parent_chains: bool,
}

impl Default for DumpOptions {
    /// 10 s, descendants included, no pausing.
    fn default() -> Self {
        DumpOptions {
            timeout: Duration::from_secs(10),
            subprocesses: true,
            pause: false,
            native: false,
            parent_chains: false,
        }
    }
}

impl DumpOptions {
    /// The defaults with another timeout.
    pub fn with_timeout(timeout: Duration) -> Self {
        DumpOptions {
            timeout,
            ..Self::default()
        }
    }
}

/// Every process that was looked at, the asked-for one first, then its
/// descendants, parents before children.
#[derive(Debug)]
#[non_exhaustive]
pub struct Dump {
    /// One entry per process.
    pub processes: Vec<ProcessDump>,
}

/// One process of a [`Dump`].
#[derive(Debug)]
#[non_exhaustive]
pub struct ProcessDump {
    /// The process.
    pub pid: u32,
    /// Its parent, for a descendant of the asked-for process.
    pub parent: Option<u32>,
    /// Its parents, its own parent first, up to the first process, with
    /// [`DumpOptions::parent_chains`] (empty otherwise).
    pub chain: Vec<ProcessLabel>,
    /// Its command line.
    pub command: String,
    /// Its stacks, or why they could not be read (not Python, gone,
    /// denied, ...).
    pub outcome: Result<PythonStacks, Error>,
}

/// The Python side of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PythonStacks {
    /// The interpreter's version, e.g. `3.11.7`.
    pub version: String,
    /// The interpreter's executable.
    pub exe: String,
    /// Every Python thread, the oldest (usually `MainThread`) first.
    pub threads: Vec<ThreadStack>,
}

impl Dump {
    /// The processes whose stacks were read.
    pub fn python_processes(&self) -> impl Iterator<Item = (&ProcessDump, &PythonStacks)> {
        self.processes
            .iter()
            .filter_map(|p| p.outcome.as_ref().ok().map(|s| (p, s)))
    }
}

/// Reads every thread's Python stack of `pid` and, with
/// [`DumpOptions::subprocesses`], of its Python descendants. A read that
/// fails for no lasting reason (memory changing under the reader) is
/// retried twice.
///
/// `Err` only when no process could be read: the asked-for process's own
/// error ([`Error::PermissionDenied`], [`Error::ProcessGone`],
/// [`Error::NotPython`] when neither it nor a descendant is Python, ...),
/// or [`Error::Timeout`] when the whole dump outlived
/// [`DumpOptions::timeout`] (its reader thread is then left to finish on
/// its own; it holds nothing but the target's ptrace attachment, which it
/// releases when its read returns).
pub fn dump(pid: u32, options: &DumpOptions) -> Result<Dump, Error> {
    Error::check_access(pid)?;
    if options.native && !crate::NATIVE {
        return Err(Error::NativeUnavailable);
    }
    let (tx, rx) = mpsc::channel();
    let subprocesses = options.subprocesses;
    let how = How {
        pause: options.pause,
        native: options.native,
        chains: options.parent_chains,
    };
    let reader = std::thread::Builder::new()
        .name("pystacks-dump".into())
        .spawn(move || {
            let _ = tx.send(read_tree(pid, subprocesses, how));
        })
        .map_err(Error::Thread)?;
    match rx.recv_timeout(options.timeout) {
        Ok(processes) => {
            let _ = reader.join();
            into_result(subprocesses, processes)
        }
        Err(_) => Err(Error::Timeout {
            pid,
            after: options.timeout,
        }),
    }
}

/// How each process is read.
#[derive(Debug, Clone, Copy)]
struct How {
    pause: bool,
    native: bool,
    chains: bool,
}

fn read_tree(pid: u32, subprocesses: bool, how: How) -> Vec<ProcessDump> {
    let mut out = vec![read_one(pid, None, how)];
    if subprocesses {
        for (child, parent) in procfs::descendants(pid) {
            out.push(read_one(child, Some(parent), how));
        }
    }
    out
}

fn read_one(pid: u32, parent: Option<u32>, how: How) -> ProcessDump {
    let command = procfs::cmdline(pid);
    ProcessDump {
        pid,
        parent,
        command,
        chain: if how.chains {
            parent_chain(pid)
        } else {
            Vec::new()
        },
        outcome: read_stacks(pid, how),
    }
}

/// Attaches and reads, retrying a read that failed for no lasting reason
/// (memory changing under the reader, an interpreter still starting).
fn read_stacks(pid: u32, how: How) -> Result<PythonStacks, Error> {
    const ATTEMPTS: u32 = 3;
    let mut attempt = 1;
    // A process that maps no Python (a shell, a Rust service) is not
    // handed to py-spy: it would search its memory for an interpreter.
    if procfs::maps_mention_python(pid) == Some(false) {
        return Err(Error::NotPython {
            pid,
            command: procfs::cmdline(pid),
            searched_children: false,
            detail: String::new(),
        });
    }
    loop {
        let result = Spy::attach(pid, Lines::Current, how.pause, how.native).and_then(|mut spy| {
            let mut threads = spy.threads()?;
            threads.reverse();
            Ok(PythonStacks {
                version: spy.version(),
                exe: spy.exe(),
                threads,
            })
        });
        match result {
            Err(Error::Read { .. }) if attempt < ATTEMPTS => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

fn into_result(subprocesses: bool, mut processes: Vec<ProcessDump>) -> Result<Dump, Error> {
    if processes.iter().any(|p| p.outcome.is_ok()) {
        return Ok(Dump { processes });
    }
    let root = processes.swap_remove(0);
    match root.outcome {
        Err(Error::NotPython {
            pid,
            command,
            detail,
            ..
        }) => Err(Error::NotPython {
            pid,
            command,
            searched_children: subprocesses,
            detail,
        }),
        Err(e) => Err(e),
        Ok(_) => unreachable!("no process was read, the root included"),
    }
}

impl fmt::Display for Dump {
    /// As `py-spy dump` writes it: per process a header (`Process PID:
    /// command`, the parent chain or the parent, `Python vX (exe)`), then
    /// every thread; a process that is not Python says so in one line, one
    /// that could not be read says why.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.processes.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            writeln!(f, "Process {}: {}", p.pid, p.command)?;
            if !p.chain.is_empty() {
                let chain: Vec<String> = p.chain.iter().map(ToString::to_string).collect();
                writeln!(f, "Parent chain: {}", chain.join(" < "))?;
            } else if let Some(parent) = p.parent {
                writeln!(f, "Parent Process {parent}")?;
            }
            match &p.outcome {
                Ok(stacks) => {
                    writeln!(f, "Python v{} ({})", stacks.version, stacks.exe)?;
                    for t in &stacks.threads {
                        writeln!(f)?;
                        write!(f, "{t}")?;
                    }
                }
                Err(Error::NotPython { .. }) => writeln!(f, "(not a Python process)")?,
                Err(e) => writeln!(f, "(no Python stack: {e})")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::Frame;

    #[test]
    fn a_dump_renders_processes_threads_and_reasons() {
        let d = Dump {
            processes: vec![
                ProcessDump {
                    pid: 10,
                    parent: None,
                    chain: vec![],
                    command: "python3 parent.py".into(),
                    outcome: Ok(PythonStacks {
                        version: "3.11.7".into(),
                        exe: "/usr/bin/python3.11".into(),
                        threads: vec![ThreadStack {
                            thread_id: 1,
                            os_thread_id: Some(10),
                            name: Some("MainThread".into()),
                            active: false,
                            owns_gil: false,
                            frames: vec![Frame {
                                name: "wait".into(),
                                filename: "/lib/subprocess.py".into(),
                                short_filename: "subprocess.py".into(),
                                line: 1264,
                            }],
                        }],
                    }),
                },
                ProcessDump {
                    pid: 11,
                    parent: Some(10),
                    chain: vec![],
                    command: "sleep 100".into(),
                    outcome: Err(Error::NotPython {
                        pid: 11,
                        command: "sleep 100".into(),
                        searched_children: false,
                        detail: String::new(),
                    }),
                },
            ],
        };
        assert_eq!(
            d.to_string(),
            "Process 10: python3 parent.py\n\
             Python v3.11.7 (/usr/bin/python3.11)\n\
             \n\
             Thread 10 (idle): \"MainThread\"\n    wait (subprocess.py:1264)\n\
             \n\
             Process 11: sleep 100\n\
             Parent Process 10\n\
             (not a Python process)\n"
        );
        assert_eq!(d.python_processes().count(), 1);
    }

    #[test]
    fn a_gone_process_is_an_error_at_once() {
        let e = dump(u32::MAX - 1, &DumpOptions::default()).unwrap_err();
        assert!(matches!(e, Error::ProcessGone { .. }), "{e}");
        assert!(e.to_string().starts_with("process"), "{e}");
    }

    #[test]
    fn a_process_that_is_not_python_says_so() {
        let mut child = std::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("cat runs");
        let e = dump(child.id(), &DumpOptions::default()).unwrap_err();
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            matches!(
                e,
                Error::NotPython {
                    searched_children: true,
                    ..
                }
            ),
            "{e}"
        );
    }
}
