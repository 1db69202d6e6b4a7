//! One look at every thread of a process and of its Python descendants,
//! in bounded time: the stack of a hung worker.

use std::fmt;
use std::sync::mpsc;
use std::time::Duration;

use crate::error::Error;
use crate::native::{self, NativeReader, NativeStacks};
use crate::procfs;
use crate::spy::{Lines, Spy};
use crate::stack::{Frame, ThreadStack};
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
    /// Native (C/C++) frames merged under the Python ones, and the native
    /// stacks of the asked-for process when it is not Python (the Rust
    /// service above the workers) (the `native` feature;
    /// [`Error::NativeUnavailable`] without it). Unwinding needs the
    /// process stopped, so it implies [`pause`](Self::pause).
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
    /// The waits of the asked-for process (when it is not Python) on its
    /// workers that were proven when it was read.
    pub waits: Vec<ProvenWait>,
}

/// A wait of the process above the workers on one of them that was read,
/// not guessed: a thread of it blocked reading a pipe (or named pipe)
/// whose write end that worker holds.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProvenWait {
    /// The waiting thread (the kernel's id).
    pub thread: u32,
    /// Its name, the kernel's.
    pub name: Option<String>,
    /// The file descriptor it is blocked reading.
    pub fd: i32,
    /// The worker that holds the pipe's write end.
    pub worker: u32,
}

impl fmt::Display for ProvenWait {
    /// `thread T "name" is blocked reading fd F, a pipe worker W writes to`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "thread {}", self.thread)?;
        if let Some(name) = &self.name {
            write!(f, " \"{name}\"")?;
        }
        write!(
            f,
            " is blocked reading fd {}, a pipe worker {} writes to",
            self.fd, self.worker
        )
    }
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
    /// For the asked-for process when it is not Python: its threads, with
    /// their names and states, and with [`DumpOptions::native`] their
    /// native stacks (or why they could not be unwound).
    pub native: Option<Result<NativeStacks, Error>>,
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

/// The process above the workers (not Python) beside its workers, as
/// read: its threads' states, each worker's, and the waits on a worker
/// that were proven. That the parent is idle while a worker is busy is
/// no proof that it waits for that worker; only [`ParentWait::waits`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParentWait {
    /// The parent (the asked-for process).
    pub pid: u32,
    /// Its threads.
    pub threads: usize,
    /// Those of its threads that were idle (parked, waiting).
    pub idle: usize,
    /// Each Python process below it, in the dump's order.
    pub workers: Vec<WorkerState>,
    /// Its waits on a worker that were proven (a thread blocked reading a
    /// pipe the worker writes to); empty when none was.
    pub waits: Vec<ProvenWait>,
}

/// One Python process below a [`ParentWait`]'s parent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerState {
    /// The worker.
    pub pid: u32,
    /// Some thread of it was active (running Python frames).
    pub busy: bool,
    /// How many of its threads were active.
    pub active_threads: usize,
    /// The innermost Python frame of its first active thread (busy), else
    /// of its first thread (where it waits); its innermost frame when it
    /// has no Python frame (see [`in_python`](Self::in_python)).
    pub at: Option<Frame>,
    /// Whether `at` is a Python frame. False when that thread's stack
    /// held native frames only (`--native`): the interpreter outside
    /// Python code, as in the collection of its objects at exit.
    pub in_python: bool,
}

impl Dump {
    /// The processes whose stacks were read.
    pub fn python_processes(&self) -> impl Iterator<Item = (&ProcessDump, &PythonStacks)> {
        self.processes
            .iter()
            .filter_map(|p| p.outcome.as_ref().ok().map(|s| (p, s)))
    }

    /// The asked-for process's threads, when it is not Python and they
    /// were read.
    pub fn parent_threads(&self) -> Option<&NativeStacks> {
        self.processes.first()?.native.as_ref()?.as_ref().ok()
    }

