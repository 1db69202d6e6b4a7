//! A live worker: spawn, ready, requests, shutdown, and the end of it all.

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::process::ChildStdin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use worker_proto::{
    Inbound, MAX_LINE_BYTES, Message, RawLine, Ready, Reply, Request, encode, escaped_prefix,
};

use crate::drain::{self, Event, Tail, Watched};
use crate::error::{Error, ErrorDetail, ErrorKind, Phase};
use crate::reap::{self, ExitInfo, Rusage};
use crate::{Command, group, monotonic_ns};
use crate::{Escalation, ExitStatus};
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
/// Longest quote of an unexpected message in an error.
const QUOTE_MAX: usize = 200;

/// A value and the monotonic stamp taken right after the `read` that
/// delivered its line, before parsing.
#[derive(Debug, Clone, PartialEq)]
pub struct Stamped<T> {
    /// The parsed message (the ready line, or a reply).
    pub value: T,
    /// CLOCK_MONOTONIC ns right after the `read` that delivered its line.
    pub read_at_ns: u64,
}

/// One request and its reply, with both stamps.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// The op of the request that was sent.
    pub request_op: String,
    /// The worker's reply to it.
    pub reply: Reply,
    /// Taken just before the request line was written.
    pub sent_at_ns: u64,
    /// Taken right after the reply line was read.
    pub received_at_ns: u64,
}

/// A stdout line that is not a protocol line (does not start with `{`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NoiseLine {
    /// The line, cut to 4 KiB at most.
    pub text: String,
    /// CLOCK_MONOTONIC ns right after the `read` that delivered the line.
    pub read_at_ns: u64,
    /// The phase in which the harness read it.
    pub phase: Phase,
}

/// How long each polite step of [`Worker::shutdown`] may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownPolicy {
    /// From writing the shutdown op to reading its ack.
    pub ack_timeout: Duration,
    /// From the ack (and stdin closed) to the process's exit.
    pub exit_timeout: Duration,
    /// From SIGTERM to the group to SIGKILL to the group.
    pub grace: Duration,
}

impl Default for ShutdownPolicy {
    /// 5 s for the ack, 5 s to exit, 2 s of grace after SIGTERM.
    fn default() -> Self {
        ShutdownPolicy {
            ack_timeout: Duration::from_secs(5),
            exit_timeout: Duration::from_secs(5),
            grace: Duration::from_secs(2),
        }
    }
}

/// A worker's end: how it exited, what it cost, and what it left.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The worker's pid.
    pub pid: u32,
    /// How the process ended: exit code, signal, or unknown.
    pub status: ExitStatus,
    /// From `wait4` on this child; `None` only with [`ExitStatus::Unknown`].
    pub rusage: Option<Rusage>,
    /// The worker's whole timeline: spawned, ready, each request and its
    /// reply, each step of the end (shutdown sent, ack, stdin closed,
    /// signals, exit).
    pub timeline: Timeline,
    /// Whether SIGTERM or SIGKILL to the group was needed to end it.
    pub escalation: Escalation,
    /// Every noise line seen on stdout during the worker's life.
    pub noise: Vec<NoiseLine>,
    /// The last bytes of stderr (lossy UTF-8, at most the tail bound).
    pub stderr_tail: String,
    /// How many bytes the worker wrote to stderr in all.
    pub stderr_bytes: u64,
    /// Why the stderr file copy is incomplete, if it is.
    pub stderr_file_error: Option<String>,
    /// Whether every process of the group was gone when the end was
    /// recorded (false only if a member resisted SIGKILL for seconds).
    pub group_gone: bool,
}

/// The hook run when a timeout fires, before the kill; given the pid, it
/// returns diagnostic text (a stack dump, ...) for [`ErrorDetail::diagnostics`].
pub type TimeoutHook = Box<dyn FnMut(u32) -> Option<String> + Send>;

