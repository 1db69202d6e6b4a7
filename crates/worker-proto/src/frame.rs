//! Line framing: cutting a byte stream into protocol lines and classifying
//! each one. Bounded: no line ever grows a buffer past the cap.

use std::fmt::Write as _;
use std::io::{self, Read};

use serde::Serialize;

use crate::Message;

/// The longest line accepted, newline excluded: 1 MiB.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// How many characters of a bad line an error quotes.
const PREFIX_CHARS: usize = 80;

/// One classified stdout line.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Inbound {
    /// A JSON object that parsed as a protocol message.
    Message(Message),
    /// A line that does not start with `{`: tolerated, counted and kept.
    Noise(String),
}

/// Why a line is not a protocol line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// Starts with `{` but is not a JSON object of the protocol.
    #[error(
        "malformed protocol line: {reason}; the line starts `{prefix}`; a stdout line that starts with `{{` must be one JSON object (send logs to stderr)"
    )]
    Malformed { prefix: String, reason: String },
    /// Not valid UTF-8.
    #[error(
        "protocol line is not UTF-8 (first bad byte at offset {valid_up_to}); the line starts `{prefix}`; the worker must write UTF-8 JSON on stdout"
    )]
    NotUtf8 { prefix: String, valid_up_to: usize },
    /// Longer than the cap.
    #[error(
        "protocol line of {len} bytes exceeds the {cap}-byte cap; the line starts `{prefix}`; send large payloads another way or split them"
    )]
    TooLong {
        prefix: String,
        len: usize,
        cap: usize,
    },
}

/// Encodes one message as one line: compact JSON and a `\n`.
///
/// Compact JSON escapes every control character inside strings, so the
/// encoded line never contains a raw newline.
pub fn encode<T: Serialize + ?Sized>(message: &T) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).expect("protocol messages always serialise");
    debug_assert!(!line.contains(&b'\n'));
    line.push(b'\n');
    line
}

/// Classifies one received line (without its `\n`; a trailing `\r` is
/// ignored).
pub fn classify(line: &[u8]) -> Result<Inbound, FrameError> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.len() > MAX_LINE_BYTES {
        return Err(FrameError::TooLong {
            prefix: escaped_prefix(line),
            len: line.len(),
            cap: MAX_LINE_BYTES,
        });
    }
    let text = std::str::from_utf8(line).map_err(|e| FrameError::NotUtf8 {
        prefix: escaped_prefix(line),
        valid_up_to: e.valid_up_to(),
    })?;
    if !text.starts_with('{') {
        return Ok(Inbound::Noise(text.to_owned()));
    }
    serde_json::from_str::<Message>(text)
        .map(Inbound::Message)
        .map_err(|e| FrameError::Malformed {
            prefix: escaped_prefix(line),
            reason: e.to_string(),
        })
}

/// A short, escaped, printable prefix of `bytes`: valid UTF-8 is shown with
/// Rust's debug escapes (`\n`, `\u{1b}`), other bytes as `\xNN`, and a cut
/// line ends with `…`.
pub fn escaped_prefix(bytes: &[u8]) -> String {
    let mut out = String::new();
    let mut chars = 0;
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if chars == PREFIX_CHARS {
                out.push('…');
                return out;
            }
            if c == '`' {
                out.push_str("\\`");
            } else {
                out.extend(c.escape_debug());
            }
            chars += 1;
        }
        for b in chunk.invalid() {
            if chars == PREFIX_CHARS {
                out.push('…');
                return out;
            }
            let _ = write!(out, "\\x{b:02x}");
            chars += 1;
        }
    }
    out
}

/// One line cut from a stream by [`FrameReader`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RawLine {
    /// A complete line, without its `\n`.
    Line(Vec<u8>),
    /// A line longer than the cap: its first bytes and its full length. The
    /// rest was read and dropped, never buffered.
    TooLong { prefix: Vec<u8>, len: usize },
    /// Bytes after the last `\n` when the stream ended.
    Partial(Vec<u8>),
}

impl RawLine {
    /// Classifies the line as [`classify`] would; a too-long line is a
    /// [`FrameError::TooLong`]. A partial line is classified by its content.
    pub fn classify(&self, cap: usize) -> Result<Inbound, FrameError> {
        match self {
            RawLine::Line(b) | RawLine::Partial(b) => classify(b),
            RawLine::TooLong { prefix, len } => Err(FrameError::TooLong {
                prefix: escaped_prefix(prefix),
                len: *len,
                cap,
            }),
        }
    }
}

