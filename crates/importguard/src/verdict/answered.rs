//! Which process answered the protocol: the one that wrote the ready line,
//! found among the images the recorder saw.
//!
//! The harness knows the pid it started and the `pid` the ready line gave
//! ([`Answering`]). When the process it started ran the recorder, it is the
//! worker and the ready line's pid is one of its images or their children.
//! When it did not and other images did, the harness started a launcher
//! (`uv run`, `bash -c "...; ..."`, `make`, `poetry run` under `-I`, ...)
//! that holds the protocol's pipes and starts Python below it. The process
//! that answered is then the recorded image whose pid the ready line gave,
//! taken only when its lineage leads to the launcher: the first recorded
//! image above it names its parent and the processes above that
//! ([`Start::ancestors`](crate::recorder::Start::ancestors), read from
//! `/proc` at its start), and the launcher must be one of them. Without a
//! pid in the ready line, or with one whose lineage does not lead there,
//! nothing ties the evidence to the process that answered: that is missing
//! evidence, never a pass. The processes that stood between are
//! [`Answered::through`].

use std::fmt;

use serde::Serialize;

use crate::recorder::{ProcessInfo, Recording};

use super::missing::{Answering, EvidenceKind, MissingEvidence, MissingReason};

/// The process that answered the protocol when it is not the one the
/// harness started, and the processes that stood between.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Answered {
    /// The pid that wrote the ready line (a recorded image's).
    pub pid: u32,
    /// Its command line, as its recorder saw it.
    pub command: Vec<String>,
    /// Its interpreter (`sys.executable`, after any exec), where recorded:
    /// the worker's own Python, which a launcher's command does not name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executable: Option<String>,
    /// The processes between the harness and it, the one the harness
    /// started first: launchers the recorder did not run in (`uv`, `bash`,
    /// `make`), then recorded interpreters that started it.
    pub through: Vec<Launcher>,
}

/// A process that stood between the harness and the one that answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Launcher {
    /// Its pid.
    pub pid: u32,
    /// Its name (`/proc/PID/comm`, or its command's program).
    pub name: String,
    /// Whether the recorder ran in it (a Python launcher such as `poetry`
    /// that kept the environment); its own imports are judged then.
    pub recorded: bool,
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (pid {})", self.name, self.pid)
    }
}

impl fmt::Display for Answered {
    /// `answered by pid 4242 (python), started through uv (pid 4240)`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "answered by pid {}", self.pid)?;
        if let Some(program) = self.command.first() {
            write!(f, " ({})", program_name(program))?;
        }
        let through: Vec<String> = self.through.iter().map(ToString::to_string).collect();
        if !through.is_empty() {
            write!(f, ", started through {}", through.join(", then "))?;
        }
        Ok(())
    }
}

/// A program's base name.
fn program_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// What [`locate`] found.
#[derive(Debug)]
pub(super) enum Located {
    /// Judge the evidence of this pid (`None`: the first recorded image),
    /// with the processes between when it is not the one started.
    Judge(Option<u32>, Option<Answered>),
    /// A launcher was started and nothing ties a recorded image to the
    /// ready line.
    Unproven(MissingEvidence),
}

/// The process that answered among `rec`'s images (see the module doc).
pub(super) fn locate(rec: &Recording, answering: &Answering) -> Located {
    let processes = rec.processes();
    let pid = answering.ready_pid.or(answering.spawned);
    let launcher = answering
        .spawned
        .filter(|s| !processes.is_empty() && !processes.iter().any(|p| p.image.pid == *s));
    let Some(spawned) = launcher else {
        // The process started is the worker (or nothing ran the recorder):
        // a recorded image of it may have started the one that answered.
        let answered = pid
            .zip(answering.spawned)
            .filter(|(p, s)| p != s)
            .and_then(|(p, s)| {
                let line = lineage(&processes, p)?;
                (line.first()?.image.pid == s).then(|| Answered {
                    pid: p,
                    command: line.last().map(|i| i.command.clone()).unwrap_or_default(),
                    executable: executable(rec, p),
                    through: recorded_between(&line, p),
                })
            });
        return Located::Judge(pid, answered);
    };
    let name = launcher_name(rec, spawned, &answering.command);
    let Some(ready) = answering.ready_pid else {
        return Located::Unproven(missing(
            None,
            MissingReason::NoReadyPid {
                launcher: name,
                launcher_pid: spawned,
                recorded: processes.iter().map(|p| p.image.pid).collect(),
            },
        ));
    };
    // A pid the recorder never saw: the usual explanations (a start that
    // lost the recorder's environment) apply.
    let Some(line) = lineage(&processes, ready) else {
        return Located::Judge(Some(ready), None);
    };
    let top = line[0];
    let Some(above) = launchers_above(rec, top, spawned, &name) else {
        return Located::Unproven(missing(
            Some(ready),
            MissingReason::NotBelowLauncher {
                launcher: name,
                launcher_pid: spawned,
                parent: rec
                    .images()
                    .find(|r| r.image() == Some(top.image))
                    .and_then(|r| r.start.as_ref())
                    .and_then(|s| s.ppid),
            },
        ));
    };
    let mut through = above;
    through.extend(recorded_between(&line, ready));
    Located::Judge(
        Some(ready),
        Some(Answered {
            pid: ready,
            command: line.last().map(|i| i.command.clone()).unwrap_or_default(),
            executable: executable(rec, ready),
            through,
        }),
    )
}

