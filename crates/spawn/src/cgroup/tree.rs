//! Where the cgroup tree is: the mounts of `/proc/self/mountinfo`, this
//! process's own cgroup in `/proc/self/cgroup`, and which interface (v2, or
//! v1's `cpu` and `memory` hierarchies) can hold the limits asked for.

use std::fs;
use std::path::PathBuf;

use timeline::Limits;

use super::CgroupError;

/// Where this process's cgroups are: the folder of its own cgroup in each
/// hierarchy the limits need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tree {
    V2 {
        own: PathBuf,
    },
    /// The own cgroup in each v1 hierarchy a limit needs (`None`: not
    /// needed).
    V1 {
        cpu: Option<PathBuf>,
        memory: Option<PathBuf>,
    },
}

/// One mounted cgroup hierarchy: its mount point, the cgroup its root
/// is, and its kind (v2, or the v1 controllers it carries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mount {
    pub(super) point: PathBuf,
    pub(super) root: String,
    pub(super) v2: bool,
    pub(super) controllers: Vec<String>,
}

/// The cgroup mounts in a `/proc/self/mountinfo`.
pub(super) fn mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            let (root, point) = (*left.get(3)?, *left.get(4)?);
            let fstype = *right.first()?;
            let options = right.get(2).copied().unwrap_or("");
            let v2 = match fstype {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            Some(Mount {
                point: PathBuf::from(unescape(point)),
                root: unescape(root),
                v2,
                controllers: if v2 {
                    Vec::new()
                } else {
                    options.split(',').map(str::to_owned).collect()
                },
            })
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as octal.
pub(super) fn unescape(field: &str) -> String {
    let mut out = String::new();
    let mut chars = field.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let code: String = chars.by_ref().take(3).collect();
            match u8::from_str_radix(&code, 8) {
                Ok(b) => out.push(b as char),
                Err(_) => {
                    out.push('\\');
                    out.push_str(&code);
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// This process's cgroup path in the v2 hierarchy and in the v1
/// hierarchy carrying `controller`, from `/proc/self/cgroup`.
pub(super) fn own_path<'a>(proc_cgroup: &'a str, controller: Option<&str>) -> Option<&'a str> {
    proc_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (id, list, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = match controller {
            None => id == "0" && list.is_empty(),
            Some(c) => list.split(',').any(|x| x == c),
        };
        hit.then_some(path)
    })
}

/// The folder of cgroup `path` in a hierarchy mounted as `mount`.
pub(super) fn folder(mount: &Mount, path: &str) -> PathBuf {
    let rel = path.strip_prefix(mount.root.as_str()).unwrap_or(path);
    mount.point.join(rel.trim_start_matches('/'))
}

/// The controllers a set of limits needs.
pub(super) fn needed(limits: &Limits) -> Vec<&'static str> {
    let mut out = Vec::new();
    if limits.cpus.is_some() {
        out.push("cpu");
    }
    if limits.memory_bytes.is_some() {
        out.push("memory");
    }
    out
}

pub(super) fn wanted(limits: &Limits) -> &'static str {
    match (limits.cpus.is_some(), limits.memory_bytes.is_some()) {
        (true, true) => "a CPU quota and a memory limit",
        (true, false) => "a CPU quota",
        _ => "a memory limit",
    }
}

/// Finds the tree to set `limits` in: v2 when its controllers are there
/// for this process, else v1.
pub(super) fn find(
    mountinfo: &str,
    proc_cgroup: &str,
    limits: &Limits,
) -> Result<Tree, CgroupError> {
    let mounts = mounts(mountinfo);
    let need = needed(limits);
    let mut found = Vec::new();
    if let (Some(m), Some(path)) = (mounts.iter().find(|m| m.v2), own_path(proc_cgroup, None)) {
        let own = folder(m, path);
        let offered = fs::read_to_string(own.join("cgroup.controllers")).unwrap_or_default();
        let offered: Vec<&str> = offered.split_whitespace().collect();
        if need.iter().all(|c| offered.contains(c)) {
            return Ok(Tree::V2 { own });
        }
        found.push(format!(
            "cgroup v2 at {} offers {}",
            m.point.display(),
            if offered.is_empty() {
                "no controllers".to_owned()
            } else {
                format!("only {}", offered.join(" "))
            }
        ));
    }
    let v1 = |c: &str| {
        let m = mounts
            .iter()
            .find(|m| !m.v2 && m.controllers.iter().any(|x| x == c))?;
        Some(folder(m, own_path(proc_cgroup, Some(c))?))
    };
    let (cpu, memory) = (v1("cpu"), v1("memory"));
    let missing: Vec<&str> = need
        .iter()
        .copied()
        .filter(|c| match *c {
            "cpu" => cpu.is_none(),
            _ => memory.is_none(),
        })
        .collect();
    if missing.is_empty() {
        return Ok(Tree::V1 {
            cpu: cpu.filter(|_| need.contains(&"cpu")),
            memory: memory.filter(|_| need.contains(&"memory")),
        });
    }
    found.push(format!(
        "no cgroup v1 hierarchy for {}",
        missing.join(" or ")
    ));
    Err(CgroupError::Unavailable {
        wanted: wanted(limits),
        found: found.join("; "),
    })
}

pub(super) fn read_proc(file: &str) -> String {
    fs::read_to_string(file).unwrap_or_default()
}
