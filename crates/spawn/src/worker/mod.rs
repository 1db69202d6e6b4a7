//! A live worker: spawn, ready, requests, shutdown, and the end of it all.
//!
//! This module is the lifecycle; its jobs beside it are modules of their
//! own: the records it hands out (`records`), the errors it builds
//! (`failure`), what it reads in `/proc` (`procfs`), and the wire it
//! talks over (the crate's `transport`).

mod failure;
mod procfs;
mod records;

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io;
use std::process::ChildStdin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use worker_proto::{
    Inbound, MAX_LINE_BYTES, Message, RawLine, Ready, Reply, Request, encode, escaped_prefix,
};

use crate::Escalation;
use crate::error::{Error, ErrorKind, Stage};
use crate::readers::{self, Event, ReadyScan, Source, Tail, Watched};
use crate::reap::{self, ExitInfo};
use crate::transport::{self, Link, TcpLink, Transport};
use crate::{Command, group, monotonic_ns};
use failure::{cut, describe, lost_waiter, spawn_error};
use procfs::vm_rss_bytes;
pub use records::{Confinement, Exchange, Finished, NoiseLine, ShutdownPolicy, Stamped, Stop};
use timeline::{ReadyMark, RequestMark, Timeline};

/// After stdout ended, how long the worker is given at least to exit on its
/// own (so the error carries its real exit status) before it is killed.
const EXIT_AFTER_EOF: Duration = Duration::from_millis(500);
/// After the leader exited, how long stdout may stay silent before the
/// harness stops waiting for its EOF (a process that left the group holds
/// it open).
const STDOUT_AFTER_EXIT: Duration = Duration::from_millis(500);
/// How long the end of a worker waits for its reader threads once the
/// group is gone; a thread still blocked then (on a pipe held by a process
/// that left the group) is detached.
const JOIN_BOUND: Duration = Duration::from_secs(1);
/// Longest noise line kept, in bytes (cut at a character boundary).
const NOISE_LINE_MAX: usize = 4096;

/// The hook run when a timeout fires, before the kill; given the pid, it
/// returns diagnostic text (a stack dump, ...) for [`ErrorDetail::diagnostics`](crate::ErrorDetail::diagnostics).
pub type TimeoutHook = Box<dyn FnMut(u32) -> Option<String> + Send>;

