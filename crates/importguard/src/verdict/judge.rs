//! The judgement of one process: its recorder images and importtime tree
//! read against the policy, each forbidden root with its chain, the line
//! behind each link, its phase and cost.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::importtime::query::in_package;
use crate::importtime::{ImportLog, NodeId, NodeKind};
use crate::recorder::{CallSite, ImportAttempt, ProcessInfo, Program, Recording, SpawnKind};

use super::answered::{self, Answered, Located};
use super::chain::{import_chain_names, recorded_chain};
use super::missing::{self, Answering, MissingEvidence};
use super::model::{
    AllowedHit, ChainSource, Evidence, ImportStatus, LazyUse, ProcessVerdict, RecorderState,
    Violation,
};
use super::policy::{Classification, Policy};

/// What the recorder says about one forbidden root.
struct RecordedRoot<'a> {
    first: &'a ImportAttempt,
    status: ImportStatus,
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
/// and the processes it started), which process answered the protocol
/// (`answering`; behind a launcher, [`ProcessVerdict::answered`]) and
/// whether it left any evidence ([`ProcessVerdict::missing`]).
///
/// The steps: what the recorder and the log can tell (`notes_of`); the
/// forbidden roots of each recorded image (`recorded_roots`) and of the
/// importtime tree (`importtime_roots`); a violation for each recorded
/// root (`recorded_violation`), then for each root only importtime shows.
pub fn judge_answered(policy: &Policy, ev: &Evidence<'_>, answering: &Answering) -> ProcessVerdict {
    let recording = ev.recording.filter(|r| r.ran());
    let recorder = match ev.recording {
        None => RecorderState::NotUsed,
        Some(r) if r.ran() => RecorderState::Ran,
        Some(_) => RecorderState::DidNotRun,
    };
    let log = ev.importtime.filter(|l| l.entry_count() > 0);
    let processes: Vec<ProcessInfo> = recording.map(Recording::processes).unwrap_or_default();
    let images: Vec<&Recording> = recording
        .map(|r| r.images().filter(|i| i.ran()).collect())
        .unwrap_or_default();
    let mut notes = notes_of(ev, recorder, recording, &images);

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
    let lines = ChainLines::new(&images);
    let tree = log.map(|log| importtime_roots(policy, log, &mut allowed));
    let (it_roots, it_beneath) = tree.unwrap_or_default();
    // Modules the worker's own images recorded: a child's import of the
    // same module is not the one importtime shows first.
    let worker_names: HashSet<&str> = images
        .iter()
        .filter(|img| info_of(&processes, img).is_none_or(ProcessInfo::is_worker))
        .flat_map(|img| img.imports.iter().map(|a| a.name.as_str()))
        .collect();

    let seen = Seen {
        policy,
        log,
        it_roots: &it_roots,
        it_beneath: &it_beneath,
        lines: &lines,
        timeline: ev.timeline,
    };
    let mut violations = Vec::new();
    for (img, roots) in &per_image {
        let info = info_of(&processes, img);
        let is_worker = info.is_none_or(ProcessInfo::is_worker);
        for (name, root) in roots {
            if root.lazy {
                if !lazy.contains(name) {
                    lazy.push(name.clone());
                }
                continue;
            }
            // A child's own import of a module the worker also imported is
            // not the line importtime shows first.
            let node = (is_worker || !worker_names.contains(name.as_str()))
                .then(|| log.and_then(|log| first_entry(log, name)))
                .flatten();
            violations.push(seen.recorded_violation(name, root, node, img, info));
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
            violations.push(importtime_violation(policy, log, id, &it_beneath, &lines));
        }
    }

    let (answered, missing) = answering_of(ev, answering, log.is_some(), &mut notes);
    ProcessVerdict {
        violations,
        allowed: allowed.into_values().collect(),
        lazy,
        probed,
        recorder,
        importtime: log.is_some(),
        notes,
        processes,
        answered,
        missing,
    }
}

