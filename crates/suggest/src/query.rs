//! The classifier: `classify.py`, embedded, run by the target's own
//! interpreter with `-I -B`, and the typed request and answer.
//!
//! Its source is cut by job under `classify/` (`sources.py`, `analysis.py`,
//! `project.py`, `plan.py`, `driver.py`) and concatenated in that order at
//! compile time into the one script ([`SCRIPT`]).
//!
//! The script runs through `spawn`'s one runner of embedded scripts (a
//! private temporary folder with the request beside it, its own process
//! group, a timeout); it prints one line tagged `COLDSTART_SUGGEST `
//! holding JSON. Anything else (a crash, no tagged line) is an error that
//! shows what the interpreter printed on stdout and stderr.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use spawn::Script;

use crate::error::SuggestError;
use crate::{CutKind, FunctionSite, SourceLine};

/// The classifier's source: its files in order, each a job (the constants
/// and a source file's import statements, where names are read, the
/// project's other readers, the cuts' edits, the driver).
pub(crate) const SCRIPT: &str = concat!(
    include_str!("classify/sources.py"),
    include_str!("classify/analysis.py"),
    include_str!("classify/project.py"),
    include_str!("classify/plan.py"),
    include_str!("classify/driver.py"),
);
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

/// How long the classifier may take: it parses and walks the chain's
/// first-party files only, so far longer than this means a hang (a `.pth`
/// file or sitecustomize of the environment).
const TIMEOUT: Duration = Duration::from_secs(120);

/// Runs the classifier on `request` with `python`.
pub(crate) fn classify(python: &Path, request: &Request<'_>) -> Result<Answer, SuggestError> {
    // The one first-party rule's Python side, then the classifier.
    let text = format!("{}\n{SCRIPT}", importguard::firstparty::PY);
    let body = serde_json::to_vec(request).map_err(|e| SuggestError::Answer {
        python: python.to_path_buf(),
        detail: format!("the request could not be encoded: {e}"),
        stdout: String::new(),
    })?;
    let out = Script::new("classify.py", text)
        .file_arg("request.json", body)
        .timeout(TIMEOUT)
        .run(python)
        .map_err(|source| SuggestError::Spawn {
            python: python.to_path_buf(),
            source: Box::new(source),
        })?;
    let Some(json) = out.tagged(TAG) else {
        return Err(SuggestError::Interpreter {
            python: python.to_path_buf(),
            status: out.status.to_string(),
            stdout: out.stdout.trim_end().to_owned(),
            stderr: out.stderr.trim_end().to_owned(),
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
        stdout: out.stdout.trim_end().to_owned(),
    })
}