/// A live worker. Dropping it kills (SIGKILL) and reaps its whole process
/// group; so do all its errors.
pub struct Worker {
    command: String,
    pid: u32,
    max_noise: usize,
    /// The way to the worker (its stdin, or the tcp connection); `None`
    /// once closed, and before the connection of a worker started for tcp.
    link: Option<Link>,
    /// The transport the worker was started for.
    transport: Transport,
    /// A tcp worker's stdin, held open (not the protocol) until the end.
    idle_stdin: Option<ChildStdin>,
    /// Whether stdout is the protocol (stdio; cleared for tcp, so its
    /// reader only drains it).
    stdout_live: Arc<AtomicBool>,
    /// Whether the stderr drain still looks for a ready line.
    scan_live: Arc<AtomicBool>,
    /// stdout ended while a tcp ready line on stderr could still come.
    stdout_gone: bool,
    /// The protocol runs on the tcp connection.
    connected: bool,
    /// Right after the tcp connection was made.
    connected_ns: Option<u64>,
    /// A sender on the event channel for the connection's reader, until
    /// the ready line.
    events_tx: Option<SyncSender<Event>>,
    connect_timeout: Duration,
    socket_thread: Option<Watched>,
    /// The words errors use for the wire.
    wire: transport::Wire,
    /// How long one line's write to the worker may block.
    write_timeout: Duration,
    frames: Option<Receiver<Event>>,
    /// The stream that carries the protocol ended (or failed).
    inbound_ended: bool,
    /// The stdout channel reported the leader's exit.
    exit_seen: bool,
    exit_rx: Receiver<ExitInfo>,
    /// Set by the waiter the moment the leader exits.
    leader_exited: Arc<AtomicBool>,
    exit: Option<ExitInfo>,
    stdout_thread: Option<Watched>,
    stderr_thread: Option<Watched>,
    tail: Arc<Mutex<Tail>>,
    noise: Vec<NoiseLine>,
    /// Unanswered requests, oldest first, as indices into `timeline.requests`.
    /// with the `id` each request carried, if any.
    pending: VecDeque<(usize, Option<serde_json::Value>)>,
    rss_at_ready: Option<u64>,
    /// The worker's own cgroup under its limits, removed after its exit.
    cgroup: Option<crate::cgroup::Cgroup>,
    /// What the cgroup said after the exit, read before its removal.
    confinement: Option<Confinement>,
    on_timeout: Option<TimeoutHook>,
    timeline: Timeline,
    escalation: Escalation,
    diagnostics: Vec<String>,
    /// Exit collected, pipes closed, threads joined or detached.
    ended: bool,
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("command", &self.command)
            .field("pid", &self.pid)
            .field("spawned_ns", &self.timeline.spawned_ns)
            .field("exit", &self.exit)
            .field("noise", &self.noise.len())
            .field("pending", &self.pending)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

/// The file the worker's stderr is copied to, created, with its name for
/// messages; `None` when the command keeps no copy.
fn stderr_file(cmd: &Command) -> Result<Option<(File, String)>, Error> {
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
fn start_child(
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
fn abandon(cmd: &Command, mut child: std::process::Child, e: io::Error) -> Error {
    let pid = child.id() as i32;
    let _ = group::killpg(pid, libc::SIGKILL);
    let _ = child.wait();
    group::unregister(pid);
    spawn_error(cmd, e)
}

/// What the worker and its drains share: the stderr tail, the event
/// channel, and the flags that tell the drains what to look for.
struct Channels {
    /// The end of stderr, kept for errors.
    tail: Arc<Mutex<Tail>>,
    /// The event channel's sender.
    tx: SyncSender<Event>,
    /// Its receiver.
    frames: Receiver<Event>,
    /// Whether stdout is the protocol.
    stdout_live: Arc<AtomicBool>,
    /// Whether the stderr drain still looks for a ready line.
    scan_live: Arc<AtomicBool>,
}

/// The process just started: its pid, when, and its cgroup.
struct Start {
    pid: u32,
    spawned_at_ns: u64,
    cgroup: Option<crate::cgroup::Cgroup>,
}

/// The threads a worker's start leaves running.
struct Drains {
    /// The stderr drain.
    stderr_thread: Watched,
    /// The stdout reader.
    stdout_thread: Watched,
    /// The waiter's report of the leader's exit.
    exit_rx: Receiver<ExitInfo>,
    /// Set by the waiter when the leader exits.
    leader_exited: Arc<AtomicBool>,
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
    fn started(
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

    /// The worker's own cgroup, when it runs under
    /// [`Command::limits`]; removed after its exit.
    pub fn cgroup(&self) -> Option<&crate::cgroup::Cgroup> {
        self.cgroup.as_ref()
    }

    /// The worker's pid, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The command as a person would type it.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// [`monotonic_ns`] taken just before the process was spawned.
    pub fn spawned_at_ns(&self) -> u64 {
        self.timeline.spawned_ns
    }

    /// The wire's words for messages.
    fn wire(&self) -> transport::Wire {
        self.wire
    }

    /// The worker's timeline so far (the whole of it is in [`Finished`]).
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// Sets the hook run when a ready, request or shutdown-ack timeout
    /// fires, before the worker is ended; its text goes into the error's
    /// diagnostics.
    pub fn on_timeout(&mut self, hook: impl FnMut(u32) -> Option<String> + Send + 'static) {
        self.on_timeout = Some(Box::new(hook));
    }

    /// Waits for the ready line. Noise lines before it are kept. Any error
    /// ends the worker (group killed and reaped) before it is returned.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<Stamped<Ready>, Error> {
        let stage = Stage::Startup;
        let expected = format!(
            r#"a ready line {{"ready": true, ...}} on {}"#,
            self.wire().ready_from
        );
        if self.ended {
            return Err(self.not_running(stage, expected));
        }
        let deadline = Instant::now() + timeout;
        match self.next_message(deadline, timeout, &stage) {
            Ok((Message::Ready(ready), read_at_ns, source)) if ready.ready => {
                self.rss_at_ready = vm_rss_bytes(self.pid);
                self.timeline.ready = Some(ReadyMark {
                    read_ns: read_at_ns,
                    t_ns: ready.t_ns,
                });
                self.scan_live.store(false, Ordering::SeqCst);
                if source == Source::Stderr
                    && let Err(kind) = self.connect(&ready)
                {
                    let expected =
                        "a connection to the loopback address its ready line on stderr names"
                            .to_owned();
                    return Err(self.fail(kind, stage, expected, Instant::now()));
                }
                self.events_tx = None;
                Ok(Stamped {
                    value: ready,
                    read_at_ns,
                })
            }
            Ok((m, ..)) => {
                let kind = ErrorKind::UnexpectedReply { got: describe(&m) };
                Err(self.fail(kind, stage, expected, deadline))
            }
            Err(kind) => Err(self.fail(kind, stage, expected, deadline)),
        }
    }

    /// The worker's resident set size read from `/proc/PID/status` (VmRSS)
    /// right after its ready line; `None` where the OS does not expose it.
    pub fn rss_at_ready_bytes(&self) -> Option<u64> {
        self.rss_at_ready
    }

    /// Sends a request and waits for its reply (or an `error` reply). Do not
    /// mix with unanswered [`Worker::send`]s. Any error ends the worker.
    pub fn request(&mut self, req: &Request, timeout: Duration) -> Result<Exchange, Error> {
        let sent_at_ns = self.send(req)?;
        let reply = self.recv(timeout)?;
        Ok(Exchange {
            request_op: req.op().to_owned(),
            reply: reply.value,
            sent_at_ns,
            received_at_ns: reply.read_at_ns,
        })
    }

    /// Writes a request without waiting for its reply; returns the stamp
    /// taken just before the write. Replies are read with [`Worker::recv`],
    /// in order. (A write blocks only if the worker leaves 64 KiB of
    /// requests unread.)
    pub fn send(&mut self, req: &Request) -> Result<u64, Error> {
        let op = req.op().to_owned();
        let stage = Stage::Request {
            op: op.clone(),
            index: self.timeline.requests.len() + 1,
        };
        let wire = self.wire();
        let expected = format!(r#"to write {{"op": "{op}"}} to the worker's {}"#, wire.to);
        if self.ended || self.link.is_none() {
            return Err(self.not_running(stage, expected));
        }
        let line = encode(req);
        let link = self.link.as_mut().expect("checked above");
        let sent_at_ns = monotonic_ns();
        // Marked before the write and kept if it fails: whatever the
        // request set off is never earlier than its mark.
        self.timeline.requests.push(RequestMark {
            op,
            sent_ns: sent_at_ns,
            received_ns: None,
        });
        match link.write_line(&line, self.write_timeout) {
            Ok(()) => {
                let id = request_id(req);
                self.pending
                    .push_back((self.timeline.requests.len() - 1, id));
                Ok(sent_at_ns)
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                let kind = ErrorKind::Timeout {
                    after: self.write_timeout,
                };
                let expected = format!("{expected}: the worker stopped reading its {}", wire.to);
                Err(self.fail(kind, stage, expected, Instant::now()))
            }
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                let deadline = Instant::now() + EXIT_AFTER_EOF;
                let kind = self.closed_kind(None);
                Err(self.fail(kind, stage, expected, deadline))
            }
            Err(e) => {
                let deadline = Instant::now();
                Err(self.fail(ErrorKind::Io(e), stage, expected, deadline))
            }
        }
    }

    /// Waits for the next reply: to the unanswered request whose `id` it
    /// carries when it carries one (a worker that answers concurrently may
    /// answer out of order), else to the oldest; a reply with that
    /// request's op, or an `error` reply. Any error ends the worker.
    pub fn recv(&mut self, timeout: Duration) -> Result<Stamped<Reply>, Error> {
        let front = self.pending.front().map(|(i, _)| *i);
        let op = front.map(|i| self.timeline.requests[i].op.clone());
        let stage = Stage::Request {
            op: op.clone().unwrap_or_default(),
            index: front.map_or(self.timeline.requests.len(), |i| i + 1),
        };
        let from = self.wire().from;
        let expected = match &op {
            Some(op) => {
                format!(r#"a reply {{"op": "{op}", ...}} or {{"op": "error", ...}} on {from}"#)
            }
            None => format!("a reply on {from}"),
        };
        if self.ended {
            return Err(self.not_running(stage, expected));
        }
        let deadline = Instant::now() + timeout;
        match self.next_message(deadline, timeout, &stage) {
            Ok((Message::Reply(reply), read_at_ns, _))
                if self.pending.is_empty() || self.answers(&reply).is_some() =>
            {
                if let Some(at) = self.answers(&reply) {
                    self.answered(at, read_at_ns);
                }
                Ok(Stamped {
                    value: reply,
                    read_at_ns,
                })
            }
            Ok((m, ..)) => {
                let kind = ErrorKind::UnexpectedReply { got: describe(&m) };
                Err(self.fail(kind, stage, expected, deadline))
            }
            Err(kind) => Err(self.fail(kind, stage, expected, deadline)),
        }
    }

    /// The noise lines seen so far.
    pub fn noise(&self) -> &[NoiseLine] {
        &self.noise
    }

    /// The last bytes of stderr so far (lossy UTF-8).
    pub fn stderr_tail(&self) -> String {
        self.tail.lock().unwrap_or_else(|e| e.into_inner()).text()
    }

    /// Ends the worker politely, escalating as needed: writes the shutdown
    /// op, waits for its ack (`ack_timeout`), closes stdin, waits for the
    /// exit (`exit_timeout`), then SIGTERM to the group, `grace`, SIGKILL to
    /// the group; reaps. Each step is stamped.
    ///
    /// `Ok` only for the exact handshake: ack in time, exit in time, exit
    /// code 0. Anything else is an `Err` whose `finished` holds the record
    /// of the end (the worker is always ended and reaped).
    pub fn shutdown(mut self, policy: &ShutdownPolicy) -> Result<Finished, Error> {
        let ack = format!(
            r#"the shutdown ack {{"op": "shutdown"}} on {}"#,
            self.wire().from
        );
        let ack = ack.as_str();
        if self.ended {
            return Err(self.not_running(Stage::Shutdown, ack.to_owned()));
        }
        let mut problem: Option<(ErrorKind, Stage, String)> = None;

        // 1. The shutdown op.
        let line = encode(&Request::shutdown());
        if let Some(link) = self.link.as_mut() {
            let at = monotonic_ns();
            match link.write_line(&line, self.write_timeout) {
                Ok(()) => self.timeline.end.shutdown_sent_ns = Some(at),
                Err(e) => {
                    let kind = match e.kind() {
                        io::ErrorKind::BrokenPipe => self.closed_kind(None),
                        io::ErrorKind::TimedOut => ErrorKind::Timeout {
                            after: self.write_timeout,
                        },
                        _ => ErrorKind::Io(e),
                    };
                    problem = Some((kind, Stage::Shutdown, ack.to_owned()));
                }
            }
        }

        // 2. Its ack (replies still owed to earlier requests are skipped).
        if problem.is_none() {
            let deadline = Instant::now() + policy.ack_timeout;
            loop {
                match self.next_message(deadline, policy.ack_timeout, &Stage::Shutdown) {
                    Ok((Message::Reply(Reply::Shutdown(_)), at, _)) => {
                        self.timeline.end.ack_read_ns = Some(at);
                        break;
                    }
                    Ok((Message::Reply(r), at, _)) if self.answers(&r).is_some() => {
                        let pos = self.answers(&r).expect("checked in the guard");
                        self.answered(pos, at);
                    }
                    Ok((m, ..)) => {
                        let kind = ErrorKind::UnexpectedReply { got: describe(&m) };
                        problem = Some((kind, Stage::Shutdown, ack.to_owned()));
                        break;
                    }
                    Err(kind) => {
                        if matches!(kind, ErrorKind::Timeout { .. }) {
                            self.run_hook();
                        }
                        problem = Some((kind, Stage::Shutdown, ack.to_owned()));
                        break;
                    }
                }
            }
        }

        // 3. EOF on the way in (stdin closed, or the connection shut
        // down): the protocol's other way to ask for an exit.
        self.idle_stdin = None;
        if self.link.take().is_some() {
            self.timeline.end.stdin_closed_ns = Some(monotonic_ns());
        }

        // 4. The exit, escalating if it does not come. A worker built to
        // outlive its reply (a daemon) is sent its stop signal first, and
        // its exit awaited from there.
        let mut exited = false;
        let mut expected = "the worker to exit after its shutdown ack".to_owned();
        if let Some(stop) = policy
            .stop_for(self.served_over())
            .filter(|_| problem.is_none())
        {
            exited = self.wait_exit_until(Instant::now() + stop.after.min(policy.exit_timeout));
            if !exited && let Some(at) = self.signal(stop.signal) {
                self.timeline.end.stop_sent_ns = Some(at);
                expected = format!(
                    "the worker to exit after its stop signal ({})",
                    timeline::signal_name(stop.signal)
                );
            }
        }
        if !exited && !self.wait_exit_until(Instant::now() + policy.exit_timeout) {
            if problem.is_none() {
                let kind = ErrorKind::Timeout {
                    after: policy.exit_timeout,
                };
                problem = Some((kind, Stage::Exit, expected));
            }
            self.escalate(policy.grace);
        }
        self.close_out();
        let finished = self.record();
        if problem.is_none() && !finished.status.success() {
            let expected = "exit code 0 after the shutdown ack".to_owned();
            problem = Some((ErrorKind::FailedExit, Stage::Exit, expected));
        }
        match problem {
            None => Ok(finished),
            Some((kind, stage, expected)) => Err(self.error(kind, stage, expected, finished)),
        }
    }

    /// Kills (SIGKILL) the whole group now and reaps the worker.
    pub fn kill(mut self) -> Finished {
        self.force_kill();
        self.close_out();
        self.record()
    }

    /// SIGTERM to the group, up to `policy.grace` for the exit, then SIGKILL
    /// to the group; reaps the worker. No shutdown op is sent.
    pub fn terminate_with(mut self, policy: &ShutdownPolicy) -> Finished {
        self.escalate(policy.grace);
        self.close_out();
        self.record()
    }

    // ---- internals ------------------------------------------------------

    /// Which unanswered request (its place in `pending`) `reply` answers:
    /// the one whose `id` it carries, else the oldest; `None` when its op
    /// is neither that request's nor `error`.
    fn answers(&self, reply: &Reply) -> Option<usize> {
        let by_id = reply.to_object().get("id").and_then(|id| {
            self.pending
                .iter()
                .position(|(_, sent)| sent.as_ref() == Some(id))
        });
        let pos = by_id.unwrap_or(0);
        let (i, _) = self.pending.get(pos)?;
        let op = &self.timeline.requests[*i].op;
        (reply.op() == op || reply.op() == "error").then_some(pos)
    }

    /// The unanswered request at `pos` in `pending` got its reply, read at
    /// `read_ns`.
    fn answered(&mut self, pos: usize, read_ns: u64) {
        if let Some((i, _)) = self.pending.remove(pos) {
            self.timeline.requests[i].received_ns = Some(read_ns);
        }
    }

    /// The transport the worker served over: tcp once it is connected
    /// to the address its ready line named (whatever it was started for),
    /// else stdio.
    fn served_over(&self) -> Transport {
        if self.connected {
            Transport::Tcp
        } else {
            Transport::Stdio
        }
    }

    /// Whether events from `source` carry the protocol now.
    fn accepts(&self, source: Source) -> bool {
        match source {
            Source::Socket => self.connected,
            Source::Stdout => {
                !self.connected && !self.stdout_gone && self.stdout_live.load(Ordering::SeqCst)
            }
            Source::Stderr => self.timeline.ready.is_none(),
        }
    }

    /// The error for the protocol's stream closing before the expected
    /// line (`partial`: the start of an unfinished line).
    fn closed_kind(&self, partial: Option<String>) -> ErrorKind {
        match (self.connected, partial) {
            (true, partial) => ErrorKind::Disconnected { partial },
            (false, Some(prefix)) => ErrorKind::PartialLine { prefix },
            (false, None) => ErrorKind::ExitedEarly,
        }
    }

    /// Connects to the address a tcp ready line names and moves the
    /// protocol onto the connection: stdout is only drained from now on.
    fn connect(&mut self, ready: &Ready) -> Result<(), ErrorKind> {
        self.stdout_live.store(false, Ordering::SeqCst);
        self.wire = transport::TCP;
        let addr = transport::address(ready).map_err(|why| ErrorKind::Connect {
            to: "the address of its ready line".to_owned(),
            cause: io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the ready line on stderr is no use: {why}"),
            ),
        })?;
        let (link, reader) =
            TcpLink::connect(addr, self.connect_timeout).map_err(|cause| ErrorKind::Connect {
                to: addr.to_string(),
                cause,
            })?;
        let tx = self.events_tx.take().ok_or(ErrorKind::NotRunning)?;
        let live = Arc::new(AtomicBool::new(true));
        let thread = readers::spawn_reader(self.pid, Source::Socket, reader, tx, live)
            .map_err(ErrorKind::Io)?;
        self.socket_thread = Some(thread);
        if let Some(Link::Stdio(stdin)) = self.link.take() {
            self.idle_stdin = Some(stdin);
        }
        self.link = Some(Link::Tcp(link));
        self.connected = true;
        self.connected_ns = Some(monotonic_ns());
        Ok(())
    }

    /// The next protocol message, keeping noise lines on the way, with the
    /// stream it came from.
    fn next_message(
        &mut self,
        deadline: Instant,
        timeout: Duration,
        stage: &Stage,
    ) -> Result<(Message, u64, Source), ErrorKind> {
        // Once the leader exited, the protocol's stream must keep making
        // progress.
        let mut quiet_until = self.exit_seen.then(|| Instant::now() + STDOUT_AFTER_EXIT);
        loop {
            let Some(frames) = self.frames.as_ref().filter(|_| !self.inbound_ended) else {
                return Err(self.closed_kind(None));
            };
            let until = quiet_until.map_or(deadline, |q| q.min(deadline));
            let left = until.saturating_duration_since(Instant::now());
            let (source, frame) = match frames.recv_timeout(left) {
                Ok(Event::LeaderExited) => {
                    self.exit_seen = true;
                    if self.stdout_gone && !self.connected {
                        // stdout ended, and no tcp ready line came on
                        // stderr before the exit.
                        self.inbound_ended = true;
                        return Err(ErrorKind::ExitedEarly);
                    }
                    quiet_until = Some(Instant::now() + STDOUT_AFTER_EXIT);
                    continue;
                }
                Ok(Event::Frame(source, frame)) if self.accepts(source) => {
                    if quiet_until.is_some() {
                        quiet_until = Some(Instant::now() + STDOUT_AFTER_EXIT);
                    }
                    (source, frame)
                }
                Ok(Event::Eof(Source::Stdout))
                    if self.accepts(Source::Stdout)
                        && self.transport == Transport::Stdio
                        && self.timeline.ready.is_none()
                        && !self.exit_seen =>
                {
                    // A worker that serves over tcp may close stdout at
                    // once; its ready line can still come on stderr, so
                    // only the exit ends the wait.
                    self.stdout_gone = true;
                    continue;
                }
                Ok(Event::Eof(source)) if self.accepts(source) => {
                    self.inbound_ended = true;
                    return Err(self.closed_kind(None));
                }
                Ok(Event::Failed(source, e)) if self.accepts(source) => {
                    self.inbound_ended = true;
                    return Err(match e.kind() {
                        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                            if self.connected =>
                        {
                            ErrorKind::Disconnected { partial: None }
                        }
                        _ => ErrorKind::Io(e),
                    });
                }
                // A stream that is not the protocol (now): ignored.
                Ok(Event::Frame(..) | Event::Eof(_) | Event::Failed(..)) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    self.inbound_ended = true;
                    return Err(self.closed_kind(None));
                }
                Err(RecvTimeoutError::Timeout) => {
                    if quiet_until.is_some_and(|q| q < deadline) {
                        // The leader is gone and the stream went quiet
                        // without an EOF: someone outside the group holds it.
                        self.inbound_ended = true;
                        return Err(self.closed_kind(None));
                    }
                    return Err(ErrorKind::Timeout { after: timeout });
                }
            };
            let read_at_ns = frame.read_at_ns.unwrap_or_else(monotonic_ns);
            if let RawLine::Partial(bytes) = &frame.line {
                self.inbound_ended = true;
                return Err(self.closed_kind(Some(escaped_prefix(bytes))));
            }
            match frame.line.classify(MAX_LINE_BYTES) {
                Ok(Inbound::Message(m)) => return Ok((m, read_at_ns, source)),
                Ok(Inbound::Noise(text)) => {
                    self.noise.push(NoiseLine {
                        text: cut(&text, NOISE_LINE_MAX),
                        read_at_ns,
                        stage: stage.clone(),
                    });
                    if self.noise.len() > self.max_noise {
                        return Err(ErrorKind::TooMuchNoise {
                            limit: self.max_noise,
                        });
                    }
                }
                Ok(other) => {
                    return Err(ErrorKind::UnexpectedReply {
                        got: failure::quote(&format!("{other:?}")),
                    });
                }
                Err(e) => return Err(ErrorKind::Protocol(e)),
            }
        }
    }

    /// Whether the exit is known, without waiting.
    fn try_exit(&mut self) -> bool {
        if self.exit.is_none() {
            match self.exit_rx.try_recv() {
                Ok(info) => self.exit = Some(info),
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => self.exit = Some(lost_waiter()),
            }
        }
        self.exit.is_some()
    }

    /// Waits for the exit until `deadline`; returns whether it is known.
    fn wait_exit_until(&mut self, deadline: Instant) -> bool {
        if self.try_exit() {
            return true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match self.exit_rx.recv_timeout(left) {
            Ok(info) => self.exit = Some(info),
            Err(RecvTimeoutError::Timeout) => return false,
            Err(RecvTimeoutError::Disconnected) => self.exit = Some(lost_waiter()),
        }
        true
    }

    /// Sends `sig` to the group unless the leader has exited (the waiter
    /// then kills the rest of the group itself); returns the stamp taken
    /// just before sending.
    fn signal(&mut self, sig: i32) -> Option<u64> {
        if self.try_exit() || self.leader_exited.load(Ordering::SeqCst) {
            return None;
        }
        let at = monotonic_ns();
        group::signal(self.pid as i32, sig);
        Some(at)
    }

    /// SIGTERM, `grace`, SIGKILL, each only if still needed.
    fn escalate(&mut self, grace: Duration) {
        if let Some(at) = self.signal(libc::SIGTERM) {
            self.timeline.end.term_sent_ns = Some(at);
            self.escalation = Escalation::Term;
            if self.wait_exit_until(Instant::now() + grace) {
                return;
            }
        }
        self.force_kill();
    }

    /// SIGKILL to the group unless already exited, then wait for the reap.
    fn force_kill(&mut self) {
        if let Some(at) = self.signal(libc::SIGKILL) {
            self.timeline.end.kill_sent_ns = Some(at);
            self.escalation = Escalation::Kill;
        }
        if self.exit.is_none() {
            // A SIGKILLed child always exits; the waiter reports it once
            // the group is reaped.
            match self.exit_rx.recv() {
                Ok(info) => self.exit = Some(info),
                Err(_) => self.exit = Some(lost_waiter()),
            }
        }
    }

    /// After the exit: close the pipes and collect the reader threads,
    /// waiting a bounded time for them.
    fn close_out(&mut self) {
        if self.ended {
            return;
        }
        debug_assert!(self.exit.is_some());
        self.link = None;
        self.idle_stdin = None;
        self.events_tx = None;
        self.frames = None;
        let deadline = Instant::now() + JOIN_BOUND;
        if let Some(t) = self.stdout_thread.take() {
            t.join_by(deadline);
        }
        if let Some(t) = self.stderr_thread.take() {
            t.join_by(deadline);
        }
        if let Some(t) = self.socket_thread.take() {
            t.join_by(deadline);
        }
        if let Some(mut cg) = self.cgroup.take() {
            self.confinement = Some(Confinement {
                limits: *cg.limits(),
                version: cg.version(),
                oom_kills: cg.oom_kills(),
                join_ns: cg.join_ns(),
                memory_peak_bytes: cg.memory_peak_bytes(),
            });
            cg.remove();
        }
        self.ended = true;
    }

    fn record(&mut self) -> Finished {
        let exit = self.exit.unwrap_or_else(lost_waiter);
        let tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        self.timeline.end.exited_ns = Some(exit.exited_at_ns);
        Finished {
            pid: self.pid,
            status: exit.status,
            rusage: exit.rusage,
            timeline: self.timeline.clone(),
            escalation: self.escalation,
            noise: self.noise.clone(),
            stderr_tail: tail.text(),
            stderr_bytes: tail.total(),
            stderr_file_error: tail.file_error(),
            group_gone: exit.group_gone,
            connected_ns: self.connected_ns,
            confinement: self.confinement.clone(),
        }
    }
}

impl Drop for Worker {
    /// Kills (SIGKILL) and reaps the whole group if it is still running;
    /// never blocks on a pipe held by a process outside the group.
    fn drop(&mut self) {
        if !self.ended {
            self.force_kill();
            self.close_out();
        }
    }
}

/// The `id` a request carries, if any.
fn request_id(req: &Request) -> Option<serde_json::Value> {
    match serde_json::to_value(req) {
        Ok(serde_json::Value::Object(mut m)) => m.remove("id"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExitStatus;
    use crate::error::ErrorDetail;

    use crate::serial;

    #[test]
    fn a_worker_can_move_to_another_thread() {
        fn assert_send<T: Send>() {}
        assert_send::<Worker>();
        assert_send::<Error>();
    }

    fn group_exists(pgid: u32) -> bool {
        crate::group::group_exists(pgid as i32)
    }

    /// A shell worker: a helper in its group, then the ready line, then it
    /// waits for the helper.
    fn shell_worker() -> Worker {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", r#"sleep 100 & echo '{"ready": true}'; wait"#]);
        let mut w = Worker::spawn(&cmd).unwrap();
        w.wait_ready(Duration::from_secs(5)).unwrap();
        w
    }

    #[test]
    fn drop_kills_and_reaps_the_whole_group() {
        let _serial = serial();
        let w = shell_worker();
        let pid = w.pid();
        assert!(group_exists(pid));
        drop(w);
        assert!(!group_exists(pid));
    }

    #[test]
    fn kill_all_ends_every_live_group() {
        let _serial = serial();
        let (a, b) = (shell_worker(), shell_worker());
        crate::kill_all();
        assert!(!group_exists(a.pid()) && !group_exists(b.pid()));
        // The handles stay valid: the workers were killed under them.
        for w in [a, b] {
            let fin = w.kill();
            assert_eq!(fin.status, ExitStatus::Signal(libc::SIGKILL));
            assert!(fin.group_gone);
        }
    }

    #[test]
    fn kill_group_ends_one_worker_from_another_thread_and_never_a_reaped_one() {
        let _serial = serial();
        let (mut a, b) = (shell_worker(), shell_worker());
        let pid = a.pid();
        // What a pool's supervisor does while another thread holds `a`.
        assert!(
            std::thread::spawn(move || crate::kill_group(pid))
                .join()
                .unwrap()
        );
        let err = a.recv(Duration::from_secs(10)).unwrap_err();
        assert_eq!(err.status, Some(ExitStatus::Signal(libc::SIGKILL)), "{err}");
        assert!(!group_exists(pid));
        assert!(group_exists(b.pid()), "only that group is killed");
        assert!(!crate::kill_group(pid), "a reaped group is never signalled");
        assert!(!crate::kill_group(0) && !crate::kill_group(1));
        drop(b);
    }

    #[test]
    fn kill_all_from_another_thread_unblocks_a_waiting_harness() {
        let _serial = serial();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 100"]);
        let mut w = Worker::spawn(&cmd).unwrap();
        // What a Ctrl-C handler does, on its own thread.
        let ctrl_c = std::thread::spawn(crate::kill_all);
        let err = w.wait_ready(Duration::from_secs(60)).unwrap_err();
        ctrl_c.join().unwrap();
        assert!(matches!(err.kind, ErrorKind::ExitedEarly), "{err}");
        assert_eq!(err.status, Some(ExitStatus::Signal(libc::SIGKILL)));
        assert!(!group_exists(w.pid()));
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let _serial = serial();
        let err = Worker::spawn(&Command::new("/nonexistent/coldstart-worker")).unwrap_err();
        assert!(
            matches!(&err.kind, ErrorKind::SpawnFailed(e) if e.kind() == io::ErrorKind::NotFound)
        );
        assert_eq!(err.stage, Stage::Spawn);
        assert_eq!(err.pid, 0);
        assert!(err.finished.is_none());
    }

    #[test]
    fn an_uncreatable_stderr_file_is_a_spawn_error_and_starts_nothing() {
        let _serial = serial();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "exit 0"])
            .stderr_file("/nonexistent/dir/stderr.log");
        let err = Worker::spawn(&cmd).unwrap_err();
        assert!(matches!(err.kind, ErrorKind::SpawnFailed(_)));
        assert!(
            err.to_string()
                .contains("cannot create the stderr file /nonexistent/dir/stderr.log"),
            "{err}"
        );
    }

    #[test]
    fn a_worker_that_ended_answers_not_running() {
        let _serial = serial();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo oops >&2; exit 4"]);
        let mut w = Worker::spawn(&cmd).unwrap();
        let err = w.wait_ready(Duration::from_secs(5)).unwrap_err();
        assert!(matches!(err.kind, ErrorKind::ExitedEarly));
        assert_eq!(err.status, Some(ExitStatus::Code(4)));
        let again = w
            .request(&Request::health(), Duration::from_secs(1))
            .unwrap_err();
        assert!(matches!(again.kind, ErrorKind::NotRunning));
        assert_eq!(again.status, Some(ExitStatus::Code(4)));
        assert_eq!(w.kill().status, ExitStatus::Code(4));
    }

    #[test]
    fn error_message_reads_well() {
        let finished = Finished {
            confinement: None,
            pid: 4242,
            status: ExitStatus::Signal(libc::SIGKILL),
            rusage: None,
            timeline: Timeline::default(),
            escalation: Escalation::Kill,
            noise: Vec::new(),
            stderr_tail: String::new(),
            stderr_bytes: 0,
            stderr_file_error: None,
            group_gone: true,
            connected_ns: None,
        };
        let noise = vec![NoiseLine {
            text: "Loading checkpoint shards: 100%".to_owned(),
            read_at_ns: 1,
            stage: Stage::Startup,
        }];
        let err = Error::new(ErrorDetail {
            kind: ErrorKind::Timeout {
                after: Duration::from_secs(2),
            },
            stage: Stage::Startup,
            command: "PYTHONPATH=worker python3 -m refworker --test-echo".to_owned(),
            expected: r#"a ready line {"ready": true, ...} on stdout"#.to_owned(),
            status: Some(finished.status),
            noise,
            stderr_tail: "starting\nimporting torch\n".to_owned(),
            pid: 4242,
            diagnostics: vec![
                "Thread 4242 (idle): \"MainThread\"\n    main (refworker/__main__.py:12)"
                    .to_owned(),
            ],
            finished: Some(Box::new(finished)),
        });
        insta::assert_snapshot!(err.to_string());
    }

    /// A Python worker that reports the CPUs it may run on in its ready
    /// line, then waits for stdin to close.
    fn affinity_reporter(cpus: &[usize]) -> Command {
        let mut cmd = Command::new(test_interpreters::default_python());
        cmd.args([
            "-c",
            "import json, os, sys\n\
             print(json.dumps({'ready': True, 'cpus': sorted(os.sched_getaffinity(0))}), flush=True)\n\
             sys.stdin.read()",
        ])
        .cpus(cpus.iter().copied());
        cmd
    }

    fn reported_cpus(cmd: &Command) -> Vec<usize> {
        let mut w = Worker::spawn(cmd).unwrap();
        let ready = w.wait_ready(Duration::from_secs(30)).unwrap();
        let cpus = serde_json::from_value(ready.value.extra["cpus"].clone()).unwrap();
        w.kill();
        cpus
    }

    #[test]
    fn a_python_worker_runs_on_exactly_its_cpu_set() {
        let _serial = serial();
        let all = crate::affinity::current_cpus().unwrap();
        let last = *all.last().unwrap();
        assert_eq!(reported_cpus(&affinity_reporter(&[last])), [last]);
        assert_eq!(reported_cpus(&affinity_reporter(&all)), all);
    }

    #[test]
    fn a_pinned_harness_thread_still_starts_its_worker_on_the_workers_cpus() {
        let _serial = serial();
        // On a thread of its own, as the harness's trial loop would be.
        std::thread::spawn(|| {
            let p = crate::affinity::place(1);
            let Some(harness) = p.harness.clone() else {
                // One CPU: nothing to separate; the worker gets it anyway.
                assert_eq!(reported_cpus(&affinity_reporter(&p.available)), p.available);
                return;
            };
            assert_eq!(crate::affinity::current_cpus().unwrap(), harness);
            assert_eq!(reported_cpus(&affinity_reporter(&p.workers)), p.workers);
            // Without a set of its own, a worker inherits the harness's.
            let mut plain = affinity_reporter(&[]);
            plain.cpus = None;
            assert_eq!(reported_cpus(&plain), harness);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_cpu_set_the_machine_refuses_is_a_spawn_error_that_says_so() {
        let _serial = serial();
        let beyond = crate::affinity::MAX_CPUS - 1;
        if crate::affinity::current_cpus().unwrap().contains(&beyond) {
            return; // a machine with every CPU a set can name
        }
        let err = Worker::spawn(&affinity_reporter(&[beyond])).unwrap_err();
        assert!(matches!(err.kind, ErrorKind::SpawnFailed(_)));
        let text = err.to_string();
        assert!(
            text.contains(&format!("could not pin the worker to CPU {beyond}")),
            "{text}"
        );
        let python = test_interpreters::default_python().display();
        assert!(
            text.contains(&format!("taskset -c 1023 {python}")),
            "{text}"
        );
        assert!(
            text.contains("what to do: start the worker on CPUs this process may use"),
            "{text}"
        );
        // Out of any set's range: refused before anything starts.
        let err = Worker::spawn(&affinity_reporter(&[crate::affinity::MAX_CPUS + 5])).unwrap_err();
        assert!(err.to_string().contains("is beyond the"), "{err}");
        assert_eq!(err.pid, 0);
        let err = Worker::spawn(&affinity_reporter(&[])).unwrap_err();
        assert!(err.to_string().contains("no CPU given"), "{err}");
    }
}
