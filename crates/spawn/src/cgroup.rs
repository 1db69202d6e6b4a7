//! Container limits: a worker started with [`Limits`] runs in a cgroup of
//! its own with that CPU quota and memory limit, as a container runtime
//! would start it, and the cgroup is removed when the worker is reaped.
//!
//! - cgroup v2 where the unified hierarchy offers the `cpu` and `memory`
//!   controllers to this process's cgroup; cgroup v1's `cpu` and `memory`
//!   hierarchies where it does not; a [`CgroupError`] that names what is
//!   missing where neither can be written.
//! - Every worker's cgroup sits under one folder per harness process,
//!   `coldstart-<pid>`, beside the harness's own cgroup (below it in the
//!   tree, so the harness's own limits still bound its workers). The
//!   folder is made at the first limited spawn and removed with the last
//!   worker's cgroup; the guard (the process that kills orphaned worker groups) removes it, and every
//!   cgroup in it, when the harness dies, SIGKILL included.
//! - The child joins its cgroup between `fork` and `exec` (it writes `0`,
//!   itself, to `cgroup.procs` files opened before the fork), so the
//!   interpreter's first instruction already runs under the limits.
//! - The memory limit comes with swap off (v2 `memory.swap.max` 0, v1
//!   `memsw` equal to the limit where the kernel accounts swap), so a
//!   worker over it is killed by the kernel's OOM killer, as in a pod,
//!   rather than slowed by swapping; [`Cgroup::oom_kills`] tells the one
//!   from a plain SIGKILL.
//!
//! Linux only; elsewhere every limited spawn fails with
//! [`CgroupError::Unavailable`].

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub use timeline::Limits;

/// The CFS period a CPU quota is counted in: 100 ms, the kernel's and
/// docker's default.
pub const PERIOD_US: u64 = 100_000;

/// Which cgroup interface the limits were set through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// The unified hierarchy (`cpu.max`, `memory.max`).
    V2,
    /// The legacy per-controller hierarchies (`cpu.cfs_quota_us`,
    /// `memory.limit_in_bytes`).
    V1,
}

impl Version {
    /// `cgroup v2` or `cgroup v1`.
    pub fn name(self) -> &'static str {
        match self {
            Version::V2 => "cgroup v2",
            Version::V1 => "cgroup v1",
        }
    }
}

/// Why a worker's limits could not be set.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CgroupError {
    /// Neither cgroup v2 with the controllers needed nor cgroup v1's
    /// hierarchies for them are mounted for this process.
    #[error(
        "no cgroup to set {wanted} in: {found}; run on a host or in a container that mounts cgroup v2 with the cpu and memory controllers (or cgroup v1's cpu and memory hierarchies) under /sys/fs/cgroup, or run without --cpus/--memory"
    )]
    Unavailable {
        /// The limits asked for (`a CPU quota and a memory limit`).
        wanted: &'static str,
        /// What was found instead.
        found: String,
    },
    /// A cgroup file or folder could not be written.
    #[error("could not {action} {}: {source}; {hint}", path.display())]
    Write {
        /// What was being done (`create the cgroup`, `set the CPU quota in`).
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
        /// What to do about it.
        hint: &'static str,
    },
}

const HINT_ACCESS: &str = "coldstart needs write access to the cgroup tree: run it as root, or in a cgroup delegated to your user (`systemd-run --user --scope -p Delegate=yes coldstart ...`)";
const HINT_BUSY: &str = "cgroup v2 gives no controllers to the children of a cgroup that holds processes: start coldstart in a cgroup of its own (`systemd-run --user --scope -p Delegate=yes coldstart ...`)";
const HINT_OTHER: &str = "check that the cgroup filesystem is mounted read-write";

fn write_error(action: &'static str, path: &Path, source: io::Error) -> CgroupError {
    let hint = match source.raw_os_error() {
        Some(libc::EACCES | libc::EPERM | libc::EROFS) => HINT_ACCESS,
        Some(libc::EBUSY) => HINT_BUSY,
        _ => HINT_OTHER,
    };
    CgroupError::Write {
        action,
        path: path.to_owned(),
        source,
        hint,
    }
}

