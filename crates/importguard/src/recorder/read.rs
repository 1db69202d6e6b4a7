//! Reading a record file back: its lines parsed into one [`Recording`],
//! a truncated last line tolerated, a format this build does not read
//! refused.

use std::path::{Path, PathBuf};

use super::RecorderError;
use super::bootstrap;
use super::record::{
    BootstrapError, Chain, Channel, Exit, ImageId, ImportAttempt, Record, Spawn, Start,
};

/// Everything one interpreter image recorded, and for the first one the
/// other images it and its descendants started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recording {
    /// `None`: the recorder never ran (`-S`, `-I`, `-E`, or `PYTHONPATH`
    /// replaced), or the record file is missing.
    pub start: Option<Start>,
    /// The environment's own sitecustomize, run after the recorder.
    pub chain: Option<Chain>,
    /// In the order they happened (an attempt both channels wrote is one).
    pub imports: Vec<ImportAttempt>,
    /// The images this one started, in order.
    pub spawns: Vec<Spawn>,
    /// Swallowed bootstrap errors.
    pub errors: Vec<BootstrapError>,
    /// `None` when the interpreter did not reach exit normally (crash,
    /// `os._exit`, killed, or replaced by `os.exec*`).
    pub exit: Option<Exit>,
    /// Lines that were not records: a truncated last line, or a line of an
    /// unknown type (newer bootstrap). 1-based line numbers.
    pub skipped_lines: Vec<u32>,
    /// Record files of the other images.
    pub child_files: Vec<PathBuf>,
    /// The other images (children, forked children, exec'd images, and
    /// theirs), each read from its file, in start order. Empty in a child.
    pub children: Vec<Recording>,
}

impl Recording {
    /// Whether the bootstrap ran in this interpreter.
    pub fn ran(&self) -> bool {
        self.start.is_some()
    }

    /// This image's identity, when it ran.
    pub fn image(&self) -> Option<ImageId> {
        self.start.as_ref().map(|s| ImageId {
            pid: s.pid,
            exec_gen: s.exec_gen,
        })
    }

    /// This image then its children.
    pub fn images(&self) -> impl Iterator<Item = &Recording> {
        std::iter::once(self).chain(self.children.iter())
    }

    /// Parses record lines (one image's: a start record that completes the
    /// first replaces it, any other is ignored; see
    /// [`Recording::parse_images`]).
    pub fn parse(text: &[u8]) -> Recording {
        let mut rec = Recording::default();
        for (n, r) in lines(text) {
            match r {
                Some(r) => rec.push(r),
                None => rec.skipped_lines.push(n),
            }
        }
        rec
    }

    /// Parses a file that may hold several images (a pid reused): a new
    /// image at each start record that does not complete the one before.
    pub fn parse_images(text: &[u8]) -> Vec<Recording> {
        let mut out: Vec<Recording> = Vec::new();
        let mut cur = Recording::default();
        for (n, r) in lines(text) {
            match r {
                Some(Record::Start(s))
                    if cur.start.as_ref().is_some_and(|first| !s.completes(first)) =>
                {
                    out.push(std::mem::take(&mut cur));
                    cur.push(Record::Start(s));
                }
                Some(r) => cur.push(r),
                None => cur.skipped_lines.push(n),
            }
        }
        if cur.start.is_some() || !cur.imports.is_empty() || !cur.skipped_lines.is_empty() {
            out.push(cur);
        }
        out
    }

    /// Refuses records of a format version this build does not read.
    pub(super) fn check_format(&self, path: &Path) -> Result<(), RecorderError> {
        match &self.start {
            Some(s) => bootstrap::check_format(s.version).map_err(|source| RecorderError::Format {
                path: path.to_path_buf(),
                source,
            }),
            None => Ok(()),
        }
    }

    fn push(&mut self, r: Record) {
        match r {
            Record::Start(s) => match &self.start {
                None => self.start = Some(s),
                // The whole start record after the short one.
                Some(first) if s.completes(first) => self.start = Some(s),
                Some(_) => {}
            },
            Record::Chain(c) => self.chain = Some(c),
            Record::Import(mut i) => {
                // The audit hook wrote this attempt first (the finder was
                // not first on sys.meta_path): one attempt, both channels.
                if let Some(t) = i.audit_t_ns.take()
                    && let Some(prev) =
                        self.imports.iter_mut().rev().find(|p| {
                            p.t_ns == t && p.name == i.name && p.channel == Channel::Audit
                        })
                {
                    i.t_ns = t;
                    i.channel = Channel::Both;
                    if i.by.is_none() {
                        i.by = prev.by.take();
                    }
                    *prev = i;
                    return;
                }
                self.imports.push(i);
            }
            Record::Spawn(s) => self.spawns.push(s),
            Record::Error(e) => self.errors.push(e),
            Record::Exit(e) => self.exit = Some(e),
        }
    }
}

/// Each non-blank line with its 1-based number, parsed or not.
fn lines(text: &[u8]) -> impl Iterator<Item = (u32, Option<Record>)> + '_ {
    text.split(|&b| b == b'\n')
        .enumerate()
        .filter_map(|(i, line)| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                return None;
            }
            let n = u32::try_from(i + 1).unwrap_or(u32::MAX);
            Some((n, serde_json::from_slice::<Record>(line).ok()))
        })
}

/// Reads a record file; a missing file is an empty [`Recording`] (the
/// recorder did not run). Records of a format this build does not read are
/// an error.
pub fn read(path: &Path) -> Result<Recording, RecorderError> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let rec = Recording::parse(&bytes);
            rec.check_format(path)?;
            Ok(rec)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Recording::default()),
        Err(source) => Err(RecorderError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}
