//! Verdicts: a worker's import evidence judged against a [`Policy`].
//!
//! The evidence of one process is its `-X importtime` log (the tree: who
//! imported whom, and what it cost), its recorder [`Recording`] (every
//! attempt, found or not, blocked, who asked, when) and the worker's
//! [`Timeline`] (ready, requests, shutdown; `spawn` records it) on the same
//! monotonic clock, read by [`phase_of`].
//! [`judge`] returns a [`ProcessVerdict`]: one [`Violation`] per forbidden
//! module that entered the process on its own (a forbidden module imported
//! by another forbidden module is counted beneath it, not repeated), with
//! the chain from the top-level import down to it, the first-party line
//! that started it, the protocol phase, the cost of its subtree, and
//! whether it was loaded, only attempted, or blocked. [`merge`] folds the
//! verdicts of a target's fresh processes into one list.
//!
//! Every image the recorder saw is judged alike: the worker, the image it
//! exec'd into, its subprocesses, forked children and `multiprocessing`
//! workers; each violation says in which process it happened
//! ([`Violation::process`]), which recorder channel saw it
//! ([`Violation::channel`]) and, for a module loaded lazily, the line that
//! declared it and the line that made it real ([`Violation::lazy`]).
//!
//! Either source may be missing: `--log` judges an importtime log alone;
//! a worker run with `-S`, `-I` or `-E` never ran the recorder, and the
//! verdict says so ([`RecorderState::DidNotRun`]) and uses importtime alone.
//! When the process that answered the protocol left neither
//! ([`judge_answered`] with the harness's [`Answering`]), the verdict holds
//! a [`MissingEvidence`] that the caller must turn into an error, never a
//! pass. Nothing here starts a process or renders for people.

mod missing;
mod policy;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use serde::Serialize;
use timeline::Timeline;

use crate::importtime::query::in_package;
use crate::importtime::{ImportLog, Metric, NodeId, NodeKind};
use crate::recorder::{Channel, Frame, ImportAttempt, ProcessInfo, Program, Recording, SpawnKind};

pub use missing::{Answering, EvidenceKind, MissingEvidence, MissingReason};
pub use policy::{Allowance, Classification, Policy, PolicyError};

/// Where in the protocol an import happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// Before the worker was ready.
    Startup,
    /// After ready, before the first request (a background import).
    AfterReady,
    /// After request number `index` (1-based, over all requests) was sent
    /// and before the next one.
    Request {
        /// The request's op.
        op: String,
        /// 1-based.
        index: usize,
    },
    /// After the shutdown op was sent.
    Shutdown,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Startup => f.write_str("start-up"),
            Phase::AfterReady => f.write_str("after ready, before any request"),
            Phase::Request { op, index } => write!(f, "{op} request #{index}"),
            Phase::Shutdown => f.write_str("shutdown"),
        }
    }
}

/// The protocol phase an event at `t_ns` belongs to, on the worker's
/// timeline (as `spawn` recorded it).
pub fn phase_of(timeline: &Timeline, t_ns: u64) -> Phase {
    if timeline.end.shutdown_sent_ns.is_some_and(|s| t_ns >= s) {
        return Phase::Shutdown;
    }
    match timeline.ready_at_ns() {
        Some(ready) if t_ns >= ready => {}
        _ => return Phase::Startup,
    }
    match timeline.requests.iter().rposition(|r| t_ns >= r.sent_ns) {
        Some(i) => Phase::Request {
            op: timeline.requests[i].op.clone(),
            index: i + 1,
        },
        None => Phase::AfterReady,
    }
}

/// How far a forbidden import got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The module was imported (its code ran).
    Loaded,
    /// Asked for, but not loaded: not installed, or its import failed.
    Attempted,
    /// Refused by the recorder's policy (`--block`).
    Blocked,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Loaded => "loaded",
            Status::Attempted => "attempted",
            Status::Blocked => "blocked",
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
    pub status: Status,
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
    pub chain_lines: Vec<Option<Frame>>,
    /// The first-party source line that started it (recorder).
    pub origin: Option<Frame>,
    /// The line that asked for the module itself (recorder).
    pub importer: Option<Frame>,
    /// The protocol phase (recorder stamp on the harness's timeline).
    pub phase: Option<Phase>,
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