fn write(action: &'static str, path: &Path, text: &str) -> Result<(), CgroupError> {
    fs::write(path, text).map_err(|e| write_error(action, path, e))
}

/// Where this process's cgroups are: the folder of its own cgroup in each
/// hierarchy the limits need.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tree {
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
struct Mount {
    point: PathBuf,
    root: String,
    v2: bool,
    controllers: Vec<String>,
}

/// The cgroup mounts in a `/proc/self/mountinfo`.
fn mounts(mountinfo: &str) -> Vec<Mount> {
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
fn unescape(field: &str) -> String {
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
fn own_path<'a>(proc_cgroup: &'a str, controller: Option<&str>) -> Option<&'a str> {
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
fn folder(mount: &Mount, path: &str) -> PathBuf {
    let rel = path.strip_prefix(mount.root.as_str()).unwrap_or(path);
    mount.point.join(rel.trim_start_matches('/'))
}

/// The controllers a set of limits needs.
fn needed(limits: &Limits) -> Vec<&'static str> {
    let mut out = Vec::new();
    if limits.cpus.is_some() {
        out.push("cpu");
    }
    if limits.memory_bytes.is_some() {
        out.push("memory");
    }
    out
}

fn wanted(limits: &Limits) -> &'static str {
    match (limits.cpus.is_some(), limits.memory_bytes.is_some()) {
        (true, true) => "a CPU quota and a memory limit",
        (true, false) => "a CPU quota",
        _ => "a memory limit",
    }
}

