//! The Perfetto trace format: a `Trace` message of `TracePacket`s holding
//! `TrackDescriptor`s (a track per process, per thread, per counter) and
//! `TrackEvent`s (slices as `TYPE_SLICE_BEGIN`/`TYPE_SLICE_END`, instants,
//! counter values, flows through `flow_ids`/`terminating_flow_ids`), every
//! timestamp on CLOCK_MONOTONIC, which a first `ClockSnapshot` makes the
//! trace's clock. The messages are the subset of Perfetto's
//! `protos/perfetto/trace/perfetto_trace.proto` written here, declared with
//! its field numbers (no interned data).

use std::collections::BTreeMap;

use prost::Message;

use crate::error::Error;
use crate::model::{Trace, Unit};

/// Perfetto's `BUILTIN_CLOCK_MONOTONIC` (`ClockSnapshot.Clock.MONOTONIC`).
const CLOCK_MONOTONIC: u32 = 3;
/// The one writer sequence every packet is on.
const SEQUENCE: u32 = 1;
/// `TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED`.
const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;

/// `perfetto.protos.Trace`.
#[derive(Clone, PartialEq, Message)]
pub struct PbTrace {
    /// `packet = 1`.
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// `perfetto.protos.TracePacket` (the fields written here).
#[derive(Clone, PartialEq, Message)]
pub struct TracePacket {
    /// `timestamp = 8`.
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// `timestamp_clock_id = 58`.
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
    /// `trusted_packet_sequence_id = 10`.
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// `sequence_flags = 13`.
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    /// `clock_snapshot = 6`.
    #[prost(message, optional, tag = "6")]
    pub clock_snapshot: Option<ClockSnapshot>,
    /// `track_event = 11`.
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    /// `track_descriptor = 60`.
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
}

/// `perfetto.protos.ClockSnapshot`.
#[derive(Clone, PartialEq, Message)]
pub struct ClockSnapshot {
    /// `clocks = 1`.
    #[prost(message, repeated, tag = "1")]
    pub clocks: Vec<Clock>,
    /// `primary_trace_clock = 2` (a `BuiltinClock`).
    #[prost(int32, optional, tag = "2")]
    pub primary_trace_clock: Option<i32>,
}

/// `perfetto.protos.ClockSnapshot.Clock`.
#[derive(Clone, PartialEq, Message)]
pub struct Clock {
    /// `clock_id = 1`.
    #[prost(uint32, optional, tag = "1")]
    pub clock_id: Option<u32>,
    /// `timestamp = 2`.
    #[prost(uint64, optional, tag = "2")]
    pub timestamp: Option<u64>,
}

/// `perfetto.protos.TrackDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct TrackDescriptor {
    /// `uuid = 1`.
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    /// `parent_uuid = 5`.
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
    /// `name = 2`.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    /// `process = 3`.
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    /// `thread = 4`.
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    /// `counter = 8`.
    #[prost(message, optional, tag = "8")]
    pub counter: Option<CounterDescriptor>,
}

/// `perfetto.protos.ProcessDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct ProcessDescriptor {
    /// `pid = 1`.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// `process_name = 6`.
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

/// `perfetto.protos.ThreadDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct ThreadDescriptor {
    /// `pid = 1`.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// `tid = 2`.
    #[prost(int64, optional, tag = "2")]
    pub tid: Option<i64>,
    /// `thread_name = 5`.
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// `perfetto.protos.CounterDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct CounterDescriptor {
    /// `unit = 3` (`UNIT_SIZE_BYTES` = 3).
    #[prost(int32, optional, tag = "3")]
    pub unit: Option<i32>,
    /// `unit_name = 6`.
    #[prost(string, optional, tag = "6")]
    pub unit_name: Option<String>,
}

/// `perfetto.protos.TrackEvent` (the fields written here).
#[derive(Clone, PartialEq, Message)]
pub struct TrackEvent {
    /// `type = 9`: 1 slice begin, 2 slice end, 3 instant, 4 counter.
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    /// `track_uuid = 11`.
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// `name = 23`.
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    /// `categories = 22`.
    #[prost(string, repeated, tag = "22")]
    pub categories: Vec<String>,
    /// `double_counter_value = 44`.
    #[prost(double, optional, tag = "44")]
    pub double_counter_value: Option<f64>,
    /// `flow_ids = 47`.
    #[prost(fixed64, repeated, tag = "47")]
    pub flow_ids: Vec<u64>,
    /// `terminating_flow_ids = 48`.
    #[prost(fixed64, repeated, tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

/// `TrackEvent.Type`'s values written here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum EventType {
    /// `TYPE_SLICE_BEGIN`.
    SliceBegin = 1,
    /// `TYPE_SLICE_END`.
    SliceEnd = 2,
    /// `TYPE_INSTANT`.
    Instant = 3,
    /// `TYPE_COUNTER`.
    Counter = 4,
}