/// A lazily imported module made real: where it was declared, where it was
/// touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LazyUse {
    /// The line that declared it lazy (the `find_spec` behind a LazyLoader,
    /// or the `lazy import` statement), when the recorder saw it.
    pub declared: Option<Frame>,
    /// The line whose access ran its body.
    pub made_real_at: Option<Frame>,
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

/// What the recorder says about one forbidden root.
struct RecordedRoot<'a> {
    first: &'a ImportAttempt,
    status: Status,
    detail: Option<String>,
    lazy: bool,
    beneath: Vec<String>,
}

/// Judges one worker's evidence, taking its first recorded interpreter as
/// the process that answered the protocol (see [`judge_answered`]).
pub fn judge(policy: &Policy, ev: &Evidence<'_>) -> ProcessVerdict {
    judge_answered(policy, ev, &Answering::default())
}

/// Judges one worker's evidence: every image the recorder saw (the worker
/// and the processes it started), and whether `answering`, the process
/// that answered the protocol, left any evidence ([`ProcessVerdict::missing`]).
pub fn judge_answered(policy: &Policy, ev: &Evidence<'_>, answering: &Answering) -> ProcessVerdict {
    let mut notes = Vec::new();
    let recording = ev.recording.filter(|r| r.ran());
    let recorder = match ev.recording {
        None => RecorderState::NotUsed,
        Some(r) if r.ran() => RecorderState::Ran,
        Some(_) => RecorderState::DidNotRun,
    };
    if recorder == RecorderState::DidNotRun {
        notes.push(
            "the import recorder did not run (the worker uses -S, -I or -E, or replaces PYTHONPATH): \
             failed and caught imports, importlib.import_module and phases are not known; \
             judged by importtime alone"
                .to_owned(),
        );
    }
    let log = ev.importtime.filter(|l| l.entry_count() > 0);
    if ev.importtime.is_some() && log.is_none() {
        notes.push(
            "the importtime log has no entries (PYTHONPROFILEIMPORTTIME was not honoured: -E or -I?)"
                .to_owned(),
        );
    }
    let processes: Vec<ProcessInfo> = recording.map(Recording::processes).unwrap_or_default();
    let images: Vec<&Recording> = recording
        .map(|r| r.images().filter(|i| i.ran()).collect())
        .unwrap_or_default();
    let info_of = |img: &Recording| -> Option<&ProcessInfo> {
        let id = img.image()?;
        processes.iter().find(|p| p.image == id)
    };
    if let Some(r) = recording {
        for e in &r.errors {
            notes.push(format!("recorder error in {}: {}", e.place, e.error));
        }
        let exec_ed = r.spawns.iter().any(|s| s.kind == SpawnKind::Exec);
        if r.exit.is_none() && !exec_ed {
            notes.push(
                "the recorder saw no normal exit (crash, kill or os._exit): modules found are taken as loaded"
                    .to_owned(),
            );
        }
        for child in &r.children {
            for e in &child.errors {
                let who = child
                    .image()
                    .map_or_else(String::new, |i| format!(" ({i})"));
                notes.push(format!("recorder error{who} in {}: {}", e.place, e.error));
            }
        }
        for img in &images {
            for s in img
                .spawns
                .iter()
                .filter(|s| !s.env.record || !s.env.pythonpath)
            {
                // A program that is not Python has no imports to see.
                let what = match s.program() {
                    Program::Other(_) => continue,
                    Program::Python(exe) => format!("the Python interpreter `{exe}`"),
                    Program::Unknown(exe) if exe.is_empty() => "a program".to_owned(),
                    Program::Unknown(exe) => {
                        format!("`{exe}` (it could not be told whether it runs Python)")
                    }
                };
                let at =
                    s.by.as_ref()
                        .map_or_else(String::new, |b| format!(" at {b}"));
                notes.push(format!(
                    "{} started {what} as `{}` ({}){at} with an environment without the import recorder: its own imports are not seen",
                    img.image().map_or_else(|| "the worker".to_owned(), |i| i.to_string()),
                    s.argv.join(" "),
                    s.kind,
                ));
            }
        }
    }

    let mut allowed: BTreeMap<String, AllowedHit> = BTreeMap::new();
    let mut probed: Vec<String> = Vec::new();
    let mut lazy: Vec<String> = Vec::new();
    // Names any image recorded (an importtime-only root is one none did).
    let mut recorded_names: HashSet<&str> = HashSet::new();
    let mut exit_lazy: Vec<&str> = Vec::new();
    // Per image, its roots in time order.
    let mut per_image: Vec<(&Recording, Vec<(String, RecordedRoot<'_>)>)> = Vec::new();
    for img in &images {
        let roots = recorded_roots(policy, img, &mut allowed, &mut probed);
        for a in img.imports.iter().filter(|a| !a.probe) {
            recorded_names.insert(a.name.as_str());
        }
        if let Some(e) = &img.exit {
            exit_lazy.extend(e.lazy.iter().map(String::as_str));
            exit_lazy.dedup();
        }
        per_image.push((img, roots));
    }

    // Who imported each module, for chain lines: the worker's own images
    // first, then the children's.
    let mut imported_by: HashMap<&str, &Frame> = HashMap::new();
    for img in &images {
        importers(img, &mut imported_by);
    }
    let lines_of = |chain: &[String]| -> Vec<Option<Frame>> {
        chain
            .iter()
            .map(|m| imported_by.get(m.as_str()).map(|f| (*f).clone()))
            .collect()
    };
    // In a child image, its own records first: the same module may have
    // been imported from another line in the worker.
    let lines_in = |img: &Recording, chain: &[String]| -> Vec<Option<Frame>> {
        let mut own = HashMap::new();
        importers(img, &mut own);
        chain
            .iter()
            .map(|m| {
                own.get(m.as_str())
                    .or_else(|| imported_by.get(m.as_str()))
                    .map(|f| (*f).clone())
            })
            .collect()
    };

    // importtime's roots: forbidden nodes with no forbidden ancestor and no
    // forbidden parent package seen before them.
    let mut it_roots: Vec<NodeId> = Vec::new();
    let mut it_beneath: HashMap<NodeId, Vec<String>> = HashMap::new();
    if let Some(log) = log {
        let mut seen_root: HashMap<&str, NodeId> = HashMap::new();
        for (i, node) in log.nodes().iter().enumerate() {
            if node.kind != NodeKind::Entry {
                continue;
            }
            let id = NodeId(u32::try_from(i).unwrap_or(u32::MAX));
            let name = log.name(id);
            note_allowed(policy, &mut allowed, name);
            if !policy.forbids(name) {
                continue;
            }
            let mut anc = log.parent(id);
            let mut owner = None;
            while let Some(p) = anc {
                if policy.forbids(log.name(p)) {
                    owner = Some(p);
                }
                anc = log.parent(p);
            }
            let owner = owner
                .map(|o| root_node(log, o, &seen_root))
                .or_else(|| parents(name).find_map(|p| seen_root.get(p).copied()));
            match owner {
                Some(o) => {
                    seen_root.insert(name, o);
                    let list = it_beneath.entry(o).or_default();
                    if !list.iter().any(|n| n == name) {
                        list.push(name.to_owned());
                    }
                }
                None => {
                    seen_root.insert(name, id);
                    it_roots.push(id);
                }
            }
        }
    }
    let first_node = |name: &str| -> Option<NodeId> {
        let log = log?;
        log.find_module(name)
            .find(|&id| log.node(id).kind == NodeKind::Entry)
    };
    // Modules the worker's own images recorded: a child's import of the
    // same module is not the one importtime shows first.
    let worker_names: HashSet<&str> = images
        .iter()
        .filter(|img| info_of(img).is_none_or(ProcessInfo::is_worker))
        .flat_map(|img| img.imports.iter().map(|a| a.name.as_str()))
        .collect();

    let mut violations = Vec::new();
    let chain_names = |id: NodeId| -> (Vec<String>, Vec<Option<String>>) {
        log.map(|l| import_chain_names(l, id)).unwrap_or_default()
    };
    for (img, roots) in &per_image {
        let info = info_of(img);
        let is_worker = info.is_none_or(ProcessInfo::is_worker);
        for (name, root) in roots {
            if root.lazy {
                if !lazy.contains(name) {
                    lazy.push(name.clone());
                }
                continue;
            }
            let node = if is_worker || !worker_names.contains(name.as_str()) {
                first_node(name)
            } else {
                None
            };
            let ((chain, chain_parent_of), chain_source) = match node {
                Some(id) => (chain_names(id), ChainSource::Importtime),
                None => (recorded_chain(root.first, log), ChainSource::Recorder),
            };
            let cumulative_us = match node {
                Some(id) => log.map(|l| l.node(id).cumulative_us),
                // No line of its own (importlib.import_module): the subtrees
                // of its submodules that importtime shows as roots.
                None if is_worker => log.and_then(|l| {
                    let parts: Vec<i64> = it_roots
                        .iter()
                        .filter(|&&r| in_package(l.name(r), name))
                        .map(|&r| l.node(r).cumulative_us)
                        .collect();
                    (!parts.is_empty()).then(|| parts.iter().sum())
                }),
                None => None,
            };
            let mut beneath = root.beneath.clone();
            if let Some(id) = node {
                for n in it_beneath.get(&id).into_iter().flatten() {
                    if !beneath.contains(n) {
                        beneath.push(n.clone());
                    }
                }
            }
            let first = root.first;
            violations.push(Violation {
                module: name.clone(),
                pattern: pattern_of(policy, name),
                status: root.status,
                detail: root.detail.clone(),
                chain_lines: if is_worker {
                    lines_of(&chain)
                } else {
                    lines_in(img, &chain)
                },
                chain,
                chain_parent_of,
                chain_source,
                origin: first.origin().cloned(),
                importer: first.by.clone(),
                phase: ev.timeline.map(|t| phase_of(t, first.t_ns)),
                t_ns: Some(first.t_ns),
                cumulative_us,
                beneath,
                recorded: true,
                in_importtime: node.is_some(),
                process: info.cloned(),
                channel: Some(first.channel),
                lazy: first.reified.then(|| LazyUse {
                    declared: first.declared.clone(),
                    made_real_at: first.origin().cloned(),
                }),
            });
        }
    }
    // Time order across processes.
    violations.sort_by_key(|v: &Violation| v.t_ns.unwrap_or(u64::MAX));
    // Forbidden names only probed for, or declared lazy and never touched.
    for n in exit_lazy {
        if policy.forbids(n)
            && !recorded_names.contains(n)
            && !violations.iter().any(|v| v.module == n)
            && !lazy.iter().any(|l| l == n)
        {
            lazy.push(n.to_owned());
        }
    }
    probed.retain(|p| !violations.iter().any(|v| v.module == *p));
    // Roots only importtime shows: the recorder did not run, or did not see
    // them (an interpreter without the recorder writing to the same stderr).
    if let Some(log) = log {
        for &id in &it_roots {
            let name = log.name(id);
            if recorded_names.contains(name) || lazy.iter().any(|l| l == name) {
                continue;
            }
            let (chain, chain_parent_of) = chain_names(id);
            violations.push(Violation {
                module: name.to_owned(),
                pattern: pattern_of(policy, name),
                status: Status::Loaded,
                detail: None,
                chain_lines: lines_of(&chain),
                chain,
                chain_parent_of,
                chain_source: ChainSource::Importtime,
                origin: None,
                importer: None,
                phase: None,
                t_ns: None,
                cumulative_us: Some(log.node(id).cumulative_us),
                beneath: it_beneath.get(&id).cloned().unwrap_or_default(),
                recorded: false,
                in_importtime: true,
                process: None,
                channel: None,
                lazy: None,
            });
        }
    }

    let missing = missing::check(ev.recording, log.is_some(), answering);
    ProcessVerdict {
        violations,
        allowed: allowed.into_values().collect(),
        lazy,
        probed,
        recorder,
        importtime: log.is_some(),
        notes,
        processes,
        missing,
    }
}

fn note_allowed(policy: &Policy, allowed: &mut BTreeMap<String, AllowedHit>, module: &str) {
    if let Classification::Allowed { pattern, allowance } = policy.classify(module) {
        allowed
            .entry(module.to_owned())
            .or_insert_with(|| AllowedHit {
                module: module.to_owned(),
                pattern: pattern.to_owned(),
                allowed_by: allowance.module.clone(),
                reason: allowance.reason.clone(),
            });
    }
}

/// One image's forbidden roots in time order (a forbidden module imported
/// by another is counted beneath it).
fn recorded_roots<'a>(
    policy: &Policy,
    r: &'a Recording,
    allowed: &mut BTreeMap<String, AllowedHit>,
    probed: &mut Vec<String>,
) -> Vec<(String, RecordedRoot<'a>)> {
    let mut rec_roots: Vec<(String, RecordedRoot<'a>)> = Vec::new();
    let mut root_of: HashMap<&str, usize> = HashMap::new();
    let final_modules: Option<FinalModules<'_>> = r.exit.as_ref().map(|e| {
        (
            e.modules.iter().map(String::as_str).collect(),
            e.lazy.iter().map(String::as_str).collect(),
        )
    });
    for a in &r.imports {
        note_allowed(policy, allowed, &a.name);
        if !policy.forbids(&a.name) {
            continue;
        }
        if a.probe {
            if !probed.contains(&a.name) {
                probed.push(a.name.clone());
            }
            continue;
        }
        let owner = a
            .stack
            .iter()
            .find(|m| policy.forbids(m))
            .and_then(|m| root_of.get(m.as_str()).copied())
            .or_else(|| parents(&a.name).find_map(|p| root_of.get(p).copied()));
        let (status, detail, lazy) =
            attempt_status(a, final_modules.as_ref(), r.exit.as_ref().map(|e| e.t_ns));
        match owner {
            Some(i) => {
                root_of.insert(&a.name, i);
                let (root_name, root) = &mut rec_roots[i];
                if a.name != *root_name && !root.beneath.contains(&a.name) {
                    root.beneath.push(a.name.clone());
                }
            }
            None => match root_of.get(a.name.as_str()) {
                Some(&i) => {
                    // Asked again: the strongest outcome wins.
                    let root = &mut rec_roots[i].1;
                    if status < root.status {
                        root.status = status;
                        root.detail = detail;
                    }
                    root.lazy &= lazy;
                }
                None => {
                    root_of.insert(&a.name, rec_roots.len());
                    rec_roots.push((
                        a.name.clone(),
                        RecordedRoot {
                            first: a,
                            status,
                            detail,
                            lazy,
                            beneath: Vec::new(),
                        },
                    ));
                }
            },
        }
    }
    rec_roots
}

