//! A request's outcome when its worker failed, and the short, clipped
//! words an error is reported in (the serve phase's, the pool's, the
//! memory view's).

use phases::serve::RequestOutcome;

/// `s` cut to at most 120 bytes (see [`clip_to`]).
pub(crate) fn clip(s: &str) -> String {
    clip_to(s, 120)
}

/// `s` cut to at most `max` bytes on a character boundary, with `…` when cut.
pub(crate) fn clip_to(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// What became of the request in flight when the worker ended with `e`.
pub(crate) fn outcome_of(e: &spawn::Error) -> RequestOutcome {
    match &e.kind {
        spawn::ErrorKind::Timeout { after } => RequestOutcome::Timeout {
            after_ms: after.as_secs_f64() * 1e3,
        },
        spawn::ErrorKind::UnexpectedReply { got } => RequestOutcome::WrongReply {
            problem: format!("answered with {got}"),
        },
        _ => RequestOutcome::Lost {
            reason: short_error(e),
        },
    }
}

pub(crate) fn short_error(e: &spawn::Error) -> String {
    clip(&e.kind.to_string())
}