/// Finds the tree to set `limits` in: v2 when its controllers are there
/// for this process, else v1.
fn find(mountinfo: &str, proc_cgroup: &str, limits: &Limits) -> Result<Tree, CgroupError> {
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

fn read_proc(file: &str) -> String {
    fs::read_to_string(file).unwrap_or_default()
}

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

fn root_name() -> String {
    format!("coldstart-{}", std::process::id())
}

/// How many worker cgroups live under this harness's folders: the last
/// one removed takes the folders with it.
static LIVE: Mutex<usize> = Mutex::new(0);
static NEXT: AtomicU64 = AtomicU64::new(1);

/// The `coldstart-<pid>` folders of `tree`, one per hierarchy used, each
/// with the controllers it carries.
fn root_dirs(tree: &Tree) -> Vec<(PathBuf, Vec<&'static str>)> {
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
fn make_roots(tree: &Tree, need: &[&str]) -> Result<(), CgroupError> {
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
fn enable(dir: &Path, need: &[&str]) -> Result<(), CgroupError> {
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

/// One worker's cgroup: its folder in each hierarchy, the limits set in it.
#[derive(Debug)]
pub struct Cgroup {
    version: Version,
    /// One folder per hierarchy (one for v2).
    dirs: Vec<PathBuf>,
    /// The folder holding the CPU quota, and the one holding the memory
    /// limit (the same one for v2).
    cpu_dir: Option<PathBuf>,
    memory_dir: Option<PathBuf>,
    limits: Limits,
    removed: bool,
    /// How long the worker took to join it, read after its exec.
    pub(crate) join_ns: Option<u64>,
}

impl Cgroup {
    /// Makes a cgroup with `limits` for one worker.
    pub fn create(limits: &Limits) -> Result<Cgroup, CgroupError> {
        if !cfg!(target_os = "linux") {
            return Err(CgroupError::Unavailable {
                wanted: wanted(limits),
                found: "cgroups need Linux".to_owned(),
            });
        }
        let tree = find(
            &read_proc("/proc/self/mountinfo"),
            &read_proc("/proc/self/cgroup"),
            limits,
        )?;
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        make_roots(&tree, &needed(limits))?;
        *live += 1;
        drop(live);
        let name = format!("w{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let version = match tree {
            Tree::V2 { .. } => Version::V2,
            Tree::V1 { .. } => Version::V1,
        };
        let (mut dirs, mut cpu_dir, mut memory_dir) = (Vec::new(), None, None);
        for (root, controllers) in root_dirs(&tree) {
            let dir = root.join(&name);
            if controllers.contains(&"cpu") {
                cpu_dir = Some(dir.clone());
            }
            if controllers.contains(&"memory") {
                memory_dir = Some(dir.clone());
            }
            dirs.push(dir);
        }
        let mut cg = Cgroup {
            version,
            dirs,
            cpu_dir,
            memory_dir,
            limits: *limits,
            removed: false,
            join_ns: None,
        };
        for dir in &cg.dirs {
            if let Err(e) = fs::create_dir(dir) {
                let err = write_error("create the cgroup", dir, e);
                cg.remove();
                return Err(err);
            }
        }
        if let Err(e) = cg.set_limits() {
            cg.remove();
            return Err(e);
        }
        Ok(cg)
    }

    fn set_limits(&self) -> Result<(), CgroupError> {
        if let (Some(cpus), Some(cpu_dir)) = (self.limits.cpus, &self.cpu_dir) {
            let quota = ((cpus * PERIOD_US as f64).round() as u64).max(1000);
            match self.version {
                Version::V2 => write(
                    "set the CPU quota in",
                    &cpu_dir.join("cpu.max"),
                    &format!("{quota} {PERIOD_US}"),
                )?,
                Version::V1 => {
                    write(
                        "set the CPU period in",
                        &cpu_dir.join("cpu.cfs_period_us"),
                        &PERIOD_US.to_string(),
                    )?;
                    write(
                        "set the CPU quota in",
                        &cpu_dir.join("cpu.cfs_quota_us"),
                        &quota.to_string(),
                    )?;
                }
            }
        }
        if let (Some(bytes), Some(mem_dir)) = (self.limits.memory_bytes, &self.memory_dir) {
            match self.version {
                Version::V2 => {
                    write(
                        "set the memory limit in",
                        &mem_dir.join("memory.max"),
                        &bytes.to_string(),
                    )?;
                    let swap = mem_dir.join("memory.swap.max");
                    if swap.exists() {
                        write("turn swap off in", &swap, "0")?;
                    }
                }
                Version::V1 => {
                    write(
                        "set the memory limit in",
                        &mem_dir.join("memory.limit_in_bytes"),
                        &bytes.to_string(),
                    )?;
                    let memsw = mem_dir.join("memory.memsw.limit_in_bytes");
                    if memsw.exists() {
                        write("turn swap off in", &memsw, &bytes.to_string())?;
                    }
                }
            }
        }
        Ok(())
    }

    /// How long the worker took to join the cgroup between `fork` and
    /// `exec` (left out of its start-up: a container's process does not
    /// count its runtime placing it).
    pub fn join_ns(&self) -> Option<u64> {
        self.join_ns
    }

    /// The interface the limits were set through.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The limits set.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The cgroup's folders (one for v2, one per hierarchy for v1).
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The `cgroup.procs` files, opened for the child to write itself
    /// into between `fork` and `exec` ([`Entry::join`]).
    pub(crate) fn entry(&self) -> Result<Entry, CgroupError> {
        let mut fds = Vec::new();
        for dir in &self.dirs {
            let path = dir.join("cgroup.procs");
            let f = fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| write_error("open", &path, e))?;
            fds.push(OwnedFd::from(f));
        }
        let mut ends = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two fds into the array.
        if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(write_error(
                "make the pipe that times the join to",
                &self.dirs[0],
                io::Error::last_os_error(),
            ));
        }
        // SAFETY: both fds were just made and are owned by nothing else.
        let (stamp_rx, stamp_tx) =
            unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
        Ok(Entry {
            fds,
            stamp_rx,
            stamp_tx,
        })
    }

    /// How many times the kernel's OOM killer killed a process of this
    /// cgroup for its memory limit.
    pub fn oom_kills(&self) -> u64 {
        let (file, key) = match self.version {
            Version::V2 => ("memory.events", "oom_kill"),
            Version::V1 => ("memory.oom_control", "oom_kill"),
        };
        let Some(dir) = &self.memory_dir else {
            return 0;
        };
        fs::read_to_string(dir.join(file))
            .unwrap_or_default()
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == key).then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0)
    }

    /// The most memory the cgroup held at once, when the kernel reports it
    /// (v2 `memory.peak`, v1 `memory.max_usage_in_bytes`).
    pub fn memory_peak_bytes(&self) -> Option<u64> {
        let file = match self.version {
            Version::V2 => "memory.peak",
            Version::V1 => "memory.max_usage_in_bytes",
        };
        let dir = self.memory_dir.as_ref()?;
        fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok()
    }

    /// Kills whatever is left in the cgroup and removes it (and the
    /// harness's root folders with the last one). Waits a bounded time
    /// for killed processes to leave; a folder that still cannot be
    /// removed is left for the guard.
    pub fn remove(&mut self) {
        if self.removed {
            return;
        }
        self.removed = true;
        let deadline = Instant::now() + Duration::from_secs(2);
        for dir in &self.dirs {
            remove_dir(dir, deadline);
        }
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        *live = live.saturating_sub(1);
        if *live == 0 {
            for dir in harness_folders(std::process::id()) {
                let _ = fs::remove_dir(dir);
            }
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Kills the processes of cgroup `dir` and removes it, retrying while it
/// is still busy, until `deadline`.
fn remove_dir(dir: &Path, deadline: Instant) {
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

/// The open `cgroup.procs` files a child writes itself into, and the pipe
/// on which it says how long joining took.
#[derive(Debug)]
pub(crate) struct Entry {
    fds: Vec<OwnedFd>,
    stamp_rx: OwnedFd,
    stamp_tx: OwnedFd,
}

/// What the child's `pre_exec` needs: the `cgroup.procs` fds and the
/// pipe's write end.
#[derive(Debug, Clone)]
pub(crate) struct JoinFds {
    procs: Vec<i32>,
    stamp: i32,
}

impl Entry {
    /// The raw fds, for the child's `pre_exec`.
    pub(crate) fn raw(&self) -> JoinFds {
        JoinFds {
            procs: self.fds.iter().map(|f| f.as_raw_fd()).collect(),
            stamp: self.stamp_tx.as_raw_fd(),
        }
    }

    /// How long the child took to join its cgroup, once it has exec'd:
    /// the kernel's cgroup migration (on v1 it can wait out an RCU grace
    /// period, tens of ms), which a container's process does not count
    /// in its own start-up, so neither does the worker's.
    pub(crate) fn join_ns(&self) -> Option<u64> {
        let mut word = [0u8; 8];
        // SAFETY: reading at most 8 bytes into a stack buffer from an
        // open, non-blocking fd.
        let n = unsafe { libc::read(self.stamp_rx.as_raw_fd(), word.as_mut_ptr().cast(), 8) };
        (n == 8).then(|| u64::from_ne_bytes(word))
    }
}

fn now_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a timespec on the stack; it is
    // async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Writes the calling process into each cgroup (`0` is the writer), then
/// how long that took on the stamp pipe. Async-signal-safe: `write`s and
/// `clock_gettime`, no allocation; usable between `fork` and `exec`.
pub(crate) fn join(fds: &JoinFds) -> io::Result<()> {
    let start = now_ns();
    for &fd in &fds.procs {
        // SAFETY: writing one byte from a static buffer to an open fd.
        if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
            return Err(io::Error::last_os_error());
        }
    }
    let took = now_ns().saturating_sub(start).to_ne_bytes();
    // SAFETY: 8 bytes from a stack buffer to an open pipe (below
    // PIPE_BUF: one write); a failure only loses the figure.
    unsafe { libc::write(fds.stamp, took.as_ptr().cast(), 8) };
    Ok(())
}

/// Whether this process can put workers under `limits` here: `Ok` with the
/// interface it would use, or the error a limited spawn would meet.
/// Makes and removes one cgroup.
pub fn probe(limits: &Limits) -> Result<Version, CgroupError> {
    let cg = Cgroup::create(limits)?;
    Ok(cg.version())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO_V1: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const CGROUP_V1: &str = "\
4:memory:/process_api/abc
2:cpu,cpuacct:/
0::/
";

    #[test]
    fn mountinfo_gives_the_cgroup_mounts_and_their_controllers() {
        let m = mounts(MOUNTINFO_V1);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].point, Path::new("/sys/fs/cgroup/cpu,cpuacct"));
        assert_eq!(m[0].controllers, ["rw", "cpu", "cpuacct"]);
        assert!(m[2].v2);
        let spaced = "1 0 0:1 /a\\040b /mnt/c\\040g rw - cgroup2 cgroup2 rw\n";
        assert_eq!(mounts(spaced)[0].point, Path::new("/mnt/c g"));
        assert_eq!(mounts(spaced)[0].root, "/a b");
    }

    #[test]
    fn own_cgroup_paths_are_found_by_controller() {
        assert_eq!(
            own_path(CGROUP_V1, Some("memory")),
            Some("/process_api/abc")
        );
        assert_eq!(own_path(CGROUP_V1, Some("cpu")), Some("/"));
        assert_eq!(own_path(CGROUP_V1, None), Some("/"));
        assert_eq!(own_path(CGROUP_V1, Some("pids")), None);
    }

    #[test]
    fn a_mount_of_a_subtree_is_joined_without_its_root() {
        let m = Mount {
            point: "/sys/fs/cgroup".into(),
            root: "/kubepods/pod1".into(),
            v2: true,
            controllers: vec![],
        };
        assert_eq!(
            folder(&m, "/kubepods/pod1/c1"),
            Path::new("/sys/fs/cgroup/c1")
        );
        assert_eq!(folder(&m, "/"), Path::new("/sys/fs/cgroup/"));
    }

    #[test]
    fn v1_is_used_when_v2_offers_no_controllers_and_a_missing_one_is_named() {
        let both = Limits {
            cpus: Some(0.5),
            memory_bytes: Some(1 << 30),
        };
        // The unified hierarchy's cgroup.controllers is not readable under
        // this fake mount point, so v2 offers nothing.
        let info = MOUNTINFO_V1.replace("/sys/fs/cgroup/unified", "/nonexistent/unified");
        assert_eq!(
            find(&info, CGROUP_V1, &both).unwrap(),
            Tree::V1 {
                cpu: Some("/sys/fs/cgroup/cpu,cpuacct/".into()),
                memory: Some("/sys/fs/cgroup/memory/process_api/abc".into()),
            }
        );
        let no_memory: String = info
            .lines()
            .filter(|l| !l.contains("memory"))
            .map(|l| format!("{l}\n"))
            .collect();
        let err = find(&no_memory, CGROUP_V1, &both).unwrap_err().to_string();
        assert!(
            err.contains("no cgroup to set a CPU quota and a memory limit in"),
            "{err}"
        );
        assert!(err.contains("offers no controllers"), "{err}");
        assert!(err.contains("no cgroup v1 hierarchy for memory"), "{err}");
        let cpu_only = Limits {
            cpus: Some(1.0),
            memory_bytes: None,
        };
        assert!(find(&no_memory, CGROUP_V1, &cpu_only).is_ok());
    }

    #[test]
    fn a_refused_write_says_what_to_allow() {
        let e = write_error(
            "create the cgroup",
            Path::new("/x"),
            io::Error::from_raw_os_error(libc::EACCES),
        );
        assert!(e.to_string().contains("run it as root"), "{e}");
        let e = write_error(
            "enable",
            Path::new("/x"),
            io::Error::from_raw_os_error(libc::EBUSY),
        );
        assert!(e.to_string().contains("holds processes"), "{e}");
    }

    /// The limits, when this machine lets this process make cgroups,
    /// through the rule of `test_interpreters::or_not_run`: under `cargo
    /// xtask test` (run as root on a cgroup v2 host, as CI is) a refusal
    /// fails `case`; elsewhere one NOT RUN line.
    fn usable(limits: Limits, case: &str) -> Option<Limits> {
        let _serial = crate::serial();
        let probed = probe(&limits);
        let why = probed.as_ref().err().map(ToString::to_string);
        test_interpreters::or_not_run(probed.ok().map(|_| limits), case, || {
            why.unwrap_or_default()
        })
    }

    fn python_worker(body: &str, limits: Limits) -> crate::Command {
        let mut cmd = crate::Command::new(test_interpreters::default_python());
        cmd.args([
            "-c",
            &format!(
                "import json, sys, time\n{body}\n\
                 print(json.dumps({{'ready': True, 'cpu': time.process_time(), 'cgroup': open('/proc/self/cgroup').read()}}), flush=True)\n\
                 sys.stdin.read()"
            ),
        ])
        .limits(limits);
        cmd
    }

    #[test]
    fn a_worker_runs_in_its_own_cgroup_held_to_its_cpu_quota_and_the_cgroup_goes_with_it() {
        let Some(limits) = usable(
            Limits {
                cpus: Some(0.5),
                memory_bytes: Some(512 << 20),
            },
            "cpu quota",
        ) else {
            return;
        };
        let cmd = python_worker(
            "t = time.process_time()\nwhile time.process_time() - t < 0.3: pass",
            limits,
        );
        let _serial = crate::serial();
        let mut w = crate::Worker::spawn(&cmd).unwrap();
        let ready = w.wait_ready(Duration::from_secs(60)).unwrap();
        let wall = (ready.read_at_ns - w.spawned_at_ns()) as f64 / 1e9;
        let cpu = ready.value.extra["cpu"].as_f64().unwrap();
        let inside = ready.value.extra["cgroup"].as_str().unwrap().to_owned();
        assert!(inside.contains(&format!("/{}/w", root_name())), "{inside}");
        // A quota of half a CPU lets at most 50 ms run per 100 ms: the
        // worker's wall time is at least about twice its CPU time,
        // however loaded the machine is.
        assert!(wall >= 1.6 * cpu, "wall {wall:.3} s for {cpu:.3} s of CPU");
        let dirs = w
            .cgroup()
            .expect("a limited worker has a cgroup")
            .dirs()
            .to_vec();
        assert!(dirs.iter().all(|d| d.exists()), "{dirs:?}");
        let fin = w.kill();
        let c = fin.confinement.expect("a limited worker's cgroup is read");
        assert_eq!(c.limits, limits);
        assert!(!c.oom_killed());
        assert!(c.memory_peak_bytes.is_some_and(|p| p > 1 << 20), "{c:?}");
        // The join was timed in the child and left out of the timeline.
        assert!(c.join_ns.is_some_and(|ns| ns < 5_000_000_000), "{c:?}");
        assert!(dirs.iter().all(|d| !d.exists()), "{dirs:?}");
    }

    #[test]
    fn a_worker_over_its_memory_limit_is_labelled_oom_killed_and_leaves_no_cgroup() {
        let Some(limits) = usable(
            Limits {
                cpus: None,
                memory_bytes: Some(64 << 20),
            },
            "memory limit",
        ) else {
            return;
        };
        let cmd = python_worker("blob = bytearray(256 << 20)", limits);
        let _serial = crate::serial();
        let mut w = crate::Worker::spawn(&cmd).unwrap();
        let dirs = w
            .cgroup()
            .expect("a limited worker has a cgroup")
            .dirs()
            .to_vec();
        let err = w.wait_ready(Duration::from_secs(60)).unwrap_err();
        assert!(dirs.iter().all(|d| !d.exists()), "{dirs:?}");
        assert_eq!(
            err.status,
            Some(crate::ExitStatus::Signal(libc::SIGKILL)),
            "{err}"
        );
        let c = err.finished.as_ref().unwrap().confinement.clone().unwrap();
        assert!(c.oom_killed(), "{c:?}");
        let text = err.to_string();
        assert!(
            text.contains(
                "OOM-killed: the kernel's OOM killer ended the worker at its memory limit of 64 MiB"
            ),
            "{text}"
        );
        assert!(text.contains("limits: memory 64 MiB (cgroup v"), "{text}");
        assert!(text.contains("raise the memory limit"), "{text}");
    }
}