    /// Whether each worker is busy while the parent (not Python) waits:
    /// `None` unless the asked-for process is not Python, its threads were
    /// read and a Python process is below it.
    pub fn parent_wait(&self) -> Option<ParentWait> {
        let parent = self.parent_threads()?;
        let workers: Vec<WorkerState> = self
            .python_processes()
            .map(|(p, s)| {
                let active: Vec<&ThreadStack> = s.threads.iter().filter(|t| t.active).collect();
                let shown = active.first().copied().or(s.threads.first());
                let python = shown.and_then(|t| t.frames.iter().find(|f| f.line > 0));
                WorkerState {
                    pid: p.pid,
                    busy: !active.is_empty(),
                    active_threads: active.len(),
                    // The innermost Python frame (a line), under any
                    // native ones `--native` merged in.
                    at: python.or(shown.and_then(|t| t.frames.first())).cloned(),
                    in_python: python.is_some(),
                }
            })
            .collect();
        if workers.is_empty() {
            return None;
        }
        Some(ParentWait {
            pid: self.processes[0].pid,
            threads: parent.threads.len(),
            idle: parent.idle_threads(),
            workers,
            waits: self.waits.clone(),
        })
    }
}

impl fmt::Display for ParentWait {
    /// `Process P's threads: I of N idle; its Python workers:`, a line per
    /// worker (busy or idle, and where), then each proven wait of P on a
    /// worker, or that none was read: an idle parent beside a busy worker
    /// is not said to wait for it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Process {}'s threads: {} of {} idle; its Python workers:",
            self.pid, self.idle, self.threads
        )?;
        for w in &self.workers {
            let at = match &w.at {
                Some(f) if w.in_python => format!(", in {f}"),
                Some(f) => format!(
                    ", in {f}, no Python frame on its stack (the interpreter outside Python code, as at exit)"
                ),
                None => String::new(),
            };
            if w.busy {
                writeln!(
                    f,
                    "    worker {} is busy ({} active thread{}){at}",
                    w.pid,
                    w.active_threads,
                    if w.active_threads == 1 { "" } else { "s" }
                )?;
            } else {
                writeln!(f, "    worker {} is idle{at}", w.pid)?;
            }
        }
        if self.waits.is_empty() {
            return writeln!(
                f,
                "Nothing read shows process {} waiting on a worker (no thread of it was blocked reading a pipe a worker writes to).",
                self.pid
            );
        }
        for w in &self.waits {
            writeln!(
                f,
                "Process {} waits on worker {}: its {w}.",
                self.pid, w.worker
            )?;
        }
        Ok(())
    }
}

