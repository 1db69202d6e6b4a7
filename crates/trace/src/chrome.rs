//! Chrome's Trace Event format, its JSON Object Format (`{"traceEvents":
//! [...]}`), for the tools that read only that (chrome://tracing,
//! speedscope's import, Perfetto's legacy importer): `M` metadata naming
//! each process and thread, `X` complete events for slices, `i` instants,
//! `C` counters, `s`/`f` flow events bound to the slices they leave and
//! reach.
//!
//! Timestamps are whole µs on the trace's clock, each rounded from its ns
//! (the Perfetto trace keeps the ns). Whole, because readers sum a slice's
//! end, `ts + dur`, in f64: with fractions of a µs on a clock at 10^10 µs
//! the sums round apart, a frame that ends with its parent ends after it,
//! and speedscope's import breaks ("Tried to end ... when ... was on the
//! top of the stack"). Integers below 2^53 sum exactly, and rounding each
//! end keeps every nesting (a slice inside another stays inside, at worst
//! at the same start or end). At one start and length, the enclosing slice
//! comes first ([`crate::Thread::slice_order`]), the order readers need to
//! nest them; a slice that ends where another begins ends a µs before it
//! (see `end_us`).

use serde_json::{Value, json};

use crate::error::Error;
use crate::model::{Trace, Unit};

/// The trace as Chrome Trace Event JSON; `Err` when it breaks a rule of
/// [`Trace::check`].
pub fn to_json(trace: &Trace) -> Result<String, Error> {
    trace.check()?;
    let mut meta = Vec::new();
    // (ts in ns, the event); sorted by time, stable, after the metadata.
    let mut events: Vec<(u64, Value)> = Vec::new();
    let flows = trace.flows_by_slice();
    for p in &trace.processes {
        meta.push(
            json!({"ph": "M", "name": "process_name", "pid": p.pid, "tid": 0,
                          "args": {"name": p.name}}),
        );
        for i in &p.instants {
            events.push((
                i.t_ns,
                json!({"ph": "i", "s": "p", "name": i.name, "pid": p.pid, "tid": p.pid,
                       "ts": us(i.t_ns)}),
            ));
        }
        for c in &p.counters {
            let key = match c.unit {
                Unit::Bytes => "bytes",
                Unit::Percent => "percent",
            };
            for pt in &c.points {
                events.push((
                    pt.t_ns,
                    json!({"ph": "C", "name": c.name, "pid": p.pid, "tid": p.pid,
                           "ts": us(pt.t_ns), "args": {key: pt.value}}),
                ));
            }
        }
        for t in &p.threads {
            meta.push(
                json!({"ph": "M", "name": "thread_name", "pid": p.pid, "tid": t.tid,
                              "args": {"name": t.name}}),
            );
            let starts: std::collections::BTreeSet<u64> =
                t.slices.iter().map(|s| us(s.start_ns)).collect();
            for i in t.slice_order() {
                let s = &t.slices[i];
                let (start, end) = (us(s.start_ns), end_us(s, &starts));
                events.push((
                    s.start_ns,
                    json!({"ph": "X", "name": s.name, "cat": s.category, "pid": p.pid,
                           "tid": t.tid, "ts": start, "dur": end - start}),
                ));
                let key = (p.pid, t.tid, i);
                for id in flows.leaving.get(&key).into_iter().flatten() {
                    events.push((
                        s.start_ns,
                        json!({"ph": "s", "name": "flow", "cat": "flow", "id": id,
                               "pid": p.pid, "tid": t.tid, "ts": us(s.start_ns)}),
                    ));
                }
                for id in flows.reaching.get(&key).into_iter().flatten() {
                    events.push((
                        s.start_ns,
                        json!({"ph": "f", "bp": "e", "name": "flow", "cat": "flow",
                               "id": id, "pid": p.pid, "tid": t.tid, "ts": us(s.start_ns)}),
                    ));
                }
            }
            for i in &t.instants {
                events.push((
                    i.t_ns,
                    json!({"ph": "i", "s": "t", "name": i.name, "pid": p.pid, "tid": t.tid,
                           "ts": us(i.t_ns)}),
                ));
            }
        }
    }
    events.sort_by_key(|(t, _)| *t);
    meta.extend(events.into_iter().map(|(_, e)| e));
    let doc = json!({"traceEvents": meta, "displayTimeUnit": "ms"});
    Ok(serde_json::to_string(&doc).expect("a JSON value always serializes"))
}

/// ns as whole µs, the format's unit, rounded to the nearest.
fn us(ns: u64) -> u64 {
    ns.saturating_add(500) / 1000
}

