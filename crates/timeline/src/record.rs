//! Per-trial records: the marks taken during one trial, the phase
//! durations derived from them, resource use, and the outcome.
//!
//! One [`TrialRecord`] is one line of `trials.jsonl`. Every mark is
//! CLOCK_MONOTONIC nanoseconds ([`crate::monotonic_ns`]). A trial
//! starts `concurrency` workers at once (usually one); each has its own
//! [`WorkerRecord`], and [`PhaseDurations::derive`] turns them into the
//! trial's phase durations.

use serde::{Deserialize, Serialize};

use crate::Stage;

/// Warm-up trials are run and recorded but left out of the statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialKind {
    /// Run to warm up caches and the interpreter; excluded from the statistics.
    Warmup,
    /// Counted in the statistics.
    Measured,
}

/// Which of two interleaved commands a trial ran (A alone without `--vs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Variant {
    /// The first (or only) command.
    A,
    /// The command given with `--vs`, compared against A.
    B,
}

impl Variant {
    /// `"A"` or `"B"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::A => "A",
            Variant::B => "B",
        }
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a worker process ended: the one exit status of the workspace
/// (`spawn` reports it, the records keep it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExitStatus {
    /// Exited with this code.
    Code(i32),
    /// Ended by this signal.
    Signal(i32),
    /// The status could not be collected: something else in the harness's
    /// process reaped the child (for example `SIGCHLD` set to `SIG_IGN`).
    Unknown,
}

impl ExitStatus {
    /// Whether it exited 0.
    pub fn success(self) -> bool {
        self == ExitStatus::Code(0)
    }

    /// The code hyperfine would report: the exit code, or 128 + signal;
    /// `None` when unknown.
    pub fn shell_code(self) -> Option<i32> {
        match self {
            ExitStatus::Code(c) => Some(c),
            ExitStatus::Signal(s) => Some(128 + s),
            ExitStatus::Unknown => None,
        }
    }
}

/// The conventional name of a Linux signal (`SIGKILL`), or `signal N`.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => return format!("signal {sig}"),
    };
    name.to_owned()
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitStatus::Code(c) => write!(f, "exit code {c}"),
            ExitStatus::Signal(s) => write!(f, "killed by {} ({s})", signal_name(*s)),
            ExitStatus::Unknown => f.write_str("unknown exit status (reaped elsewhere)"),
        }
    }
}

/// How a worker had to be ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Escalation {
    /// It exited on its own.
    #[default]
    None,
    /// SIGTERM to its group ended it.
    Term,
    /// SIGKILL to its group ended it.
    Kill,
}

/// A trial is correct only if the handshake was exactly right and every
/// worker exited 0.
///
/// Serialized with a `status` tag; a failure names the [`Stage`] it
/// happened in. Records written before stages (a `check` field of
/// `spawn`, `ready`, `health`, `shutdown_ack`, `exit`, `exit_status` or
/// `interrupted`) still read, each as the stage that check was made in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", from = "OutcomeRecord")]
pub enum Outcome {
    /// Every check passed and every worker exited 0.
    Correct,
    /// The worker failed.
    Failed {
        /// The stage it failed in (an exit with a code other than 0 is
        /// [`Stage::Exit`]).
        stage: Stage,
        /// What went wrong, for a person.
        message: String,
    },
    /// Cut short by the user (a second Ctrl-C killed the worker): kept and
    /// marked, not the worker's failure.
    Interrupted {
        /// The stage the worker was in.
        stage: Stage,
        /// What was cut short, for a person.
        message: String,
    },
}

impl Outcome {
    /// Whether the trial passed every check.
    pub fn is_correct(&self) -> bool {
        matches!(self, Outcome::Correct)
    }

    /// The worker's own failure, its stage and message: `None` for a
    /// correct trial and for one cut short by the user (Ctrl-C).
    pub fn failure(&self) -> Option<(&Stage, &str)> {
        match self {
            Outcome::Failed { stage, message } => Some((stage, message)),
            _ => None,
        }
    }
}