/// The waits of `parent` on `workers` that can be proven from `/proc`:
/// each thread of it blocked reading a pipe whose write end a worker
/// holds. Nothing is claimed where nothing is proven: a thread blocked on
/// a socket, or on a pipe no worker writes to, is left out.
pub fn proven_waits(parent: u32, workers: &[u32]) -> Vec<ProvenWait> {
    let mut waits = Vec::new();
    for task in procfs::tasks(parent).into_iter().filter(|t| t.state != 'R') {
        let Some(fd) = procfs::blocked_read_fd(parent, task.tid) else {
            continue;
        };
        let Some(pipe) = procfs::pipe_read_end(parent, fd) else {
            continue;
        };
        for &worker in workers {
            if procfs::writes_to_pipe(worker, pipe) {
                waits.push(ProvenWait {
                    thread: task.tid,
                    name: Some(crate::stack::printable(task.name.clone()))
                        .filter(|n| !n.is_empty()),
                    fd,
                    worker,
                });
            }
        }
    }
    waits
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
        Ok((processes, waits)) => {
            let _ = reader.join();
            into_result(subprocesses, options.native, processes, waits)
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

fn read_tree(pid: u32, subprocesses: bool, how: How) -> (Vec<ProcessDump>, Vec<ProvenWait>) {
    let mut root = read_one(pid, None, how);
    if matches!(root.outcome, Err(Error::NotPython { .. })) {
        root.native = Some(if how.native {
            NativeReader::attach(pid).and_then(|mut r| r.read(false))
        } else {
            native::listed(pid)
        });
    }
    let mut out = vec![root];
    if subprocesses {
        for (child, parent) in procfs::descendants(pid) {
            out.push(read_one(child, Some(parent), how));
        }
    }
    let waits = if out[0].native.is_some() {
        let workers: Vec<u32> = out[1..]
            .iter()
            .filter(|p| p.outcome.is_ok())
            .map(|p| p.pid)
            .collect();
        proven_waits(pid, &workers)
    } else {
        Vec::new()
    };
    (out, waits)
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
        native: None,
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

fn into_result(
    subprocesses: bool,
    native: bool,
    mut processes: Vec<ProcessDump>,
    waits: Vec<ProvenWait>,
) -> Result<Dump, Error> {
    let parent_unwound = native && matches!(processes[0].native, Some(Ok(_)));
    if parent_unwound || processes.iter().any(|p| p.outcome.is_ok()) {
        return Ok(Dump { processes, waits });
    }
    if let Some(Err(e)) = processes[0].native.take()
        && native
    {
        // Asked for its native stacks, and they were refused: that says
        // what to allow.
        return Err(e);
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
                Err(Error::NotPython { .. }) => match &p.native {
                    Some(Ok(threads)) => write!(f, "{threads}")?,
                    Some(Err(e)) => {
                        writeln!(f, "(not a Python process; its threads: {e})")?;
                    }
                    None => writeln!(f, "(not a Python process)")?,
                },
                Err(e) => writeln!(f, "(no Python stack: {e})")?,
            }
        }
        if let Some(wait) = self.parent_wait() {
            writeln!(f)?;
            write!(f, "{wait}")?;
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
                    native: None,
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
                    native: None,
                },
            ],
            waits: vec![],
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

    fn thread(tid: u64, name: &str, active: bool, frames: Vec<Frame>) -> ThreadStack {
        ThreadStack {
            thread_id: tid,
            os_thread_id: Some(tid),
            name: Some(name.into()),
            active,
            owns_gil: false,
            frames,
        }
    }

    use crate::testing::frame;

    #[test]
    fn a_waiting_parent_is_shown_with_its_threads_and_whether_each_worker_is_busy() {
        let parked = vec![
            frame("syscall", "libc.so.6", 0),
            frame(
                "tokio::runtime::park::Inner::park",
                "tokio/src/runtime/park.rs",
                116,
            ),
        ];
        let worker = |pid: u32, active: bool, at: &str| ProcessDump {
            pid,
            parent: Some(10),
            chain: vec![],
            command: "python3 -m mlworker".into(),
            outcome: Ok(PythonStacks {
                version: "3.11.7".into(),
                exe: "/usr/bin/python3.11".into(),
                threads: vec![thread(
                    u64::from(pid),
                    "MainThread",
                    active,
                    vec![frame(at, "mlworker/__main__.py", 20)],
                )],
            }),
            native: None,
        };
        let d = Dump {
            processes: vec![
                ProcessDump {
                    pid: 10,
                    parent: None,
                    chain: vec![],
                    command: "ml-service --serve".into(),
                    outcome: Err(Error::NotPython {
                        pid: 10,
                        command: "ml-service --serve".into(),
                        searched_children: false,
                        detail: String::new(),
                    }),
                    native: Some(Ok(NativeStacks {
                        exe: "/bin/ml-service".into(),
                        threads: vec![
                            thread(10, "ml-service", false, parked.clone()),
                            thread(12, "tokio-runtime-w", false, parked),
                        ],
                        unwound: true,
                    })),
                },
                worker(11, true, "tokenize"),
                worker(13, false, "readline"),
            ],
            waits: vec![],
        };
        let text = d.to_string();
        assert!(
            text.starts_with(
                "Process 10: ml-service --serve\n\
                 Native (not Python): /bin/ml-service, 2 threads (2 idle), stopped while unwound\n\
                 \n\
                 Thread 10 (idle): \"ml-service\"\n    syscall (libc.so.6)\n"
            ),
            "{text}"
        );
        assert!(text.contains("0 of 4 frames [unknown]"), "{text}");
        // Idle beside a busy worker, and nothing read proves a wait: the
        // states alone, no "while it waits".
        assert!(
            text.ends_with(
                "Process 10's threads: 2 of 2 idle; its Python workers:\n\
                 \x20   worker 11 is busy (1 active thread), in tokenize (mlworker/__main__.py:20)\n\
                 \x20   worker 13 is idle, in readline (mlworker/__main__.py:20)\n\
                 Nothing read shows process 10 waiting on a worker (no thread of it was blocked reading a pipe a worker writes to).\n"
            ),
            "{text}"
        );
        assert!(!text.contains("While"), "{text}");
        let wait = d.parent_wait().expect("a parent above workers");
        assert_eq!((wait.threads, wait.idle), (2, 2));
        assert_eq!(
            wait.workers.iter().map(|w| w.busy).collect::<Vec<_>>(),
            [true, false]
        );
        // A proven wait (a thread blocked reading a worker's pipe) is said.
        let d = Dump {
            waits: vec![ProvenWait {
                thread: 15,
                name: Some("spawn-stdout-11".into()),
                fd: 7,
                worker: 11,
            }],
            ..d
        };
        assert!(
            d.to_string().ends_with(
                "Process 10 waits on worker 11: its thread 15 \"spawn-stdout-11\" is blocked reading fd 7, a pipe worker 11 writes to.\n"
            ),
            "{d}"
        );
    }

    /// A worker read with `--native` in the collector: the Python function
    /// beneath `gc_collect_main` is where it is; one with native frames
    /// only (the interpreter collecting at exit) is said to have no
    /// Python frame, not to be busy in a function of its own.
    #[test]
    fn a_worker_in_the_collector_is_placed_in_its_python_function_or_said_to_have_none() {
        let worker = |pid: u32, frames: Vec<Frame>| ProcessDump {
            pid,
            parent: Some(10),
            chain: vec![],
            command: "python3 worker.py".into(),
            outcome: Ok(PythonStacks {
                version: "3.11.7".into(),
                exe: "/usr/bin/python3.11".into(),
                threads: vec![thread(u64::from(pid), "MainThread", true, frames)],
            }),
            native: None,
        };
        let gc = frame("gc_collect_main", "libpython3.11.so.1.0", 0);
        let libc = frame("0x7f0a1b2c524a", "libc.so.6", 0);
        let d = Dump {
            processes: vec![
                ProcessDump {
                    pid: 10,
                    parent: None,
                    chain: vec![],
                    command: "ml-service".into(),
                    outcome: Err(Error::NotPython {
                        pid: 10,
                        command: "ml-service".into(),
                        searched_children: false,
                        detail: String::new(),
                    }),
                    native: Some(Ok(NativeStacks {
                        exe: "/bin/ml-service".into(),
                        threads: vec![thread(10, "ml-service", false, vec![])],
                        unwound: false,
                    })),
                },
                worker(
                    11,
                    vec![
                        gc.clone(),
                        frame("gc_collect", "libpython3.11.so.1.0", 0),
                        frame("collect_in_a_loop", "gc_worker.py", 12),
                        frame("<module>", "gc_worker.py", 20),
                        libc.clone(),
                    ],
                ),
                worker(12, vec![gc, libc]),
            ],
            waits: vec![],
        };
        let text = d.parent_wait().expect("workers below").to_string();
        assert!(
            text.contains(
                "worker 11 is busy (1 active thread), in collect_in_a_loop (gc_worker.py:12)\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("worker 12 is busy (1 active thread), in gc_collect_main (libpython3.11.so.1.0), no Python frame on its stack"),
            "{text}"
        );
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