/// `CounterDescriptor.Unit.UNIT_SIZE_BYTES`.
const UNIT_SIZE_BYTES: i32 = 3;

/// The trace as a Perfetto protobuf; `Err` when it breaks a rule of
/// [`Trace::check`].
pub fn to_protobuf(trace: &Trace) -> Result<Vec<u8>, Error> {
    Ok(to_message(trace)?.encode_to_vec())
}

/// The trace as Perfetto's `Trace` message.
pub fn to_message(trace: &Trace) -> Result<PbTrace, Error> {
    trace.check()?;
    let first = trace
        .processes
        .iter()
        .flat_map(|p| p.threads.iter().flat_map(|t| &t.slices))
        .map(|s| s.start_ns)
        .min()
        .unwrap_or(0);
    let mut packets = vec![TracePacket {
        timestamp: Some(first),
        timestamp_clock_id: Some(CLOCK_MONOTONIC),
        trusted_packet_sequence_id: Some(SEQUENCE),
        sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
        clock_snapshot: Some(ClockSnapshot {
            clocks: vec![Clock {
                clock_id: Some(CLOCK_MONOTONIC),
                timestamp: Some(first),
            }],
            primary_trace_clock: Some(CLOCK_MONOTONIC as i32),
        }),
        ..TracePacket::default()
    }];
    let mut uuids = 0u64;
    let mut next_uuid = || {
        uuids += 1;
        uuids
    };
    // (ts, event), stable-sorted by time: each track's events are pushed
    // in their order, which equal times keep.
    let mut events: Vec<(u64, TrackEvent)> = Vec::new();
    let flows = trace.flows_by_slice();
    for p in &trace.processes {
        let process = next_uuid();
        packets.push(descriptor(TrackDescriptor {
            uuid: Some(process),
            process: Some(ProcessDescriptor {
                pid: Some(p.pid as i32),
                process_name: Some(p.name.clone()),
            }),
            ..TrackDescriptor::default()
        }));
        for i in &p.instants {
            events.push((i.t_ns, event(EventType::Instant, process, Some(&i.name))));
        }
        for c in &p.counters {
            let track = next_uuid();
            let (unit, unit_name) = match c.unit {
                Unit::Bytes => (Some(UNIT_SIZE_BYTES), None),
                Unit::Percent => (None, Some("%".to_owned())),
            };
            packets.push(descriptor(TrackDescriptor {
                uuid: Some(track),
                parent_uuid: Some(process),
                name: Some(c.name.clone()),
                counter: Some(CounterDescriptor { unit, unit_name }),
                ..TrackDescriptor::default()
            }));
            for pt in &c.points {
                let mut e = event(EventType::Counter, track, None);
                e.double_counter_value = Some(pt.value);
                events.push((pt.t_ns, e));
            }
        }
        // Each thread's track, by tid: a track beside a thread (its spans)
        // is nested under that thread's, when that thread came first.
        let mut thread_tracks: BTreeMap<u32, u64> = BTreeMap::new();
        for t in &p.threads {
            let track = next_uuid();
            let under = t.beside.and_then(|tid| thread_tracks.get(&tid).copied());
            packets.push(descriptor(match under {
                Some(parent) => TrackDescriptor {
                    uuid: Some(track),
                    parent_uuid: Some(parent),
                    name: Some(t.name.clone()),
                    ..TrackDescriptor::default()
                },
                None => TrackDescriptor {
                    uuid: Some(track),
                    parent_uuid: Some(process),
                    thread: Some(ThreadDescriptor {
                        pid: Some(p.pid as i32),
                        tid: Some(i64::from(t.tid)),
                        thread_name: Some(t.name.clone()),
                    }),
                    ..TrackDescriptor::default()
                },
            }));
            thread_tracks.insert(t.tid, track);
            for i in &t.instants {
                events.push((i.t_ns, event(EventType::Instant, track, Some(&i.name))));
            }
            slice_events(p.pid, t, track, &flows, &mut events);
        }
    }
    events.sort_by_key(|(t, _)| *t);
    packets.extend(events.into_iter().map(|(t, e)| TracePacket {
        timestamp: Some(t),
        timestamp_clock_id: Some(CLOCK_MONOTONIC),
        trusted_packet_sequence_id: Some(SEQUENCE),
        track_event: Some(e),
        ..TracePacket::default()
    }));
    Ok(PbTrace { packet: packets })
}

