//! A worker spoken to: its ready line, each request and its reply, and
//! which line of which stream counts as what.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use worker_proto::{
    Inbound, MAX_LINE_BYTES, Message, RawLine, Ready, Reply, Request, encode, escaped_prefix,
};

use super::failure::{cut, describe};
use super::procfs::vm_rss_bytes;
use super::records::{Exchange, NoiseLine, Stamped};
use super::{EXIT_AFTER_EOF, NOISE_LINE_MAX, STDOUT_AFTER_EXIT, Worker};
use crate::error::{Error, ErrorKind, Stage};
use crate::monotonic_ns;
use crate::readers::{self, Event, Source};
use crate::transport::{self, Link, TcpLink, Transport};
use timeline::{ReadyMark, RequestMark};

impl Worker {
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

    /// Which unanswered request (its place in `pending`) `reply` answers:
    /// the one whose `id` it carries, else the oldest; `None` when its op
    /// is neither that request's nor `error`.
    pub(super) fn answers(&self, reply: &Reply) -> Option<usize> {
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
    pub(super) fn answered(&mut self, pos: usize, read_ns: u64) {
        if let Some((i, _)) = self.pending.remove(pos) {
            self.timeline.requests[i].received_ns = Some(read_ns);
        }
    }

    /// The transport the worker served over: tcp once it is connected
    /// to the address its ready line named (whatever it was started for),
    /// else stdio.
    pub(super) fn served_over(&self) -> Transport {
        if self.connected {
            Transport::Tcp
        } else {
            Transport::Stdio
        }
    }

    /// Whether events from `source` carry the protocol now.
    pub(super) fn accepts(&self, source: Source) -> bool {
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
    pub(super) fn closed_kind(&self, partial: Option<String>) -> ErrorKind {
        match (self.connected, partial) {
            (true, partial) => ErrorKind::Disconnected { partial },
            (false, Some(prefix)) => ErrorKind::PartialLine { prefix },
            (false, None) => ErrorKind::ExitedEarly,
        }
    }

    /// Connects to the address a tcp ready line names and moves the
    /// protocol onto the connection: stdout is only drained from now on.
    pub(super) fn connect(&mut self, ready: &Ready) -> Result<(), ErrorKind> {
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
    pub(super) fn next_message(
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
                        got: super::failure::quote(&format!("{other:?}")),
                    });
                }
                Err(e) => return Err(ErrorKind::Protocol(e)),
            }
        }
    }
}

/// The `id` a request carries, if any.
pub(super) fn request_id(req: &Request) -> Option<serde_json::Value> {
    match serde_json::to_value(req) {
        Ok(serde_json::Value::Object(mut m)) => m.remove("id"),
        _ => None,
    }
}
