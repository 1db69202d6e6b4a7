//! The reader threads: a stream cut into stamped protocol frames (stdout,
//! or the tcp connection), stderr drained into a bounded tail (and
//! optionally a file) with a tcp ready line picked out of it on the way,
//! and a way to join a thread with a bounded wait.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use worker_proto::{FrameReader, Inbound, MAX_LINE_BYTES, Message, RawLine, TimedLine};

use crate::monotonic_ns;

/// How many frames may wait in the channel: bounds memory when a worker
/// floods stdout faster than the harness consumes (each frame <= 1 MiB).
const FRAME_BACKLOG: usize = 16;

/// How many bytes one stderr `read` asks for.
const STDERR_CHUNK: usize = 64 * 1024;

/// Where an event's line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The worker's stdout.
    Stdout,
    /// The worker's stderr (only a tcp ready line is ever forwarded).
    Stderr,
    /// The tcp connection.
    Socket,
}

/// What the reader threads report, on the worker's one event channel.
#[derive(Debug)]
pub(crate) enum Event {
    Frame(Source, TimedLine),
    Eof(Source),
    Failed(Source, io::Error),
    /// Sent by the waiter once the leader is reaped: if no EOF follows
    /// soon, a process outside the group holds stdout open.
    LeaderExited,
}

/// A thread whose end can be awaited with a deadline: the thread holds the
/// sender of `done`, so the channel disconnects when the thread ends.
#[derive(Debug)]
pub(crate) struct Watched {
    handle: JoinHandle<()>,
    done: Receiver<()>,
}

impl Watched {
    fn spawn(name: String, body: impl FnOnce() + Send + 'static) -> io::Result<Watched> {
        let (done_tx, done) = mpsc::channel::<()>();
        let handle = thread::Builder::new().name(name).spawn(move || {
            let _done = done_tx;
            body();
        })?;
        Ok(Watched { handle, done })
    }

    /// Joins the thread if it ends by `deadline`; otherwise leaves it
    /// detached (it is blocked on a pipe some escaped process still holds)
    /// and returns false.
    pub(crate) fn join_by(self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.done.recv_timeout(left) {
            Err(RecvTimeoutError::Disconnected) | Ok(()) => {
                let _ = self.handle.join();
                true
            }
            Err(RecvTimeoutError::Timeout) => false,
        }
    }
}

/// The worker's event channel: every reader thread and the waiter send on
/// it, the lifecycle reads it.
pub(crate) fn events() -> (SyncSender<Event>, Receiver<Event>) {
    mpsc::sync_channel(FRAME_BACKLOG)
}

/// Starts a frame reader on `stream` (stdout, or the tcp connection): every
/// line is stamped with [`monotonic_ns`] right after the `read` that
/// completed it, before any parsing. While `live` is false (stdout when the
/// protocol is not on it) the stream is drained and its lines dropped.
pub(crate) fn spawn_reader<R: Read + Send + 'static>(
    pid: u32,
    source: Source,
    stream: R,
    tx: SyncSender<Event>,
    live: Arc<AtomicBool>,
) -> io::Result<Watched> {
    let name = match source {
        Source::Socket => format!("spawn-socket-{pid}"),
        _ => format!("spawn-stdout-{pid}"),
    };
    Watched::spawn(name, move || read_frames(stream, source, &tx, &live))
}

fn read_frames<R: Read>(stream: R, source: Source, tx: &SyncSender<Event>, live: &AtomicBool) {
    let mut reader = FrameReader::new(stream).with_clock(monotonic_ns);
    loop {
        let event = match reader.next_frame() {
            Ok(Some(frame)) => Event::Frame(source, frame),
            Ok(None) => Event::Eof(source),
            Err(e) => Event::Failed(source, e),
        };
        let last = !matches!(event, Event::Frame(..));
        if !live.load(Ordering::SeqCst) {
            // Not the protocol: drained, never reported.
            if last {
                return;
            }
            continue;
        }
        // A send fails once the harness dropped its end: stop reading.
        if tx.send(event).is_err() || last {
            return;
        }
    }
}