/// A thread's slices as begin and end events, in an order that nests: by
/// start, the enclosing slice first; each open slice ended (innermost
/// first) before a slice that starts at or after its end begins.
fn slice_events(
    pid: u32,
    thread: &crate::model::Thread,
    track: u64,
    flows: &crate::model::FlowsBySlice,
    events: &mut Vec<(u64, TrackEvent)>,
) {
    let mut open: Vec<u64> = Vec::new();
    for i in thread.slice_order() {
        let s = &thread.slices[i];
        while let Some(&end) = open.last().filter(|&&end| end <= s.start_ns) {
            open.pop();
            events.push((end, event(EventType::SliceEnd, track, None)));
        }
        let mut begin = event(EventType::SliceBegin, track, Some(&s.name));
        begin.categories = vec![s.category.clone()];
        let key = (pid, thread.tid, i);
        begin.flow_ids = flows.leaving.get(&key).cloned().unwrap_or_default();
        begin.terminating_flow_ids = flows.reaching.get(&key).cloned().unwrap_or_default();
        events.push((s.start_ns, begin));
        open.push(s.end_ns);
    }
    while let Some(end) = open.pop() {
        events.push((end, event(EventType::SliceEnd, track, None)));
    }
}

fn event(kind: EventType, track: u64, name: Option<&str>) -> TrackEvent {
    TrackEvent {
        r#type: Some(kind as i32),
        track_uuid: Some(track),
        name: name.map(str::to_owned),
        ..TrackEvent::default()
    }
}

