//! `trace -- CMD`: the command launched under a shell of its own, its
//! process group ended (SIGTERM, then SIGKILL) when the trace ends or is
//! dropped, and any orphan it left behind found and ended.

use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use crate::error::{Error, Result, invalid};

/// How long a launched command may take to appear under its shell.
pub(super) const LAUNCH_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the launched command, then what is left of its process
/// group, has after SIGTERM before SIGKILL.
pub(super) const END_GRACE: Duration = Duration::from_secs(5);

/// A command `trace -- CMD` started: under `sh`, which waits for it, so
/// the command is not coldstart's own child (a native read stops its
/// target with ptrace and waits for it, which in the parent would take
/// the command's exit status: `pystacks` refuses native reads of its own
/// children). The shell leads a process group of its own, which the
/// command and what it starts inherit, and coldstart becomes a child
/// subreaper, so a worker orphaned by the command (one in a group of its
/// own too, as a service puts each worker) is re-parented to it: ending
/// the trace ends them all (when the trace finishes), and a worker the command
/// started and did not stop is not left running.
#[derive(Debug)]
pub struct Launched {
    pub(super) shell: Child,
    /// The command's pid.
    pub pid: u32,
    /// Whether [`Launched::end`] ran (else dropping it ends the command:
    /// an error between the start and the end leaves nothing running).
    pub(super) ended: bool,
}

impl Launched {
    /// Starts `command` with `env` added to coldstart's environment;
    /// returns once its pid is known.
    pub fn start(command: &[String], env: &[(String, String)]) -> Result<Launched> {
        let Some(program) = command.first() else {
            invalid!("name a command to trace after `--`, or a PID");
        };
        // SAFETY: prctl(PR_SET_CHILD_SUBREAPER) only sets a process flag.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
        let mut shell = Command::new("sh")
            .args(["-c", "\"$@\"; exit $?", "coldstart-trace"])
            .args(command)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .process_group(0)
            .spawn()
            .map_err(|e| Error::io("start", std::path::Path::new("sh"), e))?;
        let children = format!("/proc/{0}/task/{0}/children", shell.id());
        let shells_own = std::fs::read(format!("/proc/{}/cmdline", shell.id())).ok();
        let deadline = Instant::now() + LAUNCH_TIMEOUT;
        loop {
            let pid: Option<u32> = std::fs::read_to_string(&children)
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok());
            // The command once it has exec'd: before, its child shows the
            // shell's command line, and during the exec none (a name read
            // then would name the wrong program, or nothing).
            let execd = |pid: u32| match std::fs::read(format!("/proc/{pid}/cmdline")) {
                Ok(line) => !line.is_empty() && Some(&line) != shells_own.as_ref(),
                Err(_) => true,
            };
            if let Some(pid) = pid.filter(|&p| execd(p)) {
                return Ok(Launched {
                    shell,
                    pid,
                    ended: false,
                });
            }
            if let Ok(Some(status)) = shell.try_wait() {
                invalid!(
                    "`{program}` ended ({status}) before it could be traced; check that it runs on its own"
                );
            }
            if Instant::now() >= deadline {
                // SAFETY: the group of the unreaped shell, which leads it.
                unsafe { libc::kill(-(shell.id() as i32), libc::SIGKILL) };
                let _ = shell.wait();
                invalid!(
                    "`{program}` did not start within {}s under sh",
                    LAUNCH_TIMEOUT.as_secs()
                );
            }
            // Polled: /proc has no event for a new child.
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Ends the command if it still runs (SIGTERM, then SIGKILL to its
    /// group after [`END_GRACE`]), then whatever is left of its process
    /// group (the workers it started: SIGTERM, the grace, SIGKILL), and
    /// reaps the shell: the command's exit status.
    pub(super) fn end(mut self) -> Result<ExitStatus> {
        self.end_all()
    }

    /// [`Launched::end`]'s work, once.
    pub(super) fn end_all(&mut self) -> Result<ExitStatus> {
        self.ended = true;
        let pgid = self.shell.id() as i32;
        // The shell is not reaped until the end: while it is a zombie its
        // pid, the group's id, cannot be reused, so the group can be
        // signalled safely throughout.
        if !self.shell_exited() {
            // SAFETY: kill(2) on the command's pid, which the shell we
            // have not reaped holds as its child (so the pid is not reused).
            unsafe { libc::kill(self.pid as i32, libc::SIGTERM) };
            if !wait_until(END_GRACE, || self.shell_exited()) {
                // SAFETY: the group of the unreaped shell (see above).
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
            }
        }
        if group_alive(pgid) {
            // SAFETY: as above.
            unsafe { libc::kill(-pgid, libc::SIGTERM) };
            if !wait_until(END_GRACE, || !group_alive(pgid)) {
                // SAFETY: as above.
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
            }
        }
        end_orphans(self.shell.id());
        self.shell
            .wait()
            .map_err(|e| Error::io("wait for", std::path::Path::new("sh"), e))
    }

    /// Whether the shell has exited, leaving it unreaped (`waitid` with
    /// `WNOWAIT`).
    pub(super) fn shell_exited(&self) -> bool {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid,
        // which writes it; the pid is our unreaped child.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                self.shell.id(),
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            ) == 0
                && info.si_pid() != 0
        }
    }
}

impl Drop for Launched {
    /// A trace that ends in an error still ends what it started.
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.end_all();
        }
    }
}

/// This process's children but `shell` (`/proc/self/task/*/children`):
/// what the traced command left, re-parented here (a subreaper).
pub(super) fn orphans(shell: u32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut out: Vec<i32> = tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .filter(|&p| p != shell as i32)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Ends and reaps the processes the command left behind, re-parented
/// here: SIGTERM, [`END_GRACE`], SIGKILL, each reaped (they are this
/// process's children, so their pids are not reused until then). Again
/// for their own children, which come here as they die, a few rounds.
pub(super) fn end_orphans(shell: u32) {
    for _ in 0..4 {
        let left = orphans(shell);
        if left.is_empty() {
            return;
        }
        let mut alive = left.clone();
        let reap = |alive: &mut Vec<i32>| {
            // SAFETY: waitpid on our own children, without blocking.
            alive
                .retain(|&p| unsafe { libc::waitpid(p, std::ptr::null_mut(), libc::WNOHANG) == 0 });
            alive.is_empty()
        };
        for &p in &left {
            // SAFETY: our unreaped child.
            unsafe { libc::kill(p, libc::SIGTERM) };
        }
        if !wait_until(END_GRACE, || reap(&mut alive)) {
            for &p in &alive {
                // SAFETY: our unreaped child.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            for &p in &alive {
                // SAFETY: waitpid on our own child, which SIGKILL ends.
                unsafe { libc::waitpid(p, std::ptr::null_mut(), 0) };
            }
        }
    }
}

/// Whether a process of group `pgid` other than a zombie still runs
/// (`/proc/PID/stat`: the state, and the group four fields on).
pub(super) fn group_alive(pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .any(|stat| {
            // After the command name, which may hold spaces, in parentheses.
            let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
            let mut fields = rest.split_whitespace();
            let state = fields.next();
            let group = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
            state != Some("Z") && group == Some(pgid)
        })
}

/// Polls `done` until it holds or `bound` passes; whether it held. Polled:
/// neither a process group's end nor an unreaped child's has an event a
/// thread could block on beside the other work.
pub(super) fn wait_until(bound: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + bound;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