/// What [`Outcome`] reads: today's records and those written before
/// stages, whose failures named a `check`.
#[derive(Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
enum OutcomeRecord {
    Correct,
    Failed {
        #[serde(default)]
        stage: Option<Stage>,
        #[serde(default)]
        check: Option<String>,
        message: String,
    },
    Interrupted {
        stage: Stage,
        message: String,
    },
}

impl From<OutcomeRecord> for Outcome {
    fn from(r: OutcomeRecord) -> Outcome {
        match r {
            OutcomeRecord::Correct => Outcome::Correct,
            OutcomeRecord::Interrupted { stage, message } => {
                Outcome::Interrupted { stage, message }
            }
            OutcomeRecord::Failed {
                stage,
                check,
                message,
            } => match (stage, check.as_deref()) {
                (Some(stage), _) => Outcome::Failed { stage, message },
                (None, Some("interrupted")) => Outcome::Interrupted {
                    stage: Stage::Startup,
                    message,
                },
                (None, check) => Outcome::Failed {
                    stage: Stage::from_check(check.unwrap_or_default()),
                    message,
                },
            },
        }
    }
}

impl Stage {
    /// The stage of a failure recorded before stages, by the handshake
    /// check it named: `spawn`, `ready` (start-up), `health` (a health
    /// request, its number not recorded: index 0), `shutdown_ack`
    /// (shutdown), `exit` and `exit_status` (exit). An unknown name is
    /// start-up, the first stage a failed trial can be in.
    fn from_check(check: &str) -> Stage {
        match check {
            "spawn" => Stage::Spawn,
            "health" => Stage::Request {
                op: "health".to_owned(),
                index: 0,
            },
            "shutdown_ack" => Stage::Shutdown,
            "exit" | "exit_status" => Stage::Exit,
            _ => Stage::Startup,
        }
    }
}

/// One request sent and its reply read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundTrip {
    /// CLOCK_MONOTONIC ns just before the request was written.
    pub sent_ns: u64,
    /// CLOCK_MONOTONIC ns when the reply was read.
    pub received_ns: u64,
}

/// The marks of one worker's life, all CLOCK_MONOTONIC ns. A mark is
/// absent when the trial failed before reaching it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marks {
    /// Taken just before the process was started.
    pub spawned_ns: u64,
    /// When the harness read the ready line.
    pub ready_read_ns: Option<u64>,
    /// The worker's own `t_ns` stamp in its ready line, if it sent one.
    pub ready_t_ns: Option<u64>,
    /// Each health round trip, in order.
    pub health: Vec<RoundTrip>,
    /// When the harness wrote the shutdown op.
    pub shutdown_sent_ns: Option<u64>,
    /// When the harness read the shutdown acknowledgement.
    pub ack_read_ns: Option<u64>,
    /// When the target's stop signal was sent (a daemon that outlives its
    /// ack): the exit is timed from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sent_ns: Option<u64>,
    /// When the harness reaped the process.
    pub exited_ns: Option<u64>,
    /// For a worker that served over tcp (its ready line on stderr): right
    /// after the connection to the address the line names was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connected_ns: Option<u64>,
}

/// CPU time and peak memory of one worker, from `wait4` on that child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// User CPU time, in ns (`ru_utime`).
    pub user_ns: u64,
    /// System CPU time, in ns (`ru_stime`).
    pub sys_ns: u64,
    /// Peak resident set, in bytes (`ru_maxrss`, converted from KiB).
    pub max_rss_bytes: u64,
}

/// One worker of a trial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerRecord {
    /// The child's pid, when it was started.
    pub pid: Option<u32>,
    /// The marks taken during this worker's life.
    pub marks: Marks,
    /// From `wait4`; absent when the process could not be reaped normally.
    pub usage: Option<Usage>,
    /// VmRSS read right after the ready line, where the OS exposes it.
    pub rss_at_ready_bytes: Option<u64>,
    /// Under a memory limit: the most memory the worker's cgroup was
    /// charged at once, what the limit is held against (pages of shared
    /// libraries already cached elsewhere count in the RSS, not here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_peak_bytes: Option<u64>,
    /// How the process ended; absent when it was never started or not reaped.
    pub exit: Option<ExitStatus>,
    /// How the process had to be ended: `none`, `term`, `kill`.
    pub escalation: Escalation,
    /// stdout lines that were not protocol messages.
    pub noise_lines: usize,
    /// Whether this worker passed every check, or the first it failed.
    pub outcome: Outcome,
}

