//! The memory view of `bench --memory`: a separate, untimed worker, driven
//! by the one lifecycle ([`Lifecycle::drive`]) with its readings as hooks, with
//! tracemalloc on from interpreter start, read at ready, after the serve
//! phase (when one is planned) and at exit, beside RSS and the `wait4`
//! peak. The bootstrap (`memory_bootstrap.py`, a body on importguard's
//! shared prelude, injected as `sitecustomize` the recorder's way)
//! takes its readings in the worker when signalled (SIGUSR1 with the
//! allocation sites, SIGUSR2 without) and writes them as JSON lines.

use std::path::Path;
use std::time::Duration;

use importguard::recorder::bootstrap::{Bootstrap, check_format};
use phases::memory::{AllocationSite, MemoryPoint, MemoryView};
use rustix::process::{Pid, Signal, kill_process};
use serde_json::Value;
use timeline::Stage;
use timeline::Variant;

use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lifecycle::{Cause, Halt, Hooks, Lifecycle, Started};
use crate::serve::{Plan, clip, serve, short_error};
use crate::side::Side;

/// The body of the memory view's bootstrap, run after the recorder's shared
/// prelude.
const MEMORY_BOOTSTRAP: &str = include_str!("memory_bootstrap.py");
/// The file the bootstrap writes, named by this variable.
const MEMORY_ENV: &str = "COLDSTART_MEMORY";
/// How many allocation sites the bootstrap lists.
const TOP_SITES: usize = 15;

/// The memory view of one fresh worker, untimed: tracemalloc from
/// interpreter start; readings at ready, after the serve phase (when one
/// is planned) and at exit; peak RSS from `wait4`.
pub fn run_memory(side: &Side, plan: Option<&Plan>, stop: &Interrupt) -> Result<MemoryView> {
    let variant = side.variant;
    // The recorder's own way to inject a bootstrap: a private folder, the
    // shared prelude (chaining to the environment's sitecustomize, writing
    // versioned records), and this body.
    let dir = crate::scratch::private_dir(crate::scratch::MEMORY, "the memory view's readings")?;
    let boot = Bootstrap::prepare_in(dir, MEMORY_BOOTSTRAP).map_err(|cause| Error::Recorder {
        context: "could not write the memory bootstrap",
        cause,
    })?;
    let record = boot.dir().join("memory.jsonl");
    let mut cmd = side.cmd.clone();
    let inherited = cmd
        .get_envs()
        .filter(|(k, _)| *k == "PYTHONPATH")
        .last()
        .map(|(_, v)| v.map(|v| v.to_os_string()))
        .unwrap_or_else(|| std::env::var_os("PYTHONPATH"));
    cmd.instrument(
        "coldstart's memory view (tracemalloc)",
        [
            ("PYTHONPATH", boot.pythonpath(inherited.as_deref())),
            (MEMORY_ENV, record.clone().into_os_string()),
            ("COLDSTART_MEMORY_TOP", TOP_SITES.to_string().into()),
            ("PYTHONTRACEMALLOC", "1".into()),
        ],
    );

    // No health round trips: the view reads memory, the timed trials
    // already checked the handshake.
    let lifecycle = Lifecycle {
        health: 0,
        ..side.lifecycle.clone()
    };
    let mut hooks = Readings::new(&record, side.target.request_timeout, variant, plan, stop);
    let lived = lifecycle.drive(&cmd, &mut hooks);
    let rusage = match lived.end {
        Ok(f) => f.rusage,
        Err(failure) => match (&failure.stage, &failure.cause) {
            (_, Cause::Refused { message, .. }) => {
                return Err(Error::Invalid(message.clone()));
            }
            (Stage::Spawn | Stage::Startup, _) => {
                return Err(Error::lifecycle(
                    "the worker of the memory view did not become ready",
                    failure,
                ));
            }
            (_, cause) => {
                let rusage = failure.finished().and_then(|f| f.rusage);
                let what = if hooks.serve_ended {
                    "the worker ended during the serve phase"
                } else {
                    "the worker did not shut down cleanly"
                };
                let short = match cause {
                    Cause::Worker(e) => short_error(e),
                    Cause::Refused { message, .. } => message.clone(),
                };
                hooks.problems.push(format!("{what}: {short}"));
                rusage
            }
        },
    };
    let Readings {
        tracing_from_start,
        mut points,
        top_at_ready,
        mut problems,
        ..
    } = hooks;
    match read_records(&record)
        .into_iter()
        .find(|r| r.get("type").and_then(Value::as_str) == Some("exit"))
    {
        Some(rec) => points.push(point(Stage::Exit, &rec)),
        None => problems
            .push("no reading at exit (the worker did not run its atexit handlers)".to_owned()),
    }
    for r in read_records(&record) {
        if r.get("type").and_then(Value::as_str) == Some("error") {
            problems.push(format!("memory bootstrap: {r}"));
        }
    }
    Ok(MemoryView {
        variant,
        tracing_from_start,
        reading: phases::memory::reading(&points),
        points,
        peak_rss_bytes: rusage.map(|r| r.max_rss_bytes),
        top_at_ready,
        problems,
    })
}