/// Which process answered the protocol and whether it left evidence: the
/// one the harness started, or the Python below a launcher that wrote the
/// ready line ([`answered::locate`]); a Python launcher that kept the
/// recorder out is said in `notes`.
fn answering_of(
    ev: &Evidence<'_>,
    answering: &Answering,
    has_log: bool,
    notes: &mut Vec<String>,
) -> (Option<Answered>, Option<MissingEvidence>) {
    let (answered, missing) = match ev.recording.map(|r| answered::locate(r, answering)) {
        Some(Located::Unproven(m)) => (None, Some(m)),
        Some(Located::Judge(pid, answered)) => (
            answered,
            missing::find(ev.recording, has_log, pid, &answering.command),
        ),
        None => (None, None),
    };
    // A Python launcher that kept the recorder out (`-I`) ran code no
    // evidence shows: the worker's are judged, its own are not.
    for l in answered.iter().flat_map(|a| &a.through) {
        if !l.recorded && crate::recorder::is_python_name(&l.name) {
            notes.push(format!(
                "{l} stood between coldstart and the worker without the import recorder: its own imports are not seen"
            ));
        }
    }
    (answered, missing)
}

/// The process `img` is, among those the recorder listed.
fn info_of<'p>(processes: &'p [ProcessInfo], img: &Recording) -> Option<&'p ProcessInfo> {
    let id = img.image()?;
    processes.iter().find(|p| p.image == id)
}

/// The first timed line of `name` in the tree.
fn first_entry(log: &ImportLog, name: &str) -> Option<NodeId> {
    log.find_module(name)
        .find(|&id| log.node(id).kind == NodeKind::Entry)
}

/// What the evidence itself says of its limits: a recorder that did not
/// run, a log with no entries, the recorder's own errors, no normal exit,
/// and each interpreter started without the recorder.
fn notes_of(
    ev: &Evidence<'_>,
    recorder: RecorderState,
    recording: Option<&Recording>,
    images: &[&Recording],
) -> Vec<String> {
    let mut notes = Vec::new();
    if recorder == RecorderState::DidNotRun {
        notes.push(
            "the import recorder did not run (the worker uses -S, -I or -E, or replaces PYTHONPATH): \
             failed and caught imports, importlib.import_module and phases are not known; \
             judged by importtime alone"
                .to_owned(),
        );
    }
    if ev.importtime.is_some_and(|l| l.entry_count() == 0) {
        notes.push(
            "the importtime log has no entries (PYTHONPROFILEIMPORTTIME was not honoured: -E or -I?)"
                .to_owned(),
        );
    }
    let Some(r) = recording else {
        return notes;
    };
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
    for img in images {
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
    notes
}

/// Who imported each module, for a chain's lines: the worker's own images
/// first, then the children's.
struct ChainLines<'a> {
    imported_by: HashMap<&'a str, &'a CallSite>,
}