fn descriptor(d: TrackDescriptor) -> TracePacket {
    TracePacket {
        trusted_packet_sequence_id: Some(SEQUENCE),
        track_descriptor: Some(d),
        ..TracePacket::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protobuf::MessageDyn;
    use protobuf::reflect::{MessageDescriptor, ReflectFieldRef, ReflectValueRef};

    #[test]
    fn the_example_decodes_back_into_its_tracks_and_nested_events() {
        let bytes = to_protobuf(&crate::example()).unwrap();
        let trace = PbTrace::decode(bytes.as_slice()).unwrap();
        let tracks: Vec<&TrackDescriptor> = trace
            .packet
            .iter()
            .filter_map(|p| p.track_descriptor.as_ref())
            .collect();
        // 2 processes, 3 threads, a span track, 2 counters.
        assert_eq!(tracks.len(), 8);
        let thread = tracks
            .iter()
            .find(|t| t.thread.as_ref().and_then(|t| t.tid) == Some(101))
            .unwrap();
        assert_eq!(
            thread.thread.as_ref().unwrap().thread_name.as_deref(),
            Some("tokio-rt-worker")
        );
        // The span track is nested under its thread's, not a thread.
        let spans = tracks
            .iter()
            .find(|t| t.name.as_deref() == Some("spans on tokio-rt-worker"))
            .unwrap();
        assert!(spans.thread.is_none());
        assert_eq!(spans.parent_uuid, thread.uuid);
        let events: Vec<(u64, &TrackEvent)> = trace
            .packet
            .iter()
            .filter_map(|p| Some((p.timestamp?, p.track_event.as_ref()?)))
            .collect();
        // Every track's begins and ends pair up, in order, and timestamps
        // never go back.
        let mut depth = std::collections::BTreeMap::<u64, i32>::new();
        let mut last = 0;
        for (t, e) in &events {
            assert!(*t >= last);
            last = *t;
            let d = depth.entry(e.track_uuid.unwrap()).or_default();
            match e.r#type {
                Some(1) => *d += 1,
                Some(2) => *d -= 1,
                _ => {}
            }
            assert!(*d >= 0, "an end before its begin at {t}");
        }
        assert!(depth.values().all(|d| *d == 0), "{depth:?}");
        let begins = events.iter().filter(|(_, e)| e.r#type == Some(1)).count();
        assert_eq!(begins, 8);
        let out = events.iter().find(|(_, e)| !e.flow_ids.is_empty()).unwrap();
        let into = events
            .iter()
            .find(|(_, e)| !e.terminating_flow_ids.is_empty())
            .unwrap();
        assert_eq!(out.1.name.as_deref(), Some("waiting on worker 200"));
        assert_eq!(into.1.name.as_deref(), Some("load (mlworker/model.py:10)"));
        assert_eq!(out.1.flow_ids, into.1.terminating_flow_ids);
    }

    /// Perfetto's own schema (its repository's merged
    /// `protos/perfetto/trace/perfetto_trace.proto`, vendored under
    /// `tests/fixtures/perfetto`) parsed in pure Rust, and the written
    /// bytes decoded against it as dynamic messages: every field written
    /// is one the schema knows at that number, with that wire type (no
    /// unknown field anywhere), and the values read through the schema's
    /// names are the ones meant. What it cannot prove: how Perfetto's UI
    /// draws them.
    #[test]
    fn the_bytes_decode_against_perfettos_own_schema_with_no_unknown_field() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/perfetto");
        let parsed = protobuf_parse::Parser::new()
            .pure()
            .include(&dir)
            .input(dir.join("perfetto_trace.proto"))
            .parse_and_typecheck()
            .unwrap();
        let files =
            protobuf::reflect::FileDescriptor::new_dynamic_fds(parsed.file_descriptors, &[])
                .unwrap();
        let schema = files
            .iter()
            .find_map(|f| f.message_by_full_name(".perfetto.protos.Trace"))
            .expect("the schema has perfetto.protos.Trace");
        let bytes = to_protobuf(&crate::example()).unwrap();
        let trace = schema.parse_from_bytes(&bytes).unwrap();
        let mut seen = Vec::new();
        walk(&schema, &*trace, "Trace", &mut seen);
        for expected in [
            "Trace.packet.clock_snapshot.primary_trace_clock=BUILTIN_CLOCK_MONOTONIC",
            "Trace.packet.track_descriptor.process.process_name=\"ml-service --serve\"",
            "Trace.packet.track_descriptor.thread.thread_name=\"tokio-rt-worker\"",
            "Trace.packet.track_descriptor.counter.unit=UNIT_SIZE_BYTES",
            "Trace.packet.track_event.type=TYPE_SLICE_BEGIN",
            "Trace.packet.track_event.type=TYPE_SLICE_END",
            "Trace.packet.track_event.type=TYPE_INSTANT",
            "Trace.packet.track_event.type=TYPE_COUNTER",
            "Trace.packet.track_event.name=\"waiting on worker 200\"",
            "Trace.packet.track_event.flow_ids=1",
            "Trace.packet.track_event.terminating_flow_ids=1",
            "Trace.packet.track_event.double_counter_value=97.5",
            "Trace.packet.timestamp_clock_id=3",
        ] {
            assert!(
                seen.iter().any(|s| s == expected),
                "{expected} not in {seen:#?}"
            );
        }
    }

    /// Every field of `m` as `path.field=value`; panics on an unknown field.
    fn walk(d: &MessageDescriptor, m: &dyn MessageDyn, path: &str, out: &mut Vec<String>) {
        let unknown: Vec<u32> = m.unknown_fields_dyn().iter().map(|(n, _)| n).collect();
        assert!(
            unknown.is_empty(),
            "{path} has fields {unknown:?} the schema does not know"
        );
        for f in d.fields() {
            let here = format!("{path}.{}", f.name());
            let values: Vec<ReflectValueRef<'_>> = match f.get_reflect(m) {
                ReflectFieldRef::Optional(v) => v.value().into_iter().collect(),
                ReflectFieldRef::Repeated(r) => r.into_iter().collect(),
                ReflectFieldRef::Map(_) => Vec::new(),
            };
            for v in values {
                match v {
                    ReflectValueRef::Message(sub) => walk(&sub.descriptor_dyn(), &*sub, &here, out),
                    ReflectValueRef::Enum(e, n) => out.push(format!(
                        "{here}={}",
                        e.value_by_number(n)
                            .map_or(n.to_string(), |v| v.name().to_owned())
                    )),
                    ReflectValueRef::String(s) => out.push(format!("{here}={s:?}")),
                    other => out.push(format!("{here}={other}")),
                }
            }
        }
    }
}