fn pattern_of(policy: &Policy, name: &str) -> String {
    match policy.classify(name) {
        Classification::Forbidden { pattern } | Classification::Allowed { pattern, .. } => {
            pattern.to_owned()
        }
        Classification::Clean => String::new(),
    }
}

/// `a.b.c` -> `a.b`, `a`.
/// Adds, for each module one image's records place, the line that imported
/// it (the first place wins): an attempt's own `by`, and the `stack_by` of
/// a forbidden name's record, which holds the importing line of every
/// module that was executing at that moment (the worker's other imports
/// carry no frame of their own).
fn importers<'a>(img: &'a Recording, out: &mut HashMap<&'a str, &'a Frame>) {
    for a in img.imports.iter().filter(|a| !a.probe) {
        if let Some(by) = &a.by {
            out.entry(a.name.as_str()).or_insert(by);
        }
        if a.stack_by.len() == a.stack.len() {
            for (m, by) in a.stack.iter().zip(&a.stack_by) {
                if let Some(by) = by {
                    out.entry(m.as_str()).or_insert(by);
                }
            }
        }
    }
}

fn parents(name: &str) -> impl Iterator<Item = &str> {
    name.match_indices('.')
        .map(move |(i, _)| &name[..i])
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
}

/// The root a forbidden importtime ancestor was filed under.
fn root_node(log: &ImportLog, id: NodeId, seen_root: &HashMap<&str, NodeId>) -> NodeId {
    seen_root.get(log.name(id)).copied().unwrap_or(id)
}

