//! The request a serve phase sends and how each reply is judged.

use std::time::Duration;

use phases::serve::{OfferedLoad, RequestOutcome};
use serde_json::{Map, Value};
use spawn::worker_proto::{Reply, Request};

use crate::error::{Result, invalid};
use crate::target::{Origin, Target};

use super::outcome::clip;

/// What to send, and how to judge the replies.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Closed or open loop, and how many requests.
    pub load: OfferedLoad,
    /// The request's op.
    pub op: String,
    /// The request's fields besides `op` (no `id`).
    pub fields: Map<String, Value>,
    /// How long to wait for each reply.
    pub timeout: Duration,
    /// The reply must carry `response.echo` equal to the fields (the
    /// reference worker's `infer`); a reply that carries one is always
    /// checked.
    pub expect_echo: bool,
}

impl Plan {
    /// The request from --request, else the target's, else a default.
    pub fn new(load: OfferedLoad, request: Option<&str>, target: &Target) -> Result<Plan> {
        let reference = target.origin == Origin::BuiltinDefault;
        let mut object = match (request, &target.request) {
            (Some(text), _) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(m)) => m,
                Ok(_) => invalid!("--request must be a JSON object with an `op`, got `{text}`"),
                Err(e) => invalid!(
                    "--request is not JSON ({e}): give an object such as '{{\"op\": \"infer\", \"text\": \"hello\"}}'"
                ),
            },
            (None, Some(m)) => m.clone(),
            (None, None) if reference => {
                let mut m = Map::new();
                m.insert("op".into(), "infer".into());
                m.insert(
                    "text".into(),
                    "The quick brown fox jumps over the lazy dog.".into(),
                );
                m
            }
            (None, None) => {
                let mut m = Map::new();
                m.insert("op".into(), "health".into());
                m
            }
        };
        let op = match object.remove("op") {
            Some(Value::String(op)) if !op.is_empty() => op,
            _ => invalid!(
                "the serve request needs a string `op` (from --request or the target's `request` in its config)"
            ),
        };
        if op == "shutdown" {
            invalid!(
                "the serve request cannot be `shutdown`: it would end the worker; pick the op to measure"
            );
        }
        object.remove("id");
        Ok(Plan {
            load,
            expect_echo: reference && op == "infer",
            op,
            fields: object,
            timeout: target.request_timeout,
        })
    }

    /// The request as configured, `{"op": ..., ...}`, for the summary.
    pub fn describe(&self) -> Value {
        let mut m = Map::new();
        m.insert("op".into(), Value::String(self.op.clone()));
        m.extend(self.fields.clone());
        Value::Object(m)
    }

    /// Request `index`: the fields with that `id`.
    pub(crate) fn request(&self, index: usize) -> Request {
        let mut extra = self.fields.clone();
        extra.insert("id".into(), Value::from(index));
        Request::new(self.op.clone(), extra)
    }

    /// Judges a reply to request `index`.
    pub fn judge(&self, index: usize, reply: &Reply) -> RequestOutcome {
        let obj = reply.to_object();
        if let Some(id) = obj.get("id")
            && id.as_u64() != Some(index as u64)
        {
            return RequestOutcome::WrongReply {
                problem: format!(
                    "the reply carries id {id} where {index} was due: a reply out of order or for another request"
                ),
            };
        }
        match reply {
            Reply::Error(e) => {
                return RequestOutcome::ErrorReply {
                    error: e.error.clone(),
                };
            }
            // A health request's reply is judged by the protocol's one rule.
            _ if self.op == "health" => {
                if let Err(why) = reply.healthy() {
                    return RequestOutcome::WrongReply {
                        problem: why.to_string(),
                    };
                }
            }
            _ => {}
        }
        let echo = obj.get("response").and_then(|r| r.get("echo"));
        match echo {
            Some(Value::Object(e)) if *e == self.fields => RequestOutcome::Ok,
            Some(other) => RequestOutcome::WrongReply {
                problem: format!(
                    "response.echo is {} where the request's fields {} were due",
                    clip(&other.to_string()),
                    clip(&Value::Object(self.fields.clone()).to_string())
                ),
            },
            None if self.expect_echo => RequestOutcome::WrongReply {
                problem: "the reply has no response.echo of the request's fields".to_owned(),
            },
            None => RequestOutcome::Ok,
        }
    }
}
