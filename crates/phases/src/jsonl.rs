//! The one JSON-lines reader and writer of the records this crate defines
//! (`trials.jsonl`, `requests.jsonl`): one record per line, each line
//! written whole and flushed as soon as its record exists, so a run that is
//! killed keeps every record it finished. A last line without its newline
//! (a run killed mid-write) is reported, never parsed.
//!
//! This is the crate's only I/O, kept here so the format of the records and
//! the way they are stored live side by side.

use std::fs::File;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A JSONL file could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JsonlError {
    /// Opening, writing or reading the file failed.
    #[error("could not {what} {}: {cause}", path.display())]
    Io {
        /// `create`, `append to`, `open`, `read`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's word.
        cause: std::io::Error,
    },
    /// A record did not serialise.
    #[error("a record of {} did not serialise: {cause}", path.display())]
    Serialise {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: serde_json::Error,
    },
    /// A complete line is not a record of the expected type.
    #[error("{} line {line} is not a record of this kind ({cause}); is it the right file?", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based.
        line: usize,
        /// Why.
        cause: serde_json::Error,
    },
}

/// Appends records to a JSONL file, one line each, flushed per record.
#[derive(Debug)]
pub struct Writer {
    file: File,
    path: PathBuf,
}

impl Writer {
    /// Opens `path` for appending, creating it.
    pub fn create(path: &Path) -> Result<Writer, JsonlError> {
        let file = File::options()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|cause| JsonlError::Io {
                what: "create",
                path: path.to_path_buf(),
                cause,
            })?;
        Ok(Writer {
            file,
            path: path.to_path_buf(),
        })
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes each record as one line with a single `write`, then flushes.
    pub fn append<T: Serialize>(&mut self, records: &[T]) -> Result<(), JsonlError> {
        let mut buf = Vec::new();
        for r in records {
            serde_json::to_writer(&mut buf, r).map_err(|cause| JsonlError::Serialise {
                path: self.path.clone(),
                cause,
            })?;
            buf.push(b'\n');
        }
        self.file
            .write_all(&buf)
            .and_then(|()| self.file.flush())
            .map_err(|cause| JsonlError::Io {
                what: "append to",
                path: self.path.clone(),
                cause,
            })
    }
}

/// What [`read`] found: the records of every complete line, and whether a
/// last line was cut short (left out).
#[derive(Debug)]
pub struct Read<T> {
    /// One per complete line, in order.
    pub records: Vec<T>,
    /// The 1-based number of a last line without its newline.
    pub cut_short_line: Option<usize>,
}

/// Reads every complete line of `path` as a record.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<Read<T>, JsonlError> {
    let io = |what: &'static str| {
        move |cause| JsonlError::Io {
            what,
            path: path.to_path_buf(),
            cause,
        }
    };
    let mut reader = BufReader::new(File::open(path).map_err(io("open"))?);
    let mut records = Vec::new();
    let mut line = String::new();
    let mut n = 0;
    loop {
        line.clear();
        if reader.read_line(&mut line).map_err(io("read"))? == 0 {
            return Ok(Read {
                records,
                cut_short_line: None,
            });
        }
        n += 1;
        if !line.ends_with('\n') {
            return Ok(Read {
                records,
                cut_short_line: Some(n),
            });
        }
        records.push(
            serde_json::from_str(&line).map_err(|cause| JsonlError::Parse {
                path: path.to_path_buf(),
                line: n,
                cause,
            })?,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_cut_line_is_reported_not_parsed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        let mut w = Writer::create(&path).unwrap();
        w.append(&[1u32, 2]).unwrap();
        w.append(&[3u32]).unwrap();
        let got: Read<u32> = read(&path).unwrap();
        assert_eq!(got.records, [1, 2, 3]);
        assert_eq!(got.cut_short_line, None);

        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"4")
            .unwrap();
        let got: Read<u32> = read(&path).unwrap();
        assert_eq!(got.records, [1, 2, 3]);
        assert_eq!(got.cut_short_line, Some(4));
    }

    #[test]
    fn a_line_of_another_kind_names_its_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        std::fs::write(&path, "1\n\"no\"\n").unwrap();
        let err = read::<u32>(&path).unwrap_err().to_string();
        assert!(err.contains("x.jsonl line 2"), "{err}");
    }
}