/// `sys.modules` at exit, and its lazy modules.
type FinalModules<'a> = (HashSet<&'a str>, HashSet<&'a str>);

fn attempt_status(
    a: &ImportAttempt,
    final_modules: Option<&FinalModules<'_>>,
    exit_t_ns: Option<u64>,
) -> (Status, Option<String>, bool) {
    if a.blocked {
        return (
            Status::Blocked,
            Some("refused by the import policy (--block)".to_owned()),
            false,
        );
    }
    if a.found == Some(false) {
        let detail = match &a.error {
            Some(e) => format!("a finder failed: {e}"),
            None => "not installed".to_owned(),
        };
        return (Status::Attempted, Some(detail), false);
    }
    match final_modules {
        None => (Status::Loaded, None, false),
        // Asked for after the exit snapshot (interpreter finalisation): the
        // snapshot cannot tell.
        Some(_) if exit_t_ns.is_some_and(|t| a.t_ns > t) => (Status::Loaded, None, false),
        Some((modules, lazy)) => {
            if lazy.contains(a.name.as_str()) {
                (Status::Loaded, None, true)
            } else if modules.contains(a.name.as_str()) {
                (Status::Loaded, None, false)
            } else {
                (
                    Status::Attempted,
                    Some(
                        "found, but its import failed (absent from sys.modules at exit)".to_owned(),
                    ),
                    false,
                )
            }
        }
    }
}

