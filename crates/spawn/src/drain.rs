//! The reader threads: stdout cut into stamped protocol frames, stderr
//! drained into a bounded tail (and optionally a file), and a way to join a
//! thread with a bounded wait.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Write};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use worker_proto::{Frame, FrameReader};

use crate::monotonic_ns;

/// How many frames may wait in the channel: bounds memory when a worker
/// floods stdout faster than the harness consumes (each frame <= 1 MiB).
const FRAME_BACKLOG: usize = 16;

/// How many bytes one stderr `read` asks for.
const STDERR_CHUNK: usize = 64 * 1024;

/// What the stdout reader reports.
#[derive(Debug)]
pub(crate) enum Event {
    Frame(Frame),
    Eof,
    Failed(io::Error),
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

/// Starts the stdout reader: every line is stamped with [`monotonic_ns`]
/// right after the `read` that completed it, before any parsing.
pub(crate) fn spawn_stdout<R: Read + Send + 'static>(
    pid: u32,
    stdout: R,
) -> io::Result<(Watched, Receiver<Event>, SyncSender<Event>)> {
    let (tx, rx) = mpsc::sync_channel(FRAME_BACKLOG);
    let notify = tx.clone();
    let watched = Watched::spawn(format!("spawn-stdout-{pid}"), move || {
        read_frames(stdout, &tx)
    })?;
    Ok((watched, rx, notify))
}

fn read_frames<R: Read>(stdout: R, tx: &SyncSender<Event>) {
    let mut reader = FrameReader::new(stdout).with_clock(monotonic_ns);
    loop {
        let event = match reader.next_frame() {
            Ok(Some(frame)) => Event::Frame(frame),
            Ok(None) => Event::Eof,
            Err(e) => Event::Failed(e),
        };
        let last = !matches!(event, Event::Frame(_));
        // A send fails once the harness dropped its end: stop reading.
        if tx.send(event).is_err() || last {
            return;
        }
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
/// every byte to `file` when given.
pub(crate) fn spawn_stderr<R: Read + Send + 'static>(
    pid: u32,
    stderr: R,
    tail: Arc<Mutex<Tail>>,
    file: Option<(File, String)>,
) -> io::Result<Watched> {
    Watched::spawn(format!("spawn-stderr-{pid}"), move || {
        drain_stderr(stderr, &tail, file)
    })
}

fn drain_stderr<R: Read>(mut stderr: R, tail: &Mutex<Tail>, mut file: Option<(File, String)>) {
    let mut chunk = vec![0u8; STDERR_CHUNK];
    loop {
        let n = match stderr.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let bytes = &chunk[..n];
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
        drain_stderr(&data[..], &tail, Some((file, path.display().to_string())));
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
        let handle = thread::spawn(move || read_frames(input, &tx));
        let mut frames = Vec::new();
        while let Ok(e) = rx.recv() {
            frames.push(e);
        }
        handle.join().unwrap();
        assert_eq!(frames.len(), 4, "{frames:?}");
        for e in &frames[..3] {
            let Event::Frame(f) = e else { panic!("{e:?}") };
            assert!(f.read_at_ns.unwrap() >= before);
        }
        assert!(matches!(frames[3], Event::Eof));
    }
}