/// The phase durations of one trial, in ns.
///
/// With one worker these are that worker's phases. With `K` concurrent
/// workers they are the pool's: `ready` from the first spawn to the last
/// ready line (time until all are ready), `total` from the first spawn to
/// the last exit, `shutdown_ack`, `exit` and `pipe_latency` the slowest
/// worker's, and `health` every round trip of every worker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseDurations {
    /// spawn -> ready line read.
    pub ready_ns: Option<u64>,
    /// Each health round trip: request sent -> reply read.
    pub health_ns: Vec<u64>,
    /// shutdown sent -> acknowledgement read.
    pub shutdown_ack_ns: Option<u64>,
    /// acknowledgement read -> process reaped.
    pub exit_ns: Option<u64>,
    /// spawn -> process reaped.
    pub total_ns: Option<u64>,
    /// The worker's ready `t_ns` -> the harness's read of that line.
    /// Signed: a negative value means the worker did not stamp with the
    /// harness's clock. Absent for workers that serve over tcp: their
    /// ready line comes on stderr, and the figure of their wire is
    /// `connect_first_reply_ns`.
    pub pipe_latency_ns: Option<i64>,
    /// For workers that serve over tcp: the harness's read of the ready
    /// line (on stderr) -> the read of the first health reply on the
    /// connection (connecting, writing the request, the worker's answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_first_reply_ns: Option<u64>,
}

fn span(from: u64, to: Option<u64>) -> Option<u64> {
    to.map(|t| t.saturating_sub(from))
}

impl PhaseDurations {
    /// Derives the phases from the workers' marks (see the type's doc).
    /// A pool phase is present only when every worker reached it.
    pub fn derive(workers: &[WorkerRecord]) -> PhaseDurations {
        if workers.is_empty() {
            return PhaseDurations::default();
        }
        let first_spawn = workers.iter().map(|w| w.marks.spawned_ns).min();
        let all = |f: &dyn Fn(&Marks) -> Option<u64>| -> Option<Vec<u64>> {
            workers.iter().map(|w| f(&w.marks)).collect()
        };
        let last = |f: &dyn Fn(&Marks) -> Option<u64>| all(f).and_then(|v| v.into_iter().max());
        let first_spawn = first_spawn.expect("non-empty");
        PhaseDurations {
            ready_ns: span(first_spawn, last(&|m| m.ready_read_ns)),
            health_ns: workers
                .iter()
                .flat_map(|w| &w.marks.health)
                .map(|rt| rt.received_ns.saturating_sub(rt.sent_ns))
                .collect(),
            shutdown_ack_ns: last(&|m| span(m.shutdown_sent_ns?, m.ack_read_ns)),
            exit_ns: last(&|m| span(m.stop_sent_ns.or(m.ack_read_ns)?, m.exited_ns)),
            total_ns: span(first_spawn, last(&|m| m.exited_ns)),
            pipe_latency_ns: workers
                .iter()
                .map(|w| {
                    if w.marks.connected_ns.is_some() {
                        return None;
                    }
                    Some(w.marks.ready_read_ns? as i64 - w.marks.ready_t_ns? as i64)
                })
                .collect::<Option<Vec<i64>>>()
                .and_then(|v| v.into_iter().max()),
            connect_first_reply_ns: workers
                .iter()
                .map(|w| {
                    w.marks.connected_ns?;
                    let first = w.marks.health.first()?;
                    Some(first.received_ns.saturating_sub(w.marks.ready_read_ns?))
                })
                .collect::<Option<Vec<u64>>>()
                .and_then(|v| v.into_iter().max()),
        }
    }
}