/// The memory view's hooks: the bootstrap checked and the first reading
/// taken at ready; the serve phase (when planned) and its reading before
/// the shutdown.
struct Readings<'a> {
    record: &'a Path,
    request_timeout: Duration,
    variant: Variant,
    plan: Option<&'a Plan>,
    stop: &'a Interrupt,
    seq: u64,
    tracing_from_start: bool,
    points: Vec<MemoryPoint>,
    top_at_ready: Vec<AllocationSite>,
    problems: Vec<String>,
    /// The worker ended during the serve phase.
    serve_ended: bool,
}

impl<'a> Readings<'a> {
    /// No reading taken yet, for the worker whose bootstrap writes `record`.
    fn new(
        record: &'a Path,
        request_timeout: Duration,
        variant: Variant,
        plan: Option<&'a Plan>,
        stop: &'a Interrupt,
    ) -> Self {
        Readings {
            record,
            request_timeout,
            variant,
            plan,
            stop,
            seq: 0,
            tracing_from_start: false,
            points: Vec::new(),
            top_at_ready: Vec::new(),
            problems: Vec::new(),
            serve_ended: false,
        }
    }

    /// Asks the worker for reading `seq + 1` and waits for it; `Err` when
    /// the signal cannot be sent.
    ///
    /// The number goes into `FILE.want` first, then the signal, resent
    /// until the reading appears: CPython runs a signal's Python handler
    /// between bytecodes, and a signal that lands just before the worker
    /// blocks in `read` (an idle worker waiting for its next request) is
    /// noted but not handled until that read returns, which for an idle
    /// worker is never. A resend interrupts the read; the bootstrap answers
    /// each number once, so a resend never takes a second reading (nor
    /// resets the peak twice).
    fn snapshot(&mut self, pid: u32, at: Stage) -> std::result::Result<Option<Value>, Halt> {
        self.seq += 1;
        let sig = if at == Stage::Ready {
            Signal::USR1 // with the allocation sites
        } else {
            Signal::USR2
        };
        let want = want_path(self.record);
        let tmp = want.with_extension("want.tmp");
        std::fs::write(&tmp, self.seq.to_string())
            .and_then(|()| std::fs::rename(&tmp, &want))
            .map_err(|e| {
                Halt::Refused(format!(
                    "could not ask the worker for its {} memory reading: {}: {e}",
                    at.brief(),
                    want.display()
                ))
            })?;
        let deadline = std::time::Instant::now() + self.request_timeout;
        let mut resend = Duration::from_millis(50);
        loop {
            // The worker is alive and not reaped (it answered its ready
            // line and is still held by its handle), so its pid is its own.
            let sent = Pid::from_raw(pid as i32).map(|p| kill_process(p, sig));
            if !matches!(sent, Some(Ok(()))) {
                return Err(Halt::Refused(format!(
                    "could not signal the worker for its {} memory reading: {}",
                    at.brief(),
                    sent.and_then(std::result::Result::err)
                        .map_or_else(|| "no such pid".to_owned(), |e| e.to_string())
                )));
            }
            let until = deadline.min(std::time::Instant::now() + resend);
            if let Some(found) = wait_snapshot(self.record, self.seq, until) {
                return Ok(Some(found));
            }
            if std::time::Instant::now() >= deadline {
                return Ok(None);
            }
            resend = (resend * 2).min(Duration::from_secs(1));
        }
    }
}

impl Hooks for Readings<'_> {
    fn ready(&mut self, w: &mut Started<'_>) -> std::result::Result<(), Halt> {
        let start = read_records(self.record)
            .into_iter()
            .find(|r| r.get("type").and_then(Value::as_str) == Some("start"));
        let Some(start) = start else {
            return Err(Halt::Refused(format!(
                "the memory bootstrap did not run in the worker (started with -S, -I or -E, or PYTHONPATH replaced?), so there is no memory view; worker stderr: {}",
                clip(w.worker.stderr_tail().trim())
            )));
        };
        let version = start.get("version").and_then(Value::as_u64).unwrap_or(0) as u32;
        if let Err(e) = check_format(version) {
            return Err(Halt::Refused(format!(
                "the memory bootstrap's records are not the harness's format: {e}"
            )));
        }
        // Signals go to the process that spawn started, never to a pid read
        // from a file: the bootstrap must be running in that very process.
        let pid = w.worker.pid();
        if start.get("pid").and_then(Value::as_u64) != Some(u64::from(pid)) {
            return Err(Halt::Refused(format!(
                "the memory bootstrap runs in pid {}, not in the worker that was started (pid {pid}): the command starts Python in a child process (a launcher or wrapper), so it cannot be signalled for readings; run the interpreter directly; worker stderr: {}",
                start
                    .get("pid")
                    .map_or_else(|| "unknown".to_owned(), ToString::to_string),
                clip(w.worker.stderr_tail().trim())
            )));
        }
        self.tracing_from_start = start
            .get("tracing_from_start")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if !self.tracing_from_start {
            self.problems.push("PYTHONTRACEMALLOC was not honoured: tracing began in sitecustomize, after site's own imports".to_owned());
        }
        match self.snapshot(pid, Stage::Ready)? {
            Some(rec) => {
                self.points.push(point(Stage::Ready, &rec));
                self.top_at_ready = sites(&rec);
            }
            None => self
                .problems
                .push("no reading at ready: the worker did not answer SIGUSR1 in time".to_owned()),
        }
        Ok(())
    }

    fn before_shutdown(&mut self, w: &mut Started<'_>) -> std::result::Result<(), Halt> {
        let Some(plan) = self.plan else {
            return Ok(());
        };
        let stop = self.stop;
        let served = serve(&mut w.worker, self.variant, plan, &|| stop.is_set());
        if let Some(e) = served.error {
            self.serve_ended = true;
            return Err(Halt::Ended(e));
        }
        match self.snapshot(w.worker.pid(), Stage::AfterServe)? {
            Some(rec) => self.points.push(point(Stage::AfterServe, &rec)),
            None => self
                .problems
                .push("no reading after the serve phase".to_owned()),
        }
        Ok(())
    }
}

