//! The one rule for what answers a health request after the ready line:
//! which reply says the worker can serve ([`Reply::healthy`]). Every task
//! of a harness judges health replies by it, so one worker is never judged
//! two ways.

use crate::message::Reply;

/// The reply that answers `{"op": "health"}` from a worker that can serve
/// (other fields beside `op` and `response`, and inside `response`, are
/// allowed and kept).
pub const HEALTHY_REPLY: &str = r#"{"op": "health", "response": {"status": "ok", ...}}"#;

/// The most characters of a reply an [`Unhealthy`] quotes.
const QUOTE_MAX: usize = 200;

/// Why a reply to `{"op": "health"}` does not say the worker can serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unhealthy {
    /// A health reply whose `response.status` is not `"ok"` (such as
    /// `"loading"`): alive, but not able to serve after its ready line.
    #[error(
        "health answered status `{status}`, not `ok`, after the ready line; a worker that can serve answers {HEALTHY_REPLY}"
    )]
    Status {
        /// The status as sent.
        status: String,
    },
    /// Any other reply: an error reply, another op, or a health reply
    /// without a string `response.status` (`{"op": "health", "ok": true}`).
    #[error("health was answered with `{reply}`; a worker that can serve answers {HEALTHY_REPLY}")]
    Shape {
        /// The reply as encoded, cut to 200 characters.
        reply: String,
    },
}

impl Reply {
    /// Whether this reply to `{"op": "health"}` says the worker can serve:
    /// only [`HEALTHY_REPLY`] does, a `health` reply whose
    /// `response.status` is `"ok"`. A status other than `ok`, a `health`
    /// reply without a string `response.status`, an error reply or a reply
    /// of another op is refused, saying what came and what was due.
    pub fn healthy(&self) -> Result<(), Unhealthy> {
        match self {
            Reply::Health(h) if h.response.status.is_ok() => Ok(()),
            Reply::Health(h) => Err(Unhealthy::Status {
                status: h.response.status.as_str().to_owned(),
            }),
            other => {
                let text = serde_json::to_string(other).unwrap_or_else(|e| e.to_string());
                let mut reply: String = text.chars().take(QUOTE_MAX).collect();
                if reply.len() < text.len() {
                    reply.push('…');
                }
                Err(Unhealthy::Shape { reply })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Inbound, Message, Reply, classify};

    fn reply(line: &str) -> Reply {
        match classify(line.as_bytes()).unwrap() {
            Inbound::Message(Message::Reply(r)) => r,
            other => panic!("not a reply: {other:?}"),
        }
    }

    #[test]
    fn only_status_ok_answers_health() {
        assert_eq!(
            reply(r#"{"op": "health", "response": {"status": "ok", "model": null}, "id": 1}"#)
                .healthy(),
            Ok(())
        );
        for (line, says) in [
            (
                r#"{"op": "health", "ok": true}"#,
                r#"health was answered with `{"op":"health","ok":true}`"#,
            ),
            (
                r#"{"op": "health", "response": {"status": "loading"}}"#,
                "health answered status `loading`, not `ok`",
            ),
            (
                r#"{"op": "health", "response": {"status": 1}}"#,
                r#"health was answered with `{"op":"health","response":{"status":1}}`"#,
            ),
            (
                r#"{"op": "error", "error": "unknown op: 'health'"}"#,
                "health was answered with `{\"op\":\"error\"",
            ),
            (
                r#"{"op": "capabilities", "ops": ["health"]}"#,
                "health was answered with `{\"op\":\"capabilities\"",
            ),
        ] {
            let why = reply(line).healthy().unwrap_err().to_string();
            assert!(why.starts_with(says), "{line}: {why}");
            assert!(
                why.ends_with(r#"a worker that can serve answers {"op": "health", "response": {"status": "ok", ...}}"#),
                "{line}: {why}"
            );
        }
    }

    #[test]
    fn a_long_reply_is_quoted_cut() {
        let line = format!(r#"{{"op": "health", "blob": "{}"}}"#, "x".repeat(1000));
        let why = reply(&line).healthy().unwrap_err().to_string();
        assert!(why.len() < 400, "{why}");
        assert!(why.contains("xxx…`"), "{why}");
    }
}