/// What the stderr drain looks for while it drains: the first ready line
/// (`{"ready": ...}` on a line of its own) that names `"transport": "tcp"`,
/// or any ready line when the worker was started for tcp. It is forwarded
/// as a frame stamped right after the `read` that completed it; the tail
/// and the file still get every byte.
pub(crate) struct ReadyScan {
    /// Where the line goes.
    pub tx: SyncSender<Event>,
    /// Only a ready line naming `"transport": "tcp"` counts (a stdio worker
    /// that turns out to serve over tcp).
    pub tcp_only: bool,
    /// Report stderr's end when it comes before a ready line (a worker
    /// started for tcp, whose ready line can come nowhere else).
    pub eof_matters: bool,
    /// Cleared by the lifecycle once a ready line came from elsewhere:
    /// the scan stops.
    pub live: Arc<AtomicBool>,
}

/// Cuts stderr into lines for the scan, keeping only a line that starts
/// with `{`, up to the protocol's cap.
#[derive(Debug, Default)]
struct LineCut {
    line: Vec<u8>,
    /// The current line is not a candidate: skip to its end.
    skipping: bool,
    /// At the start of a line.
    fresh: bool,
}

impl LineCut {
    fn new() -> Self {
        LineCut {
            fresh: true,
            ..LineCut::default()
        }
    }

    /// Feeds bytes; calls `found` with each complete candidate line
    /// (without its `\n` or `\r`) until it returns true.
    fn feed(&mut self, mut bytes: &[u8], found: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        while !bytes.is_empty() {
            if self.fresh {
                self.fresh = false;
                self.skipping = bytes[0] != b'{';
            }
            let end = memchr::memchr(b'\n', bytes);
            let part = &bytes[..end.unwrap_or(bytes.len())];
            if !self.skipping {
                if self.line.len() + part.len() > MAX_LINE_BYTES + 1 {
                    self.line.clear();
                    self.skipping = true;
                } else {
                    self.line.extend_from_slice(part);
                }
            }
            let Some(end) = end else {
                return false;
            };
            if !self.skipping {
                let mut line = &self.line[..];
                if let [rest @ .., b'\r'] = line {
                    line = rest;
                }
                if found(line) {
                    return true;
                }
            }
            self.line.clear();
            self.fresh = true;
            bytes = &bytes[end + 1..];
        }
        false
    }
}

/// Whether a stderr line is the ready line the scan is after.
fn is_ready_line(line: &[u8], tcp_only: bool) -> bool {
    match RawLine::Line(line.to_vec()).classify(MAX_LINE_BYTES) {
        Ok(Inbound::Message(Message::Ready(r))) => {
            !tcp_only || r.extra.get("transport").and_then(|v| v.as_str()) == Some("tcp")
        }
        _ => false,
    }
}

/// The last bytes of stderr, at most `cap`, and a count of all bytes.
#[derive(Debug)]
pub(crate) struct Tail {
    buf: VecDeque<u8>,
    cap: usize,
    total: u64,
    file_error: Option<String>,
}

impl Tail {
    pub(crate) fn new(cap: usize) -> Self {
        Tail {
            buf: VecDeque::with_capacity(cap.min(STDERR_CHUNK)),
            cap,
            total: 0,
            file_error: None,
        }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if bytes.len() >= self.cap {
            self.buf.clear();
            self.buf.extend(&bytes[bytes.len() - self.cap..]);
            return;
        }
        self.buf.extend(bytes);
        let excess = self.buf.len().saturating_sub(self.cap);
        self.buf.drain(..excess);
    }

    /// The tail as text: lossy UTF-8, starting at a character boundary, so
    /// never longer than the cap for valid UTF-8 input.
    pub(crate) fn text(&self) -> String {
        let (a, b) = self.buf.as_slices();
        let mut bytes = Vec::with_capacity(a.len() + b.len());
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        // Skip the continuation bytes of a character cut by the ring.
        let skip = bytes
            .iter()
            .take(3)
            .take_while(|&&b| b & 0xC0 == 0x80)
            .count();
        String::from_utf8_lossy(&bytes[skip..]).into_owned()
    }

    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    pub(crate) fn file_error(&self) -> Option<String> {
        self.file_error.clone()
    }
}

