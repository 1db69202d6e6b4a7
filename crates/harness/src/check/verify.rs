//! The one verification of a patched copy ([`on_copy`]), for every caller
//! that offers a cut (`check --suggest`): after the check on the copy (the worker reaches ready, answers
//! health and shutdown, and the recorder's evidence says what start-up
//! imported), the target's model path must still work: each of its
//! `verify` requests, sent after ready on one fresh worker, gets a reply
//! that is not an error, and its `verify_command`, run in the copy, exits
//! 0. A cut that fails any step is never offered; the failure names the
//! step and carries its output. A worker whose original already ends late
//! (its shutdown ack or its exit past the target's timeouts, after a whole
//! start-up) ends late on the copy too: with [`LateEnd::Original`] that end
//! is the worker's, not the cut's, and the copy is judged on the rest.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use timeline::Stage;

use answers::check::{ProcessReport, Status};
use serde::Serialize;
use serde_json::Value;
use spawn::worker_proto::{Reply, Request};
use suggest::VerifyOutcome;

use super::CheckOptions;
use crate::error::Result;
use crate::lifecycle::{Halt, Hooks, Lifecycle, Started};
use crate::target::Target;

/// How long the user's own command may run before it is killed: a bound on
/// a hang, not a figure.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(600);

/// How much of a failing step's output is kept.
const OUTPUT_BYTES: usize = 4000;

/// The part of the model path that failed: the worker (in a stage of its
/// life), one of the config's `verify` requests, or `verify_command`.
/// Serialized with a `step` tag (`lifecycle`, `request`, `command`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Part {
    /// The worker did not reach ready, or did not answer health or
    /// shutdown, while the `verify` requests were sent.
    Lifecycle {
        /// The stage of its life it failed in.
        stage: Stage,
    },
    /// A `verify` request got an error reply, or none.
    Request {
        /// 1-based, in the config's order (not the worker's request
        /// count: health round trips come first).
        index: usize,
        /// Its op.
        op: String,
    },
    /// `verify_command` did not exit 0.
    Command,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Part::Lifecycle { stage } => write!(f, "the worker's lifecycle (at {stage})"),
            Part::Request { index, op } => write!(f, "verify request {index} (`{op}`)"),
            Part::Command => f.write_str("verify_command"),
        }
    }
}

/// A model path that failed: where, and what it said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failed {
    /// The part that failed.
    #[serde(flatten)]
    pub part: Part,
    /// The failing reply, or the command's status and output (its tail).
    pub output: String,
}

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {}", self.part, self.output)
    }
}

/// Sends the target's `verify` requests after ready; the first error reply
/// stops the worker.
struct SendVerify<'a> {
    requests: &'a [serde_json::Map<String, Value>],
    timeout: Duration,
    failed: Option<Failed>,
}

impl Hooks for SendVerify<'_> {
    fn before_shutdown(&mut self, w: &mut Started<'_>) -> std::result::Result<(), Halt> {
        for (i, req) in self.requests.iter().enumerate() {
            let op = req
                .get("op")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let mut extra = req.clone();
            extra.remove("op");
            let part = Part::Request {
                index: i + 1,
                op: op.clone(),
            };
            match w.worker.request(&Request::new(op, extra), self.timeout) {
                Ok(x) => {
                    if let Reply::Error(_) = x.reply {
                        let output = Value::Object(x.reply.to_object()).to_string();
                        self.failed = Some(Failed {
                            part,
                            output: tail(&output),
                        });
                        return Err(Halt::Refused("a verify request got an error reply".into()));
                    }
                }
                Err(e) => {
                    self.failed = Some(Failed {
                        part,
                        output: tail(&e.to_string()),
                    });
                    return Err(Halt::Ended(e));
                }
            }
        }
        Ok(())
    }
}

/// Whether a worker on the copy that fails only at its end (the shutdown
/// ack or the exit, after a whole start-up and every `verify` request
/// answered) fails the verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LateEnd {
    /// It does: the original ends in time, so a late end on the copy is
    /// the cut's doing.
    Rejects,
    /// It does not: the original ends late too (its check, or `lazy`'s
    /// pricing, saw it), so the late end is the worker's own; the copy is
    /// judged on its start-up and its model path, as the original is priced.
    Original,
}

impl LateEnd {
    /// [`LateEnd::Original`] when any of the original's processes failed
    /// at its end after a whole start-up, else [`LateEnd::Rejects`].
    pub fn of(original: &[ProcessReport]) -> LateEnd {
        if original.iter().any(ProcessReport::ended_late) {
            LateEnd::Original
        } else {
            LateEnd::Rejects
        }
    }

    /// Whether a failure at `stage` is forgiven.
    fn forgives(self, stage: &Stage) -> bool {
        self == LateEnd::Original && stage.at_end()
    }
}

/// The last [`OUTPUT_BYTES`] of `s`, on a character boundary.
fn tail(s: &str) -> String {
    let s = s.trim();
    if s.len() <= OUTPUT_BYTES {
        return s.to_owned();
    }
    let mut start = s.len() - OUTPUT_BYTES;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &s[start..])
}

/// `t` with every path under its project root moved into `copy`
/// ([`Target::moved`], the mapping `diff` uses for its base checkout), the
/// copy's tree first on PYTHONPATH, one process.
pub fn in_copy(t: &Target, copy: &Path) -> Target {
    // The copy's import roots first: an editable install of the project
    // points at the original.
    let mut m = t.moved(&t.root, copy).own_roots_first();
    let moved = m.pythonpath().unwrap_or_default();
    let mut entries: Vec<String> = vec![copy.display().to_string()];
    entries.extend(
        std::env::split_paths(&moved)
            .filter(|p| !p.as_os_str().is_empty())
            .map(|p| p.display().to_string()),
    );
    m.env.insert("PYTHONPATH".to_owned(), entries.join(":"));
    m.processes = 1;
    m
}

