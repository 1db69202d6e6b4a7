//! Typed protocol messages. Every type keeps unknown fields in `extra`.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::Object;

/// The worker's first line: `{"ready": true, "pid": 123, ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ready {
    /// Must be `true` for a worker that is ready; kept as sent.
    pub ready: bool,
    /// The worker's own pid, as it reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// `time.monotonic_ns()` just before the line was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_ns: Option<u64>,
    /// Every other field (`transport`, ...), in the order received.
    #[serde(flatten)]
    pub extra: Object,
}

impl Ready {
    /// A ready line with no optional fields.
    pub fn new() -> Self {
        Ready {
            ready: true,
            pid: None,
            t_ns: None,
            extra: Object::new(),
        }
    }
}

impl Default for Ready {
    fn default() -> Self {
        Self::new()
    }
}

/// A request from the harness to the worker.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Request {
    /// `{"op": "health"}`.
    Health {
        /// Any fields besides `op` (usually none), in the order given.
        extra: Object,
    },
    /// `{"op": "shutdown"}`.
    Shutdown {
        /// Any fields besides `op` (usually none), in the order given.
        extra: Object,
    },
    /// Any other op, with its fields (`{"op": "infer", "text": "..."}`).
    /// Build requests with [`Request::new`]: an `Other` named `health` or
    /// `shutdown` encodes like the typed variant but does not compare equal
    /// to what decoding gives back.
    Other {
        /// The op name as sent on the wire (`infer`, `load`, ...).
        op: String,
        /// The request's fields besides `op`, in order.
        extra: Object,
    },
}

impl Request {
    /// `{"op": "health"}`.
    pub fn health() -> Self {
        Request::Health {
            extra: Object::new(),
        }
    }

    /// `{"op": "shutdown"}`.
    pub fn shutdown() -> Self {
        Request::Shutdown {
            extra: Object::new(),
        }
    }

    /// A request for `op` with extra fields. `health` and `shutdown` give the
    /// typed variants, so equal wire forms give equal values.
    pub fn new(op: impl Into<String>, extra: Object) -> Self {
        let op = op.into();
        match op.as_str() {
            "health" => Request::Health { extra },
            "shutdown" => Request::Shutdown { extra },
            _ => Request::Other { op, extra },
        }
    }

    /// The op name as sent on the wire.
    pub fn op(&self) -> &str {
        match self {
            Request::Health { .. } => "health",
            Request::Shutdown { .. } => "shutdown",
            Request::Other { op, .. } => op,
        }
    }

    /// The fields besides `op`.
    pub fn extra(&self) -> &Object {
        match self {
            Request::Health { extra }
            | Request::Shutdown { extra }
            | Request::Other { extra, .. } => extra,
        }
    }
}

fn with_op(op: &str, extra: &Object) -> Object {
    let mut map = Object::with_capacity(extra.len() + 1);
    map.insert("op".to_owned(), Value::String(op.to_owned()));
    for (k, v) in extra {
        if k != "op" {
            map.insert(k.clone(), v.clone());
        }
    }
    map
}

fn take_op<E: serde::de::Error>(map: &mut Object) -> Result<String, E> {
    match map.remove("op") {
        Some(Value::String(op)) => Ok(op),
        Some(other) => Err(E::custom(format_args!(
            "field `op` must be a string, found {other}"
        ))),
        None => Err(E::missing_field("op")),
    }
}

impl Serialize for Request {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        with_op(self.op(), self.extra()).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Request {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut map = Object::deserialize(d)?;
        let op = take_op(&mut map)?;
        Ok(Request::new(op, map))
    }
}

/// The `status` of a health response.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HealthStatus {
    /// `"ok"`: ready to serve.
    Ok,
    /// `"loading"`: alive, not yet ready.
    Loading,
    /// Any other status string, kept as sent.
    Other(String),
}

impl HealthStatus {
    /// The wire string.
    pub fn as_str(&self) -> &str {
        match self {
            HealthStatus::Ok => "ok",
            HealthStatus::Loading => "loading",
            HealthStatus::Other(s) => s,
        }
    }

    /// Whether the status is `"ok"`.
    pub fn is_ok(&self) -> bool {
        matches!(self, HealthStatus::Ok)
    }
}

