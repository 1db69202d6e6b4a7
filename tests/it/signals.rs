//! Signals to the harness: SIGKILL of `coldstart` (a CI job's hard timeout,
//! the OOM killer) leaves no worker and no process of a worker's group
//! alive; SIGTERM, SIGHUP and SIGINT say what they cut short, keep what was
//! measured and exit 143, 129, 130.
//!
//! The workers are stand-ins (`tests/fixtures/workers/helper_then_hang.py`
//! starts a helper in its group and hangs before ready;
//! `tests/fixtures/bench/standin.py` is the bench's quick worker).

use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{self, KillOnDrop, lines_in, signal_and_wait, wait_for_trials};

fn hang_fixture() -> PathBuf {
    support::fixtures()
        .join("workers")
        .join("helper_then_hang.py")
}

/// One process as `/proc/PID/stat` shows it.
#[derive(Debug, Clone, Copy)]
struct Stat {
    pid: i32,
    ppid: i32,
    pgrp: i32,
    state: u8,
}

fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold anything: the fields start after its ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let mut f = rest.split(' ');
    let state = f.next()?.bytes().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    Some(Stat {
        pid,
        ppid,
        pgrp,
        state,
    })
}

fn processes() -> Vec<Stat> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter_map(stat)
        .collect()
}

fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Alive: not a zombie waiting for its parent, not dead.
fn alive(s: &Stat) -> bool {
    !matches!(s.state, b'Z' | b'X' | b'x')
}

/// The live members of these groups.
fn members(groups: &[i32]) -> Vec<Stat> {
    processes()
        .into_iter()
        .filter(|s| groups.contains(&s.pgrp) && alive(s))
        .collect()
}

fn pidfd(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open has no memory-safety preconditions.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a new fd owned by nothing else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Waits, at most `bound`, until every process behind these pidfds has
/// exited (a pidfd polls readable then). Returns the ones still running.
fn wait_exited(fds: &mut Vec<(Stat, OwnedFd)>, bound: Duration) {
    let deadline = Instant::now() + bound;
    while !fds.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        let mut polls: Vec<libc::pollfd> = fds
            .iter()
            .map(|(_, fd)| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: a valid array of pollfd of the given length.
        let n = unsafe {
            libc::poll(
                polls.as_mut_ptr(),
                polls.len() as libc::nfds_t,
                left.as_millis().max(1) as i32,
            )
        };
        if n > 0 {
            let mut i = 0;
            fds.retain(|_| {
                let keep = polls[i].revents == 0;
                i += 1;
                keep
            });
        }
    }
}

/// A harness with its stand-in workers up.
struct Running {
    harness: std::process::Child,
    _reaper: KillOnDrop,
    /// The workers' process groups.
    groups: Vec<i32>,
    /// Every process of those groups, each watched by a pidfd.
    watched: Vec<(Stat, OwnedFd)>,
}

/// Starts the harness and waits (polling /proc, at most a minute) until
/// `workers` stand-in workers run under it, each with its helper in its
/// group.
fn start_with_workers(mut cmd: Command, workers: usize) -> Running {
    let mut harness = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("coldstart runs");
    let hpid = harness.id() as i32;
    let reaper = KillOnDrop(hpid);
    // The workers' argv: the interpreter, then the fixture (the harness's
    // own forks share its argv, which names both).
    let argv = format!(
        "{} {}",
        support::python().display(),
        hang_fixture().display()
    );
    let groups = support::wait_while_running(
        &mut harness,
        &format!("{workers} workers with helpers under pid {hpid} were up"),
        Duration::from_secs(60),
        || {
            let leaders: Vec<i32> = processes()
                .into_iter()
                .filter(|s| s.ppid == hpid && s.pgrp == s.pid && cmdline(s.pid).starts_with(&argv))
                .map(|s| s.pid)
                .collect();
            let ready =
                leaders.len() == workers && leaders.iter().all(|&g| members(&[g]).len() >= 2);
            ready.then_some(leaders)
        },
    );
    let watched: Vec<(Stat, OwnedFd)> = members(&groups)
        .into_iter()
        .filter_map(|s| Some((s, pidfd(s.pid)?)))
        .collect();
    assert_eq!(watched.len(), 2 * workers, "{watched:?}");
    Running {
        harness,
        _reaper: reaper,
        groups,
        watched,
    }
}

impl Running {
    /// Proves that every process of the workers' groups ends within ten
    /// seconds (each watched by a pidfd taken while it ran, then /proc
    /// scanned for any other member).
    fn assert_groups_end(&mut self) {
        wait_exited(&mut self.watched, Duration::from_secs(10));
        let left = members(&self.groups);
        if !self.watched.is_empty() || !left.is_empty() {
            let left: Vec<String> = left
                .iter()
                .map(|s| format!("{} ({})", s.pid, cmdline(s.pid)))
                .collect();
            for &g in &self.groups {
                // SAFETY: kill(2); the groups are this test's workers'.
                unsafe { libc::kill(-g, libc::SIGKILL) };
            }
            panic!(
                "processes of the worker groups {:?} still run 10 s after the harness was signalled: {left:?}",
                self.groups
            );
        }
    }

    /// Signals the harness and waits for its end: (exit code, stdout, stderr).
    fn signal_and_wait(&mut self, sig: i32) -> (Option<i32>, String, String) {
        signal_and_wait(&mut self.harness, sig)
    }
}

/// Kills the harness with SIGKILL once its workers are up and proves that
/// nothing of their groups is left.
fn killed_harness_leaves_nothing(cmd: Command, workers: usize) {
    let mut run = start_with_workers(cmd, workers);
    let (code, _, _) = run.signal_and_wait(libc::SIGKILL);
    assert_eq!(code, None, "killed by a signal");
    run.assert_groups_end();
}

fn check_of_hanging_workers(dir: &std::path::Path) -> Command {
    let mut cmd = crate::support::coldstart(dir);
    cmd.args(["check", "--processes", "3", "--ready-timeout", "600", "--"])
        .arg(support::python())
        .arg(hang_fixture());
    cmd
}

/// The recorder's private folders in the temporary folder that `pid`
/// owns (its owner file names it).
fn recorder_folders_of(pid: u32) -> Vec<PathBuf> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("coldstart-recorder-"))
                && std::fs::read_to_string(p.join(".coldstart-owner"))
                    .is_ok_and(|o| o.lines().next() == Some(&pid.to_string()))
        })
        .collect()
}