/// The import chain of a line ([`ImportLog::import_chain`]): the names,
/// and for each the name it was imported as a parent package of.
fn import_chain_names(log: &ImportLog, id: NodeId) -> (Vec<String>, Vec<Option<String>>) {
    log.import_chain(id)
        .iter()
        .map(|c| {
            (
                log.name(c.node).to_owned(),
                c.parent_of.map(|r| log.name(r).to_owned()),
            )
        })
        .unzip()
}

/// The chain of an attempt importtime has no line for: the import chain of
/// the innermost executing module importtime does show, then the rest of
/// the recorder's stack, then the module.
fn recorded_chain(
    a: &ImportAttempt,
    log: Option<&ImportLog>,
) -> (Vec<String>, Vec<Option<String>>) {
    let (mut chain, mut parent_of) = (Vec::new(), Vec::new());
    let mut from = 0;
    if let Some(log) = log {
        for (i, m) in a.stack.iter().enumerate().rev() {
            if let Some(id) = log
                .find_module(m)
                .find(|&id| log.node(id).kind == NodeKind::Entry)
            {
                (chain, parent_of) = import_chain_names(log, id);
                from = i + 1;
                break;
            }
        }
    }
    for m in a.stack[from..].iter().chain([&a.name]) {
        if !chain.contains(m) {
            chain.push(m.clone());
            parent_of.push(None);
        }
    }
    (chain, parent_of)
}