impl From<String> for HealthStatus {
    fn from(s: String) -> Self {
        match s.as_str() {
            "ok" => HealthStatus::Ok,
            "loading" => HealthStatus::Loading,
            _ => HealthStatus::Other(s),
        }
    }
}

impl Serialize for HealthStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for HealthStatus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(String::deserialize(d)?.into())
    }
}

/// The `response` object of a health reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthResponse {
    /// The worker's `status`: `"ok"` when ready to serve, `"loading"` before.
    pub status: HealthStatus,
    /// Every other field, in the order received.
    #[serde(flatten)]
    pub extra: Object,
}

/// `{"op": "health", "response": {"status": "ok", ...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthReply {
    /// The `response` object carrying the worker's status.
    pub response: HealthResponse,
    /// Every top-level field besides `op` and `response`, in the order received.
    #[serde(flatten)]
    pub extra: Object,
}

/// `{"op": "shutdown"}`, the acknowledgement before the worker exits.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ShutdownReply {
    /// Every field besides `op`, in the order received.
    #[serde(flatten)]
    pub extra: Object,
}

/// `{"op": "error", "error": "text"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// The worker's error message (e.g. `unknown op: 'bogus'`).
    pub error: String,
    /// Every field besides `op` and `error`, in the order received.
    #[serde(flatten)]
    pub extra: Object,
}

/// A reply with any other op (`capabilities`, `load`, `infer`, ...), or a
/// `health` reply without a well-formed `response.status`, kept whole.
#[derive(Debug, Clone, PartialEq)]
pub struct OtherReply {
    /// The op name as received (`capabilities`, `load`, `infer`, ...).
    pub op: String,
    /// The fields besides `op`.
    pub extra: Object,
}

/// A reply from the worker to a request.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Reply {
    /// A well-formed `health` reply with a `response.status`.
    Health(HealthReply),
    /// The `shutdown` acknowledgement sent before the worker exits.
    Shutdown(ShutdownReply),
    /// An `{"op": "error", "error": ...}` reply to a request the worker could not serve.
    Error(ErrorReply),
    /// Any other op, or a `health`/`error` reply that is not well formed, kept whole.
    Other(OtherReply),
}

impl Reply {
    /// The op name as received.
    pub fn op(&self) -> &str {
        match self {
            Reply::Health(_) => "health",
            Reply::Shutdown(_) => "shutdown",
            Reply::Error(_) => "error",
            Reply::Other(o) => &o.op,
        }
    }

    /// The reply as a JSON object, exactly as it would be encoded.
    pub fn to_object(&self) -> Object {
        let value = serde_json::to_value(self).expect("a reply always serialises");
        match value {
            Value::Object(map) => map,
            _ => unreachable!("a reply serialises to an object"),
        }
    }

    fn from_object<E: serde::de::Error>(mut map: Object) -> Result<Self, E> {
        let op = take_op(&mut map)?;
        let typed = match op.as_str() {
            "health" => serde_json::from_value::<HealthReply>(Value::Object(map.clone()))
                .ok()
                .map(Reply::Health),
            "shutdown" => Some(Reply::Shutdown(ShutdownReply { extra: map.clone() })),
            "error" => serde_json::from_value::<ErrorReply>(Value::Object(map.clone()))
                .ok()
                .map(Reply::Error),
            _ => None,
        };
        Ok(typed.unwrap_or(Reply::Other(OtherReply { op, extra: map })))
    }
}

impl Serialize for Reply {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let rest = match self {
            Reply::Health(h) => serde_json::to_value(h),
            Reply::Shutdown(r) => serde_json::to_value(r),
            Reply::Error(e) => serde_json::to_value(e),
            Reply::Other(o) => Ok(Value::Object(o.extra.clone())),
        }
        .map_err(serde::ser::Error::custom)?;
        let Value::Object(rest) = rest else {
            return Err(serde::ser::Error::custom("a reply must be a JSON object"));
        };
        with_op(self.op(), &rest).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Reply {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Reply::from_object(Object::deserialize(d)?)
    }
}

