//! A worker started: its process group, its stdio, its cgroup and CPU set,
//! and the reader threads that drain it from the first byte.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::process::ChildStdin;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use super::Worker;
use super::failure::spawn_error;
use crate::Escalation;
use crate::error::Error;
use crate::readers::{self, Event, ReadyScan, Source, Tail, Watched};
use crate::reap::{self, ExitInfo};
use crate::transport::{self, Link, Transport};
use crate::{Command, group, monotonic_ns};
use timeline::Timeline;

/// The file the worker's stderr is copied to, created, with its name for
/// messages; `None` when the command keeps no copy.
pub(super) fn stderr_file(cmd: &Command) -> Result<Option<(File, String)>, Error> {
    let Some(path) = &cmd.stderr_file else {
        return Ok(None);
    };
    let f = File::create(path).map_err(|e| {
        spawn_error(
            cmd,
            io::Error::new(
                e.kind(),
                format!("cannot create the stderr file {}: {e}", path.display()),
            ),
        )
    })?;
    Ok(Some((f, path.display().to_string())))
}

/// The child process of `cmd`, started (in a cgroup of its own under
/// its limits, returned beside it), and [`monotonic_ns`] just before.
pub(super) fn start_child(
    cmd: &Command,
) -> Result<(std::process::Child, Option<crate::cgroup::Cgroup>, u64), Error> {
    let cgroup_error = |e: crate::cgroup::CgroupError| {
        spawn_error(cmd, io::Error::new(io::ErrorKind::PermissionDenied, e))
    };
    let cgroup = if cmd.limits.is_set() {
        Some(crate::cgroup::Cgroup::create(&cmd.limits).map_err(cgroup_error)?)
    } else {
        None
    };
    let entry = cgroup
        .as_ref()
        .map(|c| c.entry())
        .transpose()
        .map_err(cgroup_error)?;
    let mut std_cmd = cmd
        .to_std(entry.as_ref().map(|e| e.raw()))
        .map_err(|e| spawn_error(cmd, io::Error::new(io::ErrorKind::InvalidInput, e)))?;
    let spawned_at_ns = monotonic_ns();
    let child = std_cmd.spawn().map_err(|e| match &cmd.cpus {
        // sched_setaffinity in the child refused the set (no CPU of it
        // is one this process may use).
        Some(cpus) if e.raw_os_error() == Some(libc::EINVAL) && entry.is_none() => spawn_error(
            cmd,
            io::Error::new(
                io::ErrorKind::InvalidInput,
                crate::affinity::AffinityError::Pin {
                    who: "the worker",
                    cpus: crate::affinity::cpu_list(cpus),
                    source: e,
                },
            ),
        ),
        _ if entry.is_some() => spawn_error(
            cmd,
            io::Error::new(
                e.kind(),
                format!(
                    "{e} (the child could not start, or could not join its cgroup {})",
                    cgroup
                        .as_ref()
                        .map(|c| c.dirs()[0].display().to_string())
                        .unwrap_or_default()
                ),
            ),
        ),
        _ => spawn_error(cmd, e),
    })?;
    // The child has exec'd: its time joining the cgroup is the harness's
    // placing it, not the worker's start-up, so its life starts after it.
    let join_ns = entry.as_ref().and_then(|e| e.join_ns());
    drop(entry);
    let mut cgroup = cgroup;
    if let Some(cg) = cgroup.as_mut() {
        cg.join_ns = join_ns;
    }
    Ok((child, cgroup, spawned_at_ns + join_ns.unwrap_or(0)))
}

/// Ends and reaps a child that could not be made a worker, and the
/// error that says why.
pub(super) fn abandon(cmd: &Command, mut child: std::process::Child, e: io::Error) -> Error {
    let pid = child.id() as i32;
    let _ = group::killpg(pid, libc::SIGKILL);
    let _ = child.wait();
    group::unregister(pid);
    spawn_error(cmd, e)
}

/// What the worker and its drains share: the stderr tail, the event
/// channel, and the flags that tell the drains what to look for.
pub(super) struct Channels {
    /// The end of stderr, kept for errors.
    pub(super) tail: Arc<Mutex<Tail>>,
    /// The event channel's sender.
    pub(super) tx: SyncSender<Event>,
    /// Its receiver.
    pub(super) frames: Receiver<Event>,
    /// Whether stdout is the protocol.
    pub(super) stdout_live: Arc<AtomicBool>,
    /// Whether the stderr drain still looks for a ready line.
    pub(super) scan_live: Arc<AtomicBool>,
}

/// The process just started: its pid, when, and its cgroup.
pub(super) struct Start {
    pub(super) pid: u32,
    pub(super) spawned_at_ns: u64,
    pub(super) cgroup: Option<crate::cgroup::Cgroup>,
}