/// The file that names the reading the harness wants next
/// ([`Readings::snapshot`]): the record file's path with `.want` added.
fn want_path(record: &Path) -> std::path::PathBuf {
    let mut p = record.as_os_str().to_os_string();
    p.push(".want");
    p.into()
}

/// Waits for snapshot `seq` to appear in the record file, until `until`.
/// The bootstrap writes it from its signal handler with one `write`; the
/// harness polls the file (a memory view is not timed).
fn wait_snapshot(path: &Path, seq: u64, until: std::time::Instant) -> Option<Value> {
    loop {
        let found = read_records(path).into_iter().find(|r| {
            r.get("type").and_then(Value::as_str) == Some("snapshot")
                && r.get("seq").and_then(Value::as_u64) == Some(seq)
        });
        if found.is_some() || std::time::Instant::now() >= until {
            return found;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The complete lines of the bootstrap's file, parsed; others skipped.
fn read_records(path: &Path) -> Vec<Value> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn point(at: Stage, rec: &Value) -> MemoryPoint {
    let n = |k: &str| rec.get(k).and_then(Value::as_u64);
    MemoryPoint {
        at,
        t_ns: n("t_ns").unwrap_or(0),
        traced_current_bytes: n("traced_current").unwrap_or(0),
        traced_peak_bytes: n("traced_peak").unwrap_or(0),
        tracemalloc_overhead_bytes: n("tracemalloc_overhead").unwrap_or(0),
        rss_bytes: n("rss"),
        hwm_bytes: n("hwm"),
        traced_after_reading_bytes: n("traced_after"),
        rss_after_reading_bytes: n("rss_after"),
    }
}

fn sites(rec: &Value) -> Vec<AllocationSite> {
    rec.get("top")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|s| AllocationSite {
                    file: s
                        .get("file")
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_owned(),
                    line: s.get("line").and_then(Value::as_u64).unwrap_or(0) as u32,
                    size_bytes: s.get("size").and_then(Value::as_u64).unwrap_or(0),
                    count: s.get("count").and_then(Value::as_u64).unwrap_or(0),
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker idle in `read` (as one waiting for its next request is),
    /// asked for two readings with extra signals around each: each number
    /// is answered exactly once, in order, and the duplicates take no
    /// reading of their own.
    #[test]
    fn each_reading_is_taken_once_however_often_it_is_signalled() {
        let boot = Bootstrap::prepare("coldstart-memory-test-", MEMORY_BOOTSTRAP).unwrap();
        let record = boot.dir().join("memory.jsonl");
        let mut child = std::process::Command::new(test_interpreters::default_python())
            .args(["-c", "import sys; sys.stdin.read()"])
            .env("PYTHONPATH", boot.pythonpath(None))
            .env(MEMORY_ENV, &record)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now() + Duration::from_secs(30);
        while !read_records(&record)
            .iter()
            .any(|r| r.get("type").and_then(Value::as_str) == Some("start"))
        {
            assert!(
                std::time::Instant::now() < started,
                "the bootstrap never started"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        let stop = Interrupt::new();
        let mut readings = Readings::new(&record, Duration::from_secs(30), Variant::A, None, &stop);
        let pid = child.id();
        let extra = || {
            kill_process(Pid::from_raw(pid as i32).unwrap(), Signal::USR2).unwrap();
        };
        for at in [Stage::AfterServe, Stage::AfterServe] {
            extra();
            let got = readings.snapshot(pid, at).unwrap();
            assert!(got.is_some(), "reading {} never came", readings.seq);
            extra();
        }
        drop(child.stdin.take());
        assert!(child.wait().unwrap().success());
        let seqs: Vec<u64> = read_records(&record)
            .iter()
            .filter(|r| r.get("type").and_then(Value::as_str) == Some("snapshot"))
            .map(|r| r["seq"].as_u64().unwrap())
            .collect();
        // The first extra signal comes before any number is asked for:
        // the bootstrap answers it as the next reading (1), so the harness's
        // first asked-for reading is that very one.
        assert_eq!(seqs, [1, 2], "{seqs:?}");
    }
}
