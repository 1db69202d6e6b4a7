//! A live worker: spawn, ready, requests, shutdown, and the end of it all.
//!
//! This module holds the [`Worker`] and what it knows of itself; its life is
//! in three rooms beside it: `start` (the process group, its stdio and
//! reader threads), `exchange` (the ready line, requests and replies, which
//! line counts as what) and `end` (shutdown, kill, the reap and its
//! record). Its other jobs are modules of their own: the records it hands
//! out (`records`), the errors it builds (`failure`), what it reads in
//! `/proc` (`procfs`), and the wire it talks over (the crate's
//! `transport`).

mod end;
mod exchange;
mod failure;
mod procfs;
mod records;
mod start;

use std::collections::VecDeque;
use std::fmt;
use std::process::ChildStdin;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::Escalation;
use crate::readers::{Event, Tail, Watched};
use crate::reap::ExitInfo;
use crate::transport::{self, Link, Transport};
pub use records::{Confinement, Exchange, Finished, NoiseLine, ShutdownPolicy, Stamped, Stop};
use timeline::Timeline;

/// After stdout ended, how long the worker is given at least to exit on its
/// own (so the error carries its real exit status) before it is killed.
const EXIT_AFTER_EOF: Duration = Duration::from_millis(500);

/// After the leader exited, how long stdout may stay silent before the
/// harness stops waiting for its EOF (a process that left the group holds
/// it open).
const STDOUT_AFTER_EXIT: Duration = Duration::from_millis(500);

/// How long the end of a worker waits for its reader threads once the
/// group is gone; a thread still blocked then (on a pipe held by a process
/// that left the group) is detached.
const JOIN_BOUND: Duration = Duration::from_secs(1);

/// Longest noise line kept, in bytes (cut at a character boundary).
const NOISE_LINE_MAX: usize = 4096;

/// The hook run when a timeout fires, before the kill; given the pid, it
/// returns diagnostic text (a stack dump, ...) for [`ErrorDetail::diagnostics`](crate::ErrorDetail::diagnostics).
pub type TimeoutHook = Box<dyn FnMut(u32) -> Option<String> + Send>;

/// A live worker. Dropping it kills (SIGKILL) and reaps its whole process
/// group; so do all its errors.
pub struct Worker {
    command: String,
    /// What the tool ran beside it ([`Command::instrument`]).
    instruments: Vec<String>,
    pid: u32,
    max_noise: usize,
    /// The way to the worker (its stdin, or the tcp connection); `None`
    /// once closed, and before the connection of a worker started for tcp.
    link: Option<Link>,
    /// The transport the worker was started for.
    transport: Transport,
    /// A tcp worker's stdin, held open (not the protocol) until the end.
    idle_stdin: Option<ChildStdin>,
    /// Whether stdout is the protocol (stdio; cleared for tcp, so its
    /// reader only drains it).
    stdout_live: Arc<AtomicBool>,
    /// Whether the stderr drain still looks for a ready line.
    scan_live: Arc<AtomicBool>,
    /// stdout ended while a tcp ready line on stderr could still come.
    stdout_gone: bool,
    /// The protocol runs on the tcp connection.
    connected: bool,
    /// Right after the tcp connection was made.
    connected_ns: Option<u64>,
    /// A sender on the event channel for the connection's reader, until
    /// the ready line.
    events_tx: Option<SyncSender<Event>>,
    connect_timeout: Duration,
    socket_thread: Option<Watched>,
    /// The words errors use for the wire.
    wire: transport::Wire,
    /// How long one line's write to the worker may block.
    write_timeout: Duration,
    frames: Option<Receiver<Event>>,
    /// The stream that carries the protocol ended (or failed).
    inbound_ended: bool,
    /// The stdout channel reported the leader's exit.
    exit_seen: bool,
    exit_rx: Receiver<ExitInfo>,
    /// Set by the waiter the moment the leader exits.
    leader_exited: Arc<AtomicBool>,
    exit: Option<ExitInfo>,
    stdout_thread: Option<Watched>,
    stderr_thread: Option<Watched>,
    tail: Arc<Mutex<Tail>>,
    noise: Vec<NoiseLine>,
    /// Unanswered requests, oldest first, as indices into `timeline.requests`.
    /// with the `id` each request carried, if any.
    pending: VecDeque<(usize, Option<serde_json::Value>)>,
    rss_at_ready: Option<u64>,
    /// The worker's own cgroup under its limits, removed after its exit.
    cgroup: Option<crate::cgroup::Cgroup>,
    /// What the cgroup said after the exit, read before its removal.
    confinement: Option<Confinement>,
    on_timeout: Option<TimeoutHook>,
    timeline: Timeline,
    escalation: Escalation,
    diagnostics: Vec<String>,
    /// Exit collected, pipes closed, threads joined or detached.
    ended: bool,
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("command", &self.command)
            .field("pid", &self.pid)
            .field("spawned_ns", &self.timeline.spawned_ns)
            .field("exit", &self.exit)
            .field("noise", &self.noise.len())
            .field("pending", &self.pending)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// The worker's own cgroup, when it runs under
    /// [`Command::limits`](crate::Command::limits); removed after its exit.
    pub fn cgroup(&self) -> Option<&crate::cgroup::Cgroup> {
        self.cgroup.as_ref()
    }

