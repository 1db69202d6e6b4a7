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
    Malformed {
        /// The line's first characters, escaped by [`escaped_prefix`].
        prefix: String,
        /// The JSON parser's explanation of why the line is not a message.
        reason: String,
    },
    /// Not valid UTF-8.
    #[error(
        "protocol line is not UTF-8 (first bad byte at offset {valid_up_to}); the line starts `{prefix}`; the worker must write UTF-8 JSON on stdout"
    )]
    NotUtf8 {
        /// The line's first characters, escaped by [`escaped_prefix`].
        prefix: String,
        /// Byte offset of the first invalid byte; everything before it is UTF-8.
        valid_up_to: usize,
    },
    /// Longer than the cap.
    #[error(
        "protocol line of {len} bytes exceeds the {cap}-byte cap; the line starts `{prefix}`; send large payloads another way or split them"
    )]
    TooLong {
        /// The line's first characters, escaped by [`escaped_prefix`].
        prefix: String,
        /// The line's full length in bytes, without its `\n`.
        len: usize,
        /// The cap it exceeded, in bytes ([`MAX_LINE_BYTES`] unless the
        /// reader was built with another).
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
    classify_capped(line, MAX_LINE_BYTES)
}

/// [`classify`] with another cap, for a [`FrameReader`] built with one.
fn classify_capped(line: &[u8], cap: usize) -> Result<Inbound, FrameError> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.len() > cap {
        return Err(FrameError::TooLong {
            prefix: escaped_prefix(line),
            len: line.len(),
            cap,
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

/// A short, escaped, printable prefix of `bytes`, to quote between
/// backticks: valid UTF-8 is shown with Rust's debug escapes (`\n`,
/// `\u{1b}`, `\\`) but for quotes, which stay as the worker wrote them (a
/// JSON line is full of them), and a backtick as `` \` ``; other bytes as
/// `\xNN`; a cut line ends with `…`.
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
            } else if c == '"' || c == '\'' {
                out.push(c);
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
    TooLong {
        /// The line's first bytes (at most 256), kept for the error message.
        prefix: Vec<u8>,
        /// The line's full length in bytes, without its `\n`.
        len: usize,
    },
    /// Bytes after the last `\n` when the stream ended.
    Partial(Vec<u8>),
}

impl RawLine {
    /// Classifies the line as [`classify`] would, against `cap` (the
    /// reader's, see [`FrameReader::cap`]); a too-long line is a
    /// [`FrameError::TooLong`]. A partial line is classified by its content.
    pub fn classify(&self, cap: usize) -> Result<Inbound, FrameError> {
        match self {
            RawLine::Line(b) | RawLine::Partial(b) => classify_capped(b, cap),
            RawLine::TooLong { prefix, len } => {
                let mut prefix = escaped_prefix(prefix);
                if !prefix.ends_with('…') {
                    // The kept bytes are only the start of a longer line.
                    prefix.push('…');
                }
                Err(FrameError::TooLong {
                    prefix,
                    len: *len,
                    cap,
                })
            }
        }
    }
}

/// A line and, when the reader has a clock, the clock's reading taken right
/// after the `read` that delivered the line's last byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedLine {
    /// The line as cut from the stream.
    pub line: RawLine,
    /// The reader's clock (nanoseconds) right after the `read` that delivered
    /// the line's last byte; `None` when the reader has no clock.
    pub read_at_ns: Option<u64>,
}

/// Cuts a byte stream into lines with a hard cap on memory.
///
/// The buffer never grows past `cap` bytes (plus one for a `\r`) and one
/// read's worth: a longer line is skipped to its end and reported as
/// [`RawLine::TooLong`] with its full length.
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

/// The first bytes of a too-long line, cut at a UTF-8 character boundary
/// when the line is UTF-8 there, so its error message ends cleanly.
fn keep_prefix(line: &[u8]) -> Vec<u8> {
    let mut cut = KEEP_PREFIX.min(line.len());
    if cut < line.len() {
        // Back off over at most three continuation bytes (10xxxxxx).
        let floor = cut.saturating_sub(3);
        while cut > floor && line[cut] & 0xC0 == 0x80 {
            cut -= 1;
        }
    }
    line[..cut].to_vec()
}

fn find_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

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
        let need = old + CHUNK;
        if self.buf.capacity() < need {
            // Grow by doubling, but never past the bound: the cap, a `\r`
            // of slack and one read.
            let bound = self.cap.saturating_add(1 + CHUNK);
            let target = self.buf.capacity().saturating_mul(2).min(bound).max(need);
            self.buf.reserve_exact(target - old);
        }
        self.buf.resize(need, 0);
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
        let read_at = self.clock.map(|clock| clock());
        self.buf.truncate(old + n);
        if n == 0 {
            // The stamp stays the one of the read that delivered the last
            // bytes, so a partial line at EOF is stamped like any other.
            self.eof = true;
        } else {
            self.last_read_at = read_at;
        }
        Ok(n)
    }

    /// The next line, or `None` at the end of the stream.
    pub fn next_frame(&mut self) -> io::Result<Option<TimedLine>> {
        let mut scanned = 0;
        loop {
            let pending = &self.buf[self.start..];
            if let Some(i) = find_newline(&pending[scanned..]) {
                let end = scanned + i;
                // A `\r` before the `\n` does not count against the cap,
                // as in `classify`.
                let content = pending[..end].strip_suffix(b"\r").map_or(end, <[u8]>::len);
                if content > self.cap {
                    let prefix = keep_prefix(&pending[..end]);
                    self.start += end + 1;
                    return Ok(Some(self.frame(RawLine::TooLong { prefix, len: end })));
                }
                let line = pending[..end].to_vec();
                self.start += end + 1;
                return Ok(Some(self.frame(RawLine::Line(line))));
            }
            scanned = pending.len();
            // One byte of slack for a `\r` that a `\n` may still follow.
            if pending.len() > self.cap + 1 {
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
    fn skip_long_line(&mut self) -> io::Result<TimedLine> {
        let pending = &self.buf[self.start..];
        let prefix = keep_prefix(pending);
        let mut len = pending.len();
        self.buf.clear();
        self.start = 0;
        loop {
            if self.fill()? == 0 {
                return Ok(self.frame(RawLine::TooLong { prefix, len }));
            }
            if let Some(i) = find_newline(&self.buf) {
                len += i;
                self.start = i + 1;
                return Ok(self.frame(RawLine::TooLong { prefix, len }));
            }
            len += self.buf.len();
            self.buf.clear();
        }
    }

    fn frame(&self, line: RawLine) -> TimedLine {
        TimedLine {
            line,
            read_at_ns: self.last_read_at,
        }
    }
}

impl<R: Read> Iterator for FrameReader<R> {
    type Item = io::Result<TimedLine>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_frame().transpose()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::collections::VecDeque;

    use proptest::prelude::*;

    use super::*;
    use crate::{Reply, arb};

    /// A reader that hands out the given chunks one `read` at a time (a
    /// chunk larger than the caller's buffer is split), then EOF.
    struct Chunks {
        chunks: VecDeque<Vec<u8>>,
        interrupt_first: bool,
    }

    impl Chunks {
        fn new<I: IntoIterator<Item = V>, V: Into<Vec<u8>>>(chunks: I) -> Self {
            Chunks {
                chunks: chunks.into_iter().map(Into::into).collect(),
                interrupt_first: false,
            }
        }
    }

    impl Read for Chunks {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            if std::mem::take(&mut self.interrupt_first) {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let Some(chunk) = self.chunks.front_mut() else {
                return Ok(0);
            };
            let n = chunk.len().min(out.len());
            out[..n].copy_from_slice(&chunk[..n]);
            chunk.drain(..n);
            if chunk.is_empty() {
                self.chunks.pop_front();
            }
            Ok(n)
        }
    }

    fn lines<R: Read>(reader: FrameReader<R>) -> Vec<RawLine> {
        reader.map(|f| f.unwrap().line).collect()
    }

    fn line(s: &str) -> RawLine {
        RawLine::Line(s.as_bytes().to_vec())
    }

    #[track_caller]
    fn check_noise(input: &str) {
        assert_eq!(
            classify(input.as_bytes()),
            Ok(Inbound::Noise(input.to_owned()))
        );
    }

    #[test]
    fn noise_is_any_utf8_line_not_starting_with_a_brace() {
        check_noise("");
        check_noise("Loading model weights...");
        check_noise(" {\"op\": \"health\"}");
        check_noise("[1, 2]");
        check_noise("\u{1b}[32mok\u{1b}[0m");
        check_noise("\u{feff}{\"ready\": true}");
    }

    #[test]
    fn messages_classify() {
        let got = classify(br#"{"op":"shutdown"}"#).unwrap();
        assert!(matches!(
            got,
            Inbound::Message(Message::Reply(Reply::Shutdown(_)))
        ));
        let got = classify(br#"{"ready":true}"#).unwrap();
        assert!(matches!(got, Inbound::Message(Message::Ready(_))));
        let got = classify(br#"{"note":"hi"}"#).unwrap();
        assert!(matches!(got, Inbound::Message(Message::Unknown(_))));
    }

    #[test]
    fn a_trailing_cr_is_ignored() {
        assert_eq!(
            classify(b"{\"op\":\"shutdown\"}\r"),
            classify(b"{\"op\":\"shutdown\"}")
        );
        check_noise("noise");
        assert_eq!(classify(b"noise\r"), Ok(Inbound::Noise("noise".into())));
    }

    #[test]
    fn malformed_lines_quote_their_start() {
        for (input, reason) in [
            ("{", "EOF while parsing"),
            ("{\"op\": \"health\"} trailing", "trailing characters"),
            ("{\"op\": \"health\",}", "trailing comma"),
            ("{'op': 'health'}", "key must be a string"),
            ("{\"ready\": 1}", "invalid type"),
        ] {
            let err = classify(input.as_bytes()).unwrap_err();
            let FrameError::Malformed {
                prefix,
                reason: got,
            } = &err
            else {
                panic!("{input}: {err:?}")
            };
            assert_eq!(prefix, &escaped_prefix(input.as_bytes()));
            assert!(got.contains(reason), "{input}: {got}");
            let text = err.to_string();
            assert!(text.starts_with("malformed protocol line: "), "{text}");
            assert!(text.contains("send logs to stderr"), "{text}");
        }
    }

    #[test]
    fn not_utf8_says_where() {
        let err = classify(b"{\"op\": \"h\xffealth\"}").unwrap_err();
        assert_eq!(
            err,
            FrameError::NotUtf8 {
                prefix: "{\"op\": \"h\\xffealth\"}".into(),
                valid_up_to: 9,
            }
        );
        assert!(err.to_string().contains("first bad byte at offset 9"));
        // Noise must be UTF-8 too: it is kept as text.
        assert!(matches!(
            classify(b"\xc3("),
            Err(FrameError::NotUtf8 { valid_up_to: 0, .. })
        ));
    }

    #[test]
    fn the_cap_is_on_the_line_without_cr() {
        let mut at_cap = vec![b'x'; MAX_LINE_BYTES];
        assert!(matches!(classify(&at_cap), Ok(Inbound::Noise(_))));
        at_cap.push(b'\r');
        assert!(matches!(classify(&at_cap), Ok(Inbound::Noise(_))));
        at_cap.pop();
        at_cap.push(b'x');
        let err = classify(&at_cap).unwrap_err();
        let FrameError::TooLong { prefix, len, cap } = &err else {
            panic!("{err:?}")
        };
        assert_eq!((*len, *cap), (MAX_LINE_BYTES + 1, MAX_LINE_BYTES));
        assert_eq!(prefix, &format!("{}…", "x".repeat(80)));
        assert!(
            err.to_string()
                .contains("1048577 bytes exceeds the 1048576-byte cap")
        );
    }

    #[track_caller]
    fn check_prefix(input: &[u8], expect: &str) {
        assert_eq!(escaped_prefix(input), expect);
    }

    #[test]
    fn escaped_prefixes() {
        check_prefix(b"", "");
        check_prefix(b"plain", "plain");
        check_prefix(b"a\nb\tc\r", "a\\nb\\tc\\r");
        check_prefix(b"\x1b[0m", "\\u{1b}[0m");
        check_prefix(b"`code`", "\\`code\\`");
        check_prefix(b"\"q\" 'r' \\", "\"q\" 'r' \\\\");
        check_prefix(b"ok\xff\xfeok", "ok\\xff\\xfeok");
        check_prefix("héllo ✓".as_bytes(), "héllo ✓");
        // A truncated multi-byte character shows its bytes.
        check_prefix(&"é".as_bytes()[..1], "\\xc3");
        // Exactly 80 characters: no ellipsis; 81: cut with one.
        check_prefix("é".repeat(80).as_bytes(), &"é".repeat(80));
        check_prefix("é".repeat(81).as_bytes(), &format!("{}…", "é".repeat(80)));
        check_prefix(&[0xff; 100], &format!("{}…", "\\xff".repeat(80)));
    }

    #[test]
    fn encode_writes_one_line() {
        let msg = Message::Unknown(
            serde_json::json!({"text": "two\nlines\r\u{2028}"})
                .as_object()
                .unwrap()
                .clone(),
        );
        let line = encode(&msg);
        assert_eq!(line, b"{\"text\":\"two\\nlines\\r\xe2\x80\xa8\"}\n");
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
    }

    #[test]
    fn reader_cuts_crlf_lines_and_classify_drops_the_cr() {
        let got = lines(FrameReader::new(Chunks::new([
            "{\"op\":\"health\"}\r\nnoise\r\n",
        ])));
        assert_eq!(got, [line("{\"op\":\"health\"}\r"), line("noise\r")]);
        assert_eq!(
            got[1].classify(MAX_LINE_BYTES),
            Ok(Inbound::Noise("noise".into()))
        );
    }

    #[test]
    fn reader_keeps_a_partial_line_at_eof() {
        let got = lines(FrameReader::new(Chunks::new([
            "a\n",
            "{\"op\":\"shut",
            "down\"}",
        ])));
        assert_eq!(
            got,
            [
                line("a"),
                RawLine::Partial(b"{\"op\":\"shutdown\"}".to_vec())
            ]
        );
        assert!(matches!(
            got[1].classify(MAX_LINE_BYTES),
            Ok(Inbound::Message(Message::Reply(Reply::Shutdown(_))))
        ));
    }

    #[test]
    fn reader_splits_many_lines_from_one_read() {
        let got = lines(FrameReader::new(Chunks::new(["a\nb\n\nc\n"])));
        assert_eq!(got, [line("a"), line("b"), line(""), line("c")]);
    }

    #[test]
    fn reader_joins_a_line_spread_over_reads() {
        let got = lines(FrameReader::new(Chunks::new(["ab", "c", "d\ne", "f\n"])));
        assert_eq!(got, [line("abcd"), line("ef")]);
    }

    #[test]
    fn reader_retries_interrupted_reads() {
        let mut src = Chunks::new(["x\n"]);
        src.interrupt_first = true;
        assert_eq!(lines(FrameReader::new(src)), [line("x")]);
    }

    #[test]
    fn reader_with_a_small_cap() {
        let reader =
            FrameReader::with_cap(Chunks::new(["1234\n12345\n123\r\n1234\r\n12345\r\n"]), 4);
        assert_eq!(reader.cap(), 4);
        let got = lines(reader);
        assert_eq!(
            got,
            [
                line("1234"),
                RawLine::TooLong {
                    prefix: b"12345".to_vec(),
                    len: 5
                },
                line("123\r"),
                line("1234\r"),
                RawLine::TooLong {
                    prefix: b"12345\r".to_vec(),
                    len: 6
                },
            ]
        );
        let err = got[1].classify(4).unwrap_err();
        assert_eq!(
            err,
            FrameError::TooLong {
                prefix: "12345…".into(),
                len: 5,
                cap: 4
            }
        );
        // The cap given is the one applied to complete lines too.
        assert!(matches!(
            got[0].classify(3),
            Err(FrameError::TooLong { len: 4, cap: 3, .. })
        ));
    }

    /// A stream of `len` bytes of `x` then `tail`, produced lazily.
    struct Long {
        left: usize,
        tail: io::Cursor<Vec<u8>>,
    }

    impl Read for Long {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            if self.left == 0 {
                return self.tail.read(out);
            }
            let n = self.left.min(out.len());
            out[..n].fill(b'x');
            self.left -= n;
            Ok(n)
        }
    }

    #[test]
    fn an_over_long_line_is_reported_with_its_length_in_bounded_memory() {
        let len = 40 * MAX_LINE_BYTES + 7;
        let src = Long {
            left: len,
            tail: io::Cursor::new(b"\n{\"op\":\"shutdown\"}\n".to_vec()),
        };
        let mut reader = FrameReader::new(src);
        let first = reader.next_frame().unwrap().unwrap().line;
        assert!(
            reader.buf.capacity() <= MAX_LINE_BYTES + 1 + CHUNK,
            "buffer grew to {} bytes",
            reader.buf.capacity()
        );
        let RawLine::TooLong { prefix, len: got } = &first else {
            panic!("{first:?}")
        };
        assert_eq!(*got, len);
        assert_eq!(prefix.len(), KEEP_PREFIX);
        let err = first.classify(reader.cap()).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("protocol line of {len} bytes exceeds")),
            "{err}"
        );
        // The stream goes on after it.
        let next = reader.next_frame().unwrap().unwrap().line;
        assert_eq!(next, line("{\"op\":\"shutdown\"}"));
        assert_eq!(reader.next_frame().unwrap(), None);
    }

    #[test]
    fn an_over_long_line_cut_by_eof() {
        let src = Long {
            left: 3 * MAX_LINE_BYTES,
            tail: io::Cursor::new(Vec::new()),
        };
        let got = lines(FrameReader::new(src));
        assert!(matches!(&got[..], [RawLine::TooLong { len, .. }] if *len == 3 * MAX_LINE_BYTES));
    }

    #[test]
    fn a_too_long_prefix_is_cut_at_a_character_boundary() {
        // 255 ASCII bytes then a 2-byte character across the 256-byte cut.
        let mut text = "a".repeat(KEEP_PREFIX - 1);
        text.push_str(&"é".repeat(10));
        let kept = keep_prefix(text.as_bytes());
        assert_eq!(kept.len(), KEEP_PREFIX - 1);
        assert!(std::str::from_utf8(&kept).is_ok());
        // Not UTF-8 at all: cut where it falls.
        assert_eq!(keep_prefix(&[0x80; 300]).len(), KEEP_PREFIX - 3);
        assert_eq!(keep_prefix(b"short"), b"short");
    }

    thread_local! {
        static TICKS: Cell<u64> = const { Cell::new(0) };
    }

    /// A clock that counts its readings, one per `read` call.
    fn ticks() -> u64 {
        TICKS.with(|t| {
            t.set(t.get() + 1);
            t.get()
        })
    }

    #[test]
    fn frames_are_stamped_by_the_read_that_completed_them() {
        TICKS.with(|t| t.set(0));
        let src = Chunks::new(["a\nb", "c\nd\ne\n", "f"]);
        let stamps: Vec<_> = FrameReader::new(src)
            .with_clock(ticks)
            .map(|f| {
                let f = f.unwrap();
                (f.line, f.read_at_ns)
            })
            .collect();
        assert_eq!(
            stamps,
            [
                (line("a"), Some(1)),
                (line("bc"), Some(2)),
                (line("d"), Some(2)),
                (line("e"), Some(2)),
                // The EOF read (tick 4) does not restamp the partial line.
                (RawLine::Partial(b"f".to_vec()), Some(3)),
            ]
        );
        let unstamped = FrameReader::new(Chunks::new(["a\n"]))
            .next_frame()
            .unwrap()
            .unwrap();
        assert_eq!(unstamped.read_at_ns, None);
    }

    /// What a reader must produce for `input` with `cap`, written the
    /// obvious way. A too-long line is given whole here; the reader keeps
    /// only a prefix of it (how much depends on how the reads fell when the
    /// cap is small), which `same_lines` checks.
    fn model(input: &[u8], cap: usize) -> Vec<RawLine> {
        let mut out = Vec::new();
        let mut parts: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
        let last = parts.pop().unwrap();
        for part in parts {
            let content = part.strip_suffix(b"\r").unwrap_or(part);
            out.push(if content.len() > cap {
                RawLine::TooLong {
                    prefix: part.to_vec(),
                    len: part.len(),
                }
            } else {
                RawLine::Line(part.to_vec())
            });
        }
        // At EOF a `\r` may still have been followed by a `\n`: one byte of
        // slack, and `classify` applies the exact cap to the partial line.
        if last.len() > cap + 1 {
            out.push(RawLine::TooLong {
                prefix: last.to_vec(),
                len: last.len(),
            });
        } else if !last.is_empty() {
            out.push(RawLine::Partial(last.to_vec()));
        }
        out
    }

    fn same_lines(got: &[RawLine], want: &[RawLine]) -> Result<(), TestCaseError> {
        prop_assert_eq!(got.len(), want.len(), "{:?} vs {:?}", got, want);
        for (g, w) in got.iter().zip(want) {
            match (g, w) {
                (
                    RawLine::TooLong { prefix, len },
                    RawLine::TooLong {
                        prefix: whole,
                        len: wlen,
                    },
                ) => {
                    prop_assert_eq!(len, wlen);
                    prop_assert!(
                        whole.starts_with(prefix),
                        "{:?} is not a prefix of {:?}",
                        prefix,
                        whole
                    );
                    prop_assert!(prefix.len() <= KEEP_PREFIX);
                    prop_assert!(prefix.len() >= whole.len().min(KEEP_PREFIX - 3).min(2));
                }
                _ => prop_assert_eq!(g, w),
            }
        }
        Ok(())
    }

    fn bytes_with_newlines() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            prop_oneof![4 => any::<u8>(), 1 => Just(b'\n'), 1 => Just(b'\r'), 1 => Just(b'{')],
            0..200,
        )
    }

    proptest! {
        #[test]
        fn classify_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let got = classify(&bytes);
            let text = bytes.strip_suffix(b"\r").unwrap_or(&bytes);
            match std::str::from_utf8(text) {
                Err(_) => {
                    let not_utf8 = matches!(got, Err(FrameError::NotUtf8 { .. }));
                    prop_assert!(not_utf8, "{:?}", got);
                }
                Ok(t) if !t.starts_with('{') => prop_assert_eq!(got, Ok(Inbound::Noise(t.to_owned()))),
                Ok(_) => {
                    let json_or_malformed = matches!(got, Ok(Inbound::Message(_)) | Err(FrameError::Malformed { .. }));
                    prop_assert!(json_or_malformed, "{:?}", got);
                }
            }
        }

        #[test]
        fn classify_never_panics_on_braced_json_ish_text(text in "\\{[\"a-z:,0-9 \\[\\]{}\\\\]{0,40}") {
            let _ = classify(text.as_bytes());
        }

        #[test]
        fn reader_agrees_with_the_model(
            input in bytes_with_newlines(),
            cuts in prop::collection::vec(1usize..20, 0..20),
            cap in 0usize..12,
        ) {
            // Cut the input into chunks at the given sizes.
            let mut chunks = Vec::new();
            let mut rest = &input[..];
            for n in cuts {
                let n = n.min(rest.len());
                chunks.push(rest[..n].to_vec());
                rest = &rest[n..];
            }
            chunks.push(rest.to_vec());
            let got = lines(FrameReader::with_cap(Chunks::new(chunks), cap));
            same_lines(&got, &model(&input, cap))?;
            for l in &got {
                let _ = l.classify(cap);
            }
        }

        #[test]
        fn encoded_messages_come_back_through_the_reader(
            msgs in prop::collection::vec(arb::message(), 0..6),
            chunk in 1usize..64,
        ) {
            let stream: Vec<u8> = msgs.iter().flat_map(encode).collect();
            let chunks: Vec<Vec<u8>> = stream.chunks(chunk).map(<[u8]>::to_vec).collect();
            let got: Vec<_> = FrameReader::new(Chunks::new(chunks))
                .map(|f| f.unwrap().line.classify(MAX_LINE_BYTES).unwrap())
                .collect();
            let want: Vec<_> = msgs.into_iter().map(Inbound::Message).collect();
            prop_assert_eq!(got, want);
        }
    }
}
