//! An importtime log from where the user has it: a file (mapped into
//! memory, no copy), standard input, or a live command run with
//! `PYTHONPROFILEIMPORTTIME=1`.

use std::fs::File;
use std::io::{Read, Seek};
use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use importguard::importtime::{self, ImportLog};

use crate::error::{Error, Result};

/// Reads and parses a log file: mapped into memory when it is a regular,
/// non-empty file (no copy, no allocation for the bytes), read otherwise.
pub fn read_file(path: &Path) -> Result<ImportLog> {
    let file = File::open(path).map_err(|e| Error::io("read", path, e))?;
    let meta = file.metadata().map_err(|e| Error::io("read", path, e))?;
    if meta.is_file() && meta.len() > 0 {
        // SAFETY: a read-only private mapping of an open file. Like every
        // tool that maps files, this assumes the log is not truncated while
        // it is being read.
        if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
            return Ok(importtime::parse_shared(Arc::new(MappedLog(map))));
        }
    }
    let mut buf = Vec::new();
    (&file)
        .read_to_end(&mut buf)
        .map_err(|e| Error::io("read", path, e))?;
    Ok(importtime::parse_owned(buf))
}

/// A log file mapped into memory, whose pages the parser gives back as it
/// goes: the log then holds positions into the file, and only the pages of
/// what is read again (the names a rendering prints) come back in.
struct MappedLog(memmap2::Mmap);

impl importtime::LogBytes for MappedLog {
    fn bytes(&self) -> &[u8] {
        &self.0
    }

    fn read_past(&self, range: std::ops::Range<usize>) {
        let page = page_size();
        // The page a range shares with the part another thread reads may
        // be dropped while that thread still reads it: it comes back from
        // the file, as any dropped page does.
        let (start, end) = (range.start / page * page, range.end / page * page);
        if end > start {
            // SAFETY: a private, read-only mapping of a file: dropping its
            // pages loses nothing, the next read of them maps the file's
            // pages again. A failure only leaves the pages in place.
            let _ = unsafe {
                self.0.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    start,
                    end - start,
                )
            };
        }
    }
}

/// The memory page size.
fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|&s| s > 0)
        .unwrap_or(4096)
}

/// Reads and parses a log from standard input.
pub fn read_stdin() -> Result<ImportLog> {
    let mut buf = Vec::new();
    std::io::stdin()
        .lock()
        .read_to_end(&mut buf)
        .map_err(|e| Error::io("read", Path::new("standard input"), e))?;
    Ok(importtime::parse_owned(buf))
}

/// What a live command left: its log and how it ended.
#[derive(Debug)]
pub struct Captured {
    /// Its stderr, parsed.
    pub log: ImportLog,
    /// Its exit status.
    pub status: std::process::ExitStatus,
}

/// Runs `cmd` with importtime on, stdin closed, its stdout passed to our
/// stderr (so it never mixes with a rendering on stdout) and its stderr
/// captured in a temporary file, then parses what it wrote.
pub fn run_command(cmd: &[String]) -> Result<Captured> {
    let Some((program, args)) = cmd.split_first() else {
        return Err(Error::Invalid(
            "give a command after `--`, for example `-- python3 -c 'import json'`".to_owned(),
        ));
    };
    let tmp = std::env::temp_dir();
    let mut captured = tempfile::tempfile().map_err(|e| Error::io("create a file in", &tmp, e))?;
    let stdout_to_stderr = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| Error::io("duplicate", Path::new("stderr"), e))?;
    let stderr_file = captured
        .try_clone()
        .map_err(|e| Error::io("share a file in", &tmp, e))?;
    let status = Command::new(program)
        .args(args)
        .env("PYTHONPROFILEIMPORTTIME", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout_to_stderr))
        .stderr(Stdio::from(stderr_file))
        .status()
        .map_err(|e| {
            Error::Invalid(format!(
                "could not run `{}` ({e}); check that the program exists",
                cmd.join(" ")
            ))
        })?;
    let mut buf = Vec::new();
    captured
        .rewind()
        .and_then(|_| captured.read_to_end(&mut buf))
        .map_err(|e| Error::io("read the captured stderr in", &tmp, e))?;
    Ok(Captured {
        log: importtime::parse_owned(buf),
        status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log file several times the parser's release step, mapped and given
    /// back page by page as it is parsed: the names, text lines and totals
    /// read afterwards are the ones the same bytes give in memory.
    #[test]
    fn a_mapped_file_given_back_while_parsed_reads_like_its_bytes() {
        let mut text = String::from("import time: self [us] | cumulative | imported package\n");
        let mut i = 0;
        while text.len() < 12 << 20 {
            text.push_str(&format!(
                "import time:      {:>4} | {:>10} |   pkg{}.mod{i}\nprogram output {i}\nimport time:         1 | {:>10} | pkg{}\n",
                i % 997,
                i % 997,
                i % 5,
                i % 997 + 1,
                i % 5
            ));
            i += 1;
        }
        let mut file = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
        let mapped = read_file(file.path()).unwrap();
        let inline = importtime::parse(text.as_bytes());
        let names = |log: &ImportLog| -> Vec<String> {
            (0..log.nodes().len() as u32)
                .map(|i| log.name(importtime::NodeId(i)).to_owned())
                .collect()
        };
        assert_eq!(names(&mapped), names(&inline));
        assert_eq!(mapped.nodes(), inline.nodes());
        let texts = |log: &ImportLog| -> Vec<String> {
            log.text_lines()
                .iter()
                .map(|t| log.text_of(t).to_owned())
                .collect()
        };
        assert_eq!(texts(&mapped), texts(&inline));
        assert_eq!(mapped.package_totals(None), inline.package_totals(None));
        assert_eq!(mapped.text(), text);
    }
}