    /// The worker's pid, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The command as a person would type it.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// [`monotonic_ns`](crate::monotonic_ns) taken just before the process was spawned.
    pub fn spawned_at_ns(&self) -> u64 {
        self.timeline.spawned_ns
    }

    /// The wire's words for messages.
    fn wire(&self) -> transport::Wire {
        self.wire
    }

    /// The worker's timeline so far (the whole of it is in [`Finished`]).
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// Sets the hook run when a ready, request or shutdown-ack timeout
    /// fires, before the worker is ended; its text goes into the error's
    /// diagnostics.
    pub fn on_timeout(&mut self, hook: impl FnMut(u32) -> Option<String> + Send + 'static) {
        self.on_timeout = Some(Box::new(hook));
    }

    /// The worker's resident set size read from `/proc/PID/status` (VmRSS)
    /// right after its ready line; `None` where the OS does not expose it.
    pub fn rss_at_ready_bytes(&self) -> Option<u64> {
        self.rss_at_ready
    }

    /// The noise lines seen so far.
    pub fn noise(&self) -> &[NoiseLine] {
        &self.noise
    }

    /// The last bytes of stderr so far (lossy UTF-8).
    pub fn stderr_tail(&self) -> String {
        self.tail.lock().unwrap_or_else(|e| e.into_inner()).text()
    }
}

