//! A check that cannot see never passes: whether the process that answered
//! the protocol left any import evidence, and if not, why.
//!
//! The harness knows which process answered (the `pid` of the ready line,
//! else the pid it spawned, and its command line: [`Answering`]; behind a
//! launcher, the recorded image the ready line names, see
//! [`Answered`](super::Answered)). That process's last image (after any
//! `os.exec*`) must have run the recorder, or have importtime on with
//! entries in the log. When it has neither, [`MissingEvidence`] says which
//! evidence is missing and why: an exec into an environment without the
//! recorder (a launcher that scrubs the environment), flags that keep
//! `sitecustomize` out (`-I`, `-E`, `-S`), a process no recorded image
//! started with the recorder's environment, or a launcher below which
//! nothing ties a recorded image to the ready line.

use std::fmt;

use serde::Serialize;

use crate::recorder::{CallSite, ImageId, PythonArgs, Recording, Spawn, SpawnKind};

/// The process that answered the protocol, as the harness knows it.
/// Neither pid known: the first recorded interpreter answered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Answering {
    /// The pid that wrote the ready line (its `pid` field), when it gave
    /// one.
    pub ready_pid: Option<u32>,
    /// The pid the harness spawned (a launcher, when the recorder did not
    /// run in it and ran below it).
    pub spawned: Option<u32>,
    /// The command the harness ran (its flags explain a recorder that
    /// never ran: `-I`, `-E`, `-S`).
    pub command: Vec<String>,
}

/// A kind of import evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKind {
    /// The import recorder's start record.
    Recorder,
    /// `-X importtime` entries.
    Importtime,
}

/// Why the answering process left no evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum MissingReason {
    /// A recorded image replaced itself with `os.exec*` and the new image's
    /// environment or flags keep the recorder out.
    ExecWithoutRecorder {
        /// The image that exec'd.
        from: ImageId,
        /// The line that called exec.
        at: Option<CallSite>,
        /// The new image's command line.
        command: Vec<String>,
        /// Variables the new environment dropped (`COLDSTART_RECORD`,
        /// `PYTHONPATH`, `PYTHONPROFILEIMPORTTIME`).
        dropped: Vec<String>,
        /// Flags of the new command line that keep the recorder out.
        flags: Vec<String>,
    },
    /// A recorded image started it without the recorder's environment or
    /// with flags that keep it out.
    ChildWithoutRecorder {
        /// The image that started it.
        from: ImageId,
        /// How.
        kind: SpawnKind,
        /// The line that started it.
        at: Option<CallSite>,
        /// Its command line.
        command: Vec<String>,
        /// Variables its environment dropped.
        dropped: Vec<String>,
        /// Flags that keep the recorder out.
        flags: Vec<String>,
    },
    /// The command's flags keep `sitecustomize` out.
    Flags {
        /// `-I`, `-E`, `-S` as found.
        flags: Vec<String>,
    },
    /// Nothing recorded says why: the environment was cleared or
    /// `PYTHONPATH` replaced before Python started, or it is not Python.
    Unexplained,
    /// The harness started a launcher the recorder did not run in, the
    /// recorder ran below it, and the ready line gave no `pid`: which
    /// process answered cannot be told.
    NoReadyPid {
        /// The launcher's name (`uv`, `bash`).
        launcher: String,
        /// Its pid.
        launcher_pid: u32,
        /// The pids the recorder ran in.
        recorded: Vec<u32>,
    },
    /// The pid of the ready line is a recorded image whose lineage does
    /// not lead to the launcher the harness started (a daemon that left
    /// it, a pid from another pid namespace).
    NotBelowLauncher {
        /// The launcher's name.
        launcher: String,
        /// Its pid.
        launcher_pid: u32,
        /// The parent pid the image's recorder saw at its start.
        parent: Option<u32>,
    },
}

/// The process that answered the protocol left no import evidence: the
/// check must end in error (exit 2), never pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
pub struct MissingEvidence {
    /// The answering pid, when known.
    pub pid: Option<u32>,
    /// The evidence it lacks.
    pub missing: Vec<EvidenceKind>,
    /// Why.
    #[serde(flatten)]
    pub reason: MissingReason,
}

