//! The seam between a worker's lifecycle and the wire: how request lines
//! go to the worker and how its lines come back.
//!
//! Whatever the transport, lines come back as stamped events on the
//! worker's one channel (made at spawn, so the waiter can report the
//! leader's exit on it whatever carries the protocol; the reader threads
//! are the drain's), and a line goes out through [`Link::write_line`],
//! bounded in time. The lifecycle (`worker`) knows nothing else of the
//! wire: which pipe or socket, how a write is bounded, how the way in is
//! closed.
//!
//! Two transports: stdio (`stdio.rs`: the stdin pipe) and tcp (`tcp.rs`:
//! a connection to the loopback address the worker's ready line on stderr
//! names).

mod stdio;
mod tcp;

use std::io;
use std::process::ChildStdin;
use std::time::Duration;

pub(crate) use stdio::set_nonblocking;
pub(crate) use tcp::{TcpLink, address};

/// How a worker speaks the protocol ([`crate::Command::transport`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// Requests on stdin, the ready line and replies on stdout. A ready
    /// line on stderr that names `"transport": "tcp"` still turns the
    /// worker into a tcp one.
    #[default]
    Stdio,
    /// The ready line on stderr names a loopback host and port; requests
    /// and replies go over one TCP connection to it. stdout is drained and
    /// ignored.
    Tcp,
}

impl Transport {
    /// `stdio` or `tcp`.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Tcp => "tcp",
        }
    }
}

/// The words a message uses for the wire, so an error says where the
/// harness wrote and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Wire {
    /// Where the ready line is read ("stdout").
    pub ready_from: &'static str,
    /// Where requests are written ("stdin").
    pub to: &'static str,
    /// Where replies are read ("stdout").
    pub from: &'static str,
}

/// The stdio wire's words.
pub(crate) const STDIO: Wire = Wire {
    ready_from: "stdout",
    to: "stdin",
    from: "stdout",
};

/// The tcp wire's words.
pub(crate) const TCP: Wire = Wire {
    ready_from: "stderr",
    to: "connection",
    from: "the connection",
};

/// The live way to a worker: what the lifecycle writes its request lines
/// to. Replies come back on the worker's event channel.
#[derive(Debug)]
pub(crate) enum Link {
    /// The worker's stdin pipe (non-blocking); replies are read from its
    /// stdout by the reader thread started at spawn.
    Stdio(ChildStdin),
    /// The connection to the worker; replies are read from a clone of it
    /// by a reader thread started at the connection. Dropping it shuts
    /// the connection down.
    Tcp(TcpLink),
}

impl Link {
    /// Writes the whole line; `TimedOut` when the worker does not take it
    /// within `timeout`, `BrokenPipe` when its end is closed.
    pub(crate) fn write_line(&mut self, line: &[u8], timeout: Duration) -> io::Result<()> {
        match self {
            Link::Stdio(stdin) => stdio::write_line(stdin, line, timeout),
            Link::Tcp(link) => link.write_line(line, timeout),
        }
    }
}
