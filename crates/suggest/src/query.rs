//! The classifier: `classify.py`, embedded, run by the target's own
//! interpreter with `-I -B`, and the typed request and answer.
//!
//! The script is written to a private temporary folder with the request
//! beside it; it prints one line tagged `COLDSTART_SUGGEST ` holding JSON.
//! Anything else (a crash, no tagged line) is an error that shows what the
//! interpreter printed on stdout and stderr.

use std::path::Path;
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use crate::error::SuggestError;
use crate::{CutKind, FunctionSite, SourceLine};

/// The classifier's source.
pub(crate) const SCRIPT: &str = include_str!("classify.py");
const TAG: &str = "COLDSTART_SUGGEST ";

/// One link of the chain: the line that imported `module`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LinkRequest {
    pub index: usize,
    pub module: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub func: Option<String>,
    /// The module whose top-level code ran the import (the previous link).
    pub importer: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Request<'a> {
    pub root: &'a Path,
    pub cwd: Option<&'a Path>,
    pub links: &'a [LinkRequest],
    /// Classify as if the interpreter were this version (tests only: the
    /// rewrite for a newer grammar, checked where no such interpreter is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assume_version: Option<[u32; 3]>,
}

/// The interpreter that read the files (`sys.version_info`).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PythonInfo {
    pub version: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Answer {
    pub python: PythonInfo,
    pub links: Vec<LinkAnswer>,
}

#[derive(Debug, Deserialize)]
struct TooOld {
    too_old: String,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct LinkAnswer {
    pub index: usize,
    #[serde(default)]
    pub cuts: Vec<CutAnswer>,
    #[serde(default)]
    pub blocked: Vec<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub line_count: Option<usize>,
    pub statement: Option<String>,
    pub reason: Option<String>,
    #[serde(default)]
    pub searched: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct CutAnswer {
    pub kind: CutKind,
    #[serde(default)]
    pub names: Vec<String>,
    #[serde(default)]
    pub functions: Vec<FunctionSite>,
    #[serde(default)]
    pub type_checking: bool,
    #[serde(default)]
    pub future_annotations: bool,
    #[serde(default)]
    pub getattr: bool,
    #[serde(default)]
    pub users: Vec<SourceLine>,
    #[serde(default)]
    pub notes: Vec<String>,
    pub edits: Vec<EditAnswer>,
}

/// Lines `[start, end)`, 1-based, become `lines`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct EditAnswer {
    pub start: usize,
    pub end: usize,
    pub lines: Vec<String>,
}

/// Runs the classifier on `request` with `python`.
pub(crate) fn classify(python: &Path, request: &Request<'_>) -> Result<Answer, SuggestError> {
    let dir = tempfile::Builder::new()
        .prefix("coldstart-suggest-")
        .tempdir()
        .map_err(|e| SuggestError::io("create", std::env::temp_dir(), e))?;
    let script = dir.path().join("classify.py");
    // The one first-party rule's Python side, then the classifier.
    let text = format!("{}\n{SCRIPT}", importguard::firstparty::PY);
    std::fs::write(&script, text).map_err(|e| SuggestError::io("write", &script, e))?;
    let req_path = dir.path().join("request.json");
    let body = serde_json::to_vec(request).map_err(|e| SuggestError::Answer {
        python: python.to_path_buf(),
        detail: format!("the request could not be encoded: {e}"),
        stdout: String::new(),
    })?;
    std::fs::write(&req_path, body).map_err(|e| SuggestError::io("write", &req_path, e))?;
    let out = Command::new(python)
        .args(["-I", "-B"])
        .arg(&script)
        .arg(&req_path)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .map_err(|source| SuggestError::Spawn {
            python: python.to_path_buf(),
            source,
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix(TAG));
    let Some(json) = line.filter(|_| out.status.success()) else {
        return Err(SuggestError::Interpreter {
            python: python.to_path_buf(),
            status: out.status.to_string(),
            stdout: stdout.trim_end().to_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).trim_end().to_owned(),
        });
    };
    if let Ok(old) = serde_json::from_str::<TooOld>(json) {
        return Err(SuggestError::TooOld {
            python: python.to_path_buf(),
            version: old.too_old,
        });
    }
    serde_json::from_str(json).map_err(|e| SuggestError::Answer {
        python: python.to_path_buf(),
        detail: e.to_string(),
        stdout: stdout.trim_end().to_owned(),
    })
}