/// The threads a worker's start leaves running.
pub(super) struct Drains {
    /// The stderr drain.
    pub(super) stderr_thread: Watched,
    /// The stdout reader.
    pub(super) stdout_thread: Watched,
    /// The waiter's report of the leader's exit.
    pub(super) exit_rx: Receiver<ExitInfo>,
    /// Set by the waiter when the leader exits.
    pub(super) leader_exited: Arc<AtomicBool>,
}

impl Channels {
    /// The channels of a worker started from `cmd`.
    fn new(cmd: &Command) -> Channels {
        let (tx, frames) = readers::events();
        Channels {
            tail: Arc::new(Mutex::new(Tail::new(cmd.stderr_tail_bytes))),
            tx,
            frames,
            stdout_live: Arc::new(AtomicBool::new(cmd.transport == Transport::Stdio)),
            scan_live: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Starts the stderr drain (copying to `file`, watching for a tcp
    /// ready line), the stdout reader and the waiter of worker `pid`.
    fn drain(
        &self,
        pid: u32,
        stdout: std::process::ChildStdout,
        stderr: std::process::ChildStderr,
        file: Option<(File, String)>,
        transport: Transport,
    ) -> io::Result<Drains> {
        let scan = ReadyScan {
            tx: self.tx.clone(),
            tcp_only: transport == Transport::Stdio,
            eof_matters: transport == Transport::Tcp,
            live: Arc::clone(&self.scan_live),
        };
        let stderr_thread =
            readers::spawn_stderr(pid, stderr, Arc::clone(&self.tail), file, Some(scan))?;
        let stdout_thread = readers::spawn_reader(
            pid,
            Source::Stdout,
            stdout,
            self.tx.clone(),
            Arc::clone(&self.stdout_live),
        )?;
        let (exit_rx, leader_exited) = reap::spawn_waiter(pid as i32, self.tx.clone())?;
        Ok(Drains {
            stderr_thread,
            stdout_thread,
            exit_rx,
            leader_exited,
        })
    }
}

impl Worker {
    /// Starts `cmd` in its own process group with piped stdin, stdout and
    /// stderr, and starts draining stdout and stderr at once (stderr also
    /// watched for a tcp ready line, see [`Transport`]).
    pub fn spawn(cmd: &Command) -> Result<Worker, Error> {
        let file = stderr_file(cmd)?;
        reap::become_subreaper();
        let (mut child, cgroup, spawned_at_ns) = start_child(cmd)?;
        let pid = child.id();
        group::register(pid as i32);

        let stdin = child.stdin.take().expect("stdin is piped");
        // Writes are bounded by `write_timeout`: the pipe is non-blocking
        // and a full pipe is waited on with poll(2).
        if let Err(e) = transport::set_nonblocking(&stdin) {
            return Err(abandon(cmd, child, e));
        }
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let channels = Channels::new(cmd);
        let drains = match channels.drain(pid, stdout, stderr, file, cmd.transport) {
            Ok(d) => d,
            // No waiter thread runs: end and reap the child here.
            Err(e) => return Err(abandon(cmd, child, e)),
        };
        // `child` is dropped without waiting: the waiter thread reaps it.
        drop(child);
        Ok(Worker::started(
            cmd,
            Start {
                pid,
                spawned_at_ns,
                cgroup,
            },
            stdin,
            channels,
            drains,
        ))
    }

    /// The worker just started as `pid`, its drains running; `stdin` is
    /// the protocol for stdio, held idle for tcp.
    pub(super) fn started(
        cmd: &Command,
        start: Start,
        stdin: ChildStdin,
        channels: Channels,
        drains: Drains,
    ) -> Worker {
        let Start {
            pid,
            spawned_at_ns,
            cgroup,
        } = start;
        let (link, idle_stdin, wire) = match cmd.transport {
            Transport::Stdio => (Some(Link::Stdio(stdin)), None, transport::STDIO),
            Transport::Tcp => (None, Some(stdin), transport::TCP),
        };
        Worker {
            command: cmd.display(),
            instruments: cmd.instruments().to_vec(),
            pid,
            max_noise: cmd.max_noise_lines,
            write_timeout: cmd.write_timeout,
            wire,
            link,
            transport: cmd.transport,
            idle_stdin,
            stdout_live: channels.stdout_live,
            scan_live: channels.scan_live,
            stdout_gone: false,
            connected: false,
            connected_ns: None,
            events_tx: Some(channels.tx),
            connect_timeout: cmd.connect_timeout,
            socket_thread: None,
            frames: Some(channels.frames),
            inbound_ended: false,
            exit_seen: false,
            exit_rx: drains.exit_rx,
            leader_exited: drains.leader_exited,
            exit: None,
            stdout_thread: Some(drains.stdout_thread),
            stderr_thread: Some(drains.stderr_thread),
            tail: channels.tail,
            noise: Vec::new(),
            pending: VecDeque::new(),
            rss_at_ready: None,
            cgroup,
            confinement: None,
            on_timeout: None,
            timeline: Timeline::spawned_at(spawned_at_ns),
            escalation: Escalation::None,
            diagnostics: Vec::new(),
            ended: false,
        }
    }
}