#[test]
fn sigkill_of_check_mid_run_leaves_no_worker_group_alive_and_the_next_check_sweeps_its_folders() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = start_with_workers(check_of_hanging_workers(dir.path()), 3);
    let killed = run.harness.id();
    // Each worker has a private folder that the run owns ...
    assert_eq!(recorder_folders_of(killed).len(), 3);
    let (code, _, _) = run.signal_and_wait(libc::SIGKILL);
    assert_eq!(code, None, "killed by a signal");
    run.assert_groups_end();
    // ... which a SIGKILL cannot remove (no drop runs): the next check
    // removes what a gone owner left (or another test's check did first).
    let workers = support::fixtures().join("boundary/workers");
    let out = crate::support::coldstart(dir.path())
        .args(["check", "--processes", "1", "--"])
        .arg(support::python())
        .arg(workers.join("cleanworker.py"))
        .env("PYTHONPATH", &workers)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(recorder_folders_of(killed), Vec::<PathBuf>::new());
}

#[test]
fn sigkill_of_bench_mid_trial_leaves_no_worker_group_alive() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = crate::support::coldstart(dir.path());
    cmd.arg("bench")
        .arg("--out")
        .arg(dir.path().join("run"))
        .args(["--warmup", "0", "--trials", "3", "--"])
        .arg(support::python())
        .arg(hang_fixture());
    killed_harness_leaves_nothing(cmd, 1);
}

#[test]
fn sigkill_of_bench_under_limits_mid_trial_leaves_no_cgroup_and_no_worker() {
    if !crate::limits::cgroups_here("cgroups") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = crate::support::coldstart(dir.path());
    cmd.arg("bench")
        .arg("--out")
        .arg(dir.path().join("run"))
        .args(["--cpus", "1", "--memory", "256M"])
        .args(["--warmup", "0", "--trials", "3", "--"])
        .arg(support::python())
        .arg(hang_fixture());
    let mut run = start_with_workers(cmd, 1);
    let folders = spawn::cgroup::harness_folders(run.harness.id());
    let cgroups: Vec<_> = folders
        .iter()
        .filter_map(|f| std::fs::read_dir(f).ok())
        .flatten()
        .flatten()
        .filter(|e| e.path().join("cgroup.procs").exists())
        .map(|e| e.path())
        .collect();
    assert!(
        cgroups
            .iter()
            .any(|c| std::fs::read_to_string(c.join("cgroup.procs"))
                .is_ok_and(|p| !p.trim().is_empty())),
        "the worker runs in a cgroup under {folders:?}: {cgroups:?}"
    );
    let (code, _, _) = run.signal_and_wait(libc::SIGKILL);
    assert_eq!(code, None, "killed by a signal");
    run.assert_groups_end();
    // The guard removes the folders once the killed have left them.
    crate::limits::assert_gone(&folders, "the harness was killed");
}