impl Drop for Worker {
    /// Kills (SIGKILL) and reaps the whole group if it is still running;
    /// never blocks on a pipe held by a process outside the group.
    fn drop(&mut self) {
        if !self.ended {
            self.force_kill();
            self.close_out();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use worker_proto::Request;

    use super::*;
    use crate::error::{ErrorDetail, ErrorKind, Stage};
    use crate::{Command, Error, ExitStatus};

    use crate::serial;

    #[test]
    fn a_worker_can_move_to_another_thread() {
        fn assert_send<T: Send>() {}
        assert_send::<Worker>();
        assert_send::<Error>();
    }

    fn group_exists(pgid: u32) -> bool {
        crate::group::group_exists(pgid as i32)
    }

    /// A shell worker: a helper in its group, then the ready line, then it
    /// waits for the helper.
    fn shell_worker() -> Worker {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", r#"sleep 100 & echo '{"ready": true}'; wait"#]);
        let mut w = Worker::spawn(&cmd).unwrap();
        w.wait_ready(Duration::from_secs(5)).unwrap();
        w
    }

    #[test]
    fn drop_kills_and_reaps_the_whole_group() {
        let _serial = serial();
        let w = shell_worker();
        let pid = w.pid();
        assert!(group_exists(pid));
        drop(w);
        assert!(!group_exists(pid));
    }

    #[test]
    fn kill_all_ends_every_live_group() {
        let _serial = serial();
        let (a, b) = (shell_worker(), shell_worker());
        crate::kill_all();
        assert!(!group_exists(a.pid()) && !group_exists(b.pid()));
        // The handles stay valid: the workers were killed under them.
        for w in [a, b] {
            let fin = w.kill();
            assert_eq!(fin.status, ExitStatus::Signal(libc::SIGKILL));
            assert!(fin.group_gone);
        }
    }

    #[test]
    fn kill_group_ends_one_worker_from_another_thread_and_never_a_reaped_one() {
        let _serial = serial();
        let (mut a, b) = (shell_worker(), shell_worker());
        let pid = a.pid();
        // What a pool's supervisor does while another thread holds `a`.
        assert!(
            std::thread::spawn(move || crate::kill_group(pid))
                .join()
                .unwrap()
        );
        let err = a.recv(Duration::from_secs(10)).unwrap_err();
        assert_eq!(err.status, Some(ExitStatus::Signal(libc::SIGKILL)), "{err}");
        assert!(!group_exists(pid));
        assert!(group_exists(b.pid()), "only that group is killed");
        assert!(!crate::kill_group(pid), "a reaped group is never signalled");
        assert!(!crate::kill_group(0) && !crate::kill_group(1));
        drop(b);
    }

    #[test]
    fn kill_all_from_another_thread_unblocks_a_waiting_harness() {
        let _serial = serial();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 100"]);
        let mut w = Worker::spawn(&cmd).unwrap();
        // What a Ctrl-C handler does, on its own thread.
        let ctrl_c = std::thread::spawn(crate::kill_all);
        let err = w.wait_ready(Duration::from_secs(60)).unwrap_err();
        ctrl_c.join().unwrap();
        assert!(matches!(err.kind, ErrorKind::ExitedEarly), "{err}");
        assert_eq!(err.status, Some(ExitStatus::Signal(libc::SIGKILL)));
        assert!(!group_exists(w.pid()));
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let _serial = serial();
        let err = Worker::spawn(&Command::new("/nonexistent/coldstart-worker")).unwrap_err();
        assert!(
            matches!(&err.kind, ErrorKind::SpawnFailed(e) if e.kind() == io::ErrorKind::NotFound)
        );
        assert_eq!(err.stage, Stage::Spawn);
        assert_eq!(err.pid, 0);
        assert!(err.finished.is_none());
    }

    #[test]
    fn an_uncreatable_stderr_file_is_a_spawn_error_and_starts_nothing() {
        let _serial = serial();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "exit 0"])
            .stderr_file("/nonexistent/dir/stderr.log");
        let err = Worker::spawn(&cmd).unwrap_err();
        assert!(matches!(err.kind, ErrorKind::SpawnFailed(_)));
        assert!(
            err.to_string()
                .contains("cannot create the stderr file /nonexistent/dir/stderr.log"),
            "{err}"
        );
    }

    #[test]
    fn a_worker_that_ended_answers_not_running() {
        let _serial = serial();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo oops >&2; exit 4"]);
        let mut w = Worker::spawn(&cmd).unwrap();
        let err = w.wait_ready(Duration::from_secs(5)).unwrap_err();
        assert!(matches!(err.kind, ErrorKind::ExitedEarly));
        assert_eq!(err.status, Some(ExitStatus::Code(4)));
        let again = w
            .request(&Request::health(), Duration::from_secs(1))
            .unwrap_err();
        assert!(matches!(again.kind, ErrorKind::NotRunning));
        assert_eq!(again.status, Some(ExitStatus::Code(4)));
        assert_eq!(w.kill().status, ExitStatus::Code(4));
    }

    #[test]
    fn error_message_reads_well() {
        let finished = Finished {
            confinement: None,
            pid: 4242,
            status: ExitStatus::Signal(libc::SIGKILL),
            rusage: None,
            timeline: Timeline::default(),
            escalation: Escalation::Kill,
            noise: Vec::new(),
            stderr_tail: String::new(),
            stderr_bytes: 0,
            stderr_file_error: None,
            group_gone: true,
            connected_ns: None,
        };
        let noise = vec![NoiseLine {
            text: "Loading checkpoint shards: 100%".to_owned(),
            read_at_ns: 1,
            stage: Stage::Startup,
        }];
        let err = Error::new(ErrorDetail {
            kind: ErrorKind::Timeout {
                after: Duration::from_secs(2),
            },
            stage: Stage::Startup,
            command: "PYTHONPATH=worker python3 -m refworker --test-echo".to_owned(),
            instruments: Vec::new(),
            expected: r#"a ready line {"ready": true, ...} on stdout"#.to_owned(),
            status: Some(finished.status),
            noise,
            stderr_tail: "starting\nimporting torch\n".to_owned(),
            pid: 4242,
            diagnostics: vec![
                "Thread 4242 (idle): \"MainThread\"\n    main (refworker/__main__.py:12)"
                    .to_owned(),
            ],
            finished: Some(Box::new(finished)),
        });
        insta::assert_snapshot!(err.to_string());
    }

