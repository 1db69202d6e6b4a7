//! The harness's own folder of worker cgroups, `coldstart-<pid>`: made with
//! its controllers enabled at the first limited spawn, found again by the
//! guard when the harness dies, and removed with what it holds.

use std::ffi::CString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::tree::{Tree, folder, mounts, own_path, read_proc};
use super::{CgroupError, write, write_error};

/// Where harness process `pid` (this process, or a harness it started)
/// makes its workers' cgroups: its `coldstart-<pid>` folder in each
/// hierarchy it could use, read from this process's own cgroups (a child
/// starts in its parent's). Most of them do not exist at any moment; all
/// are gone once that harness and its guard are.
pub fn harness_folders(pid: u32) -> Vec<PathBuf> {
    let (info, own) = (
        read_proc("/proc/self/mountinfo"),
        read_proc("/proc/self/cgroup"),
    );
    let name = format!("coldstart-{pid}");
    let mut out = Vec::new();
    for m in &mounts(&info) {
        let path = if m.v2 {
            own_path(&own, None)
        } else {
            m.controllers
                .iter()
                .filter(|c| *c == "cpu" || *c == "memory")
                .find_map(|c| own_path(&own, Some(c)))
        };
        if let Some(path) = path {
            out.push(folder(m, path).join(&name));
        }
    }
    out
}

/// The folders the guard empties and removes when the harness dies
/// ([`harness_folders`] of this process), as C strings made before the
/// guard's fork.
pub(crate) fn guard_roots() -> Vec<CString> {
    use std::os::unix::ffi::OsStrExt as _;
    harness_folders(std::process::id())
        .into_iter()
        .filter_map(|d| CString::new(d.as_os_str().as_bytes()).ok())
        .collect()
}

pub(super) fn root_name() -> String {
    format!("coldstart-{}", std::process::id())
}

/// The `coldstart-<pid>` folders of `tree`, one per hierarchy used, each
/// with the controllers it carries.
pub(super) fn root_dirs(tree: &Tree) -> Vec<(PathBuf, Vec<&'static str>)> {
    let name = root_name();
    match tree {
        Tree::V2 { own } => vec![(own.join(name), vec!["cpu", "memory"])],
        Tree::V1 { cpu, memory } => {
            let mut v: Vec<(PathBuf, Vec<&'static str>)> = Vec::new();
            for (dir, c) in [(cpu, "cpu"), (memory, "memory")] {
                let Some(dir) = dir else { continue };
                let dir = dir.join(&name);
                match v.iter_mut().find(|(d, _)| *d == dir) {
                    Some((_, cs)) => cs.push(c),
                    None => v.push((dir, vec![c])),
                }
            }
            v
        }
    }
}

/// Makes the harness's root folders in `tree` (v2: with the controllers
/// enabled down to them).
pub(super) fn make_roots(tree: &Tree, need: &[&str]) -> Result<(), CgroupError> {
    if let Tree::V2 { own } = tree {
        enable(own, need)?;
    }
    for (dir, _) in root_dirs(tree) {
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(write_error("create the cgroup", &dir, e)),
        }
        if matches!(tree, Tree::V2 { .. }) {
            enable(&dir, need)?;
        }
    }
    Ok(())
}

/// Enables controllers for the children of cgroup `dir` (v2).
pub(super) fn enable(dir: &Path, need: &[&str]) -> Result<(), CgroupError> {
    let file = dir.join("cgroup.subtree_control");
    let on = fs::read_to_string(&file).unwrap_or_default();
    let missing: Vec<String> = need
        .iter()
        .filter(|c| !on.split_whitespace().any(|x| x == **c))
        .map(|c| format!("+{c}"))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    write(
        "enable the controllers for the children of",
        &file,
        &missing.join(" "),
    )
}

/// Kills the processes of cgroup `dir` and removes it, retrying while it
/// is still busy, until `deadline`.
pub(super) fn remove_dir(dir: &Path, deadline: Instant) {
    loop {
        for pid in fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        match fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => return,
        }
    }
}
