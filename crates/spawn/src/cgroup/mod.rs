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
//!
//! The rooms: `tree` (where the cgroup tree is and which interface holds
//! the limits), `roots` (the harness's folder of worker cgroups, made,
//! found by the guard, removed) and `join` (the child's move into its
//! cgroup between `fork` and `exec`); the [`Cgroup`] itself is here.

use std::fs;
use std::io;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub use timeline::Limits;

mod join;
mod roots;
mod tree;

pub(crate) use join::{Entry, JoinFds, join};
pub(crate) use roots::guard_roots;
pub use roots::harness_folders;
use roots::{make_roots, remove_dir, root_dirs};
use tree::{Tree, find, needed, read_proc, wanted};

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

/// How many worker cgroups live under this harness's folders: the last
/// one removed takes the folders with it.
static LIVE: Mutex<usize> = Mutex::new(0);

static NEXT: AtomicU64 = AtomicU64::new(1);

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

/// Whether this process can put workers under `limits` here: `Ok` with the
/// interface it would use, or the error a limited spawn would meet.
/// Makes and removes one cgroup.
pub fn probe(limits: &Limits) -> Result<Version, CgroupError> {
    let cg = Cgroup::create(limits)?;
    Ok(cg.version())
}

#[cfg(test)]
mod tests {

    use super::roots::*;
    use super::tree::*;
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
