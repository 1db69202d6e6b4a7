//! The parent's own spans for `coldstart trace`: an OTLP/HTTP receiver on
//! a loopback port (`POST /v1/traces`, protobuf or JSON bodies, no
//! compression), each span kept with its service, its process and thread
//! where its attributes say (`process.pid` on the resource, `thread.id` on
//! the span), its times moved from the wall clock OTLP uses to the trace's
//! (CLOCK_MONOTONIC, by the offset between the two when it arrived).
//!
//! The messages are the subset of `opentelemetry/proto/collector/trace/v1`
//! read here, declared as `prost` structs with that schema's field numbers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use prost::Message;
use serde_json::Value;

use crate::error::{Error, Result};

/// The largest request body accepted.
const MAX_BODY: usize = 64 << 20;

/// One span received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedSpan {
    /// The resource's `service.name` (empty when it has none).
    pub service: String,
    /// The resource's `process.pid`, where set.
    pub pid: Option<u32>,
    /// The span's `thread.id`, where set: the SDK's own number for the
    /// thread (Rust's `ThreadId`, a JVM's), not always the kernel's tid.
    pub thread: Option<u32>,
    /// The span's `thread.name`, where set.
    pub thread_name: Option<String>,
    /// Its name.
    pub name: String,
    /// The values of its descriptive attributes ([`DESCRIPTIVE`], in that
    /// order): what tells one `request` span from the next.
    pub detail: Vec<String>,
    /// Its span id, hex (empty when the exporter gave none).
    pub id: String,
    /// Its parent's span id, hex; empty for a root span.
    pub parent: String,
    /// Its start and end, CLOCK_MONOTONIC ns.
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
}

/// The span attributes whose values name a span for a person, in the
/// order they are shown after its name (OpenTelemetry's semantic
/// conventions, old and new, and `tower-http`'s plain `method` and `uri`).
pub const DESCRIPTIVE: &[&str] = &[
    "http.request.method",
    "http.method",
    "method",
    "http.route",
    "url.path",
    "http.target",
    "uri",
    "rpc.service",
    "rpc.method",
    "db.operation.name",
    "db.operation",
    "messaging.operation",
    "code.function",
];

/// What the receiver got: the spans, and how many export requests carried
/// them (none at all says the exporter never sent, which no span count
/// can tell from an exporter that sent nothing to say).
#[derive(Debug, Default)]
pub struct Received {
    /// Every span, in the order received.
    pub spans: Vec<ReceivedSpan>,
    /// The export requests decoded (`POST /v1/traces`), empty ones too.
    pub requests: usize,
}

/// The receiver, listening until [`Receiver::stop`].
#[derive(Debug)]
pub struct Receiver {
    port: u16,
    stop: Arc<AtomicBool>,
    spans: Arc<Mutex<Received>>,
    thread: JoinHandle<()>,
}