impl fmt::Display for MissingEvidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = match self.pid {
            Some(pid) => format!("pid {pid}, the process that answered the protocol"),
            None => "the process that answered the protocol".to_owned(),
        };
        match &self.reason {
            MissingReason::NoReadyPid {
                launcher,
                launcher_pid,
                recorded,
            } => {
                let pids: Vec<String> = recorded.iter().map(ToString::to_string).collect();
                return write!(
                    f,
                    "no import evidence from {who}: coldstart started {launcher} (pid {launcher_pid}), which the import recorder did not run in, and the ready line gives no pid to tell which process below it answered (the recorder ran in pid {}); write the worker's own pid in its ready line (\"pid\": os.getpid(), see docs/protocol.md)",
                    pids.join(", ")
                );
            }
            MissingReason::NotBelowLauncher {
                launcher,
                launcher_pid,
                parent,
            } => {
                let parent =
                    parent.map_or_else(String::new, |p| format!(" (its parent was pid {p})"));
                return write!(
                    f,
                    "no import evidence from {who}: the recorder ran in it, but it is not a process below {launcher} (pid {launcher_pid}), which coldstart started{parent}, so its records cannot be taken for the worker's; keep the worker below the command coldstart starts (no daemonizing), or check the worker's own command directly"
                );
            }
            _ => {}
        }
        write!(
            f,
            "no import evidence from {who}: the import recorder did not run in it and importtime shows none of its imports"
        )?;
        let list = |v: &[String]| v.join(", ");
        match &self.reason {
            MissingReason::ExecWithoutRecorder {
                from,
                at,
                command,
                dropped,
                flags,
            } => {
                write!(f, "; {from} replaced itself with os.exec")?;
                if let Some(at) = at {
                    write!(f, " at {at}")?;
                }
                if !command.is_empty() {
                    write!(f, " ({})", command.join(" "))?;
                }
                explain(f, dropped, flags, &list)?;
                f.write_str(
                    "; keep COLDSTART_RECORD, PYTHONPATH and PYTHONPROFILEIMPORTTIME across the exec, or check the command it re-executes directly",
                )
            }
            MissingReason::ChildWithoutRecorder {
                from,
                kind,
                at,
                command,
                dropped,
                flags,
            } => {
                write!(f, "; it was started by {from} ({kind})")?;
                if let Some(at) = at {
                    write!(f, " at {at}")?;
                }
                if !command.is_empty() {
                    write!(f, " as {}", command.join(" "))?;
                }
                explain(f, dropped, flags, &list)?;
                f.write_str("; pass the environment on to it, or check that command directly")
            }
            MissingReason::Flags { flags } => write!(
                f,
                "; its command line has {} (which ignore PYTHONPATH and PYTHONPROFILEIMPORTTIME); drop them, or add `-X importtime` to the command",
                list(flags)
            ),
            MissingReason::Unexplained => f.write_str(
                "; its environment was cleared or PYTHONPATH replaced before Python started, or it is not Python: pass the environment through, or add `-X importtime` to the command",
            ),
            MissingReason::NoReadyPid { .. } | MissingReason::NotBelowLauncher { .. } => Ok(()),
        }
    }
}

fn explain(
    f: &mut fmt::Formatter<'_>,
    dropped: &[String],
    flags: &[String],
    list: &dyn Fn(&[String]) -> String,
) -> fmt::Result {
    if !dropped.is_empty() {
        write!(
            f,
            " with an environment without {} (a cleared environment)",
            list(dropped)
        )?;
    }
    if !flags.is_empty() {
        write!(f, " with {}", list(flags))?;
    }
    Ok(())
}

/// What a spawn's new image keeps out.
fn kept_out(s: &Spawn) -> (Vec<String>, Vec<String>, bool) {
    let args = PythonArgs::parse(&s.argv);
    let mut dropped: Vec<String> = s.env.dropped().iter().map(|d| d.to_string()).collect();
    let flags: Vec<String> = args
        .map(|a| {
            a.recorder_blockers()
                .iter()
                .map(|f| f.to_string())
                .collect()
        })
        .unwrap_or_default();
    let env_ok = args.is_none_or(|a| !a.isolated && !a.ignore_environment);
    let importtime = args.is_some_and(|a| a.importtime) || (s.env.importtime && env_ok);
    if !s.env.importtime {
        dropped.push("PYTHONPROFILEIMPORTTIME".to_owned());
    }
    (dropped, flags, importtime)
}

fn spawn_blocks_recorder(s: &Spawn) -> bool {
    !s.env.record
        || !s.env.pythonpath
        || PythonArgs::parse(&s.argv).is_some_and(|a| a.blocks_recorder())
}

