//! How the lifecycle builds its errors: a spawn that failed, a worker
//! ended after a failure (its group killed and reaped first, the record of
//! its end inside), a worker asked for something after its end.

use std::io;
use std::time::Instant;

use worker_proto::Message;

use super::{EXIT_AFTER_EOF, Worker};
use crate::error::{Error, ErrorDetail, ErrorKind, Stage};
use crate::reap::ExitInfo;
use crate::{Command, ExitStatus, Finished, monotonic_ns};

/// Longest quote of an unexpected message in an error.
const QUOTE_MAX: usize = 200;

pub(super) fn spawn_error(cmd: &Command, e: io::Error) -> Error {
    Error::new(ErrorDetail {
        kind: ErrorKind::SpawnFailed(e),
        stage: Stage::Spawn,
        command: cmd.display(),
        instruments: cmd.instruments().to_vec(),
        expected: "the process to start".to_owned(),
        status: None,
        noise: Vec::new(),
        stderr_tail: String::new(),
        pid: 0,
        diagnostics: Vec::new(),
        finished: None,
    })
}

pub(super) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

pub(super) fn describe(m: &Message) -> String {
    let json = serde_json::to_string(m).unwrap_or_else(|e| format!("<unprintable: {e}>"));
    cut(&json, QUOTE_MAX)
}

impl Worker {
    pub(super) fn run_hook(&mut self) {
        if let Some(hook) = self.on_timeout.as_mut()
            && let Some(text) = hook(self.pid)
        {
            self.diagnostics.push(text);
        }
    }

    /// Ends the worker after a failure and builds the error.
    pub(super) fn fail(
        &mut self,
        kind: ErrorKind,
        stage: Stage,
        expected: String,
        deadline: Instant,
    ) -> Error {
        match kind {
            ErrorKind::Timeout { .. } => self.run_hook(),
            ErrorKind::ExitedEarly | ErrorKind::PartialLine { .. } => {
                // stdout ended: the worker is most likely exiting; let it,
                // so the error carries its own exit status.
                let until = deadline.max(Instant::now() + EXIT_AFTER_EOF);
                self.wait_exit_until(until);
            }
            ErrorKind::Disconnected { .. } => {
                // A closed connection says less: a worker may close it and
                // go on running. A short while to exit on its own, then
                // it is ended.
                self.wait_exit_until(Instant::now() + EXIT_AFTER_EOF);
            }
            _ => {}
        }
        self.force_kill();
        self.close_out();
        let finished = self.record();
        self.error(kind, stage, expected, finished)
    }

    pub(super) fn error(
        &self,
        kind: ErrorKind,
        stage: Stage,
        expected: String,
        finished: Finished,
    ) -> Error {
        Error::new(ErrorDetail {
            kind,
            stage,
            command: self.command.clone(),
            instruments: self.instruments.clone(),
            expected,
            status: Some(finished.status),
            noise: finished.noise.clone(),
            stderr_tail: finished.stderr_tail.clone(),
            pid: self.pid,
            diagnostics: self.diagnostics.clone(),
            finished: Some(Box::new(finished)),
        })
    }

    pub(super) fn not_running(&self, stage: Stage, expected: String) -> Error {
        Error::new(ErrorDetail {
            kind: ErrorKind::NotRunning,
            stage,
            command: self.command.clone(),
            instruments: self.instruments.clone(),
            expected,
            status: self.exit.map(|e| e.status),
            noise: self.noise.clone(),
            stderr_tail: self.stderr_tail(),
            pid: self.pid,
            diagnostics: self.diagnostics.clone(),
            finished: None,
        })
    }
}

/// A text cut for quoting in an error.
pub(super) fn quote(text: &str) -> String {
    cut(text, QUOTE_MAX)
}

/// The waiter thread vanished without a report (it cannot panic in
/// practice): the exit is recorded as unknown rather than invented.
pub(super) fn lost_waiter() -> ExitInfo {
    ExitInfo {
        status: ExitStatus::Unknown,
        rusage: None,
        exited_at_ns: monotonic_ns(),
        group_gone: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_respects_characters() {
        assert_eq!(cut("abc", 5), "abc");
        assert_eq!(cut("aé", 2), "a…");
    }
}