/// The interpreter of `pid`'s latest recorded image.
fn executable(rec: &Recording, pid: u32) -> Option<String> {
    rec.images()
        .filter_map(|r| r.start.as_ref())
        .filter(|s| s.pid == pid)
        .max_by_key(|s| s.exec_gen)?
        .executable
        .clone()
}

fn missing(pid: Option<u32>, reason: MissingReason) -> MissingEvidence {
    MissingEvidence {
        pid,
        missing: vec![EvidenceKind::Recorder, EvidenceKind::Importtime],
        reason,
    }
}

/// The recorded images from the top one down to `pid`'s first image,
/// through each image's recorded parent; `None` when `pid` is not recorded.
fn lineage(processes: &[ProcessInfo], pid: u32) -> Option<Vec<&ProcessInfo>> {
    let mut cur = processes
        .iter()
        .filter(|p| p.image.pid == pid)
        .min_by_key(|p| p.image.exec_gen)?;
    let mut line = vec![cur];
    while let Some(parent) = cur.parent {
        let Some(up) = processes.iter().find(|p| p.image == parent) else {
            break;
        };
        // A cycle cannot be recorded, but a malformed file must not hang.
        if line.len() > processes.len() {
            break;
        }
        line.push(up);
        cur = up;
    }
    line.reverse();
    Some(line)
}

/// The recorded images of `line` that started the answering `pid`, one
/// entry a process (an exec keeps the pid).
fn recorded_between(line: &[&ProcessInfo], pid: u32) -> Vec<Launcher> {
    let mut out: Vec<Launcher> = Vec::new();
    for p in line.iter().filter(|p| p.image.pid != pid) {
        if out.last().is_some_and(|l| l.pid == p.image.pid) {
            continue;
        }
        out.push(Launcher {
            pid: p.image.pid,
            name: p
                .command
                .first()
                .map_or_else(|| "python".to_owned(), |c| program_name(c).to_owned()),
            recorded: true,
        });
    }
    out
}

/// The processes from `spawned` down to the parent of the top recorded
/// image `top`, the one started first; `None` when `top`'s recorded
/// parents do not lead to `spawned`.
fn launchers_above(
    rec: &Recording,
    top: &ProcessInfo,
    spawned: u32,
    name: &str,
) -> Option<Vec<Launcher>> {
    let start = rec
        .images()
        .find(|r| r.image() == Some(top.image))?
        .start
        .as_ref()?;
    if let Some(at) = start.ancestors.iter().position(|a| a.pid == spawned) {
        return Some(
            start.ancestors[..=at]
                .iter()
                .rev()
                .map(|a| Launcher {
                    pid: a.pid,
                    name: a.name.clone(),
                    recorded: false,
                })
                .collect(),
        );
    }
    (start.ppid == Some(spawned)).then(|| {
        vec![Launcher {
            pid: spawned,
            name: name.to_owned(),
            recorded: false,
        }]
    })
}