/// `coldstart bench` of the stand-in worker in `dir`, 1000 trials into
/// `out` (it runs until signalled), with `flags`.
fn bench_of_the_standin(
    dir: &std::path::Path,
    out: &std::path::Path,
    flags: &[&str],
) -> std::process::Child {
    let standin = support::fixtures().join("bench").join("standin.py");
    crate::support::coldstart(dir)
        .arg("bench")
        .arg("--out")
        .arg(out)
        .args(flags)
        .args([
            "--resamples",
            "2000",
            "--warmup",
            "0",
            "--trials",
            "1000",
            "--",
        ])
        .arg(support::python())
        .arg("-S")
        .arg(&standin)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("coldstart bench runs")
}

#[test]
fn ctrl_c_of_bench_under_limits_leaves_no_cgroup() {
    if !crate::limits::cgroups_here("cgroups") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut child = bench_of_the_standin(dir.path(), &out, &["--cpus", "1", "--memory", "256M"]);
    let _reaper = KillOnDrop(child.id() as i32);
    let folders = spawn::cgroup::harness_folders(child.id());
    wait_for_trials(&mut child, &out.join("trials.jsonl"), 3);
    let (code, stdout, stderr) = signal_and_wait(&mut child, libc::SIGINT);
    assert_eq!(code, Some(130), "{stdout}{stderr}");
    assert!(stdout.contains("with cpus 1, memory 256 MiB"), "{stdout}");
    crate::limits::assert_gone(&folders, "Ctrl-C");
}

#[test]
fn sigterm_sighup_sigint_of_check_say_what_was_cut_short_and_exit_128_plus_the_signal() {
    // What each signal makes the check say, whole: no verdict on stdout.
    let mut said = String::new();
    for (sig, name, code) in [
        (libc::SIGTERM, "SIGTERM", 143),
        (libc::SIGHUP, "SIGHUP", 129),
        (libc::SIGINT, "SIGINT", 130),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut run = start_with_workers(check_of_hanging_workers(dir.path()), 3);
        let (got, out, err) = run.signal_and_wait(sig);
        assert_eq!(got, Some(code), "{name}: {out}{err}");
        said += &format!("$ kill -{name} (exit {code})\nstdout:\n{out}stderr:\n{err}\n");
        run.assert_groups_end();
    }
    support::redactions()
        .bind(|| insta::assert_snapshot!("check_interrupted_by_each_signal", said));
}

#[test]
fn sigterm_of_bench_keeps_the_finished_trials_and_exits_143() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut child = bench_of_the_standin(dir.path(), &out, &[]);
    let _reaper = KillOnDrop(child.id() as i32);
    let log = out.join("trials.jsonl");
    wait_for_trials(&mut child, &log, 3);
    let (code, stdout, stderr) = signal_and_wait(&mut child, libc::SIGTERM);
    assert_eq!(code, Some(143), "{stdout}{stderr}");
    assert!(
        stderr.contains("interrupted by SIGTERM: the bench stopped after "),
        "{stderr}"
    );
    // The press itself is shown as it happens (the CLI shows what the
    // harness's token tells it).
    assert!(
        stderr
            .contains("interrupted (SIGTERM): killing every worker now; what was measured is kept"),
        "{stderr}"
    );
    // What was measured is printed and kept.
    assert!(stdout.contains(", interrupted"), "{stdout}");
    assert!(stdout.contains("ready"), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["trials"]["interrupted"], true);
    let trials = lines_in(&log);
    assert!((3..1000).contains(&trials), "{trials}");
    assert_eq!(summary["trials"]["run"], trials);
}