/// A slice's end in µs: rounded, and one µs earlier where another slice
/// of its thread begins at that µs. A reader cannot tell which comes
/// first of an end and a begin at one time: speedscope begins first when
/// the two frames have one name (it takes them for a zero-length frame),
/// and then ends the wrong frames ("Tried to end ... when ... was on the
/// top of the stack"). Every slice ending at that µs moves alike, so what
/// nests still nests; a zero-length slice stays as it is.
fn end_us(s: &crate::Slice, starts: &std::collections::BTreeSet<u64>) -> u64 {
    let (start, end) = (us(s.start_ns), us(s.end_ns));
    if end > start && starts.contains(&end) {
        end - 1
    } else {
        end
    }
}

/// A Chrome Trace Event JSON document that breaks a rule of the format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a valid Chrome trace: {0}")]
pub struct Invalid(pub String);

/// What a valid document holds (see [`validate`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Processes named by `process_name` metadata.
    pub processes: usize,
    /// Threads named by `thread_name` metadata.
    pub threads: usize,
    /// Slices (`X`, and `B`/`E` pairs).
    pub slices: usize,
    /// Flows (an `s` with its `f`).
    pub flows: usize,
    /// Counter values (`C`).
    pub counters: usize,
}

/// Checks a document by the Trace Event format's rules (its JSON Object
/// Format): a `traceEvents` array; every event with a known `ph`, a `pid`
/// and a `tid`, a numeric `ts` but for metadata; each `X` with a `dur` not
/// negative; every `B` ended by an `E` on its thread, in order; a thread's
/// slices nested, each end summed as `ts + dur` in f64 as readers sum it
/// (no tolerance: a child that ends a rounding after its parent breaks
/// them); each `s` flow paired with one `f` of its id, both inside a
/// slice of their thread; every process and thread with an event named
/// by `process_name`/`thread_name` metadata; timestamps not going back on
/// a thread in the file's order.
pub fn validate(json: &str) -> Result<Counts, Invalid> {
    use std::collections::{BTreeMap, BTreeSet};
    let bad = |s: String| Err(Invalid(s));
    let doc: Value = serde_json::from_str(json).map_err(|e| Invalid(format!("not JSON: {e}")))?;
    let Some(events) = doc.get("traceEvents").and_then(Value::as_array) else {
        return bad("no `traceEvents` array".into());
    };
    let mut counts = Counts::default();
    let (mut named_p, mut named_t) = (BTreeSet::new(), BTreeSet::new());
    let (mut used_p, mut used_t) = (BTreeSet::new(), BTreeSet::new());
    let mut open: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
    let mut last_ts: BTreeMap<(u64, u64), f64> = BTreeMap::new();
    let mut flows = Flows::default();
    for (n, e) in events.iter().enumerate() {
        let ph = e.get("ph").and_then(Value::as_str).unwrap_or_default();
        let (Some(pid), Some(tid)) = (
            e.get("pid").and_then(Value::as_u64),
            e.get("tid").and_then(Value::as_u64),
        ) else {
            return bad(format!("event {n} has no numeric pid and tid: {e}"));
        };
        if ph == "M" {
            let name = e["args"]["name"].as_str();
            match (e["name"].as_str(), name) {
                (Some("process_name"), Some(_)) => named_p.insert(pid),
                (Some("thread_name"), Some(_)) => named_t.insert((pid, tid)),
                _ => return bad(format!("metadata event {n} names nothing: {e}")),
            };
            continue;
        }
        let Some(ts) = e.get("ts").and_then(Value::as_f64) else {
            return bad(format!("event {n} has no numeric ts: {e}"));
        };
        used_p.insert(pid);
        let key = (pid, tid);
        if last_ts.get(&key).is_some_and(|&last| ts < last) {
            return bad(format!(
                "event {n} goes back in time on thread {tid} of {pid}"
            ));
        }
        last_ts.insert(key, ts);
        let stack = open.entry(key).or_default();
        if timed_event(ph, n, e, ts, stack, &mut counts, &mut flows)? {
            used_t.insert(key);
        }
    }
    if let Some((k, _)) = open
        .iter()
        .find(|(_, s)| s.iter().any(|(_, end)| end.is_infinite()))
    {
        return bad(format!(
            "a B event on thread {} of {} is never ended",
            k.1, k.0
        ));
    }
    let Flows { starts, finishes } = flows;
    if starts.values().any(|&c| c != 1)
        || starts.keys().ne(finishes.keys())
        || finishes.values().any(|&c| c != 1)
    {
        return bad(format!(
            "flow ids do not pair up: starts {starts:?}, finishes {finishes:?}"
        ));
    }
    if let Some(p) = used_p.difference(&named_p).next() {
        return bad(format!("process {p} has events but no process_name"));
    }
    if let Some((p, t)) = used_t.difference(&named_t).next() {
        return bad(format!(
            "thread {t} of process {p} has slices but no thread_name"
        ));
    }
    counts.processes = named_p.len();
    counts.threads = named_t.len();
    counts.flows = starts.len();
    Ok(counts)
}

