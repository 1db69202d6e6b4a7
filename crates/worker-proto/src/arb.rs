//! proptest strategies for protocol values, shared by the unit tests.
//!
//! Extra fields never use a key the type itself owns on the wire (its
//! reserved keys): such a map has no single encoding, so it cannot round-trip
//! and is not a value the protocol can carry.

use proptest::prelude::*;
use serde_json::Value;

use crate::{
    ErrorReply, HealthReply, HealthResponse, HealthStatus, Message, Object, OtherReply, Ready,
    Reply, Request, ShutdownReply,
};

/// Any JSON value: every scalar kind (finite floats; JSON has no others),
/// any Unicode in strings and keys, nested arrays and objects.
pub fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// An object key: mostly short identifiers (which may hit reserved names),
/// sometimes arbitrary Unicode.
pub fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z_]{1,8}",
        1 => prop::sample::select(vec!["op", "ready", "pid", "t_ns", "status", "response", "error"])
            .prop_map(String::from),
        1 => any::<String>(),
    ]
}

/// An object whose keys avoid `reserved`.
pub fn object_without(reserved: &'static [&'static str]) -> impl Strategy<Value = Object> {
    prop::collection::vec((key(), json_value()), 0..5).prop_map(move |kv| {
        kv.into_iter()
            .filter(|(k, _)| !reserved.contains(&k.as_str()))
            .collect()
    })
}

/// An op name other than `taken`.
pub fn op_except(taken: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "capabilities",
            "load",
            "infer",
            "ready",
            "health",
            "error",
            "shutdown"
        ])
        .prop_map(String::from),
        "[a-z_]{0,10}",
        any::<String>(),
    ]
    .prop_filter("op has a typed variant", move |op| {
        !taken.contains(&op.as_str())
    })
}

pub fn ready() -> impl Strategy<Value = Ready> {
    (
        any::<bool>(),
        any::<Option<u32>>(),
        any::<Option<u64>>(),
        object_without(&["ready", "pid", "t_ns"]),
    )
        .prop_map(|(ready, pid, t_ns, extra)| Ready {
            ready,
            pid,
            t_ns,
            extra,
        })
}

/// Extra fields of requests and replies: never `op`, and never `ready`,
/// which would make the line a ready line.
const OP_RESERVED: &[&str] = &["op", "ready"];

pub fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        object_without(OP_RESERVED).prop_map(|extra| Request::Health { extra }),
        object_without(OP_RESERVED).prop_map(|extra| Request::Shutdown { extra }),
        (
            op_except(&["health", "shutdown"]),
            object_without(OP_RESERVED)
        )
            .prop_map(|(op, extra)| Request::Other { op, extra }),
    ]
}

pub fn health_status() -> impl Strategy<Value = HealthStatus> {
    prop_oneof![
        Just(HealthStatus::Ok),
        Just(HealthStatus::Loading),
        any::<String>()
            .prop_filter("has a typed variant", |s| s != "ok" && s != "loading")
            .prop_map(HealthStatus::Other),
    ]
}

pub fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        (
            health_status(),
            object_without(&["status"]),
            object_without(&["op", "ready", "response"]),
        )
            .prop_map(|(status, rest, extra)| Reply::Health(HealthReply {
                response: HealthResponse {
                    status,
                    extra: rest,
                },
                extra,
            })),
        object_without(OP_RESERVED).prop_map(|extra| Reply::Shutdown(ShutdownReply { extra })),
        (any::<String>(), object_without(&["op", "ready", "error"]))
            .prop_map(|(error, extra)| Reply::Error(ErrorReply { error, extra })),
        (
            op_except(&["health", "shutdown", "error"]),
            object_without(OP_RESERVED)
        )
            .prop_map(|(op, extra)| Reply::Other(OtherReply { op, extra })),
        // A health reply without a `response` object stays whole as Other,
        // and so does an error reply without an `error` string.
        object_without(&["op", "ready", "response"]).prop_map(|extra| Reply::Other(OtherReply {
            op: "health".into(),
            extra,
        })),
        object_without(&["op", "ready", "error"]).prop_map(|extra| Reply::Other(OtherReply {
            op: "error".into(),
            extra,
        })),
        (
            json_value().prop_filter("a well-formed health response", |v| {
                !v.get("status").is_some_and(Value::is_string)
            }),
            object_without(&["op", "ready", "response"]),
        )
            .prop_map(|(response, mut extra)| {
                extra.insert("response".into(), response);
                Reply::Other(OtherReply {
                    op: "health".into(),
                    extra,
                })
            }),
    ]
}

pub fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        ready().prop_map(Message::Ready),
        reply().prop_map(Message::Reply),
        object_without(&["op", "ready"]).prop_map(Message::Unknown),
    ]
}