/// A live worker. Dropping it kills (SIGKILL) and reaps its whole process
/// group; so do all its errors.
pub struct Worker {
    command: String,
    pid: u32,
    max_noise: usize,
    stdin: Option<ChildStdin>,
    /// How long one line's write to stdin may block (stdin is non-blocking).
    write_timeout: Duration,
    frames: Option<Receiver<Event>>,
    stdout_eof: bool,
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
    pending: VecDeque<usize>,
    rss_at_ready: Option<u64>,
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

fn spawn_error(cmd: &Command, e: io::Error) -> Error {
    Error::new(ErrorDetail {
        kind: ErrorKind::SpawnFailed(e),
        phase: Phase::Spawn,
        command: cmd.display(),
        expected: "the process to start".to_owned(),
        status: None,
        noise: Vec::new(),
        stderr_tail: String::new(),
        pid: 0,
        diagnostics: Vec::new(),
        finished: None,
    })
}

fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn describe(m: &Message) -> String {
    let json = serde_json::to_string(m).unwrap_or_else(|e| format!("<unprintable: {e}>"));
    cut(&json, QUOTE_MAX)
}

impl Worker {
    /// Starts `cmd` in its own process group with piped stdin, stdout and
    /// stderr, and starts draining stdout and stderr at once.
    pub fn spawn(cmd: &Command) -> Result<Worker, Error> {
        let file = match &cmd.stderr_file {
            Some(path) => {
                let f = File::create(path).map_err(|e| {
                    spawn_error(
                        cmd,
                        io::Error::new(
                            e.kind(),
                            format!("cannot create the stderr file {}: {e}", path.display()),
                        ),
                    )
                })?;
                Some((f, path.display().to_string()))
            }
            None => None,
        };
        reap::become_subreaper();
        let mut std_cmd = cmd
            .to_std()
            .map_err(|e| spawn_error(cmd, io::Error::new(io::ErrorKind::InvalidInput, e)))?;
        let spawned_at_ns = monotonic_ns();
        let mut child = std_cmd.spawn().map_err(|e| match &cmd.cpus {
            // sched_setaffinity in the child refused the set (no CPU of it
            // is one this process may use).
            Some(cpus) if e.raw_os_error() == Some(libc::EINVAL) => spawn_error(
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
            _ => spawn_error(cmd, e),
        })?;
        let pid = child.id();
        group::register(pid as i32);

        let stdin = child.stdin.take().expect("stdin is piped");
        // Writes are bounded by `write_timeout`: the pipe is non-blocking
        // and a full pipe is waited on with poll(2).
        if let Err(e) = set_nonblocking(&stdin) {
            let _ = group::killpg(pid as i32, libc::SIGKILL);
            let _ = child.wait();
            group::unregister(pid as i32);
            return Err(spawn_error(cmd, e));
        }
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let tail = Arc::new(Mutex::new(Tail::new(cmd.stderr_tail_bytes)));
        let threads = (|| {
            let stderr_thread = drain::spawn_stderr(pid, stderr, Arc::clone(&tail), file)?;
            let (stdout_thread, frames, notify) = drain::spawn_stdout(pid, stdout)?;
            let (exit_rx, leader_exited) = reap::spawn_waiter(pid as i32, notify)?;
            Ok::<_, io::Error>((stderr_thread, stdout_thread, frames, exit_rx, leader_exited))
        })();
        let (stderr_thread, stdout_thread, frames, exit_rx, leader_exited) = match threads {
            Ok(t) => t,
            Err(e) => {
                // No waiter thread runs: end and reap the child here.
                let _ = group::killpg(pid as i32, libc::SIGKILL);
                let _ = child.wait();
                group::unregister(pid as i32);
                return Err(spawn_error(cmd, e));
            }
        };
        // `child` is dropped without waiting: the waiter thread reaps it.
        drop(child);
        Ok(Worker {
            command: cmd.display(),
            pid,
            max_noise: cmd.max_noise_lines,
            write_timeout: cmd.write_timeout,
            stdin: Some(stdin),
            frames: Some(frames),
            stdout_eof: false,
            exit_seen: false,
            exit_rx,
            leader_exited,
            exit: None,
            stdout_thread: Some(stdout_thread),
            stderr_thread: Some(stderr_thread),
            tail,
            noise: Vec::new(),
            pending: VecDeque::new(),
            rss_at_ready: None,
            on_timeout: None,
            timeline: Timeline::spawned_at(spawned_at_ns),
            escalation: Escalation::None,
            diagnostics: Vec::new(),
            ended: false,
        })
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
        let phase = Phase::Ready;
        let expected = r#"a ready line {"ready": true, ...} on stdout"#.to_owned();
        if self.ended {
            return Err(self.not_running(phase, expected));
        }
        let deadline = Instant::now() + timeout;
        match self.next_message(deadline, timeout, &phase) {
            Ok((Message::Ready(ready), read_at_ns)) if ready.ready => {
                self.rss_at_ready = vm_rss_bytes(self.pid);
                self.timeline.ready = Some(ReadyMark {
                    read_ns: read_at_ns,
                    t_ns: ready.t_ns,
                });
                Ok(Stamped {
                    value: ready,
                    read_at_ns,
                })
            }
            Ok((m, _)) => {
                let kind = ErrorKind::UnexpectedReply { got: describe(&m) };
                Err(self.fail(kind, phase, expected, deadline))
            }
            Err(kind) => Err(self.fail(kind, phase, expected, deadline)),
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
        let phase = Phase::Request(op.clone());
        let expected = format!(r#"to write {{"op": "{op}"}} to the worker's stdin"#);
        if self.ended || self.stdin.is_none() {
            return Err(self.not_running(phase, expected));
        }
        let line = encode(req);
        let stdin = self.stdin.as_mut().expect("checked above");
        let sent_at_ns = monotonic_ns();
        // Marked before the write and kept if it fails: whatever the
        // request set off is never earlier than its mark.
        self.timeline.requests.push(RequestMark {
            op,
            sent_ns: sent_at_ns,
            received_ns: None,
        });
        match write_line(stdin, &line, self.write_timeout) {
            Ok(()) => {
                self.pending.push_back(self.timeline.requests.len() - 1);
                Ok(sent_at_ns)
            }
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                let kind = ErrorKind::Timeout {
                    after: self.write_timeout,
                };
                let expected = format!("{expected}: the worker stopped reading its stdin");
                Err(self.fail(kind, phase, expected, Instant::now()))
            }
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                let deadline = Instant::now() + EXIT_AFTER_EOF;
                Err(self.fail(ErrorKind::ExitedEarly, phase, expected, deadline))
            }
            Err(e) => {
                let deadline = Instant::now();
                Err(self.fail(ErrorKind::Io(e), phase, expected, deadline))
            }
        }
    }

    /// Waits for the reply to the oldest unanswered request: a reply with
    /// its op, or an `error` reply. Any error ends the worker.
    pub fn recv(&mut self, timeout: Duration) -> Result<Stamped<Reply>, Error> {
        let op = self
            .pending
            .front()
            .map(|&i| self.timeline.requests[i].op.clone());
        let phase = Phase::Request(op.clone().unwrap_or_default());
        let expected = match &op {
            Some(op) => {
                format!(r#"a reply {{"op": "{op}", ...}} or {{"op": "error", ...}} on stdout"#)
            }
            None => "a reply on stdout".to_owned(),
        };
        if self.ended {
            return Err(self.not_running(phase, expected));
        }
        let deadline = Instant::now() + timeout;
        match self.next_message(deadline, timeout, &phase) {
            Ok((Message::Reply(reply), read_at_ns))
                if op
                    .as_deref()
                    .is_none_or(|op| reply.op() == op || reply.op() == "error") =>
            {
                self.answered(read_at_ns);
                Ok(Stamped {
                    value: reply,
                    read_at_ns,
                })
            }
            Ok((m, _)) => {
                let kind = ErrorKind::UnexpectedReply { got: describe(&m) };
                Err(self.fail(kind, phase, expected, deadline))
            }
            Err(kind) => Err(self.fail(kind, phase, expected, deadline)),
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
        let ack = r#"the shutdown ack {"op": "shutdown"} on stdout"#;
        if self.ended {
            return Err(self.not_running(Phase::Shutdown, ack.to_owned()));
        }
        let mut problem: Option<(ErrorKind, Phase, String)> = None;

        // 1. The shutdown op.
        let line = encode(&Request::shutdown());
        if let Some(stdin) = self.stdin.as_mut() {
            let at = monotonic_ns();
            match write_line(stdin, &line, self.write_timeout) {
                Ok(()) => self.timeline.end.shutdown_sent_ns = Some(at),
                Err(e) => {
                    let kind = match e.kind() {
                        io::ErrorKind::BrokenPipe => ErrorKind::ExitedEarly,
                        io::ErrorKind::TimedOut => ErrorKind::Timeout {
                            after: self.write_timeout,
                        },
                        _ => ErrorKind::Io(e),
                    };
                    problem = Some((kind, Phase::Shutdown, ack.to_owned()));
                }
            }
        }

        // 2. Its ack (replies still owed to earlier requests are skipped).
        if problem.is_none() {
            let deadline = Instant::now() + policy.ack_timeout;
            loop {
                match self.next_message(deadline, policy.ack_timeout, &Phase::Shutdown) {
                    Ok((Message::Reply(Reply::Shutdown(_)), at)) => {
                        self.timeline.end.ack_read_ns = Some(at);
                        break;
                    }
                    Ok((Message::Reply(r), at))
                        if self.pending.front().is_some_and(|&i| {
                            r.op() == self.timeline.requests[i].op || r.op() == "error"
                        }) =>
                    {
                        self.answered(at);
                    }
                    Ok((m, _)) => {
                        let kind = ErrorKind::UnexpectedReply { got: describe(&m) };
                        problem = Some((kind, Phase::Shutdown, ack.to_owned()));
                        break;
                    }
                    Err(kind) => {
                        if matches!(kind, ErrorKind::Timeout { .. }) {
                            self.run_hook();
                        }
                        problem = Some((kind, Phase::Shutdown, ack.to_owned()));
                        break;
                    }
                }
            }
        }

        // 3. EOF on stdin: the protocol's other way to ask for an exit.
        if self.stdin.take().is_some() {
            self.timeline.end.stdin_closed_ns = Some(monotonic_ns());
        }

        // 4. The exit, escalating if it does not come.
        if !self.wait_exit_until(Instant::now() + policy.exit_timeout) {
            if problem.is_none() {
                let kind = ErrorKind::Timeout {
                    after: policy.exit_timeout,
                };
                let expected = "the worker to exit after its shutdown ack".to_owned();
                problem = Some((kind, Phase::Exit, expected));
            }
            self.escalate(policy.grace);
        }
        self.close_out();
        let finished = self.record();
        if problem.is_none() && !finished.status.success() {
            let expected = "exit code 0 after the shutdown ack".to_owned();
            problem = Some((ErrorKind::FailedExit, Phase::Exit, expected));
        }
        match problem {
            None => Ok(finished),
            Some((kind, phase, expected)) => Err(self.error(kind, phase, expected, finished)),
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

    /// The oldest unanswered request got its reply, read at `read_ns`.
    fn answered(&mut self, read_ns: u64) {
        if let Some(i) = self.pending.pop_front() {
            self.timeline.requests[i].received_ns = Some(read_ns);
        }
    }

    /// The next protocol message, keeping noise lines on the way.
    fn next_message(
        &mut self,
        deadline: Instant,
        timeout: Duration,
        phase: &Phase,
    ) -> Result<(Message, u64), ErrorKind> {
        // Once the leader exited, stdout must keep making progress.
        let mut quiet_until = self.exit_seen.then(|| Instant::now() + STDOUT_AFTER_EXIT);
        loop {
            let Some(frames) = self.frames.as_ref().filter(|_| !self.stdout_eof) else {
                return Err(ErrorKind::ExitedEarly);
            };
            let until = quiet_until.map_or(deadline, |q| q.min(deadline));
            let left = until.saturating_duration_since(Instant::now());
            let frame = match frames.recv_timeout(left) {
                Ok(Event::LeaderExited) => {
                    self.exit_seen = true;
                    quiet_until = Some(Instant::now() + STDOUT_AFTER_EXIT);
                    continue;
                }
                Ok(Event::Frame(frame)) => {
                    if quiet_until.is_some() {
                        quiet_until = Some(Instant::now() + STDOUT_AFTER_EXIT);
                    }
                    frame
                }
                Ok(Event::Eof) | Err(RecvTimeoutError::Disconnected) => {
                    self.stdout_eof = true;
                    return Err(ErrorKind::ExitedEarly);
                }
                Ok(Event::Failed(e)) => {
                    self.stdout_eof = true;
                    return Err(ErrorKind::Io(e));
                }
                Err(RecvTimeoutError::Timeout) => {
                    if quiet_until.is_some_and(|q| q < deadline) {
                        // The leader is gone and stdout went quiet without
                        // an EOF: someone outside the group holds it.
                        self.stdout_eof = true;
                        return Err(ErrorKind::ExitedEarly);
                    }
                    return Err(ErrorKind::Timeout { after: timeout });
                }
            };
            let read_at_ns = frame.read_at_ns.unwrap_or_else(monotonic_ns);
            if let RawLine::Partial(bytes) = &frame.line {
                self.stdout_eof = true;
                return Err(ErrorKind::PartialLine {
                    prefix: escaped_prefix(bytes),
                });
            }
            match frame.line.classify(MAX_LINE_BYTES) {
                Ok(Inbound::Message(m)) => return Ok((m, read_at_ns)),
                Ok(Inbound::Noise(text)) => {
                    self.noise.push(NoiseLine {
                        text: cut(&text, NOISE_LINE_MAX),
                        read_at_ns,
                        phase: phase.clone(),
                    });
                    if self.noise.len() > self.max_noise {
                        return Err(ErrorKind::TooMuchNoise {
                            limit: self.max_noise,
                        });
                    }
                }
                Ok(other) => {
                    return Err(ErrorKind::UnexpectedReply {
                        got: cut(&format!("{other:?}"), QUOTE_MAX),
                    });
                }
                Err(e) => return Err(ErrorKind::Protocol(e)),
            }
        }
    }

    fn run_hook(&mut self) {
        if let Some(hook) = self.on_timeout.as_mut()
            && let Some(text) = hook(self.pid)
        {
            self.diagnostics.push(text);
        }
    }

    /// Ends the worker after a failure and builds the error.
    fn fail(
        &mut self,
        kind: ErrorKind,
        phase: Phase,
        expected: String,
        deadline: Instant,
    ) -> Error {
        match kind {
            ErrorKind::Timeout { .. } => self.run_hook(),
            ErrorKind::ExitedEarly | ErrorKind::PartialLine { .. } => {
                // stdout ended: the worker is most likely exiting; let it,
                // so the error carries its own exit status.
                let until = deadline.max(Instant::now() + EXIT_AFTER_EOF);
                self.wait_exit_until(until);
            }
            _ => {}
        }
        self.force_kill();
        self.close_out();
        let finished = self.record();
        self.error(kind, phase, expected, finished)
    }

    fn error(&self, kind: ErrorKind, phase: Phase, expected: String, finished: Finished) -> Error {
        Error::new(ErrorDetail {
            kind,
            phase,
            command: self.command.clone(),
            expected,
            status: Some(finished.status),
            noise: finished.noise.clone(),
            stderr_tail: finished.stderr_tail.clone(),
            pid: self.pid,
            diagnostics: self.diagnostics.clone(),
            finished: Some(Box::new(finished)),
        })
    }

    fn not_running(&self, phase: Phase, expected: String) -> Error {
        Error::new(ErrorDetail {
            kind: ErrorKind::NotRunning,
            phase,
            command: self.command.clone(),
            expected,
            status: self.exit.map(|e| e.status),
            noise: self.noise.clone(),
            stderr_tail: self.stderr_tail(),
            pid: self.pid,
            diagnostics: self.diagnostics.clone(),
            finished: None,
        })
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
        self.stdin = None;
        self.frames = None;
        let deadline = Instant::now() + JOIN_BOUND;
        if let Some(t) = self.stdout_thread.take() {
            t.join_by(deadline);
        }
        if let Some(t) = self.stderr_thread.take() {
            t.join_by(deadline);
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
        }
    }
}

/// The waiter thread vanished without a report (it cannot panic in
/// practice): the exit is recorded as unknown rather than invented.
fn lost_waiter() -> ExitInfo {
    ExitInfo {
        status: ExitStatus::Unknown,
        rusage: None,
        exited_at_ns: monotonic_ns(),
        group_gone: false,
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

/// `VmRSS` of `/proc/PID/status` in bytes; `None` where absent.
fn vm_rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss(&status)
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let mut words = line["VmRSS:".len()..].split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => Some(n * 1024),
        _ => None,
    }
}

/// Puts the worker's stdin pipe in non-blocking mode, so a write can be
/// bounded in time.
fn set_nonblocking(stdin: &ChildStdin) -> io::Result<()> {
    let fd = stdin.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own; F_GETFL/F_SETFL touch only its flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Writes the whole line to the non-blocking stdin, waiting with poll(2)
/// while the pipe is full; `TimedOut` when it stays full past `timeout`.
fn write_line(stdin: &mut ChildStdin, mut line: &[u8], timeout: Duration) -> io::Result<()> {
    let deadline = Instant::now() + timeout;
    while !line.is_empty() {
        match stdin.write(line) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => line = &line[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                let mut pfd = libc::pollfd {
                    fd: stdin.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                let ms = left.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
                // SAFETY: one valid pollfd for a descriptor we own.
                let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
                if rc < 0 {
                    let err = io::Error::last_os_error();
                    if err.kind() != io::ErrorKind::Interrupted {
                        return Err(err);
                    }
                }
                // rc == 0 loops back to the deadline check; POLLERR or
                // POLLHUP makes the next write fail with EPIPE.
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_rss_is_parsed_in_bytes() {
        let status = "Name:\tpython3\nVmPeak:\t  20000 kB\nVmRSS:\t   12345 kB\nThreads:\t1\n";
        assert_eq!(parse_vm_rss(status), Some(12345 * 1024));
    }

    #[test]
    fn vm_rss_absent_is_none() {
        // A zombie's status has no VmRSS line.
        assert_eq!(parse_vm_rss("Name:\tx\nState:\tZ (zombie)\n"), None);
        assert_eq!(parse_vm_rss("VmRSS:\tlots\n"), None);
    }

    #[test]
    fn own_rss_is_read() {
        assert!(vm_rss_bytes(std::process::id()).unwrap() > 0);
    }

    /// Tests that start processes run one at a time: `kill_all` would end
    /// the workers of tests running beside it in this process.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

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
        assert_eq!(err.phase, Phase::Spawn);
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
        };
        let noise = vec![NoiseLine {
            text: "Loading checkpoint shards: 100%".to_owned(),
            read_at_ns: 1,
            phase: Phase::Ready,
        }];
        let err = Error::new(ErrorDetail {
            kind: ErrorKind::Timeout {
                after: Duration::from_secs(2),
            },
            phase: Phase::Ready,
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
        let mut cmd = Command::new("python3");
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
        assert!(text.contains("taskset -c 1023 python3"), "{text}");
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

    #[test]
    fn cut_respects_characters() {
        assert_eq!(cut("abc", 5), "abc");
        assert_eq!(cut("aé", 2), "a…");
    }
}
