//! A check on one timeline ([`::trace::Trace`], `coldstart check --output
//! perfetto=PATH` or `chrome-json=PATH`): coldstart's track with each
//! target's check, and a track of coldstart's for each checked process
//! (`checking process N`: its processes run at once, so their waits would
//! overlap on one track) with what it waited for; each worker's process
//! with its phases (start-up to its ready line, ready, shutting down, its
//! exit) and the protocol's messages as flows, as a bench trial draws them
//! (`crate::trials::trace`); and on the worker's track its start-up
//! imports as nested slices, a forbidden module's in the category
//! `forbidden`, every other's in `import`.
//!
//! An import's slice starts at the recorder's stamp of that import (the
//! `t_ns` of its attempt, taken when the recorder's finder, first on
//! `sys.meta_path`, was asked for it) and lasts the cumulative time `-X
//! importtime` gives it; it nests as importtime nests it. The two sides
//! are joined by name only where they agree: a module is drawn when the
//! recorder saw its name asked for (on the main thread, not as a probe)
//! exactly as many times as importtime logged it, the first stamp with
//! the first line and so on. Nothing else gets a time: a module imported
//! before the recorder was installed (the interpreter's own start-up,
//! `sitecustomize`), one the recorder saw asked for more or fewer times
//! than importtime logged it (a `find_spec` probe, `runpy`'s look-up of
//! `-m`'s package, `importlib.import_module`, which importtime does not
//! log), or one whose stamp falls outside its importer's slice or before
//! its previous sibling's is not drawn, and its own imports are drawn
//! under the nearest importer that is. The worker's track says how many
//! were drawn and how many not (an instant at its spawn).
//!
//! The clocks: the recorder's `t_ns` is Python's `time.monotonic_ns()`,
//! CLOCK_MONOTONIC on Linux, the clock of every mark the harness takes
//! (`timeline::monotonic_ns`), so an import's start and a worker's phases
//! compare as they are. importtime's durations are read on
//! `time.perf_counter`'s clock (CLOCK_MONOTONIC too on Linux) in whole µs,
//! and its timing begins a little before the finder is asked: a slice's
//! end can come out up to that little past its importer's end or its next
//! sibling's start. Such an end is cut there (and at the end of the phase
//! or the round trip it began in), so that the slices nest as the imports
//! did; no start is ever moved.
//!
//! Only the imports of the first interpreter the recorder saw (the
//! worker, or the Python a launcher such as `uv run` started, on a track
//! of its own) with the log's first session are drawn; its children's are
//! not.

use std::collections::HashMap;

use ::trace::{Instant, Slice, Thread, Trace};
use answers::check::TargetReport;
use importguard::importtime::{ImportLog, NodeId, NodeKind};
use importguard::recorder::{ImportAttempt, Recording};
use importguard::verdict::Policy;
use timeline::WorkerRecord;

use crate::trials::trace::{Builder, LANE_TIDS, slice, span_of};

/// The category of a forbidden module's import slice.
pub const FORBIDDEN_CATEGORY: &str = "forbidden";
/// The category of every other import slice.
pub const IMPORT_CATEGORY: &str = "import";

/// One process of a target's check, as a trace draws it.
#[derive(Debug, Clone)]
pub struct CheckedWorker {
    /// Its number in the check, from 1 (`ProcessReport::index`).
    pub index: usize,
    /// Its life as a trial's worker record (pid, marks, exit).
    pub record: WorkerRecord,
    /// What the import recorder wrote in it.
    pub recording: Recording,
}