/// A target's violation across its processes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MergedViolation {
    /// The violation as seen in the first process that had it.
    #[serde(flatten)]
    pub first: Violation,
    /// In how many processes it occurred.
    pub processes: usize,
    /// Out of how many judged.
    pub of: usize,
    /// Median cumulative time over the processes that timed it.
    pub median_cumulative_us: Option<i64>,
}

/// Folds the verdicts of one target's processes: one entry per module and
/// status, in the order first seen.
pub fn merge(verdicts: &[ProcessVerdict]) -> Vec<MergedViolation> {
    let mut out: Vec<(MergedViolation, Vec<i64>)> = Vec::new();
    // One entry per module, status and kind of process (the worker, a
    // forked child, a child interpreter).
    let key = |x: &Violation| {
        (
            x.module.clone(),
            x.status,
            x.process.as_ref().map(|p| p.relation),
        )
    };
    for v in verdicts {
        let mut counted: Vec<usize> = Vec::new();
        for x in &v.violations {
            let costs = x.cumulative_us.into_iter();
            match out.iter().position(|(m, _)| key(&m.first) == key(x)) {
                Some(i) => {
                    let (m, c) = &mut out[i];
                    // Two pool workers of one verdict count once.
                    if !counted.contains(&i) {
                        m.processes += 1;
                        counted.push(i);
                    }
                    c.extend(costs);
                }
                None => {
                    counted.push(out.len());
                    out.push((
                        MergedViolation {
                            first: x.clone(),
                            processes: 1,
                            of: verdicts.len(),
                            median_cumulative_us: None,
                        },
                        costs.collect(),
                    ));
                }
            }
        }
    }
    out.into_iter()
        .map(|(mut m, mut costs)| {
            costs.sort_unstable();
            m.median_cumulative_us = median(&costs);
            m
        })
        .collect()
}