/// Anything a worker writes on stdout that parses as a JSON object.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Message {
    /// An object with a `ready` field.
    Ready(Ready),
    /// An object with an `op` field.
    Reply(Reply),
    /// A JSON object with neither, kept whole.
    Unknown(Object),
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Message::Ready(r) => r.serialize(s),
            Message::Reply(r) => r.serialize(s),
            Message::Unknown(m) => m.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = Object::deserialize(d)?;
        if map.contains_key("ready") {
            serde_json::from_value(Value::Object(map))
                .map(Message::Ready)
                .map_err(D::Error::custom)
        } else if map.contains_key("op") {
            Reply::from_object(map).map(Message::Reply)
        } else {
            Ok(Message::Unknown(map))
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::{Inbound, arb, classify, encode};

    fn obj(v: Value) -> Object {
        match v {
            Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        }
    }

    #[track_caller]
    fn message(line: &str) -> Message {
        match classify(line.as_bytes()) {
            Ok(Inbound::Message(m)) => m,
            other => panic!("{line} did not classify as a message: {other:?}"),
        }
    }

    #[test]
    fn seed_ready_line() {
        let Message::Ready(r) = message(r#"{"ready": true, "pid": 123, "transport": "stdio"}"#)
        else {
            panic!("not a ready line")
        };
        assert!(r.ready);
        assert_eq!(r.pid, Some(123));
        assert_eq!(r.t_ns, None);
        assert_eq!(Value::Object(r.extra), json!({"transport": "stdio"}));
    }

    #[test]
    fn ready_line_with_stamp_and_without_pid() {
        let Message::Ready(r) = message(r#"{"ready": false, "t_ns": 18446744073709551615}"#) else {
            panic!("not a ready line")
        };
        assert!(!r.ready);
        assert_eq!(r.pid, None);
        assert_eq!(r.t_ns, Some(u64::MAX));
    }

    #[test]
    fn ready_line_with_bad_fields_is_malformed() {
        for line in [
            r#"{"ready": "yes"}"#,
            r#"{"ready": true, "pid": -1}"#,
            r#"{"ready": true, "pid": "123"}"#,
            r#"{"ready": true, "t_ns": 1.5}"#,
        ] {
            assert!(classify(line.as_bytes()).is_err(), "{line}");
        }
    }

    #[test]
    fn seed_health_reply() {
        let Message::Reply(Reply::Health(h)) =
            message(r#"{"op": "health", "response": {"status": "ok", "model": "m"}}"#)
        else {
            panic!("not a health reply")
        };
        assert_eq!(h.response.status, HealthStatus::Ok);
        assert_eq!(Value::Object(h.response.extra), json!({"model": "m"}));
        assert!(h.extra.is_empty());
    }

    #[test]
    fn health_statuses() {
        let status = |s: &str| {
            let line = json!({"op": "health", "response": {"status": s}}).to_string();
            match message(&line) {
                Message::Reply(Reply::Health(h)) => h.response.status,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(status("ok"), HealthStatus::Ok);
        assert_eq!(status("loading"), HealthStatus::Loading);
        assert_eq!(status("degraded"), HealthStatus::Other("degraded".into()));
        assert!(!status("loading").is_ok());
        assert_eq!(status("degraded").as_str(), "degraded");
    }

    #[test]
    fn health_reply_without_status_is_kept_whole() {
        for line in [
            r#"{"op": "health"}"#,
            r#"{"op": "health", "response": {"state": "ok"}}"#,
            r#"{"op": "health", "response": {"status": 1}}"#,
            r#"{"op": "health", "response": "ok"}"#,
        ] {
            let m = message(line);
            let Message::Reply(Reply::Other(o)) = &m else {
                panic!("{line} gave {m:?}")
            };
            assert_eq!(o.op, "health");
            assert_eq!(
                serde_json::to_value(&m).unwrap(),
                serde_json::from_str::<Value>(line).unwrap()
            );
        }
    }

    #[test]
    fn seed_shutdown_ack() {
        let m = message(r#"{"op": "shutdown"}"#);
        assert_eq!(m, Message::Reply(Reply::Shutdown(ShutdownReply::default())));
        assert_eq!(encode(&m), b"{\"op\":\"shutdown\"}\n");
    }

    #[test]
    fn seed_error_reply() {
        let Message::Reply(Reply::Error(e)) =
            message(r#"{"op": "error", "error": "unknown op: 'bogus'"}"#)
        else {
            panic!("not an error reply")
        };
        assert_eq!(e.error, "unknown op: 'bogus'");
        // Without an `error` string it is not an error reply we can read.
        assert!(matches!(
            message(r#"{"op": "error", "error": 5}"#),
            Message::Reply(Reply::Other(_))
        ));
    }

    #[test]
    fn other_replies_and_unknown_objects_are_kept() {
        let line = r#"{"op": "capabilities", "response": {"ops": ["health"]}, "id": 7}"#;
        let Message::Reply(Reply::Other(o)) = message(line) else {
            panic!("not another reply")
        };
        assert_eq!(o.op, "capabilities");
        assert_eq!(o.extra["id"], 7);
        assert_eq!(
            message(r#"{"hello": 1}"#),
            Message::Unknown(obj(json!({"hello": 1})))
        );
        assert_eq!(message("{}"), Message::Unknown(Object::new()));
    }

    #[test]
    fn op_must_be_a_string() {
        for line in [r#"{"op": 5}"#, r#"{"op": null}"#, r#"{"op": ["health"]}"#] {
            let err = classify(line.as_bytes()).unwrap_err().to_string();
            assert!(err.contains("field `op` must be a string"), "{err}");
        }
    }

    #[test]
    fn requests_on_the_wire() {
        assert_eq!(encode(&Request::health()), b"{\"op\":\"health\"}\n");
        assert_eq!(encode(&Request::shutdown()), b"{\"op\":\"shutdown\"}\n");
        let infer = Request::new("infer", obj(json!({"text": "hi", "op": "ignored"})));
        assert_eq!(infer.op(), "infer");
        assert_eq!(encode(&infer), b"{\"op\":\"infer\",\"text\":\"hi\"}\n");
        // `new` gives the typed variants, so equal wire forms are equal values.
        assert_eq!(Request::new("health", Object::new()), Request::health());
        assert_eq!(
            serde_json::from_str::<Request>(r#"{"op": "shutdown", "id": 1}"#).unwrap(),
            Request::Shutdown {
                extra: obj(json!({"id": 1}))
            }
        );
        assert!(serde_json::from_str::<Request>(r#"{"text": "no op"}"#).is_err());
    }

    #[test]
    fn reply_op_and_object() {
        let reply = Reply::Error(ErrorReply {
            error: "boom".into(),
            extra: obj(json!({"id": 3})),
        });
        assert_eq!(reply.op(), "error");
        assert_eq!(
            Value::Object(reply.to_object()),
            json!({"op": "error", "error": "boom", "id": 3})
        );
    }

    /// Encoding then classifying gives back the same message.
    #[track_caller]
    fn round_trips(m: &Message) -> Result<(), TestCaseError> {
        let line = encode(m);
        prop_assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        let back = classify(&line[..line.len() - 1]);
        prop_assert_eq!(
            back,
            Ok(Inbound::Message(m.clone())),
            "line {}",
            String::from_utf8_lossy(&line)
        );
        Ok(())
    }

    proptest! {
        #[test]
        fn ready_round_trips(r in arb::ready()) {
            round_trips(&Message::Ready(r.clone()))?;
            let line = encode(&r);
            prop_assert_eq!(serde_json::from_slice::<Ready>(&line).unwrap(), r);
        }

        #[test]
        fn request_round_trips(req in arb::request()) {
            let line = encode(&req);
            prop_assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
            let back: Request = serde_json::from_slice(&line).unwrap();
            prop_assert_eq!(&back, &req);
            prop_assert_eq!(Request::new(req.op(), req.extra().clone()), req);
        }

        #[test]
        fn reply_round_trips(reply in arb::reply()) {
            round_trips(&Message::Reply(reply.clone()))?;
            let back: Reply = serde_json::from_value(Value::Object(reply.to_object())).unwrap();
            prop_assert_eq!(back, reply);
        }

        #[test]
        fn message_round_trips(m in arb::message()) {
            round_trips(&m)?;
        }

        #[test]
        fn any_json_value_classifies_without_panic(v in arb::json_value()) {
            let line = serde_json::to_vec(&v).unwrap();
            let got = classify(&line);
            if v.is_object() {
                // An object is a message or a typed field's error, never noise.
                prop_assert!(!matches!(got, Ok(Inbound::Noise(_))));
            } else if line.first() != Some(&b'{') {
                prop_assert!(matches!(got, Ok(Inbound::Noise(_))));
            }
        }
    }
}