/// The trace of the checks in `checks` (each target's report with its
/// processes), coldstart being process `own_pid`.
pub fn trace_of<'a>(
    checks: impl IntoIterator<Item = (&'a TargetReport, &'a [CheckedWorker])>,
    own_pid: u32,
) -> Trace {
    let mut b = Builder::new(own_pid, "coldstart check");
    for (report, workers) in checks {
        let records: Vec<WorkerRecord> = workers.iter().map(|w| w.record.clone()).collect();
        let Some((start, end)) = span_of(&records) else {
            continue;
        };
        let own = b.own_tid();
        b.own_slice(
            own,
            slice(&format!("check of {}", report.name), "check", start, end),
        );
        let policy = Policy::new(report.forbidden.clone(), report.allowed.clone()).ok();
        for w in workers {
            let lane = LANE_TIDS + w.index as u32;
            b.own_lane(lane, &format!("checking process {}", w.index));
            // The process's whole check on its lane: the slice its waits
            // and messages (and their flows) lie in.
            let life = span_of(std::slice::from_ref(&w.record))
                .filter(|_| w.record.marks.exited_ns.is_some())
                .unwrap_or((w.record.marks.spawned_ns, end));
            let name = format!("process {} of {}", w.index, report.name);
            b.own_slice(lane, slice(&name, "check", life.0, life.1));
            let Some(spawned) = b.worker(&w.record, Some(lane), end) else {
                continue;
            };
            let process = report.processes.iter().find(|p| p.index == w.index);
            let log = process.and_then(|p| p.log.as_ref());
            let (Some(log), Some(root)) = (log, w.recording.start.as_ref().map(|s| s.pid)) else {
                continue;
            };
            if root != spawned {
                // A launcher (`uv run`, a shell) stood between: the process
                // started is named as the verdict names it, and the Python
                // below it, whose imports these are, as below it.
                let launcher = process
                    .and_then(|p| p.verdict.answered.as_ref())
                    .and_then(|a| a.through.iter().find(|l| l.pid == spawned))
                    .map_or("launcher", |l| l.name.as_str());
                b.name_process(spawned, &format!("{launcher} {spawned} (launcher)"));
                b.name_process(root, &format!("python {root} (below {launcher} {spawned})"));
            }
            let thread = b.thread(root, root, "main");
            draw_imports(thread, log, &w.recording, policy.as_ref(), life);
        }
    }
    b.finish()
}

/// How many of a worker's timed imports got a slice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportsDrawn {
    /// Drawn.
    pub drawn: usize,
    /// Timed in the log's first session, not drawn (no recorded start that
    /// agrees with the log).
    pub not_drawn: usize,
}

/// The imports of `log`'s first session that `recording` stamped, as
/// nested slices on `thread` within `life` (spawn to exit), fitted
/// between the slices it holds already; an instant at the spawn says how
/// many were drawn.
pub fn draw_imports(
    thread: &mut Thread,
    log: &ImportLog,
    recording: &Recording,
    policy: Option<&Policy>,
    life: (u64, u64),
) -> ImportsDrawn {
    let Some(session) = log.sessions().first() else {
        return ImportsDrawn::default();
    };
    let mut d = Drawing {
        log,
        starts: matched(log, recording),
        fixed: thread
            .slices
            .iter()
            .map(|s| (s.start_ns, s.end_ns))
            .collect(),
        policy,
        out: Vec::new(),
    };
    d.level(session.roots.clone(), life.0, life.1);
    let drawn = d.out.len();
    thread.slices.append(&mut d.out);
    let counts = ImportsDrawn {
        drawn,
        not_drawn: (session.entries as usize).saturating_sub(drawn),
    };
    thread.instants.push(Instant {
        name: format!(
            "imports: {} drawn, {} not (no recorded start that agrees with importtime)",
            counts.drawn, counts.not_drawn
        ),
        t_ns: life.0,
    });
    counts
}

/// Each timed node of the log's first session paired with the recorder's
/// attempt of that name, where both saw the name the same number of
/// times (the k-th line with the k-th attempt).
fn matched<'a>(log: &ImportLog, recording: &'a Recording) -> HashMap<NodeId, &'a ImportAttempt> {
    let mut out = HashMap::new();
    let Some(session) = log.sessions().first() else {
        return out;
    };
    let mut lines: HashMap<&str, Vec<NodeId>> = HashMap::new();
    for id in (session.first_node..session.end_node).map(NodeId) {
        if log.node(id).kind == NodeKind::Entry {
            lines.entry(log.name(id)).or_default().push(id);
        }
    }
    let mut attempts: HashMap<&str, Vec<&ImportAttempt>> = HashMap::new();
    for a in recording
        .imports
        .iter()
        .filter(|a| a.thread.is_none() && !a.probe)
    {
        attempts.entry(a.name.as_str()).or_default().push(a);
    }
    for (name, ids) in lines {
        if let Some(seen) = attempts.get(name).filter(|a| a.len() == ids.len()) {
            out.extend(ids.into_iter().zip(seen.iter().copied()));
        }
    }
    out
}

