//! Temporary folders that say which process owns them, and the sweep of
//! those whose owner is gone.
//!
//! A folder made by [`tempdir`] holds an [`OWNER_FILE`]: the owner's pid,
//! its start time (field 22 of `/proc/PID/stat`, so a reused pid is not
//! taken for the owner) and a note of the caller's (for a `diff`'s base
//! checkout, the repository that registered it). The folder is removed
//! when its `TempDir` drops; a SIGKILL skips the drop, so the next run
//! calls [`sweep`] with the same prefix and gets back every folder whose
//! owner no longer runs, for the caller to undo what it registered
//! elsewhere (a `git worktree`) before [`remove`] deletes it.
//!
//! A folder without an owner file is left alone: it may be another tool's,
//! or one being made right now.

use std::io;
use std::path::{Path, PathBuf};

/// The owner file's name inside an owned folder.
pub const OWNER_FILE: &str = ".coldstart-owner";

/// A process's start time in clock ticks since boot (`/proc/PID/stat`
/// field 22), `None` when it does not run.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: the
    // fields after it start after its last `)`.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A new temporary folder named `prefix` + random under the system's
/// temporary folder, owned by this process, with `note` in its owner file.
pub fn tempdir(prefix: &str, note: &str) -> io::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new().prefix(prefix).tempdir()?;
    let me = std::process::id();
    let text = format!(
        "{me}\n{}\n{note}\n",
        start_time(me).map_or_else(String::new, |t| t.to_string())
    );
    std::fs::write(dir.path().join(OWNER_FILE), text)?;
    Ok(dir)
}

/// A folder whose owner is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// The folder.
    pub dir: PathBuf,
    /// The owner's pid.
    pub pid: u32,
    /// The note its owner left.
    pub note: String,
}

/// The folders named `prefix`* in the system's temporary folder whose
/// owner process no longer runs (or is another process under the same
/// pid).
pub fn sweep(prefix: &str) -> Vec<Orphan> {
    sweep_in(&std::env::temp_dir(), prefix)
}

fn sweep_in(tmp: &Path, prefix: &str) -> Vec<Orphan> {
    let Ok(rd) = std::fs::read_dir(tmp) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        if !e.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let dir = e.path();
        let Ok(text) = std::fs::read_to_string(dir.join(OWNER_FILE)) else {
            continue;
        };
        let mut lines = text.lines();
        let Some(pid) = lines.next().and_then(|p| p.trim().parse::<u32>().ok()) else {
            continue;
        };
        let started: Option<u64> = lines.next().and_then(|t| t.trim().parse().ok());
        let note = lines.next().unwrap_or_default().to_owned();
        let alive = match (start_time(pid), started) {
            (Some(now), Some(then)) => now == then,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if !alive {
            out.push(Orphan { dir, pid, note });
        }
    }
    out.sort_by(|a, b| a.dir.cmp(&b.dir));
    out
}

/// Deletes an orphan's folder.
pub fn remove(o: &Orphan) -> io::Result<()> {
    match std::fs::remove_dir_all(&o.dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_owner_keeps_its_folder_and_a_dead_one_does_not() {
        let tmp = tempfile::tempdir().unwrap();
        let mine = tmp.path().join("cs-test-mine");
        std::fs::create_dir(&mine).unwrap();
        let me = std::process::id();
        std::fs::write(
            mine.join(OWNER_FILE),
            format!("{me}\n{}\n/repo\n", start_time(me).unwrap()),
        )
        .unwrap();
        // A child that has exited and been reaped: its pid runs no more.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let dead = tmp.path().join("cs-test-dead");
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join(OWNER_FILE), format!("{gone}\n1\n/other repo\n")).unwrap();
        // The same pid as ours but another start time: a reused pid.
        let reused = tmp.path().join("cs-test-reused");
        std::fs::create_dir(&reused).unwrap();
        std::fs::write(reused.join(OWNER_FILE), format!("{me}\n1\n\n")).unwrap();
        // No owner file: not ours to judge.
        std::fs::create_dir(tmp.path().join("cs-test-unknown")).unwrap();

        let orphans = sweep_in(tmp.path(), "cs-test-");
        let dirs: Vec<&Path> = orphans.iter().map(|o| o.dir.as_path()).collect();
        assert_eq!(dirs, [dead.as_path(), reused.as_path()]);
        assert_eq!(orphans[0].note, "/other repo");
        assert_eq!(orphans[0].pid, gone);
        remove(&orphans[0]).unwrap();
        assert!(!dead.exists() && mine.exists());
    }

    #[test]
    fn tempdir_writes_its_owner() {
        let d = tempdir("coldstart-owned-test-", "note here").unwrap();
        let text = std::fs::read_to_string(d.path().join(OWNER_FILE)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], std::process::id().to_string());
        assert_eq!(lines[2], "note here");
        assert!(
            sweep("coldstart-owned-test-")
                .iter()
                .all(|o| o.dir != d.path())
        );
    }
}