impl Receiver {
    /// Listens on a free port of 127.0.0.1.
    pub fn start() -> Result<Receiver> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| Error::io("listen on", std::path::Path::new("127.0.0.1"), e))?;
        let port = listener
            .local_addr()
            .map_err(|e| Error::io("listen on", std::path::Path::new("127.0.0.1"), e))?
            .port();
        let stop = Arc::new(AtomicBool::new(false));
        let spans = Arc::new(Mutex::new(Received::default()));
        let (flag, sink) = (Arc::clone(&stop), Arc::clone(&spans));
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                if let Ok(conn) = conn {
                    let sink = Arc::clone(&sink);
                    std::thread::spawn(move || serve(conn, &sink));
                }
            }
        });
        Ok(Receiver {
            port,
            stop,
            spans,
            thread,
        })
    }

    /// `http://127.0.0.1:PORT`, what `OTEL_EXPORTER_OTLP_ENDPOINT` says.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The variables that point an OpenTelemetry SDK's exporter here.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), self.endpoint()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL".into(), "http/protobuf".into()),
            ("OTEL_TRACES_EXPORTER".into(), "otlp".into()),
        ]
    }

    /// Stops listening; every span received, and the requests.
    pub fn stop(self) -> Received {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the blocked accept.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        let _ = self.thread.join();
        std::mem::take(&mut *self.spans.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Serves one connection's requests (kept alive) until it closes.
fn serve(conn: TcpStream, sink: &Mutex<Received>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let (mut length, mut json, mut refused) = (0usize, false, None);
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap_or((header, ""));
            let value = value.trim().to_ascii_lowercase();
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.parse().unwrap_or(usize::MAX),
                "content-type" => json = value.starts_with("application/json"),
                "content-encoding" if value != "identity" => {
                    refused = Some("415 Unsupported Media Type")
                }
                "transfer-encoding" => refused = Some("411 Length Required"),
                _ => {}
            }
        }
        if length > MAX_BODY {
            let _ = respond(&mut out, "413 Payload Too Large", json, b"");
            return;
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let status = match (refused, method, path) {
            (Some(why), _, _) => why,
            (None, "POST", "/v1/traces") => {
                let decoded = if json {
                    from_json(&body)
                } else {
                    from_protobuf(&body)
                };
                match decoded {
                    Some(spans) => {
                        let mut got = sink.lock().unwrap_or_else(|e| e.into_inner());
                        got.spans.extend(spans);
                        got.requests += 1;
                        "200 OK"
                    }
                    None => "400 Bad Request",
                }
            }
            _ => "404 Not Found",
        };
        let reply: &[u8] = if json { b"{}" } else { b"" };
        if respond(&mut out, status, json, reply).is_err() || refused.is_some() {
            return;
        }
    }
}

fn respond(out: &mut TcpStream, status: &str, json: bool, body: &[u8]) -> std::io::Result<()> {
    let kind = if json {
        "application/json"
    } else {
        "application/x-protobuf"
    };
    write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )?;
    out.write_all(body)?;
    out.flush()
}

/// ns to subtract from a wall-clock time for CLOCK_MONOTONIC's, now.
fn wall_minus_monotonic() -> i128 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    wall - i128::from(timeline::monotonic_ns())
}

fn monotonic_of(unix_ns: u64, offset: i128) -> u64 {
    u64::try_from(i128::from(unix_ns) - offset).unwrap_or(0)
}

/// `ExportTraceServiceRequest`.
#[derive(Clone, PartialEq, Message)]
struct ExportRequest {
    #[prost(message, repeated, tag = "1")]
    resource_spans: Vec<ResourceSpans>,
}

#[derive(Clone, PartialEq, Message)]
struct ResourceSpans {
    #[prost(message, optional, tag = "1")]
    resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    scope_spans: Vec<ScopeSpans>,
}

#[derive(Clone, PartialEq, Message)]
struct Resource {
    #[prost(message, repeated, tag = "1")]
    attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, Message)]
struct ScopeSpans {
    #[prost(message, repeated, tag = "2")]
    spans: Vec<Span>,
}

#[derive(Clone, PartialEq, Message)]
struct Span {
    #[prost(bytes = "vec", tag = "2")]
    span_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "4")]
    parent_span_id: Vec<u8>,
    #[prost(string, tag = "5")]
    name: String,
    #[prost(fixed64, tag = "7")]
    start_time_unix_nano: u64,
    #[prost(fixed64, tag = "8")]
    end_time_unix_nano: u64,
    #[prost(message, repeated, tag = "9")]
    attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, Message)]
struct KeyValue {
    #[prost(string, tag = "1")]
    key: String,
    #[prost(message, optional, tag = "2")]
    value: Option<AnyValue>,
}

/// `AnyValue`'s `oneof value`, as the fields read here.
#[derive(Clone, PartialEq, Message)]
struct AnyValue {
    #[prost(string, optional, tag = "1")]
    string_value: Option<String>,
    #[prost(bool, optional, tag = "2")]
    bool_value: Option<bool>,
    #[prost(int64, optional, tag = "3")]
    int_value: Option<i64>,
    #[prost(double, optional, tag = "4")]
    double_value: Option<f64>,
}