/// Whether the process that answered, `pid` (`None`: the first recorded
/// image), left evidence; `recording` is `None` when no recorder was used
/// (nothing is asked of it then).
pub(super) fn find(
    recording: Option<&Recording>,
    log_has_entries: bool,
    pid: Option<u32>,
    command: &[String],
) -> Option<MissingEvidence> {
    let rec = recording?;
    let images: Vec<&Recording> = rec.images().filter(|r| r.ran()).collect();
    let pid = pid.or_else(|| rec.image().map(|i| i.pid));
    let Some(pid) = pid else {
        // The recorder never ran in the first interpreter and the harness
        // does not know the pid: the command line is all there is.
        if log_has_entries {
            return None;
        }
        return Some(MissingEvidence {
            pid: None,
            missing: vec![EvidenceKind::Recorder, EvidenceKind::Importtime],
            reason: from_command(command),
        });
    };
    let mut own: Vec<&Recording> = images
        .iter()
        .copied()
        .filter(|r| r.image().is_some_and(|i| i.pid == pid))
        .collect();
    own.sort_by_key(|r| r.image().map(|i| i.exec_gen));
    if let Some(last) = own.last() {
        let exec = last
            .spawns
            .iter()
            .rev()
            .find(|s| s.kind == SpawnKind::Exec)?;
        // An exec that failed leaves the image running: more records after it.
        let after = last.exit.is_some()
            || last.imports.iter().any(|i| i.t_ns > exec.t_ns)
            || last.spawns.iter().any(|s| s.t_ns > exec.t_ns);
        if after {
            return None;
        }
        let (dropped, flags, importtime) = kept_out(exec);
        if importtime && log_has_entries {
            return None;
        }
        return Some(MissingEvidence {
            pid: Some(pid),
            missing: vec![EvidenceKind::Recorder, EvidenceKind::Importtime],
            reason: MissingReason::ExecWithoutRecorder {
                from: last.image()?,
                at: exec.by.clone(),
                command: exec.argv.clone(),
                dropped,
                flags,
            },
        });
    }
    if images.is_empty() {
        // Nothing ran the recorder: importtime alone, if it saw anything.
        if log_has_entries {
            return None;
        }
        return Some(MissingEvidence {
            pid: Some(pid),
            missing: vec![EvidenceKind::Recorder, EvidenceKind::Importtime],
            reason: from_command(command),
        });
    }
    // The worker ran the recorder, but another process answered: the latest
    // start without the recorder's environment explains it.
    let blind = images
        .iter()
        .flat_map(|img| img.spawns.iter().map(move |s| (img, s)))
        .filter(|(_, s)| s.kind != SpawnKind::Exec && spawn_blocks_recorder(s))
        .max_by_key(|(_, s)| s.t_ns);
    match blind {
        Some((img, s)) => {
            let (dropped, flags, importtime) = kept_out(s);
            if importtime && log_has_entries {
                return None;
            }
            Some(MissingEvidence {
                pid: Some(pid),
                missing: vec![EvidenceKind::Recorder, EvidenceKind::Importtime],
                reason: MissingReason::ChildWithoutRecorder {
                    from: img.image()?,
                    kind: s.kind,
                    at: s.by.clone(),
                    command: s.argv.clone(),
                    dropped,
                    flags,
                },
            })
        }
        None => Some(MissingEvidence {
            pid: Some(pid),
            missing: vec![EvidenceKind::Recorder, EvidenceKind::Importtime],
            reason: MissingReason::Unexplained,
        }),
    }
}

