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
    /// The span's `thread.id`, where set.
    pub thread: Option<u32>,
    /// Its name.
    pub name: String,
    /// Its start and end, CLOCK_MONOTONIC ns.
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
}

/// The receiver, listening until [`Receiver::stop`].
#[derive(Debug)]
pub struct Receiver {
    port: u16,
    stop: Arc<AtomicBool>,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
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
        let spans = Arc::new(Mutex::new(Vec::new()));
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

    /// Stops listening; every span received.
    pub fn stop(self) -> Vec<ReceivedSpan> {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the blocked accept.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        let _ = self.thread.join();
        std::mem::take(&mut *self.spans.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Serves one connection's requests (kept alive) until it closes.
fn serve(conn: TcpStream, sink: &Mutex<Vec<ReceivedSpan>>) {
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
                        sink.lock().unwrap_or_else(|e| e.into_inner()).extend(spans);
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
    #[prost(int64, optional, tag = "3")]
    int_value: Option<i64>,
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
            out.push(ReceivedSpan {
                service: service.clone(),
                pid,
                thread: int_of(attribute(&span.attributes, "thread.id")),
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
            out.push(ReceivedSpan {
                service: service.clone(),
                pid,
                thread: attr(&span["attributes"], "thread.id")
                    .and_then(|v| number(&v["intValue"]))
                    .and_then(|t| u32::try_from(t).ok()),
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
        let request = ExportRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![
                        kv(
                            "service.name",
                            AnyValue {
                                string_value: Some("svc".into()),
                                int_value: None,
                            },
                        ),
                        kv(
                            "process.pid",
                            AnyValue {
                                string_value: None,
                                int_value: Some(42),
                            },
                        ),
                    ],
                }),
                scope_spans: vec![ScopeSpans {
                    spans: vec![Span {
                        name: "handle".into(),
                        start_time_unix_nano: now_unix,
                        end_time_unix_nano: now_unix + 5_000_000,
                        attributes: vec![kv(
                            "thread.id",
                            AnyValue {
                                string_value: None,
                                int_value: Some(7),
                            },
                        )],
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
                "name": "handle", "startTimeUnixNano": now_unix.to_string(),
                "endTimeUnixNano": now_unix + 5_000_000,
                "attributes": [{"key": "thread.id", "value": {"intValue": 7}}]}]}]}]});
        let from_js = from_json(json.to_string().as_bytes()).unwrap();
        for spans in [&from_pb, &from_js] {
            let s = &spans[0];
            assert_eq!(
                (s.service.as_str(), s.pid, s.thread, s.name.as_str()),
                ("svc", Some(42), Some(7), "handle")
            );
            assert_eq!(s.end_ns - s.start_ns, 5_000_000);
            // Moved to the monotonic clock: within a second of now on it.
            assert!(s.start_ns.abs_diff(timeline::monotonic_ns()) < 1_000_000_000);
        }
        assert!(from_json(b"[]").is_none());
        assert!(from_protobuf(b"\xff\xff").is_none());
    }
}