    /// A Python worker that reports the CPUs it may run on in its ready
    /// line, then waits for stdin to close.
    fn affinity_reporter(cpus: &[usize]) -> Command {
        let mut cmd = Command::new(test_interpreters::default_python());
        cmd.args([
            "-c",
            "import json, os, sys\n\
             print(json.dumps({'ready': True, 'cpus': sorted(os.sched_getaffinity(0))}), flush=True)\n\
             sys.stdin.read()",
        ])
        .cpus(cpus.iter().copied());
        cmd
    }

    fn reported_cpus(cmd: &Command) -> Vec<usize> {
        let mut w = Worker::spawn(cmd).unwrap();
        let ready = w.wait_ready(Duration::from_secs(30)).unwrap();
        let cpus = serde_json::from_value(ready.value.extra["cpus"].clone()).unwrap();
        w.kill();
        cpus
    }

    #[test]
    fn a_python_worker_runs_on_exactly_its_cpu_set() {
        let _serial = serial();
        let all = crate::affinity::current_cpus().unwrap();
        let last = *all.last().unwrap();
        assert_eq!(reported_cpus(&affinity_reporter(&[last])), [last]);
        assert_eq!(reported_cpus(&affinity_reporter(&all)), all);
    }

    #[test]
    fn a_pinned_harness_thread_still_starts_its_worker_on_the_workers_cpus() {
        let _serial = serial();
        // On a thread of its own, as the harness's trial loop would be.
        std::thread::spawn(|| {
            let p = crate::affinity::place(1);
            let Some(harness) = p.harness.clone() else {
                // One CPU: nothing to separate; the worker gets it anyway.
                assert_eq!(reported_cpus(&affinity_reporter(&p.available)), p.available);
                return;
            };
            assert_eq!(crate::affinity::current_cpus().unwrap(), harness);
            assert_eq!(reported_cpus(&affinity_reporter(&p.workers)), p.workers);
            // Without a set of its own, a worker inherits the harness's.
            let mut plain = affinity_reporter(&[]);
            plain.cpus = None;
            assert_eq!(reported_cpus(&plain), harness);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_cpu_set_the_machine_refuses_is_a_spawn_error_that_says_so() {
        let _serial = serial();
        let beyond = crate::affinity::MAX_CPUS - 1;
        if crate::affinity::current_cpus().unwrap().contains(&beyond) {
            return; // a machine with every CPU a set can name
        }
        let err = Worker::spawn(&affinity_reporter(&[beyond])).unwrap_err();
        assert!(matches!(err.kind, ErrorKind::SpawnFailed(_)));
        let text = err.to_string();
        assert!(
            text.contains(&format!("could not pin the worker to CPU {beyond}")),
            "{text}"
        );
        let python = test_interpreters::default_python().display();
        assert!(
            text.contains(&format!("taskset -c 1023 {python}")),
            "{text}"
        );
        assert!(
            text.contains("what to do: start the worker on CPUs this process may use"),
            "{text}"
        );
        // Out of any set's range: refused before anything starts.
        let err = Worker::spawn(&affinity_reporter(&[crate::affinity::MAX_CPUS + 5])).unwrap_err();
        assert!(err.to_string().contains("is beyond the"), "{err}");
        assert_eq!(err.pid, 0);
        let err = Worker::spawn(&affinity_reporter(&[])).unwrap_err();
        assert!(err.to_string().contains("no CPU given"), "{err}");
    }
}
