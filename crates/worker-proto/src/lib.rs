//! The worker protocol: typed messages and JSON-lines framing.
//!
//! A coldstart harness and a Python worker talk over the worker's stdin and
//! stdout, one JSON object per line. This crate owns the shapes of those
//! lines and the rules for cutting a byte stream into them. It deliberately
//! owns **no process code and no async runtime**: spawning, timeouts and
//! signals live in `spawn`; this crate is pure data and can be used from
//! anything that has bytes.
//!
//! # The protocol
//!
//! - UTF-8, one JSON object per line, `\n` terminated (a `\r` before the
//!   `\n` is tolerated), flushed after each line. A line longer than
//!   [`MAX_LINE_BYTES`] (1 MiB) is an error, never an unbounded buffer.
//! - Worker to harness, once at start, the ready line. Extra fields are
//!   allowed and kept; `t_ns` is `time.monotonic_ns()` taken just before the
//!   line was written (CLOCK_MONOTONIC, the harness's clock too):
//!
//!   ```json
//!   {"ready": true, "pid": 4242, "transport": "stdio", "t_ns": 81234567890123}
//!   ```
//! - Health: `{"op": "health"}` is answered by
//!   `{"op": "health", "response": {"status": "ok", ...}}`. `status` may be
//!   `"loading"` while a worker is not yet ready to serve. After the ready
//!   line only `"ok"` answers health: [`Reply::healthy`] is the one rule
//!   every task judges a health reply by.
//! - Shutdown: `{"op": "shutdown"}` is acknowledged by `{"op": "shutdown"}`,
//!   then the worker exits 0. EOF on stdin also ends the worker with exit 0.
//! - Any other op (`capabilities`, `load`, `infer`, ...) is a request too;
//!   its reply is kept as JSON ([`Reply::Other`]).
//! - An error reply: `{"op": "error", "error": "unknown op: 'bogus'"}`.
//! - A stdout line that does not start with `{` is noise ([`Inbound::Noise`]):
//!   the harness counts it, keeps it for the report and tolerates a small
//!   number. A line that starts with `{` and does not parse is a protocol
//!   error ([`FrameError::Malformed`]).
//!
//! These are exactly the shapes of the seed system's worker, which the tool
//! drives unchanged:
//!
//! ```
//! use worker_proto::{classify, Inbound, Message, Reply, Request, encode};
//!
//! let ready = classify(br#"{"ready": true, "pid": 123, "transport": "stdio"}"#).unwrap();
//! let Inbound::Message(Message::Ready(r)) = ready else { panic!() };
//! assert_eq!(r.pid, Some(123));
//! assert_eq!(r.extra["transport"], "stdio");
//!
//! assert_eq!(encode(&Request::health()), b"{\"op\":\"health\"}\n");
//!
//! let reply = classify(br#"{"op": "health", "response": {"status": "ok", "model": null}}"#).unwrap();
//! let Inbound::Message(Message::Reply(Reply::Health(h))) = reply else { panic!() };
//! assert!(h.response.status.is_ok());
//!
//! let err = classify(br#"{"op": "error", "error": "unknown op: 'bogus'"}"#).unwrap();
//! assert!(matches!(err, Inbound::Message(Message::Reply(Reply::Error(e))) if e.error == "unknown op: 'bogus'"));
//! ```
//!
//! # Stability
//!
//! The wire shapes above are the contract; the Rust types are
//! `#[non_exhaustive]` where new variants may come. Unknown fields are never
//! dropped: every type carries an `extra` map that round-trips.

#![warn(missing_docs)]

mod frame;
mod health;
mod message;

pub use frame::{
    FrameError, FrameReader, Inbound, MAX_LINE_BYTES, RawLine, TimedLine, classify, encode,
    escaped_prefix,
};
pub use health::{HEALTHY_REPLY, Unhealthy};
pub use message::{
    ErrorReply, HealthReply, HealthResponse, HealthStatus, Message, OtherReply, Ready, Reply,
    Request, ShutdownReply,
};

/// A JSON object as kept for unknown fields and unknown messages.
pub type Object = serde_json::Map<String, serde_json::Value>;

#[cfg(test)]
mod arb;