/// A line and, when the reader has a clock, the clock's reading taken right
/// after the `read` that delivered the line's last byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub line: RawLine,
    pub read_at_ns: Option<u64>,
}

/// Cuts a byte stream into lines with a hard cap on memory.
///
/// The buffer never holds more than `cap` bytes plus one read's worth: a
/// longer line is skipped to its end and reported as [`RawLine::TooLong`].
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    buf: Vec<u8>,
    /// Start of unconsumed bytes in `buf`.
    start: usize,
    cap: usize,
    clock: Option<fn() -> u64>,
    /// Clock reading of the read that filled the current tail of `buf`.
    last_read_at: Option<u64>,
    eof: bool,
}

/// How many bytes one `read` asks for.
const CHUNK: usize = 64 * 1024;
/// How many bytes of a too-long line are kept for its error message.
const KEEP_PREFIX: usize = 256;

impl<R: Read> FrameReader<R> {
    /// A reader with the protocol's cap ([`MAX_LINE_BYTES`]).
    pub fn new(inner: R) -> Self {
        Self::with_cap(inner, MAX_LINE_BYTES)
    }

    /// A reader with another cap (bytes, newline excluded).
    pub fn with_cap(inner: R, cap: usize) -> Self {
        FrameReader {
            inner,
            buf: Vec::new(),
            start: 0,
            cap,
            clock: None,
            last_read_at: None,
            eof: false,
        }
    }

    /// Stamps every frame with `clock()` read right after the `read` call
    /// that completed it.
    pub fn with_clock(mut self, clock: fn() -> u64) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The cap this reader enforces.
    pub fn cap(&self) -> usize {
        self.cap
    }

    fn fill(&mut self) -> io::Result<usize> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let old = self.buf.len();
        self.buf.resize(old + CHUNK, 0);
        let n = loop {
            match self.inner.read(&mut self.buf[old..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.buf.truncate(old);
                    return Err(e);
                }
            }
        };
        if let Some(clock) = self.clock {
            self.last_read_at = Some(clock());
        }
        self.buf.truncate(old + n);
        if n == 0 {
            self.eof = true;
        }
        Ok(n)
    }

    /// The next line, or `None` at the end of the stream.
    pub fn next_frame(&mut self) -> io::Result<Option<Frame>> {
        let mut scanned = 0;
        loop {
            let pending = &self.buf[self.start..];
            if let Some(i) = pending[scanned..].iter().position(|&b| b == b'\n') {
                let end = scanned + i;
                if end > self.cap {
                    let prefix = pending[..KEEP_PREFIX.min(end)].to_vec();
                    self.start += end + 1;
                    return Ok(Some(self.frame(RawLine::TooLong { prefix, len: end })));
                }
                let line = pending[..end].to_vec();
                self.start += end + 1;
                return Ok(Some(self.frame(RawLine::Line(line))));
            }
            scanned = pending.len();
            if pending.len() > self.cap {
                return self.skip_long_line().map(Some);
            }
            if self.eof {
                if pending.is_empty() {
                    return Ok(None);
                }
                let line = pending.to_vec();
                self.start = self.buf.len();
                return Ok(Some(self.frame(RawLine::Partial(line))));
            }
            self.fill()?;
        }
    }

    /// The pending bytes are already longer than the cap: keep a prefix,
    /// drop everything up to and including the next `\n`.
    fn skip_long_line(&mut self) -> io::Result<Frame> {
        let pending = &self.buf[self.start..];
        let prefix = pending[..KEEP_PREFIX.min(pending.len())].to_vec();
        let mut len = pending.len();
        self.buf.clear();
        self.start = 0;
        loop {
            if self.fill()? == 0 {
                return Ok(self.frame(RawLine::TooLong { prefix, len }));
            }
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                len += i;
                self.start = i + 1;
                return Ok(self.frame(RawLine::TooLong { prefix, len }));
            }
            len += self.buf.len();
            self.buf.clear();
        }
    }

    fn frame(&self, line: RawLine) -> Frame {
        Frame {
            line,
            read_at_ns: self.last_read_at,
        }
    }
}

impl<R: Read> Iterator for FrameReader<R> {
    type Item = io::Result<Frame>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_frame().transpose()
    }
}
