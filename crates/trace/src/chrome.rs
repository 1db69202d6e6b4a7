//! Chrome's Trace Event format, its JSON Object Format (`{"traceEvents":
//! [...]}`), for the tools that read only that (chrome://tracing,
//! speedscope's import, Perfetto's legacy importer): `M` metadata naming
//! each process and thread, `X` complete events for slices, `i` instants,
//! `C` counters, `s`/`f` flow events bound to the slices they leave and
//! reach. Timestamps are µs (fractions keep the ns) on the trace's clock.

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
            for i in t.slice_order() {
                let s = &t.slices[i];
                events.push((
                    s.start_ns,
                    json!({"ph": "X", "name": s.name, "cat": s.category, "pid": p.pid,
                           "tid": t.tid, "ts": us(s.start_ns),
                           "dur": us(s.end_ns - s.start_ns)}),
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

/// ns as µs, the format's unit, the ns kept as a fraction.
fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// How far apart two times in µs may be and still be one: a slice's end,
/// `ts + dur`, is summed from two rounded figures (a ns is 0.001 µs).
const ROUNDING_US: f64 = 0.001;

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
/// slices nested; each `s` flow paired with one `f` of its id, both inside
/// a slice of their thread; every process and thread with an event named
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
    while stack
        .last()
        .is_some_and(|&(_, end)| end <= ts + ROUNDING_US)
    {
        stack.pop();
    }
    match ph {
        "X" => {
            let Some(dur) = e.get("dur").and_then(Value::as_f64).filter(|d| *d >= 0.0) else {
                return bad(format!("complete event {n} has no duration: {e}"));
            };
            if stack
                .last()
                .is_some_and(|&(_, end)| ts + dur > end + ROUNDING_US)
            {
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
                threads: 3,
                slices: 7,
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
        // µs, the ns kept as a fraction.
        assert_eq!(
            (x["ts"].as_f64(), x["dur"].as_f64()),
            (Some(1.6), Some(2.4))
        );
        let f = events.iter().find(|e| e["ph"] == "f").unwrap();
        assert_eq!((&f["pid"], &f["bp"]), (&json!(200), &json!("e")));
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