fn median(sorted: &[i64]) -> Option<i64> {
    match sorted.len() {
        0 => None,
        n if n % 2 == 1 => Some(sorted[n / 2]),
        n => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2),
    }
}

/// One of the slowest imports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SlowImport {
    /// The module.
    pub module: String,
    /// Its cumulative time, microseconds.
    pub cumulative_us: i64,
    /// Its self time, microseconds.
    pub self_us: i64,
    /// From its top-level import down to it.
    pub chain: Vec<String>,
}

/// The `n` heaviest disjoint subtrees of the log's first session (the
/// worker's own interpreter): by cumulative time, skipping any import that
/// lies inside one already listed, so one deep chain does not fill the list.
pub fn slowest(log: &ImportLog, n: usize) -> Vec<SlowImport> {
    let session = (!log.sessions().is_empty()).then_some(0);
    let mut picked: Vec<NodeId> = Vec::new();
    for id in log.top(log.entry_count(), Metric::Cumulative, session) {
        if picked.len() == n {
            break;
        }
        let mut up = log.parent(id);
        let mut inside = false;
        while let Some(p) = up {
            if picked.contains(&p) {
                inside = true;
                break;
            }
            up = log.parent(p);
        }
        if !inside {
            picked.push(id);
        }
    }
    picked.into_iter().map(|id| slow_import(log, id)).collect()
}

/// Start-up time by top-level package over the log's first session (the
/// worker's own interpreter): each package's self time summed over its
/// timed modules, with their count; the `n` largest first (ties by name).
/// This is where the time went: `torch` with its hundreds of modules, not
/// the worker's `main` that imported it.
pub fn by_package(log: &ImportLog, n: usize) -> Vec<crate::importtime::PackageTotal> {
    let session = (!log.sessions().is_empty()).then_some(0);
    let mut totals = log.package_totals(session);
    totals.sort_by(|a, b| {
        b.self_us
            .cmp(&a.self_us)
            .then_with(|| a.package.cmp(&b.package))
    });
    totals.truncate(n);
    totals
}

/// The `n` modules of the project's own code (their top-level name in
/// `first_party`) with the largest self time in the log's first session,
/// largest first.
pub fn first_party_modules(log: &ImportLog, first_party: &[String], n: usize) -> Vec<SlowImport> {
    let session = (!log.sessions().is_empty()).then_some(0);
    let ids = log.node_range(session).map(NodeId).filter(|&id| {
        let top = crate::importtime::top_level(log.name(id));
        first_party.iter().any(|p| p == top)
    });
    log.top_among(n, Metric::SelfTime, ids)
        .into_iter()
        .map(|id| slow_import(log, id))
        .collect()
}

#[cfg(test)]
mod tests;

/// One module of the importtime tree as a row of a "slowest" list.
fn slow_import(log: &ImportLog, id: NodeId) -> SlowImport {
    SlowImport {
        module: log.name(id).to_owned(),
        cumulative_us: log.node(id).cumulative_us,
        self_us: log.node(id).self_us,
        chain: import_chain_names(log, id).0,
    }
}
