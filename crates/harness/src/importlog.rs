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
            return Ok(importtime::parse_shared(Arc::new(map)));
        }
    }
    let mut buf = Vec::new();
    (&file)
        .read_to_end(&mut buf)
        .map_err(|e| Error::io("read", path, e))?;
    Ok(importtime::parse_owned(buf))
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