/// The whole verification of a patched copy at `copy` of `t`'s project,
/// in order: the check on the copy ([`super::check_target`], one process, held to the copy's tree: the
/// worker reaches ready and answers health and shutdown, and the
/// recorder's evidence says what start-up imported), then, once no
/// violation remains, the target's model path ([`model_path`]). What it
/// saw, for `suggest` to judge the cut by. `late`: whether a worker that
/// fails only at its end fails the verification.
pub fn on_copy(t: &Target, copy: &Path, late: LateEnd) -> Result<VerifyOutcome> {
    let moved = in_copy(t, copy);
    // A copy whose worker ran the original's code verified nothing.
    let r = super::check_target_in(&moved, CheckOptions::default(), Some(copy))?;
    if r.status == Status::Error {
        // A worker that ended late after a whole start-up was still judged
        // on it: with the original's own late end, that verdict stands.
        let forgiven = |p: &ProcessReport| late == LateEnd::Original && p.ended_late();
        if let Some(why) = r
            .processes
            .iter()
            .filter(|p| !forgiven(p))
            .find_map(|p| p.error.clone())
        {
            return Ok(VerifyOutcome::handshake_failed(why));
        }
    }
    // The model path is only worth running once the violation is gone
    // from start-up: a cut that leaves it is rejected anyway.
    if r.violations.is_empty()
        && let Some(failed) = model_path(&moved, late)?
    {
        return Ok(VerifyOutcome::model_path_failed(
            failed.part.to_string(),
            failed.output,
        ));
    }
    Ok(VerifyOutcome::checked(
        r.violations.iter().map(|m| m.first.clone()).collect(),
    ))
}

/// The model path of `t` (a target already moved into a patched copy):
/// its `verify` requests on one fresh worker after ready (then shutdown),
/// then its `verify_command` in its working directory with its
/// environment. `None` when every step passed (or there is none); with
/// [`LateEnd::Original`], a worker that answered every request and then
/// ended late passed. An error only when a step could not be run at all.
pub fn model_path(t: &Target, late: LateEnd) -> Result<Option<Failed>> {
    if !t.verify.is_empty() {
        let mut hooks = SendVerify {
            requests: &t.verify,
            timeout: t.request_timeout,
            failed: None,
        };
        let lived = Lifecycle::of(t).drive(&t.spawn_command(), &mut hooks);
        if let Some(failed) = hooks.failed {
            return Ok(Some(failed));
        }
        if let Err(f) = lived.end
            && !late.forgives(&f.stage)
        {
            return Ok(Some(Failed {
                part: Part::Lifecycle {
                    stage: f.stage.clone(),
                },
                output: tail(&f.to_string()),
            }));
        }
    }
    if !t.verify_command.is_empty() {
        let mut cmd = std::process::Command::new(&t.verify_command[0]);
        cmd.args(&t.verify_command[1..])
            .current_dir(&t.cwd)
            .envs(&t.env);
        let failed = match spawn::run_helper(cmd, COMMAND_TIMEOUT) {
            Ok(out) if out.status.success() => None,
            Ok(out) => Some(format!(
                "{} exited with {}\n{}{}",
                crate::target::display_argv(&t.verify_command),
                out.status,
                out.stdout,
                out.stderr
            )),
            Err(e) => Some(e.to_string()),
        };
        if let Some(output) = failed {
            return Ok(Some(Failed {
                part: Part::Command,
                output: tail(&output),
            }));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn a_long_output_keeps_its_end_on_a_char_boundary() {
        let s = format!("{}é{}", "a".repeat(10), "b".repeat(OUTPUT_BYTES - 1));
        let t = tail(&s);
        assert!(t.starts_with("..."));
        assert!(t.ends_with('b'));
        assert!(t.len() <= OUTPUT_BYTES + 3);
        assert_eq!(tail("  short \n"), "short");
    }

    #[test]
    fn a_failed_step_says_which_and_what() {
        let f = Failed {
            part: Part::Request {
                index: 2,
                op: "load".into(),
            },
            output: r#"{"op":"error","error":"no plugin"}"#.into(),
        };
        assert_eq!(
            f.to_string(),
            r#"verify request 2 (`load`) failed: {"op":"error","error":"no plugin"}"#
        );
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(json["step"], "request");
        assert_eq!(json["op"], "load");
    }

    #[test]
    fn project_paths_move_into_the_copy_and_others_stay() {
        let copy = tempfile::tempdir().unwrap();
        let c = copy.path();
        std::fs::write(c.join("run.py"), "").unwrap();
        let mut t = Target::ad_hoc(
            Path::new("/p"),
            vec!["python3".into(), "/p/run.py".into()],
            "w",
        );
        t.env.insert("PYTHONPATH".into(), "/p/src:/opt/lib".into());
        t.cwd = PathBuf::from("/p/sub");
        let m = in_copy(&t, c);
        assert_eq!(m.command[1], c.join("run.py").display().to_string());
        assert_eq!(m.cwd, c.join("sub"));
        assert_eq!(
            m.env["PYTHONPATH"],
            format!("{}:{}:/opt/lib", c.display(), c.join("src").display())
        );
        assert_eq!(m.processes, 1);
    }
}
