//! The process tree of one worker, from its images' start and spawn
//! records: who started each image, how, and from which line.
//!
//! An image is one interpreter in one process between two `exec`s: a pid
//! and an exec generation ([`ImageId`]). Each image's start record names the
//! image that started it (from `COLDSTART_RECORD_IMAGE`); the line that
//! did is the fork's caller for a forked child (seen from inside the child),
//! else the parent's [`Spawn`] record that matches it: the latest one
//! before the child started, of the right kind, with the same command line
//! where Python kept it (`sys.orig_argv`).
//!
//! [`PythonArgs`] reads the interpreter flags that decide what evidence an
//! image can give (`-I`, `-E`, `-S`, `-X importtime`) from a command line.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{CallSite, ImageId, Recording, Spawn, SpawnKind, StartHow};

impl Recording {
    /// The process tree: one [`ProcessInfo`] per image that ran the
    /// recorder (this one first, then the children in start order), with
    /// the image that started it and the line that did.
    pub fn processes(&self) -> Vec<ProcessInfo> {
        tree(self)
    }
}

/// How an image relates to the image that started it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// The worker's first interpreter (the one the harness started).
    Root,
    /// The worker itself after `os.exec*` (same pid, next generation).
    Exec,
    /// A forked child (`os.fork`, `multiprocessing` fork workers).
    Fork,
    /// A new interpreter: subprocess, `multiprocessing` spawn worker,
    /// `os.spawn*`, `os.system` (possibly through a shell).
    Child,
}

/// One image of the worker's process tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessInfo {
    /// Which image.
    pub image: ImageId,
    /// Its parent pid at start.
    pub ppid: Option<u32>,
    /// Its command line.
    pub command: Vec<String>,
    /// How it relates to the image that started it.
    pub relation: Relation,
    /// The image that started it (`None` for the root).
    pub parent: Option<ImageId>,
    /// How it was started, where a spawn record says so.
    pub spawn_kind: Option<SpawnKind>,
    /// The line that started it (the worker's own line where known).
    pub started_at: Option<CallSite>,
    /// When its recorder started (`monotonic_ns`).
    pub started_t_ns: u64,
}

impl ProcessInfo {
    /// Whether this is the worker itself (its first image or one it exec'd
    /// into), not a child.
    pub fn is_worker(&self) -> bool {
        matches!(self.relation, Relation::Root | Relation::Exec)
    }
}

impl fmt::Display for ProcessInfo {
    /// `pid 812 (python -c ...), a subprocess of pid 800, started at w.py:12`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.image)?;
        if !self.command.is_empty() {
            write!(f, " ({})", shown_command(&self.command))?;
        }
        match (self.relation, self.parent) {
            (Relation::Root, _) => f.write_str(", the worker")?,
            (Relation::Exec, _) => f.write_str(", the worker after os.exec")?,
            (Relation::Fork, Some(p)) => write!(f, ", forked from pid {}", p.pid)?,
            (Relation::Child, Some(p)) => match self.spawn_kind {
                Some(k) => write!(f, ", a {k} child of pid {}", p.pid)?,
                None => write!(f, ", a child of pid {}", p.pid)?,
            },
            (_, None) => {}
        }
        if let Some(at) = &self.started_at {
            write!(f, ", started at {at}")?;
        }
        Ok(())
    }
}