/// One worker's import slices in the making.
struct Drawing<'a> {
    log: &'a ImportLog,
    starts: HashMap<NodeId, &'a ImportAttempt>,
    /// The thread's slices before the imports (phases, round trips,
    /// messages): an import's end is cut where it would cross one.
    fixed: Vec<(u64, u64)>,
    policy: Option<&'a Policy>,
    out: Vec<Slice>,
}

impl Drawing<'_> {
    /// The nodes `ids` (siblings, in import order) within `lo..hi`: each
    /// drawn one, its end cut at its next drawn sibling's start, then its
    /// own imports within it.
    fn level(&mut self, ids: Vec<NodeId>, lo: u64, hi: u64) {
        let mut items = Vec::new();
        let mut last = lo;
        self.frontier(ids, hi, &mut last, &mut items);
        for (k, &(id, start, end)) in items.iter().enumerate() {
            let next = items.get(k + 1).map_or(hi, |n| n.1);
            let end = self.fit(start, end.min(next).min(hi));
            let attempt = self.starts[&id];
            let name = if attempt.blocked {
                format!("{} (blocked)", attempt.name)
            } else {
                attempt.name.clone()
            };
            let category = match self.policy {
                Some(p) if p.forbids(&attempt.name) => FORBIDDEN_CATEGORY,
                _ => IMPORT_CATEGORY,
            };
            self.out.push(slice(&name, category, start, end));
            let children = self.log.children(id).collect();
            self.level(children, start, end);
        }
    }

    /// The nodes to draw at one level: each of `ids` with a start at or
    /// after the previous one's (`last`) and before `hi`, else, in its
    /// place, its own children's.
    fn frontier(
        &self,
        ids: Vec<NodeId>,
        hi: u64,
        last: &mut u64,
        items: &mut Vec<(NodeId, u64, u64)>,
    ) {
        for id in ids {
            let node = self.log.node(id);
            match self.starts.get(&id) {
                Some(a) if a.t_ns >= *last && a.t_ns < hi && node.cumulative_us >= 0 => {
                    let end = a.t_ns.saturating_add(node.cumulative_us as u64 * 1_000);
                    items.push((id, a.t_ns, end));
                    *last = a.t_ns;
                }
                _ => self.frontier(self.log.children(id).collect(), hi, last, items),
            }
        }
    }

    /// `end`, cut so that `start..end` neither crosses a fixed slice's end
    /// from inside it nor its start from outside.
    fn fit(&self, start: u64, mut end: u64) -> u64 {
        loop {
            let before = end;
            for &(a, b) in &self.fixed {
                if a < start && start < b && end > b {
                    end = b;
                }
                if start < a && a < end && end < b {
                    end = a;
                }
            }
            if end == before {
                return end;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use importguard::importtime::parse;
    use importguard::recorder::Channel;

    fn attempt(name: &str, t_ns: u64) -> ImportAttempt {
        ImportAttempt {
            name: name.to_owned(),
            t_ns,
            found: Some(true),
            blocked: false,
            probe: false,
            by: None,
            first_party: None,
            depth: None,
            parent: None,
            stack: Vec::new(),
            stack_by: Vec::new(),
            thread: None,
            error: None,
            channel: Channel::Finder,
            reified: false,
            declared: None,
            audit_t_ns: None,
            file: None,
            finder: None,
        }
    }

    /// `encodings` before the recorder (no stamp); `app` importing
    /// `app.model`, which imports `torch`, which imports `torch._C`; then
    /// `json`, whose stamp the recorder saw twice (a probe of its name).
    const LOG: &str = "\
import time: self [us] | cumulative | imported package
import time:       100 |        100 | encodings
import time:         5 |          5 |       torch._C
import time:        10 |         15 |     torch
import time:        20 |         35 |   app.model
import time:        30 |         65 | app
import time:         4 |          4 | json
";

    fn recording(at: u64) -> Recording {
        Recording {
            imports: vec![
                attempt("app", at),
                attempt("app.model", at + 10_000),
                attempt("torch", at + 12_000),
                attempt("torch._C", at + 13_000),
                attempt("json", at + 70_000),
                attempt("json", at + 71_000),
            ],
            ..Recording::default()
        }
    }

    fn policy() -> Policy {
        Policy::new(vec!["torch".into()], Vec::new()).unwrap()
    }

    fn drawn(t: &Thread) -> Vec<(&str, &str, u64, u64)> {
        t.slices
            .iter()
            .map(|s| (s.name.as_str(), s.category.as_str(), s.start_ns, s.end_ns))
            .collect()
    }

    #[test]
    fn imports_nest_as_importtime_nests_them_and_a_module_without_a_start_is_not_drawn() {
        let log = parse(LOG.as_bytes());
        let mut t = Thread {
            tid: 5,
            ..Thread::default()
        };
        let counts = draw_imports(
            &mut t,
            &log,
            &recording(1_000_000),
            Some(&policy()),
            (0, 1 << 40),
        );
        assert_eq!(
            counts,
            ImportsDrawn {
                drawn: 4,
                not_drawn: 2
            }
        );
        let at = 1_000_000;
        assert_eq!(
            drawn(&t),
            [
                ("app", IMPORT_CATEGORY, at, at + 65_000),
                ("app.model", IMPORT_CATEGORY, at + 10_000, at + 45_000),
                // torch's 15 µs from its stamp would end at +27 000; torch._C's
                // 5 µs at +18 000: each within its importer.
                ("torch", FORBIDDEN_CATEGORY, at + 12_000, at + 27_000),
                ("torch._C", FORBIDDEN_CATEGORY, at + 13_000, at + 18_000),
            ]
        );
        assert!(t.instants[0].name.starts_with("imports: 4 drawn, 2 not"));
        valid_alone(t);
    }

    /// `t` alone in a process is a trace that passes the trace's own
    /// checks (slices nest, nothing ends before it starts).
    fn valid_alone(t: Thread) {
        let trace = Trace {
            processes: vec![::trace::Process {
                pid: 5,
                threads: vec![t],
                ..::trace::Process::default()
            }],
            flows: Vec::new(),
        };
        trace.check().unwrap();
    }

    #[test]
    fn an_end_past_its_importer_or_a_phase_is_cut_there_and_a_start_is_never_moved() {
        let log = parse(LOG.as_bytes());
        let mut rec = recording(1_000_000);
        // torch stamped late: 15 µs from here would end past app.model's end.
        rec.imports[2].t_ns = 1_040_000;
        rec.imports[3].t_ns = 1_041_000;
        let mut t = Thread {
            tid: 5,
            // The start-up phase ends at +60 000: app's 65 µs cross it.
            slices: vec![slice("start-up", "phase", 0, 1_060_000)],
            ..Thread::default()
        };
        draw_imports(&mut t, &log, &rec, Some(&policy()), (0, 1 << 40));
        let d = drawn(&t);
        assert_eq!(d[1], ("app", IMPORT_CATEGORY, 1_000_000, 1_060_000));
        assert_eq!(d[2], ("app.model", IMPORT_CATEGORY, 1_010_000, 1_045_000));
        assert_eq!(d[3], ("torch", FORBIDDEN_CATEGORY, 1_040_000, 1_045_000));
        assert_eq!(d[4].2, 1_041_000, "torch._C keeps its stamp");
        valid_alone(t);
    }

    #[test]
    fn a_module_whose_importer_is_not_drawn_goes_under_the_nearest_that_is() {
        let log = parse(LOG.as_bytes());
        let mut rec = recording(1_000_000);
        // app.model imported through importlib.import_module: stamped,
        // but seen twice by the recorder (a find_spec before it).
        rec.imports.push(attempt("app.model", 1_005_000));
        let mut t = Thread::default();
        draw_imports(&mut t, &log, &rec, None, (0, 1 << 40));
        let names: Vec<&str> = t.slices.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["app", "torch", "torch._C"]);
        assert!(
            t.slices.iter().all(|s| s.category == IMPORT_CATEGORY),
            "no policy, nothing forbidden"
        );
    }

    /// A worker's ready line stamped 50 us before it is read, then 10 us
    /// between each later mark.
    const GAPS: [u64; 6] = [50_000, 10_000, 10_000, 10_000, 10_000, 10_000];

    fn worker(pid: u32, t0: u64) -> WorkerRecord {
        timeline::testing::worker(pid, t0, t0 + 950_000, GAPS)
    }

    /// A report of target `w` forbidding torch, with `n` processes that
    /// each left `log`.
    fn report_of(log: &ImportLog, n: usize) -> TargetReport {
        let verdict = importguard::verdict::judge(
            &policy(),
            &importguard::verdict::Evidence {
                importtime: Some(log),
                recording: None,
                timeline: None,
            },
        );
        let process = |index| answers::check::ProcessReport {
            index,
            pid: None,
            ready_ms: None,
            exit: None,
            error: None,
            failed_at_end: false,
            stderr_tail: None,
            recorder: verdict.recorder,
            chained_sitecustomize: None,
            child_interpreters: 0,
            importtime_entries: log.entry_count(),
            verdict: verdict.clone(),
            log: Some(log.clone()),
        };
        TargetReport {
            name: "w".into(),
            origin: "command line".into(),
            command: Vec::new(),
            limits: None,
            log: None,
            forbidden: vec!["torch".into()],
            allowed: Vec::new(),
            block: false,
            status: answers::check::Status::Fail,
            ready_ms_median: None,
            violations: Vec::new(),
            packages: Vec::new(),
            instrument: None,
            first_party: Vec::new(),
            slowest: Vec::new(),
            processes: (1..=n).map(process).collect(),
            tree: None,
            suggestions: Vec::new(),
        }
    }

    #[test]
    fn each_process_has_its_phases_imports_and_flows_and_coldstart_a_lane_for_each() {
        let report = report_of(&parse(LOG.as_bytes()), 2);
        let workers: Vec<CheckedWorker> = [(1, 11, 1_000_000), (2, 12, 1_000_500)]
            .into_iter()
            .map(|(index, pid, t0)| {
                let mut recording = recording(t0 + 100_000);
                recording.start = Some(importguard::recorder::Start {
                    pid,
                    ..serde_json::from_str(r#"{"t_ns": 0, "pid": 0}"#).unwrap()
                });
                CheckedWorker {
                    index,
                    record: worker(pid, t0),
                    recording,
                }
            })
            .collect();
        let t = trace_of([(&report, workers.as_slice())], 7);
        t.check().unwrap();
        let json = ::trace::chrome::to_json(&t).unwrap();
        let counts = ::trace::chrome::validate(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(counts.flows, 10);
        let own = &t.processes[0];
        let tracks: Vec<&str> = own.threads.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            tracks,
            [
                "coldstart check",
                "checking process 1",
                "checking process 2"
            ]
        );
        assert_eq!(own.threads[0].slices[0].name, "check of w");
        // Ready line, health request and reply, shutdown and its
        // acknowledgement: five flows a process.
        assert_eq!(t.flows.len(), 10);
        let w = &t.processes[1].threads[0];
        let names: Vec<&str> = w.slices.iter().map(|s| s.name.as_str()).collect();
        for name in [
            "start-up",
            "ready",
            "shutting down",
            "app",
            "torch",
            "torch._C",
        ] {
            assert!(names.contains(&name), "{name} in {names:?}");
        }
        let torch = w.slices.iter().find(|s| s.name == "torch").unwrap();
        assert_eq!(torch.category, FORBIDDEN_CATEGORY);
    }
}