/// The flow events met, by id: `s` and `f`.
#[derive(Debug, Default)]
struct Flows {
    starts: std::collections::BTreeMap<String, u32>,
    finishes: std::collections::BTreeMap<String, u32>,
}

/// One timed event of a thread checked against its open slices (`stack`:
/// each one's start and end, `B`'s end infinite until its `E`); whether
/// it puts something on the thread's track (so the thread needs a name).
fn timed_event(
    ph: &str,
    n: usize,
    e: &Value,
    ts: f64,
    stack: &mut Vec<(f64, f64)>,
    counts: &mut Counts,
    flows: &mut Flows,
) -> Result<bool, Invalid> {
    let bad = |s: String| Err(Invalid(s));
    // Slices that ended by this time are closed.
    while stack.last().is_some_and(|&(_, end)| end <= ts) {
        stack.pop();
    }
    match ph {
        "X" => {
            let Some(dur) = e.get("dur").and_then(Value::as_f64).filter(|d| *d >= 0.0) else {
                return bad(format!("complete event {n} has no duration: {e}"));
            };
            if stack.last().is_some_and(|&(_, end)| ts + dur > end) {
                return bad(format!("slice {n} overlaps its enclosing slice: {e}"));
            }
            stack.push((ts, ts + dur));
            counts.slices += 1;
            Ok(true)
        }
        "B" => {
            stack.push((ts, f64::INFINITY));
            Ok(true)
        }
        "E" => match stack.pop() {
            Some((_, end)) if end.is_infinite() => {
                counts.slices += 1;
                Ok(false)
            }
            _ => bad(format!("end event {n} has no begin on its thread: {e}")),
        },
        "i" | "I" => Ok(e.get("s").and_then(Value::as_str) == Some("t")),
        "C" => {
            if !e["args"]
                .as_object()
                .is_some_and(|a| a.values().all(Value::is_number))
            {
                return bad(format!("counter event {n} has no numeric args: {e}"));
            }
            counts.counters += 1;
            Ok(false)
        }
        "s" | "f" => {
            let id = e.get("id").map(Value::to_string).unwrap_or_default();
            if id.is_empty() {
                return bad(format!("flow event {n} has no id: {e}"));
            }
            if stack.is_empty() {
                return bad(format!(
                    "flow event {n} is inside no slice of its thread: {e}"
                ));
            }
            let side = if ph == "s" {
                &mut flows.starts
            } else {
                &mut flows.finishes
            };
            *side.entry(id).or_default() += 1;
            Ok(false)
        }
        other => bad(format!("event {n} has an unknown ph {other:?}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_is_valid_and_holds_every_item() {
        let json = to_json(&crate::example()).unwrap();
        let counts = validate(&json).unwrap();
        assert_eq!(
            counts,
            Counts {
                processes: 2,
                threads: 4,
                slices: 8,
                flows: 1,
                counters: 3,
            }
        );
        let doc: Value = serde_json::from_str(&json).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let x = events
            .iter()
            .find(|e| e["name"] == "load (mlworker/model.py:10)")
            .unwrap();
        // Whole µs, each end rounded from its ns: 1600 -> 2, 4000 -> 4,
        // and a µs earlier, since `serve` begins at 4.
        assert_eq!((x["ts"].as_u64(), x["dur"].as_u64()), (Some(2), Some(1)));
        let f = events.iter().find(|e| e["ph"] == "f").unwrap();
        assert_eq!((&f["pid"], &f["bp"]), (&json!(200), &json!("e")));
    }

    /// The X events as a reader nests them (speedscope's import: by `ts`,
    /// the longer first at one `ts`, else in the file's order; a slice
    /// ends at `ts + dur` summed in f64): each one's name and depth.
    fn nested_as_read(json: &str) -> Vec<(String, usize)> {
        let doc: Value = serde_json::from_str(json).unwrap();
        let mut xs: Vec<(f64, f64, String)> = doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| {
                let num = |k: &str| e[k].as_f64().unwrap();
                (
                    num("ts"),
                    num("dur"),
                    e["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        xs.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
        let mut ends: Vec<f64> = Vec::new();
        let mut out = Vec::new();
        for (ts, dur, name) in xs {
            while ends.last().is_some_and(|&end| end <= ts) {
                ends.pop();
            }
            out.push((name, ends.len()));
            ends.push(ts + dur);
        }
        out
    }

    proptest::proptest! {
        /// Sampled stacks on a clock far from zero (the kernel's monotonic
        /// clock at days of uptime), frames opening and closing together:
        /// the document is valid and every frame is read back at its own
        /// depth, never inside its child.
        #[test]
        fn sampled_stacks_far_from_zero_are_read_back_at_their_depth(
            base in 10u64.pow(15)..10u64.pow(17),
            samples in proptest::collection::vec(
                (
                    0u64..3_000_000,
                    1_000u64..20_000_000,
                    proptest::collection::vec(0usize..2, 1..6),
                ),
                1..40,
            ),
        ) {
            let mut t = base;
            let stacks: Vec<crate::flame::TimedStack> = samples
                .iter()
                .map(|(gap, span, frames)| {
                    // A gap under a millisecond continues the last sample.
                    let start = t + if *gap < 1_000_000 { 0 } else { *gap };
                    t = start + span;
                    crate::flame::TimedStack {
                        start_ns: start,
                        end_ns: t,
                        frames: frames
                            .iter()
                            .enumerate()
                            .map(|(depth, f)| crate::flame::Frame {
                                name: format!("d{depth}:{}", ["a", "b"][*f]),
                                category: "python".into(),
                            })
                            .collect(),
                    }
                })
                .collect();
            let trace = Trace {
                processes: vec![crate::Process {
                    pid: 1,
                    name: "p".into(),
                    threads: vec![crate::Thread {
                        tid: 1,
                        name: "t".into(),
                        slices: crate::flame::slices(&stacks),
                        instants: Vec::new(),
                        beside: None,
                    }],
                    ..crate::Process::default()
                }],
                flows: Vec::new(),
            };
            let json = to_json(&trace).unwrap();
            proptest::prop_assert!(validate(&json).is_ok(), "{:?}", validate(&json));
            for (name, depth) in nested_as_read(&json) {
                proptest::prop_assert_eq!(&name[..2], format!("d{depth}"), "{}", json);
            }
            // No slice ends at a µs where another begins: a reader would
            // have to guess which comes first.
            let doc: Value = serde_json::from_str(&json).unwrap();
            let xs: Vec<(u64, u64)> = doc["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["ph"] == "X")
                .map(|e| (e["ts"].as_u64().unwrap(), e["dur"].as_u64().unwrap()))
                .collect();
            let begins: std::collections::BTreeSet<u64> = xs.iter().map(|x| x.0).collect();
            for (ts, dur) in xs {
                proptest::prop_assert!(dur == 0 || !begins.contains(&(ts + dur)), "{}", json);
            }
        }
    }

    #[test]
    fn the_validator_refuses_what_breaks_a_rule() {
        let doc = |events: Value| json!({ "traceEvents": events }).to_string();
        let named = json!([
            {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "p"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "t"}},
        ]);
        let with = |more: Value| {
            let mut all = named.as_array().unwrap().clone();
            all.extend(more.as_array().unwrap().iter().cloned());
            doc(Value::Array(all))
        };
        let ok = with(json!([
            {"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 1},
            {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 2, "dur": 1},
            {"ph": "E", "pid": 1, "tid": 1, "ts": 5},
        ]));
        assert_eq!(validate(&ok).map(|c| c.slices), Ok(2));
        for (rule, bad) in [
            (
                "unended",
                json!([{"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 1}]),
            ),
            (
                "no begin",
                json!([{"ph": "E", "pid": 1, "tid": 1, "ts": 1}]),
            ),
            (
                "no dur",
                json!([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1}]),
            ),
            (
                "back in time",
                json!([
                    {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 5, "dur": 1},
                    {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
                ]),
            ),
            (
                "overlap",
                json!([
                    {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 5},
                    {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 2, "dur": 9},
                ]),
            ),
            (
                "unpaired flow",
                json!([
                    {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 5},
                    {"ph": "s", "id": 3, "pid": 1, "tid": 1, "ts": 1},
                ]),
            ),
            (
                "unnamed thread",
                json!([{"ph": "X", "name": "a", "pid": 1, "tid": 9, "ts": 1, "dur": 1}]),
            ),
        ] {
            assert!(validate(&with(bad)).is_err(), "{rule} passed");
        }
        assert!(validate("{}").is_err());
    }
}