/// A command line on one line, long arguments cut.
fn shown_command(argv: &[String]) -> String {
    const MAX: usize = 60;
    argv.iter()
        .map(|a| {
            let a = if a.chars().count() > MAX {
                format!("{}…", a.chars().take(MAX).collect::<String>())
            } else {
                a.clone()
            };
            if a.is_empty() || a.contains(char::is_whitespace) {
                format!("'{a}'")
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The tree of a recording's images (see [`Recording::processes`]).
pub(super) fn tree(rec: &Recording) -> Vec<ProcessInfo> {
    let images: Vec<&Recording> = rec.images().filter(|r| r.ran()).collect();
    // Spawn records already matched to a child: (image index, spawn index).
    let mut claimed: Vec<(usize, usize)> = Vec::new();
    let mut out = Vec::with_capacity(images.len());
    for (i, img) in images.iter().enumerate() {
        let Some(start) = img.start.as_ref() else {
            continue;
        };
        let image = ImageId {
            pid: start.pid,
            exec_gen: start.exec_gen,
        };
        let mut parent = start.parent;
        let relation = match start.how() {
            StartHow::Root if i == 0 => Relation::Root,
            StartHow::Root | StartHow::Child => Relation::Child,
            StartHow::Fork => Relation::Fork,
            StartHow::Exec => Relation::Exec,
        };
        if relation == Relation::Exec && parent.is_none() && start.exec_gen > 0 {
            parent = Some(ImageId {
                pid: start.pid,
                exec_gen: start.exec_gen - 1,
            });
        }
        let mut spawn_kind = None;
        let mut started_at = None;
        let mut command = start.command();
        match relation {
            Relation::Root => {}
            Relation::Fork => started_at = start.by.clone(),
            Relation::Exec | Relation::Child => {
                let parent_idx =
                    parent.and_then(|p| images.iter().position(|r| r.image() == Some(p)));
                if let Some(pi) = parent_idx
                    && let Some(si) = matching_spawn(images[pi], start, relation, &claimed, pi)
                {
                    claimed.push((pi, si));
                    let s = &images[pi].spawns[si];
                    spawn_kind = Some(s.kind);
                    started_at = s.by.clone();
                    // Before 3.10 Python keeps no orig_argv (`-c` code is
                    // lost): the command line as the parent started it.
                    if start.orig_argv.is_empty() && !s.argv.is_empty() {
                        command = s.argv.clone();
                    }
                }
            }
        }
        out.push(ProcessInfo {
            image,
            ppid: start.ppid,
            command,
            relation,
            parent,
            spawn_kind,
            started_at,
            started_t_ns: start.t_ns,
        });
    }
    out
}

/// The parent's spawn record that started `child`: the latest unclaimed one
/// before it of the right kind, preferring one with the same command line.
fn matching_spawn(
    parent: &Recording,
    child: &super::Start,
    relation: Relation,
    claimed: &[(usize, usize)],
    parent_idx: usize,
) -> Option<usize> {
    let candidates: Vec<(usize, &Spawn)> = parent
        .spawns
        .iter()
        .enumerate()
        .filter(|(si, s)| {
            s.t_ns <= child.t_ns
                && !claimed.contains(&(parent_idx, *si))
                && ((relation == Relation::Exec) == (s.kind == SpawnKind::Exec))
        })
        .collect();
    let same_args = |s: &Spawn| {
        !child.orig_argv.is_empty()
            && s.argv.len() == child.orig_argv.len()
            && s.argv[1..] == child.orig_argv[1..]
    };
    candidates
        .iter()
        .rev()
        .find(|(_, s)| same_args(s))
        .or_else(|| candidates.last())
        .map(|(si, _)| *si)
}

/// The interpreter flags of a Python command line that decide what
/// evidence it can give.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PythonArgs {
    /// `-I`: no `PYTHONPATH`, no `PYTHON*` variables, no user site.
    pub isolated: bool,
    /// `-E`: no `PYTHON*` variables (`PYTHONPATH`, `PYTHONPROFILEIMPORTTIME`).
    pub ignore_environment: bool,
    /// `-S`: no `site`, so no `sitecustomize`.
    pub no_site: bool,
    /// `-X importtime`.
    pub importtime: bool,
}

impl PythonArgs {
    /// Reads the flags before the script, `-c` or `-m` of `argv` when
    /// `argv[0]` looks like a Python interpreter; `None` otherwise.
    pub fn parse(argv: &[String]) -> Option<PythonArgs> {
        let exe = argv.first()?;
        let base = exe.rsplit('/').next().unwrap_or(exe);
        if !(base.starts_with("python") || base.starts_with("pypy")) {
            return None;
        }
        let mut out = PythonArgs::default();
        let mut it = argv[1..].iter();
        while let Some(a) = it.next() {
            if a == "--" || !a.starts_with('-') || a == "-" {
                break;
            }
            if a.starts_with("--") {
                if a == "--check-hash-based-pycs" {
                    it.next();
                }
                continue;
            }
            let mut chars = a[1..].chars();
            while let Some(c) = chars.next() {
                match c {
                    'I' => out.isolated = true,
                    'E' => out.ignore_environment = true,
                    'S' => out.no_site = true,
                    'c' | 'm' => return Some(out),
                    'X' | 'W' => {
                        let rest: String = chars.collect();
                        let value = if rest.is_empty() {
                            it.next().cloned().unwrap_or_default()
                        } else {
                            rest
                        };
                        if c == 'X' && (value == "importtime" || value.starts_with("importtime=")) {
                            out.importtime = true;
                        }
                        break;
                    }
                    _ => {}
                }
            }
        }
        Some(out)
    }

    /// Whether the recorder (a `sitecustomize` on `PYTHONPATH`) cannot run.
    pub fn blocks_recorder(&self) -> bool {
        self.isolated || self.ignore_environment || self.no_site
    }

    /// The flags that keep the recorder out, as written (`-I`, `-E`, `-S`).
    pub fn recorder_blockers(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.isolated {
            out.push("-I");
        }
        if self.ignore_environment {
            out.push("-E");
        }
        if self.no_site {
            out.push("-S");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn python_flags_are_read_up_to_the_script() {
        let p = |s: &str| PythonArgs::parse(&args(s));
        assert_eq!(p("bash -c x"), None);
        assert_eq!(p("/usr/bin/python3 w.py -I"), Some(PythonArgs::default()));
        let f = p("/usr/bin/python3.11 -IE -X importtime -m w").unwrap();
        assert!(f.isolated && f.ignore_environment && f.importtime && !f.no_site);
        assert_eq!(f.recorder_blockers(), ["-I", "-E"]);
        let f = p("python -Ximporttime -S -c import x").unwrap();
        assert!(f.importtime && f.no_site && f.blocks_recorder());
        let f = p("python -W error -c -I").unwrap();
        assert!(!f.blocks_recorder(), "-I after -c is the program's");
        assert!(!p("python -Xdev w.py").unwrap().importtime);
    }
}