/// Why the command's Python kept the recorder out: its flags, read from
/// the interpreter the command names, first or after a launcher's own
/// words (`uv run --no-sync python -I -m app`).
fn from_command(command: &[String]) -> MissingReason {
    let python = (0..command.len()).find_map(|i| PythonArgs::parse(&command[i..]));
    match python {
        Some(a) if a.blocks_recorder() => MissingReason::Flags {
            flags: a
                .recorder_blockers()
                .iter()
                .map(|f| f.to_string())
                .collect(),
        },
        _ => MissingReason::Unexplained,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(lines: &[&str]) -> Recording {
        Recording::parse(lines.join("\n").as_bytes())
    }

    const START: &str = r#"{"type":"start","t_ns":10,"pid":7,"version":2,"gen":0,"how":"root"}"#;

    fn cmd(command: &str) -> Vec<String> {
        command.split(' ').map(String::from).collect()
    }

    #[test]
    fn no_recorder_and_no_importtime_says_which_flags_kept_them_out() {
        let none = Recording::default();
        let m = find(Some(&none), false, Some(9), &cmd("python3 -I w.py")).unwrap();
        assert_eq!(
            m.reason,
            MissingReason::Flags {
                flags: vec!["-I".into()]
            }
        );
        assert_eq!(
            m.missing,
            [EvidenceKind::Recorder, EvidenceKind::Importtime]
        );
        assert!(m.to_string().contains("has -I"), "{m}");
        // Behind a launcher, the flags of the Python it names.
        let m = find(
            Some(&none),
            false,
            Some(9),
            &cmd("uv run --no-sync python -E -m app"),
        )
        .unwrap();
        assert_eq!(
            m.reason,
            MissingReason::Flags {
                flags: vec!["-E".into()]
            }
        );
        let m = find(Some(&none), false, None, &cmd("node w.js")).unwrap();
        assert_eq!(m.reason, MissingReason::Unexplained);
        assert_eq!(
            find(
                Some(&none),
                true,
                Some(9),
                &cmd("python3 -I -X importtime w.py")
            ),
            None,
            "importtime alone is evidence"
        );
        assert_eq!(find(None, false, None, &[]), None, "no recorder used");
    }

    #[test]
    fn the_recorded_worker_answering_is_evidence() {
        let r = rec(&[START]);
        assert_eq!(find(Some(&r), false, Some(7), &cmd("python3 w.py")), None);
        assert_eq!(find(Some(&r), false, None, &[]), None);
    }

    #[test]
    fn an_exec_that_failed_leaves_the_recorded_image_answering() {
        let r = rec(&[
            START,
            r#"{"type":"spawn","t_ns":20,"kind":"exec","argv":["python3","w.py"],"env":{"inherited":false}}"#,
            r#"{"type":"import","name":"json","t_ns":30,"channel":"both"}"#,
        ]);
        assert_eq!(find(Some(&r), false, Some(7), &cmd("python3 w.py")), None);
    }

    #[test]
    fn an_exec_that_keeps_importtime_is_judged_by_importtime() {
        let r = rec(&[
            START,
            r#"{"type":"spawn","t_ns":20,"kind":"exec","argv":["python3","w.py"],"env":{"importtime":true}}"#,
        ]);
        assert_eq!(find(Some(&r), true, Some(7), &cmd("python3 w.py")), None);
        let m = find(Some(&r), false, Some(7), &cmd("python3 w.py")).unwrap();
        assert!(
            matches!(m.reason, MissingReason::ExecWithoutRecorder { .. }),
            "{m:?}"
        );
        // -E in the new command line ignores PYTHONPROFILEIMPORTTIME.
        let r = rec(&[
            START,
            r#"{"type":"spawn","t_ns":20,"kind":"exec","argv":["python3","-E","w.py"],"env":{"importtime":true,"record":true,"pythonpath":true}}"#,
        ]);
        let m = find(Some(&r), true, Some(7), &cmd("python3 w.py")).unwrap();
        match &m.reason {
            MissingReason::ExecWithoutRecorder { flags, dropped, .. } => {
                assert_eq!(flags, &["-E"]);
                assert!(dropped.is_empty(), "{dropped:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn another_process_answering_is_explained_by_the_start_that_lost_the_recorder() {
        let r = rec(&[
            START,
            r#"{"type":"spawn","t_ns":20,"kind":"subprocess","argv":["python3","-I","inner.py"],"env":{"inherited":true,"record":true,"pythonpath":true},"by":{"file":"/app/launch.py","line":4}}"#,
        ]);
        let m = find(Some(&r), true, Some(8), &cmd("python3 launch.py")).unwrap();
        assert_eq!(m.pid, Some(8));
        match &m.reason {
            MissingReason::ChildWithoutRecorder {
                from,
                kind,
                at,
                flags,
                ..
            } => {
                assert_eq!((from.pid, *kind), (7, SpawnKind::Subprocess));
                assert_eq!(at.as_ref().unwrap().to_string(), "/app/launch.py:4");
                assert_eq!(flags, &["-I"]);
            }
            other => panic!("{other:?}"),
        }
        let m = find(Some(&rec(&[START])), true, Some(8), &cmd("python3 w.py")).unwrap();
        assert_eq!(m.reason, MissingReason::Unexplained);
    }
}