/// Starts the stderr drain: reads until EOF, keeping the tail and copying
/// every byte to `file` when given, and forwarding the ready line `scan`
/// is after.
pub(crate) fn spawn_stderr<R: Read + Send + 'static>(
    pid: u32,
    stderr: R,
    tail: Arc<Mutex<Tail>>,
    file: Option<(File, String)>,
    scan: Option<ReadyScan>,
) -> io::Result<Watched> {
    Watched::spawn(format!("spawn-stderr-{pid}"), move || {
        drain_stderr(stderr, &tail, file, scan)
    })
}

fn drain_stderr<R: Read>(
    mut stderr: R,
    tail: &Mutex<Tail>,
    mut file: Option<(File, String)>,
    mut scan: Option<ReadyScan>,
) {
    let mut chunk = vec![0u8; STDERR_CHUNK];
    let mut cut = LineCut::new();
    loop {
        let n = match stderr.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let read_at_ns = monotonic_ns();
        let bytes = &chunk[..n];
        if let Some(s) = scan.as_ref().filter(|s| s.live.load(Ordering::SeqCst)) {
            let mut line = None;
            cut.feed(bytes, &mut |l| {
                let hit = is_ready_line(l, s.tcp_only);
                if hit {
                    line = Some(l.to_vec());
                }
                hit
            });
            if let Some(line) = line {
                let frame = TimedLine {
                    line: RawLine::Line(line),
                    read_at_ns: Some(read_at_ns),
                };
                // Sent before this chunk reaches the tail: whoever reads
                // the ready line finds the bytes before it in the tail.
                let _ = s.tx.send(Event::Frame(Source::Stderr, frame));
                scan = None;
            }
        } else {
            scan = None;
        }
        let mut failed = None;
        if let Some((f, path)) = &mut file
            && let Err(e) = f.write_all(bytes)
        {
            failed = Some(format!("writing the stderr copy to {path} failed: {e}"));
        }
        let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
        t.push(bytes);
        if let Some(msg) = failed {
            // Keep draining (the worker must never block on stderr), but
            // stop writing to the file and say why.
            t.file_error = Some(msg);
            file = None;
        }
    }
    if let Some(s) = scan.filter(|s| s.eof_matters && s.live.load(Ordering::SeqCst)) {
        let _ = s.tx.send(Event::Eof(Source::Stderr));
    }
    if let Some((f, path)) = &mut file
        && let Err(e) = f.flush().and_then(|()| f.sync_data())
    {
        let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
        t.file_error = Some(format!("flushing the stderr copy to {path} failed: {e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_bytes_only() {
        let mut t = Tail::new(8);
        t.push(b"hello ");
        t.push(b"world");
        assert_eq!(t.text(), "lo world");
        assert_eq!(t.total(), 11);
        t.push(b"0123456789abc");
        assert_eq!(t.text(), "56789abc");
        assert_eq!(t.total(), 24);
    }

    #[test]
    fn tail_never_exceeds_its_cap() {
        let mut t = Tail::new(100);
        for i in 0..1000u32 {
            t.push(&vec![b'a' + (i % 26) as u8; (i % 37) as usize]);
            assert!(t.buf.len() <= 100);
        }
    }

    proptest::proptest! {
        #[test]
        fn tail_is_the_last_bytes_of_everything(
            cap in 1usize..64,
            chunks in proptest::collection::vec(proptest::collection::vec(0u8..=255, 0..100), 0..20),
        ) {
            let mut t = Tail::new(cap);
            let all: Vec<u8> = chunks.concat();
            for c in &chunks {
                t.push(c);
            }
            let kept: Vec<u8> = t.buf.iter().copied().collect();
            proptest::prop_assert_eq!(&kept[..], &all[all.len().saturating_sub(cap)..]);
            proptest::prop_assert_eq!(t.total(), all.len() as u64);
        }
    }

    #[test]
    fn tail_text_starts_at_a_character_boundary() {
        let mut t = Tail::new(4);
        t.push("xé€".as_bytes()); // 1 + 2 + 3 bytes: the ring cuts into `é`
        assert_eq!(t.text(), "€");
    }

    #[test]
    fn stderr_drain_copies_everything_and_keeps_a_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stderr.log");
        let file = File::create(&path).unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let tail = Arc::new(Mutex::new(Tail::new(1000)));
        drain_stderr(
            &data[..],
            &tail,
            Some((file, path.display().to_string())),
            None,
        );
        assert_eq!(std::fs::read(&path).unwrap(), data);
        let t = tail.lock().unwrap();
        assert_eq!(t.text().as_bytes(), &data[data.len() - 1000..]);
        assert_eq!(t.total(), data.len() as u64);
        assert_eq!(t.file_error(), None);
    }

    #[test]
    fn stdout_frames_are_stamped_and_end_with_eof() {
        let (tx, rx) = mpsc::sync_channel(4);
        let before = monotonic_ns();
        let input: &[u8] = b"{\"ready\": true}\nnoise\npartial";
        let live = AtomicBool::new(true);
        let handle = thread::spawn(move || read_frames(input, Source::Stdout, &tx, &live));
        let mut frames = Vec::new();
        while let Ok(e) = rx.recv() {
            frames.push(e);
        }
        handle.join().unwrap();
        assert_eq!(frames.len(), 4, "{frames:?}");
        for e in &frames[..3] {
            let Event::Frame(Source::Stdout, f) = e else {
                panic!("{e:?}")
            };
            assert!(f.read_at_ns.unwrap() >= before);
        }
        assert!(matches!(frames[3], Event::Eof(Source::Stdout)));
    }

    /// Drains `input` in chunks of `chunk` bytes with a scan; the lines
    /// forwarded and the tail kept.
    fn scan(input: &[u8], chunk: usize, tcp_only: bool) -> (Vec<Event>, String) {
        struct Chunked<'a>(&'a [u8], usize);
        impl Read for Chunked<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(self.1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let (tx, rx) = events();
        let tail = Arc::new(Mutex::new(Tail::new(1 << 20)));
        let s = ReadyScan {
            tx,
            tcp_only,
            eof_matters: true,
            live: Arc::new(AtomicBool::new(true)),
        };
        drain_stderr(Chunked(input, chunk), &tail, None, Some(s));
        let got = rx.try_iter().collect();
        let text = tail.lock().unwrap().text();
        (got, text)
    }

    #[test]
    fn the_tcp_ready_line_is_picked_out_of_stderr_and_the_tail_stays_whole() {
        let ready =
            br#"{"ready": true, "pid": 7, "transport": "tcp", "host": "127.0.0.1", "port": 5000}"#;
        let mut input = Vec::new();
        for i in 0..2000 {
            input.extend_from_slice(
                format!("import time:      {i} |      {i} | mod{i}\n").as_bytes(),
            );
        }
        input.extend_from_slice(b"{\"not\": \"ready\"}\n{broken json\n");
        input.extend_from_slice(ready);
        input.extend_from_slice(b"\r\nINFO after\n");
        input.extend_from_slice(ready);
        input.extend_from_slice(b"\n");
        for chunk in [1, 7, 4096, 1 << 20] {
            let (events, tail) = scan(&input, chunk, true);
            assert_eq!(events.len(), 1, "chunk {chunk}: {events:?}");
            let Event::Frame(Source::Stderr, f) = &events[0] else {
                panic!("{events:?}")
            };
            assert_eq!(f.line, RawLine::Line(ready.to_vec()));
            assert!(f.read_at_ns.is_some());
            assert_eq!(tail.as_bytes(), &input[..]);
        }
    }

    #[test]
    fn a_stdio_worker_s_ready_line_on_stderr_is_not_taken_for_tcp() {
        let input = b"{\"ready\": true, \"transport\": \"stdio\"}\nlog\n";
        let (events, _) = scan(input, 5, true);
        assert!(
            matches!(events[..], [Event::Eof(Source::Stderr)]),
            "{events:?}"
        );
        // Started for tcp, any ready line on stderr is the one.
        let (events, _) = scan(input, 5, false);
        assert!(
            matches!(events[..], [Event::Frame(Source::Stderr, _)]),
            "{events:?}"
        );
    }

    #[test]
    fn an_over_long_line_is_skipped_not_buffered() {
        let mut input = vec![b'{'; MAX_LINE_BYTES + 10];
        input.extend_from_slice(b"\n{\"ready\": true, \"transport\": \"tcp\", \"port\": 1}\n");
        let (events, _) = scan(&input, 65536, true);
        assert!(
            matches!(events[..], [Event::Frame(Source::Stderr, _)]),
            "{events:?}"
        );
    }
}