impl<'a> ChainLines<'a> {
    fn new(images: &[&'a Recording]) -> Self {
        let mut imported_by = HashMap::new();
        for img in images {
            importers(img, &mut imported_by);
        }
        ChainLines { imported_by }
    }

    /// The line behind each link of `chain`.
    fn of(&self, chain: &[String]) -> Vec<Option<CallSite>> {
        chain
            .iter()
            .map(|m| self.imported_by.get(m.as_str()).map(|f| (*f).clone()))
            .collect()
    }

    /// In a child image, its own records first: the same module may have
    /// been imported from another line in the worker.
    fn in_image(&self, img: &Recording, chain: &[String]) -> Vec<Option<CallSite>> {
        let mut own = HashMap::new();
        importers(img, &mut own);
        chain
            .iter()
            .map(|m| {
                own.get(m.as_str())
                    .or_else(|| self.imported_by.get(m.as_str()))
                    .map(|f| (*f).clone())
            })
            .collect()
    }
}

/// importtime's roots: forbidden nodes with no forbidden ancestor and no
/// forbidden parent package seen before them; and for each root, the
/// forbidden modules counted beneath it. Notes the allowed modules seen.
fn importtime_roots(
    policy: &Policy,
    log: &ImportLog,
    allowed: &mut BTreeMap<String, AllowedHit>,
) -> (Vec<NodeId>, HashMap<NodeId, Vec<String>>) {
    let mut it_roots: Vec<NodeId> = Vec::new();
    let mut it_beneath: HashMap<NodeId, Vec<String>> = HashMap::new();
    let mut seen_root: HashMap<&str, NodeId> = HashMap::new();
    for (i, node) in log.nodes().iter().enumerate() {
        if node.kind != NodeKind::Entry {
            continue;
        }
        let id = NodeId(u32::try_from(i).unwrap_or(u32::MAX));
        let name = log.name(id);
        note_allowed(policy, allowed, name);
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
    (it_roots, it_beneath)
}

/// What a recorded root's violation is read from, beside the root itself.
struct Seen<'s, 'a> {
    policy: &'s Policy,
    log: Option<&'a ImportLog>,
    it_roots: &'s [NodeId],
    it_beneath: &'s HashMap<NodeId, Vec<String>>,
    lines: &'s ChainLines<'a>,
    timeline: Option<&'a timeline::Timeline>,
}

impl Seen<'_, '_> {
    /// The violation of a forbidden root the recorder saw in `img`, with
    /// its line in the tree (`node`) when importtime timed it.
    fn recorded_violation(
        &self,
        name: &str,
        root: &RecordedRoot<'_>,
        node: Option<NodeId>,
        img: &Recording,
        info: Option<&ProcessInfo>,
    ) -> Violation {
        let log = self.log;
        let is_worker = info.is_none_or(ProcessInfo::is_worker);
        let ((chain, chain_parent_of), chain_source) = match (node, log) {
            (Some(id), Some(l)) => (import_chain_names(l, id), ChainSource::Importtime),
            _ => (recorded_chain(root.first, log), ChainSource::Recorder),
        };
        let cumulative_us = match node {
            Some(id) => log.map(|l| l.node(id).cumulative_us),
            // No line of its own (importlib.import_module): the subtrees
            // of its submodules that importtime shows as roots.
            None if is_worker => log.and_then(|l| {
                let parts: Vec<i64> = self
                    .it_roots
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
            for n in self.it_beneath.get(&id).into_iter().flatten() {
                if !beneath.contains(n) {
                    beneath.push(n.clone());
                }
            }
        }
        let first = root.first;
        Violation {
            module: name.to_owned(),
            pattern: pattern_of(self.policy, name),
            status: root.status,
            detail: root.detail.clone(),
            chain_lines: if is_worker {
                self.lines.of(&chain)
            } else {
                self.lines.in_image(img, &chain)
            },
            chain,
            chain_parent_of,
            chain_source,
            origin: first.origin().cloned(),
            importer: first.by.clone(),
            stage: self.timeline.map(|t| t.stage_at(first.t_ns)),
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
        }
    }
}

/// The violation of a root only importtime shows: loaded, with its chain
/// and cost from the tree, and no phase (the recorder did not see it).
fn importtime_violation(
    policy: &Policy,
    log: &ImportLog,
    id: NodeId,
    it_beneath: &HashMap<NodeId, Vec<String>>,
    lines: &ChainLines<'_>,
) -> Violation {
    let name = log.name(id);
    let (chain, chain_parent_of) = import_chain_names(log, id);
    let chain_lines = lines.of(&chain);
    Violation {
        chain_parent_of,
        cumulative_us: Some(log.node(id).cumulative_us),
        beneath: it_beneath.get(&id).cloned().unwrap_or_default(),
        ..Violation::loaded(name, &pattern_of(policy, name), chain, chain_lines)
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
fn importers<'a>(img: &'a Recording, out: &mut HashMap<&'a str, &'a CallSite>) {
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
) -> (ImportStatus, Option<String>, bool) {
    if a.blocked {
        return (
            ImportStatus::Blocked,
            Some("refused by the import policy (--block)".to_owned()),
            false,
        );
    }
    if a.found == Some(false) {
        let detail = match &a.error {
            Some(e) => format!("a finder failed: {e}"),
            None => "not installed".to_owned(),
        };
        return (ImportStatus::Attempted, Some(detail), false);
    }
    match final_modules {
        None => (ImportStatus::Loaded, None, false),
        // Asked for after the exit snapshot (interpreter finalisation): the
        // snapshot cannot tell.
        Some(_) if exit_t_ns.is_some_and(|t| a.t_ns > t) => (ImportStatus::Loaded, None, false),
        Some((modules, lazy)) => {
            if lazy.contains(a.name.as_str()) {
                (ImportStatus::Loaded, None, true)
            } else if modules.contains(a.name.as_str()) {
                (ImportStatus::Loaded, None, false)
            } else {
                (
                    ImportStatus::Attempted,
                    Some(
                        "found, but its import failed (absent from sys.modules at exit)".to_owned(),
                    ),
                    false,
                )
            }
        }
    }
}