/// One line of `trials.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrialRecord {
    /// 0-based position in the run, counting warm-ups and both variants.
    pub trial: usize,
    /// With `--vs`, A and B of the same round ran back to back and are
    /// compared as a pair. Warm-ups and measured trials count rounds apart.
    pub round: usize,
    /// Warm-up or measured.
    pub kind: TrialKind,
    /// Which command (A or B) this trial ran.
    pub variant: Variant,
    /// Wall clock at the trial's start, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// CLOCK_MONOTONIC at the trial's start.
    pub started_ns: u64,
    /// The trial's phase durations, derived from its workers' marks.
    pub phases: PhaseDurations,
    /// The trial's outcome: the first failure among its workers, if any.
    pub outcome: Outcome,
    /// One record per worker started in the trial (`concurrency` of them).
    pub workers: Vec<WorkerRecord>,
}

impl TrialRecord {
    /// Builds a record, deriving the phases and the outcome from the workers.
    pub fn new(
        trial: usize,
        round: usize,
        kind: TrialKind,
        variant: Variant,
        started_unix_ms: u64,
        started_ns: u64,
        workers: Vec<WorkerRecord>,
    ) -> TrialRecord {
        let outcome = workers
            .iter()
            .map(|w| &w.outcome)
            .find(|o| !o.is_correct())
            .cloned()
            .unwrap_or(Outcome::Correct);
        TrialRecord {
            trial,
            round,
            kind,
            variant,
            started_unix_ms,
            started_ns,
            phases: PhaseDurations::derive(&workers),
            outcome,
            workers,
        }
    }

    /// Peak RSS over the trial's workers, from `wait4`.
    pub fn max_rss_bytes(&self) -> Option<u64> {
        self.workers
            .iter()
            .map(|w| w.usage.map(|u| u.max_rss_bytes))
            .collect::<Option<Vec<_>>>()
            .and_then(|v| v.into_iter().max())
    }

    /// Summed user and system CPU of the trial's workers, in ns.
    pub fn cpu_ns(&self) -> Option<(u64, u64)> {
        self.workers.iter().try_fold((0, 0), |(u, s), w| {
            w.usage.map(|x| (u + x.user_ns, s + x.sys_ns))
        })
    }