impl AnyValue {
    /// The value as text (the scalar kinds; `None` for the others).
    fn text(&self) -> Option<String> {
        self.string_value
            .clone()
            .or_else(|| self.int_value.map(|i| i.to_string()))
            .or_else(|| self.bool_value.map(|b| b.to_string()))
            .or_else(|| self.double_value.map(|d| d.to_string()))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The values of `DESCRIPTIVE` attributes that `value_of` finds.
fn detail(value_of: impl Fn(&str) -> Option<String>) -> Vec<String> {
    DESCRIPTIVE.iter().filter_map(|k| value_of(k)).collect()
}

fn attribute<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attrs.iter().find(|a| a.key == key)?.value.as_ref()
}

fn int_of(v: Option<&AnyValue>) -> Option<u32> {
    let v = v?;
    v.int_value
        .and_then(|i| u32::try_from(i).ok())
        .or_else(|| v.string_value.as_ref()?.parse().ok())
}

/// The spans of a protobuf `ExportTraceServiceRequest`; `None` when it is
/// not one.
pub fn from_protobuf(body: &[u8]) -> Option<Vec<ReceivedSpan>> {
    let request = ExportRequest::decode(body).ok()?;
    let offset = wall_minus_monotonic();
    let mut out = Vec::new();
    for rs in request.resource_spans {
        let attrs = rs.resource.map(|r| r.attributes).unwrap_or_default();
        let service = attribute(&attrs, "service.name")
            .and_then(|v| v.string_value.clone())
            .unwrap_or_default();
        let pid = int_of(attribute(&attrs, "process.pid"));
        for span in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
            let text = |k: &str| attribute(&span.attributes, k).and_then(AnyValue::text);
            out.push(ReceivedSpan {
                service: service.clone(),
                pid,
                thread: int_of(attribute(&span.attributes, "thread.id")),
                thread_name: text("thread.name"),
                detail: detail(text),
                id: hex(&span.span_id),
                parent: hex(&span.parent_span_id),
                start_ns: monotonic_of(span.start_time_unix_nano, offset),
                end_ns: monotonic_of(
                    span.end_time_unix_nano.max(span.start_time_unix_nano),
                    offset,
                ),
                name: span.name,
            });
        }
    }
    Some(out)
}

