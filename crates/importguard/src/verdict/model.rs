//! What a verdict says: the protocol stage of an import, a violation with
//! its chain, status, cost and process, and one process's whole verdict.

use std::fmt;

use serde::Serialize;
use timeline::{Stage, Timeline};

use crate::importtime::ImportLog;
use crate::recorder::{CallSite, Channel, ProcessInfo, Recording};

use super::answered::Answered;
use super::missing::MissingEvidence;

/// How far a forbidden import got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ImportStatus {
    /// The module was imported (its code ran).
    Loaded,
    /// Asked for, but not loaded: not installed, or its import failed.
    Attempted,
    /// Refused by the recorder's policy (`--block`).
    Blocked,
}

impl fmt::Display for ImportStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ImportStatus::Loaded => "loaded",
            ImportStatus::Attempted => "attempted",
            ImportStatus::Blocked => "blocked",
        })
    }
}

/// Where a violation's chain came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChainSource {
    /// The importtime tree.
    Importtime,
    /// The recorder's stack of executing modules (no importtime line for
    /// the module: `importlib.import_module`, a failed or blocked attempt).
    Recorder,
}

/// One forbidden module that entered a process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The forbidden module.
    pub module: String,
    /// The forbidden prefix it matched.
    pub pattern: String,
    /// Loaded, attempted or blocked.
    pub status: ImportStatus,
    /// Why it is `attempted`: `not installed`, `found, but its import failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Who imported whom, from the top-level import down to the module
    /// (both included), each module once
    /// ([`crate::importtime::ImportLog::import_chain`]).
    pub chain: Vec<String>,
    /// For each module of the chain, the dotted name its importer asked for
    /// when the module was imported as that name's parent package (`import
    /// a.b.c` imports `a.b` first); `None` for a module imported by name.
    pub chain_parent_of: Vec<Option<String>>,
    /// Where the chain came from.
    pub chain_source: ChainSource,
    /// For each module of the chain, the line that imported it (recorder;
    /// `None` where it has no record), so a re-export in a package
    /// `__init__.py` shows as the line it is.
    pub chain_lines: Vec<Option<CallSite>>,
    /// The first-party source line that started it (recorder).
    pub origin: Option<CallSite>,
    /// The line that asked for the module itself (recorder).
    pub importer: Option<CallSite>,
    /// The protocol stage it happened in (recorder stamp placed on the
    /// harness's timeline); serialized under its first name, `phase`, as
    /// `{"phase": "startup"}` or `{"phase": "request", "op", "index"}`.
    #[serde(rename = "phase", serialize_with = "stage_as_phase")]
    pub stage: Option<Stage>,
    /// Recorder stamp of the first attempt.
    pub t_ns: Option<u64>,
    /// Cumulative import time of its subtree, microseconds (importtime).
    pub cumulative_us: Option<i64>,
    /// Other forbidden modules imported beneath it.
    pub beneath: Vec<String>,
    /// Whether the recorder saw it.
    pub recorded: bool,
    /// Whether importtime shows it.
    pub in_importtime: bool,
    /// The process it happened in (recorder): the worker, or a child with
    /// its command line, parent and the line that started it.
    pub process: Option<ProcessInfo>,
    /// The recorder channel that saw its first attempt.
    pub channel: Option<Channel>,
    /// For a module imported lazily and made real later: the line that
    /// declared it and the line that touched it.
    pub lazy: Option<LazyUse>,
}