    /// The exit code hyperfine would report: the first non-zero one, else 0.
    pub fn shell_exit_code(&self) -> Option<i32> {
        let codes: Option<Vec<i32>> = self
            .workers
            .iter()
            .map(|w| w.exit.and_then(ExitStatus::shell_code))
            .collect();
        codes.map(|c| c.into_iter().find(|&c| c != 0).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_the_workers_own_never_a_ctrl_c() {
        let failed = Outcome::Failed {
            stage: Stage::Startup,
            message: "no ready line".into(),
        };
        assert_eq!(Outcome::Correct.failure(), None);
        assert_eq!(failed.failure(), Some((&Stage::Startup, "no ready line")));
        let cut = Outcome::Interrupted {
            stage: Stage::Startup,
            message: "interrupted".into(),
        };
        assert_eq!(cut.failure(), None);
    }

    #[test]
    fn a_record_written_before_stages_reads_with_its_stage() {
        let read = |json: &str| serde_json::from_str::<Outcome>(json).unwrap();
        assert_eq!(
            read(r#"{"status": "failed", "check": "ready", "message": "m"}"#),
            Outcome::Failed {
                stage: Stage::Startup,
                message: "m".into()
            }
        );
        assert_eq!(
            read(r#"{"status": "failed", "check": "exit_status", "message": "m"}"#).failure(),
            Some((&Stage::Exit, "m"))
        );
        assert_eq!(
            read(r#"{"status": "failed", "check": "interrupted", "message": "m"}"#).failure(),
            None
        );
        let now = Outcome::Failed {
            stage: Stage::Request {
                op: "health".into(),
                index: 2,
            },
            message: "m".into(),
        };
        assert_eq!(read(&serde_json::to_string(&now).unwrap()), now);
    }

    /// [`crate::testing::worker`] that exits at `exited`, with `wait4`'s
    /// usage.
    fn worker(spawned: u64, ready: u64, exited: u64) -> WorkerRecord {
        let gaps = [50, 10, 20, 10, 5, exited - (ready + 45)];
        WorkerRecord {
            usage: Some(Usage {
                user_ns: 5,
                sys_ns: 2,
                max_rss_bytes: 1000,
            }),
            rss_at_ready_bytes: Some(900),
            ..crate::testing::worker(1, spawned, ready, gaps)
        }
    }

    #[test]
    fn one_worker_phases() {
        let p = PhaseDurations::derive(&[worker(1000, 2000, 2100)]);
        assert_eq!(p.ready_ns, Some(1000));
        assert_eq!(p.health_ns, [20]);
        assert_eq!(p.shutdown_ack_ns, Some(5));
        assert_eq!(p.exit_ns, Some(55));
        assert_eq!(p.total_ns, Some(1100));
        assert_eq!(p.pipe_latency_ns, Some(50));
        assert_eq!(p.connect_first_reply_ns, None);
    }

    #[test]
    fn a_tcp_worker_has_a_connect_and_first_reply_latency_and_no_pipe_latency() {
        let mut w = worker(1000, 2000, 2100);
        w.marks.connected_ns = Some(2005);
        let p = PhaseDurations::derive(&[w.clone()]);
        assert_eq!(p.connect_first_reply_ns, Some(30));
        assert_eq!(p.pipe_latency_ns, None);
        // The record's JSON gains the mark only for tcp workers.
        let json = serde_json::to_string(&w.marks).unwrap();
        assert!(json.contains("connected_ns"), "{json}");
        let plain = serde_json::to_string(&worker(1000, 2000, 2100).marks).unwrap();
        assert!(!plain.contains("connected_ns"), "{plain}");
        let back: Marks = serde_json::from_str(&plain).unwrap();
        assert_eq!(back.connected_ns, None);
    }

    #[test]
    fn pool_phases_wait_for_the_last_worker() {
        let p = PhaseDurations::derive(&[worker(1000, 2000, 2100), worker(1010, 3000, 3500)]);
        assert_eq!(p.ready_ns, Some(2000));
        assert_eq!(p.health_ns, [20, 20]);
        assert_eq!(p.exit_ns, Some(455));
        assert_eq!(p.total_ns, Some(2500));
    }

    #[test]
    fn missing_marks_leave_phases_absent() {
        let mut w = worker(1000, 2000, 2100);
        w.marks.ack_read_ns = None;
        w.marks.ready_t_ns = None;
        let p = PhaseDurations::derive(&[w]);
        assert_eq!(p.shutdown_ack_ns, None);
        assert_eq!(p.exit_ns, None);
        assert_eq!(p.pipe_latency_ns, None);
        assert_eq!(p.total_ns, Some(1100));
    }

    #[test]
    fn record_takes_the_first_failure_and_round_trips_json() {
        let mut bad = worker(1000, 2000, 2100);
        bad.outcome = Outcome::Failed {
            stage: Stage::Exit,
            message: "exited with code 3".into(),
        };
        bad.exit = Some(ExitStatus::Code(3));
        let r = TrialRecord::new(
            4,
            2,
            TrialKind::Measured,
            Variant::B,
            1,
            999,
            vec![worker(1000, 2000, 2100), bad],
        );
        assert!(!r.outcome.is_correct());
        assert_eq!(r.shell_exit_code(), Some(3));
        assert_eq!(r.cpu_ns(), Some((10, 4)));
        assert_eq!(r.max_rss_bytes(), Some(1000));
        let line = serde_json::to_string(&r).unwrap();
        assert!(
            line.contains(r#""outcome":{"status":"failed","stage":"exit""#),
            "{line}"
        );
        assert!(
            line.contains(r#""kind":"measured","variant":"B""#),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<TrialRecord>(&line).unwrap(), r);
    }
}