/// The launcher's name: as a recorded image's ancestors saw it, else its
/// command's program.
fn launcher_name(rec: &Recording, spawned: u32, command: &[String]) -> String {
    rec.images()
        .filter_map(|r| r.start.as_ref())
        .flat_map(|s| s.ancestors.iter())
        .find(|a| a.pid == spawned)
        .map(|a| a.name.clone())
        .or_else(|| command.first().map(|c| program_name(c).to_owned()))
        .unwrap_or_else(|| "the command".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(lines: &[&str]) -> Recording {
        let mut images = lines
            .iter()
            .map(|l| Recording::parse(l.as_bytes()))
            .collect::<Vec<_>>();
        let mut first = images.remove(0);
        first.children = images;
        first
    }

    /// The Python below `uv` (pid 10, spawned by the harness, pid 1): its
    /// recorder saw uv and the harness above it.
    const BELOW_UV: &str = r#"{"type":"start","t_ns":10,"pid":11,"ppid":10,"version":2,"gen":0,"how":"root","executable":"/app/.venv/bin/python","orig_argv":["python","-m","app.worker"],"ancestors":[[10,"uv"],[1,"coldstart"]]}"#;

    fn answering(ready_pid: Option<u32>, spawned: u32) -> Answering {
        Answering {
            ready_pid,
            spawned: Some(spawned),
            command: vec!["uv".into(), "run".into(), "python".into()],
        }
    }

    #[test]
    fn the_ready_lines_pid_below_the_launcher_answered_through_it() {
        let r = rec(&[BELOW_UV]);
        let Located::Judge(pid, Some(a)) = locate(&r, &answering(Some(11), 10)) else {
            panic!("{:?}", locate(&r, &answering(Some(11), 10)));
        };
        assert_eq!(pid, Some(11));
        assert_eq!(
            a.to_string(),
            "answered by pid 11 (python), started through uv (pid 10)"
        );
        assert!(a.through.iter().all(|l| !l.recorded));
        assert_eq!(a.executable.as_deref(), Some("/app/.venv/bin/python"));
        // Without the ancestors (no /proc), the parent pid proves it too.
        let r = rec(&[
            r#"{"type":"start","t_ns":10,"pid":11,"ppid":10,"version":2,"gen":0,"how":"root"}"#,
        ]);
        let Located::Judge(_, Some(a)) = locate(&r, &answering(Some(11), 10)) else {
            panic!()
        };
        assert_eq!(a.through[0].name, "uv");
    }

    #[test]
    fn launchers_between_are_named_the_one_started_first() {
        let r = rec(&[
            r#"{"type":"start","t_ns":10,"pid":12,"ppid":11,"version":2,"gen":0,"how":"root","ancestors":[[11,"sh"],[10,"make"],[1,"coldstart"]]}"#,
        ]);
        let Located::Judge(_, Some(a)) = locate(&r, &answering(Some(12), 10)) else {
            panic!()
        };
        let names: Vec<&str> = a.through.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["make", "sh"]);
    }

    #[test]
    fn no_pid_in_the_ready_line_below_a_launcher_is_missing_evidence() {
        let r = rec(&[BELOW_UV]);
        let Located::Unproven(m) = locate(&r, &answering(None, 10)) else {
            panic!()
        };
        assert!(
            matches!(&m.reason, MissingReason::NoReadyPid { launcher, launcher_pid: 10, recorded } if launcher == "uv" && recorded == &[11]),
            "{m:?}"
        );
        assert!(m.to_string().contains("\"pid\": os.getpid()"), "{m}");
    }

    #[test]
    fn a_recorded_pid_not_below_the_launcher_is_missing_evidence() {
        // A daemon that left uv: its parent is init, uv is not above it.
        let r = rec(&[
            r#"{"type":"start","t_ns":10,"pid":11,"ppid":1,"version":2,"gen":0,"how":"root","ancestors":[[1,"systemd"]]}"#,
        ]);
        let Located::Unproven(m) = locate(&r, &answering(Some(11), 10)) else {
            panic!()
        };
        assert!(
            matches!(
                m.reason,
                MissingReason::NotBelowLauncher {
                    launcher_pid: 10,
                    parent: Some(1),
                    ..
                }
            ),
            "{m:?}"
        );
        assert_eq!(m.pid, Some(11));
    }

    #[test]
    fn a_worker_started_directly_has_no_launcher_and_a_recorded_one_is_named() {
        let r = rec(&[BELOW_UV]);
        assert!(matches!(
            locate(&r, &answering(Some(11), 11)),
            Located::Judge(Some(11), None)
        ));
        // poetry (a Python launcher that kept the recorder) started the
        // worker: it is recorded, and named between.
        let r = rec(&[
            r#"{"type":"start","t_ns":10,"pid":10,"ppid":1,"version":2,"gen":0,"how":"root","orig_argv":["/venv/bin/poetry","run","python","w.py"]}"#,
            r#"{"type":"start","t_ns":20,"pid":11,"ppid":10,"version":2,"gen":0,"how":"child","parent":[10,0],"orig_argv":["python","w.py"]}"#,
        ]);
        let Located::Judge(Some(11), Some(a)) = locate(&r, &answering(Some(11), 10)) else {
            panic!()
        };
        assert_eq!(
            a.to_string(),
            "answered by pid 11 (python), started through poetry (pid 10)"
        );
        assert!(a.through[0].recorded);
    }
}