impl Violation {
    /// A forbidden `module` (matched by `pattern`) that importtime shows
    /// loaded, reached along `chain` (the top-level import first, the
    /// module last, each imported by name) with the line of each link
    /// where known. Everything the recorder adds is empty (no stage, time,
    /// origin, process, channel or laziness; not `recorded`), and so is its
    /// cost: the judge fills in what it has, an embedding program or a test
    /// what it needs.
    pub fn loaded(
        module: &str,
        pattern: &str,
        chain: Vec<String>,
        chain_lines: Vec<Option<CallSite>>,
    ) -> Violation {
        Violation {
            module: module.to_owned(),
            pattern: pattern.to_owned(),
            status: ImportStatus::Loaded,
            detail: None,
            chain_parent_of: vec![None; chain.len()],
            chain,
            chain_source: ChainSource::Importtime,
            chain_lines,
            origin: None,
            importer: None,
            stage: None,
            t_ns: None,
            cumulative_us: None,
            beneath: Vec::new(),
            recorded: false,
            in_importtime: true,
            process: None,
            channel: None,
            lazy: None,
        }
    }
}

/// A lazily imported module made real: where it was declared, where it was
/// touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LazyUse {
    /// The line that declared it lazy (the `find_spec` behind a LazyLoader,
    /// or the `lazy import` statement), when the recorder saw it.
    pub declared: Option<CallSite>,
    /// The line whose access ran its body.
    pub made_real_at: Option<CallSite>,
}

/// A module the allow list let through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AllowedHit {
    /// The module that was imported.
    pub module: String,
    /// The forbidden prefix it matched.
    pub pattern: String,
    /// The allowance's module.
    pub allowed_by: String,
    /// The allowance's reason.
    pub reason: String,
}

/// Whether the recorder was used and ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecorderState {
    /// No recorder for this evidence (`--log`).
    NotUsed,
    /// Injected but it never ran: `-S`, `-I`, `-E`, or `PYTHONPATH` replaced.
    DidNotRun,
    /// It ran.
    Ran,
}

/// The verdict on one process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessVerdict {
    /// One per forbidden module that entered on its own, in time order.
    pub violations: Vec<Violation>,
    /// Forbidden-but-allowed modules seen.
    pub allowed: Vec<AllowedHit>,
    /// Forbidden modules imported lazily and never executed (not violations).
    pub lazy: Vec<String>,
    /// Forbidden modules only probed for (`importlib.util.find_spec`), not
    /// imported (not violations).
    pub probed: Vec<String>,
    /// Whether the recorder ran.
    pub recorder: RecorderState,
    /// Whether an importtime log with at least one entry was given.
    pub importtime: bool,
    /// Things the reader should know (evidence missing, bootstrap errors).
    pub notes: Vec<String>,
    /// Every image the recorder saw, the worker first, with how each was
    /// started and by which line.
    pub processes: Vec<ProcessInfo>,
    /// The process that answered the protocol when it is not the one the
    /// harness started (a launcher such as `uv run` or a shell stood
    /// between), with the processes between.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered: Option<Answered>,
    /// The process that answered the protocol left no import evidence: the
    /// check cannot pass (exit 2), whatever `violations` says.
    pub missing: Option<MissingEvidence>,
}

impl ProcessVerdict {
    /// No violation, and evidence from the process that answered.
    pub fn holds(&self) -> bool {
        self.violations.is_empty() && self.missing.is_none()
    }
}

/// One process's evidence.
#[derive(Debug, Clone, Copy, Default)]
pub struct Evidence<'a> {
    /// Its `-X importtime` log.
    pub importtime: Option<&'a ImportLog>,
    /// Its recorder records (`None`: no recorder was used).
    pub recording: Option<&'a Recording>,
    /// The worker's timeline (`None`: nothing was run).
    pub timeline: Option<&'a Timeline>,
}

/// A violation's stage in the check's JSON, in the shape it first had:
/// `{"phase": NAME}`, a request's `op` and `index` beside it.
fn stage_as_phase<S: serde::Serializer>(stage: &Option<Stage>, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let Some(stage) = stage else {
        return s.serialize_none();
    };
    let mut m = s.serialize_map(None)?;
    m.serialize_entry("phase", stage.name())?;
    if let Stage::Request { op, index } = stage {
        m.serialize_entry("op", op)?;
        m.serialize_entry("index", index)?;
    }
    m.end()
}