/// The spans of an OTLP/JSON request (`resourceSpans`, camelCase, 64-bit
/// integers as strings or numbers); `None` when it is not one.
pub fn from_json(body: &[u8]) -> Option<Vec<ReceivedSpan>> {
    let doc: Value = serde_json::from_slice(body).ok()?;
    let offset = wall_minus_monotonic();
    let number = |v: &Value| -> Option<u64> { v.as_u64().or_else(|| v.as_str()?.parse().ok()) };
    let attr = |attrs: &Value, key: &str| -> Option<Value> {
        attrs
            .as_array()?
            .iter()
            .find(|a| a["key"] == key)
            .map(|a| a["value"].clone())
    };
    let mut out = Vec::new();
    for rs in doc.get("resourceSpans")?.as_array()? {
        let attrs = &rs["resource"]["attributes"];
        let service = attr(attrs, "service.name")
            .and_then(|v| v["stringValue"].as_str().map(str::to_owned))
            .unwrap_or_default();
        let pid = attr(attrs, "process.pid")
            .and_then(|v| number(&v["intValue"]))
            .and_then(|p| u32::try_from(p).ok());
        let scopes = rs["scopeSpans"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for span in scopes
            .iter()
            .flat_map(|s| s["spans"].as_array().into_iter().flatten())
        {
            let start = number(&span["startTimeUnixNano"])?;
            let end = number(&span["endTimeUnixNano"])?.max(start);
            // OTLP/JSON: ids in hex, an AnyValue as `{"stringValue": ..}`,
            // `{"intValue": ..}` (a string or a number) and so on.
            let text = |k: &str| -> Option<String> {
                let v = attr(&span["attributes"], k)?;
                let (_, inner) = v.as_object()?.iter().next()?;
                match inner {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(_) | Value::Bool(_) => Some(inner.to_string()),
                    _ => None,
                }
            };
            let id = |k: &str| span[k].as_str().unwrap_or_default().to_ascii_lowercase();
            out.push(ReceivedSpan {
                service: service.clone(),
                pid,
                thread: attr(&span["attributes"], "thread.id")
                    .and_then(|v| number(&v["intValue"]))
                    .and_then(|t| u32::try_from(t).ok()),
                thread_name: text("thread.name"),
                detail: detail(text),
                id: id("spanId"),
                parent: id("parentSpanId"),
                name: span["name"].as_str().unwrap_or_default().to_owned(),
                start_ns: monotonic_of(start, offset),
                end_ns: monotonic_of(end, offset),
            });
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_and_json_give_the_same_span_on_the_monotonic_clock() {
        let now_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let kv = |key: &str, value: AnyValue| KeyValue {
            key: key.into(),
            value: Some(value),
        };
        let text = |s: &str| AnyValue {
            string_value: Some(s.into()),
            ..AnyValue::default()
        };
        let int = |i: i64| AnyValue {
            int_value: Some(i),
            ..AnyValue::default()
        };
        let request = ExportRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![kv("service.name", text("svc")), kv("process.pid", int(42))],
                }),
                scope_spans: vec![ScopeSpans {
                    spans: vec![Span {
                        span_id: vec![0xab, 0x01],
                        parent_span_id: vec![0x0c],
                        name: "handle".into(),
                        start_time_unix_nano: now_unix,
                        end_time_unix_nano: now_unix + 5_000_000,
                        attributes: vec![
                            kv("thread.id", int(7)),
                            kv("thread.name", text("tokio-worker")),
                            kv("uri", text("/health")),
                            kv("method", text("GET")),
                            kv("other", text("not shown")),
                        ],
                    }],
                }],
            }],
        };
        let from_pb = from_protobuf(&request.encode_to_vec()).unwrap();
        let json = serde_json::json!({"resourceSpans": [{
            "resource": {"attributes": [
                {"key": "service.name", "value": {"stringValue": "svc"}},
                {"key": "process.pid", "value": {"intValue": "42"}}]},
            "scopeSpans": [{"spans": [{
                "spanId": "AB01", "parentSpanId": "0c",
                "name": "handle", "startTimeUnixNano": now_unix.to_string(),
                "endTimeUnixNano": now_unix + 5_000_000,
                "attributes": [
                    {"key": "thread.id", "value": {"intValue": 7}},
                    {"key": "thread.name", "value": {"stringValue": "tokio-worker"}},
                    {"key": "uri", "value": {"stringValue": "/health"}},
                    {"key": "method", "value": {"stringValue": "GET"}},
                    {"key": "other", "value": {"stringValue": "not shown"}}]}]}]}]});
        let from_js = from_json(json.to_string().as_bytes()).unwrap();
        for spans in [&from_pb, &from_js] {
            let s = &spans[0];
            assert_eq!(
                (s.service.as_str(), s.pid, s.thread, s.name.as_str()),
                ("svc", Some(42), Some(7), "handle")
            );
            assert_eq!(s.thread_name.as_deref(), Some("tokio-worker"));
            assert_eq!(s.detail, ["GET", "/health"], "in DESCRIPTIVE's order");
            assert_eq!((s.id.as_str(), s.parent.as_str()), ("ab01", "0c"));
            assert_eq!(s.end_ns - s.start_ns, 5_000_000);
            // Moved to the monotonic clock: within a second of now on it.
            assert!(s.start_ns.abs_diff(timeline::monotonic_ns()) < 1_000_000_000);
        }
        assert!(from_json(b"[]").is_none());
        assert!(from_protobuf(b"\xff\xff").is_none());
    }
}
