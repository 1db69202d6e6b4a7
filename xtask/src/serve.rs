//! The serve phase and the memory view of `cargo xtask bench`: after
//! ready, requests at a closed or an open loop, each reply checked; and a
//! separate, untimed run with tracemalloc that reads Python-traced memory
//! beside RSS.
//!
//! The open loop runs on one thread over the [`spawn::Worker`] API
//! (`send`, then `recv` of the oldest reply, in order: the protocol is
//! FIFO). A worker handle is not shared between threads and a `recv`
//! timeout ends the worker, so the loop never waits on a reply with a short
//! timeout: it writes every request that is due, then waits for the oldest
//! reply; requests that fall due meanwhile are written as soon as that
//! reply is read. Their latency still runs from their scheduled time (the
//! queue wait is counted, no coordinated omission), and each record keeps
//! the harness's own send lag (`sent - scheduled`) so the reader can see
//! how late the harness was.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use phases::Bootstrap;
use phases::Variant;
use phases::memory::{AllocationSite, MemoryPoint, MemoryView, Moment};
use phases::serve::{Load, RequestOutcome, RequestRecord, ServeStats};
use serde_json::{Map, Value};
use spawn::worker_proto::{Reply, Request};

use crate::config::Target;

/// The bootstrap of the memory view, written as `sitecustomize.py`.
const MEMORY_BOOTSTRAP: &str = include_str!("memory_bootstrap.py");
/// The file the bootstrap writes, named by this variable.
const MEMORY_ENV: &str = "COLDSTART_MEMORY";
/// How many allocation sites the bootstrap lists.
const TOP_SITES: usize = 15;

/// The serve phase's and the memory view's flags on `cargo xtask bench`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// Serve phase: send N requests after ready. Alone: a closed loop, one
    /// in flight. With --rate: N requests at that rate (instead of
    /// --duration).
    #[arg(long, value_name = "N")]
    pub requests: Option<usize>,
    /// Serve phase: an open loop offering R requests per second, whatever
    /// the replies do (latency counts from each scheduled send).
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
    /// Serve phase: how long the open loop offers requests, seconds
    /// (default 10).
    #[arg(
        long,
        value_name = "SECONDS",
        requires = "rate",
        conflicts_with = "requests"
    )]
    pub duration: Option<f64>,
    /// The request to serve, a JSON object with an `op` (default: the
    /// target's `request` in coldstart.toml; for the reference worker an
    /// `infer` of a short text; else `{"op": "health"}`). Each request gets
    /// an `id`.
    #[arg(long, value_name = "JSON")]
    pub request: Option<String>,
    /// Memory view: one more worker, untimed, with tracemalloc from
    /// interpreter start: traced memory beside RSS at ready, after the
    /// serve phase and at exit, and the top allocation sites at ready.
    #[arg(long)]
    pub memory: bool,
}

impl ServeArgs {
    /// The load asked for; `None` without --requests or --rate.
    pub fn load(&self) -> Result<Option<Load>> {
        match (self.rate, self.requests) {
            (None, None) => Ok(None),
            (None, Some(0)) | (Some(_), Some(0)) => bail!("--requests must be at least 1"),
            (None, Some(n)) => Ok(Some(Load::Closed { requests: n })),
            (Some(r), n) => {
                if !(r.is_finite() && r > 0.0) {
                    bail!("--rate must be a positive number of requests per second, got {r}");
                }
                let duration = match (n, self.duration) {
                    (Some(n), _) => n as f64 / r,
                    (None, Some(d)) if d.is_finite() && d > 0.0 => d,
                    (None, Some(d)) => {
                        bail!("--duration must be a positive number of seconds, got {d}")
                    }
                    (None, None) => 10.0,
                };
                let mut load = Load::open(r, duration);
                if let (Some(n), Load::Open { requests, .. }) = (n, &mut load) {
                    *requests = n;
                }
                Ok(Some(load))
            }
        }
    }

    /// Whether anything beyond the start-up trials was asked for.
    pub fn wanted(&self) -> bool {
        self.memory || self.requests.is_some() || self.rate.is_some()
    }
}

/// What to send, and how to judge the replies.
#[derive(Debug, Clone)]
pub struct Plan {
    pub load: Load,
    /// The request's fields besides `op` (no `id`).
    pub op: String,
    pub fields: Map<String, Value>,
    pub timeout: Duration,
    /// The reply must carry `response.echo` equal to the fields (the
    /// reference worker's `infer`); a reply that carries one is always
    /// checked.
    pub expect_echo: bool,
}

impl Plan {
    /// The request from --request, else the target's, else a default.
    pub fn new(load: Load, request: Option<&str>, target: &Target) -> Result<Plan> {
        let reference = target.origin == "built-in default";
        let mut object = match (request, &target.request) {
            (Some(text), _) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(m)) => m,
                Ok(_) => bail!("--request must be a JSON object with an `op`, got `{text}`"),
                Err(e) => bail!(
                    "--request is not JSON ({e}): give an object such as '{{\"op\": \"infer\", \"text\": \"hello\"}}'"
                ),
            },
            (None, Some(m)) => m.clone(),
            (None, None) if reference => {
                let mut m = Map::new();
                m.insert("op".into(), "infer".into());
                m.insert(
                    "text".into(),
                    "The quick brown fox jumps over the lazy dog.".into(),
                );
                m
            }
            (None, None) => {
                let mut m = Map::new();
                m.insert("op".into(), "health".into());
                m
            }
        };
        let op = match object.remove("op") {
            Some(Value::String(op)) if !op.is_empty() => op,
            _ => bail!(
                "the serve request needs a string `op` (from --request or the target's `request` in {})",
                crate::config::CONFIG_FILE
            ),
        };
        if op == "shutdown" {
            bail!(
                "the serve request cannot be `shutdown`: it would end the worker; pick the op to measure"
            );
        }
        object.remove("id");
        Ok(Plan {
            load,
            expect_echo: reference && op == "infer",
            op,
            fields: object,
            timeout: target.request_timeout,
        })
    }

    /// The request as configured, `{"op": ..., ...}`, for the summary.
    pub fn describe(&self) -> Value {
        let mut m = Map::new();
        m.insert("op".into(), Value::String(self.op.clone()));
        m.extend(self.fields.clone());
        Value::Object(m)
    }

    fn request(&self, index: usize) -> Request {
        let mut extra = self.fields.clone();
        extra.insert("id".into(), Value::from(index));
        Request::new(self.op.clone(), extra)
    }

    /// Judges a reply to request `index`.
    pub fn check(&self, index: usize, reply: &Reply) -> RequestOutcome {
        let obj = reply.to_object();
        if let Some(id) = obj.get("id")
            && id.as_u64() != Some(index as u64)
        {
            return RequestOutcome::WrongReply {
                problem: format!(
                    "the reply carries id {id} where {index} was due: a reply out of order or for another request"
                ),
            };
        }
        match reply {
            Reply::Error(e) => {
                return RequestOutcome::ErrorReply {
                    error: e.error.clone(),
                };
            }
            Reply::Health(h) if !h.response.status.is_ok() => {
                return RequestOutcome::WrongReply {
                    problem: format!("health status `{}`, not `ok`", h.response.status.as_str()),
                };
            }
            _ => {}
        }
        let echo = obj.get("response").and_then(|r| r.get("echo"));
        match echo {
            Some(Value::Object(e)) if *e == self.fields => RequestOutcome::Ok,
            Some(other) => RequestOutcome::WrongReply {
                problem: format!(
                    "response.echo is {} where the request's fields {} were due",
                    clip(&other.to_string()),
                    clip(&Value::Object(self.fields.clone()).to_string())
                ),
            },
            None if self.expect_echo => RequestOutcome::WrongReply {
                problem: "the reply has no response.echo of the request's fields".to_owned(),
            },
            None => RequestOutcome::Ok,
        }
    }
}

fn clip(s: &str) -> String {
    if s.len() <= 120 {
        return s.to_owned();
    }
    let mut end = 120;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The records of a serve phase, and the error that ended the worker
/// early (the worker is then gone: do not shut it down).
pub struct Served {
    pub records: Vec<RequestRecord>,
    pub error: Option<spawn::Error>,
    /// `stop` said yes before every request was written.
    pub stopped: bool,
}

/// What became of requests still owed when the worker ended with `e`: the
/// oldest gets the error's own outcome, the rest are lost.
fn fail_pending(records: &mut [RequestRecord], pending: &mut VecDeque<usize>, e: &spawn::Error) {
    let reason = short_error(e);
    if let Some(oldest) = pending.pop_front() {
        records[oldest].outcome = match &e.kind {
            spawn::ErrorKind::Timeout { after } => RequestOutcome::Timeout {
                after_ms: after.as_secs_f64() * 1e3,
            },
            spawn::ErrorKind::UnexpectedReply { got } => RequestOutcome::WrongReply {
                problem: format!("answered with {got}"),
            },
            _ => RequestOutcome::Lost {
                reason: reason.clone(),
            },
        };
    }
    for i in pending.drain(..) {
        records[i].outcome = RequestOutcome::Lost {
            reason: format!("the worker ended before answering: {reason}"),
        };
    }
}

fn short_error(e: &spawn::Error) -> String {
    clip(&e.kind.to_string())
}

/// Runs the serve phase on a worker after its ready line.
/// `stop` is asked before each write: once it says yes (Ctrl-C), no more
/// requests are written, the replies owed are still read, and the requests
/// not written yet are left out of the run.
pub fn serve(
    w: &mut spawn::Worker,
    variant: Variant,
    plan: &Plan,
    stop: &dyn Fn() -> bool,
) -> Served {
    let n = plan.load.requests();
    let requests: Vec<Request> = (0..n).map(|i| plan.request(i)).collect();
    let mut records: Vec<RequestRecord> = Vec::with_capacity(n);
    let mut pending: VecDeque<usize> = VecDeque::new();
    let start = spawn::monotonic_ns();
    if let Load::Open { .. } = plan.load {
        for i in 0..n {
            let offset = plan.load.offset_ns(i).unwrap_or(0);
            records.push(RequestRecord::scheduled(variant, i, start + offset));
        }
    }
    let mut next = 0;
    let mut stopped = false;
    loop {
        if !stopped && stop() {
            stopped = true;
            if let Load::Open { .. } = plan.load {
                records.truncate(next);
            }
        }
        match plan.load {
            Load::Closed { .. } if stopped => {}
            Load::Closed { .. } => {
                if next == n {
                    break;
                }
                records.push(RequestRecord::scheduled(
                    variant,
                    next,
                    spawn::monotonic_ns(),
                ));
            }
            Load::Open { .. } => {
                let now = spawn::monotonic_ns();
                if next < records.len() && pending.is_empty() && records[next].scheduled_at_ns > now
                {
                    // Nothing owed: wait until the next request is due.
                    wait_until(records[next].scheduled_at_ns, now);
                }
            }
        }
        // Write every request that is due.
        let now = spawn::monotonic_ns();
        while next < records.len() && records[next].scheduled_at_ns <= now {
            match w.send(&requests[next]) {
                Ok(at) => {
                    records[next].sent_at_ns = Some(at);
                    pending.push_back(next);
                    next += 1;
                }
                Err(e) => {
                    records[next].outcome = RequestOutcome::Lost {
                        reason: format!("could not be written: {}", short_error(&e)),
                    };
                    fail_pending(&mut records, &mut pending, &e);
                    return Served {
                        records,
                        error: Some(e),
                        stopped,
                    };
                }
            }
        }
        let Some(&oldest) = pending.front() else {
            if next == n || stopped {
                break;
            }
            continue;
        };
        match w.recv(plan.timeout) {
            Ok(reply) => {
                pending.pop_front();
                let outcome = plan.check(oldest, &reply.value);
                records[oldest].answered(reply.read_at_ns, outcome);
            }
            Err(e) => {
                fail_pending(&mut records, &mut pending, &e);
                return Served {
                    records,
                    error: Some(e),
                    stopped,
                };
            }
        }
    }
    Served {
        records,
        error: None,
        stopped,
    }
}

/// How close to a due time the open loop stops sleeping and yields in a
/// loop instead: a sleep wakes tens of microseconds late, and that
/// lateness would count in every request's latency.
const SPIN_NS: u64 = 200_000;

/// Returns at `due` (monotonic ns), given the time `now`: sleeps until
/// [`SPIN_NS`] before it, then yields the CPU until it is reached.
fn wait_until(due: u64, now: u64) {
    if due > now + SPIN_NS {
        std::thread::sleep(Duration::from_nanos(due - now - SPIN_NS));
    }
    while spawn::monotonic_ns() < due {
        std::thread::yield_now();
    }
}

/// `requests.jsonl`: every request's record, flushed per worker.
pub struct RequestLog {
    out: BufWriter<File>,
    path: PathBuf,
}

impl RequestLog {
    pub fn create(dir: &Path) -> Result<RequestLog> {
        let path = dir.join("requests.jsonl");
        let file =
            File::create(&path).with_context(|| format!("could not create {}", path.display()))?;
        Ok(RequestLog {
            out: BufWriter::new(file),
            path,
        })
    }

    fn append(&mut self, records: &[RequestRecord]) -> Result<()> {
        for r in records {
            serde_json::to_writer(&mut self.out, r)
                .context("a request record did not serialise")?;
            self.out.write_all(b"\n")?;
        }
        self.out
            .flush()
            .with_context(|| format!("could not write {}", self.path.display()))
    }
}

fn spawn_ready(cmd: &spawn::Command, target: &Target) -> Result<spawn::Worker> {
    let mut w =
        spawn::Worker::spawn(cmd).context("could not start the worker for the serve phase")?;
    w.wait_ready(target.ready_timeout)
        .context("the worker of the serve phase did not become ready")?;
    Ok(w)
}

/// The serve phase of one fresh worker (not one of the timed trials): spawn,
/// ready, serve, shutdown; every record appended to `log`.
pub fn run_serve(
    target: &Target,
    cmd: &spawn::Command,
    variant: Variant,
    plan: &Plan,
    log: &mut RequestLog,
    boot: &Bootstrap,
    stop: &dyn Fn() -> bool,
) -> Result<(ServeStats, Vec<RequestRecord>)> {
    let mut w = spawn_ready(cmd, target)?;
    let served = serve(&mut w, variant, plan, stop);
    let mut ended = served.error.as_ref().map(|e| e.to_string());
    if served.stopped && ended.is_none() {
        ended = Some(format!(
            "interrupted: {} of {} requests sent",
            served.records.len(),
            plan.load.requests()
        ));
    }
    if served.error.is_none()
        && let Err(e) = w.shutdown(&target.shutdown_policy())
    {
        ended = Some(format!("after the serve phase: {e}"));
    }
    log.append(&served.records)?;
    let stats = ServeStats::of(
        variant,
        plan.load,
        plan.describe(),
        &served.records,
        ended,
        boot,
    )
    .context("could not summarise the serve phase")?;
    Ok((stats, served.records))
}

/// The memory view of one fresh worker, untimed: tracemalloc from
/// interpreter start; readings at ready, after the serve phase (when one
/// is planned) and at exit; peak RSS from `wait4`.
pub fn run_memory(
    target: &Target,
    cmd: &spawn::Command,
    variant: Variant,
    plan: Option<&Plan>,
    stop: &dyn Fn() -> bool,
) -> Result<MemoryView> {
    let dir = tempfile::Builder::new()
        .prefix("coldstart-memory-")
        .tempdir()
        .context("could not create a temporary folder for the memory bootstrap")?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .context("could not make the memory bootstrap's folder private")?;
    }
    std::fs::write(dir.path().join("sitecustomize.py"), MEMORY_BOOTSTRAP)
        .context("could not write the memory bootstrap")?;
    let record = dir.path().join("memory.jsonl");
    let mut cmd = cmd.clone();
    let inherited = cmd
        .get_envs()
        .filter(|(k, _)| *k == "PYTHONPATH")
        .last()
        .map(|(_, v)| v.map(|v| v.to_os_string()))
        .unwrap_or_else(|| std::env::var_os("PYTHONPATH"));
    let mut pythonpath = dir.path().as_os_str().to_os_string();
    if let Some(rest) = inherited.filter(|p| !p.is_empty()) {
        pythonpath.push(":");
        pythonpath.push(rest);
    }
    cmd.env("PYTHONPATH", pythonpath)
        .env(MEMORY_ENV, &record)
        .env("COLDSTART_MEMORY_TOP", TOP_SITES.to_string())
        .env("PYTHONTRACEMALLOC", "1");

    let mut problems = Vec::new();
    let mut points = Vec::new();
    let mut top_at_ready = Vec::new();
    let mut w = spawn_ready(&cmd, target)?;
    let start = read_records(&record)
        .into_iter()
        .find(|r| r.get("type").and_then(Value::as_str) == Some("start"));
    let Some(start) = start else {
        let fin = w.kill();
        bail!(
            "the memory bootstrap did not run in the worker (started with -S, -I or -E, or PYTHONPATH replaced?), so there is no memory view; worker stderr: {}",
            clip(fin.stderr_tail.trim())
        );
    };
    let py_pid = start.get("pid").and_then(Value::as_u64).unwrap_or(0) as i32;
    let tracing_from_start = start
        .get("tracing_from_start")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if !tracing_from_start {
        problems.push("PYTHONTRACEMALLOC was not honoured: tracing began in sitecustomize, after site's own imports".to_owned());
    }

    let mut seq = 0;
    let mut snapshot = |at: Moment| -> Result<Option<Value>> {
        seq += 1;
        // SAFETY: kill(2) with a pid the bootstrap reported from inside the
        // worker's process group, which is alive (the worker is ready).
        let sig = if at == Moment::Ready {
            libc::SIGUSR1 // with the allocation sites
        } else {
            libc::SIGUSR2
        };
        let sent = unsafe { libc::kill(py_pid, sig) };
        if sent != 0 {
            bail!(
                "could not signal the worker for its {} memory reading: {}",
                at.words(),
                std::io::Error::last_os_error()
            );
        }
        Ok(wait_snapshot(&record, seq, target.request_timeout))
    };
    match snapshot(Moment::Ready)? {
        Some(rec) => {
            points.push(point(Moment::Ready, &rec));
            top_at_ready = sites(&rec);
        }
        None => problems
            .push("no reading at ready: the worker did not answer SIGUSR1 in time".to_owned()),
    }
    let mut ended = None;
    if let Some(plan) = plan {
        let served = serve(&mut w, variant, plan, stop);
        match served.error {
            Some(e) => ended = Some(e),
            None => match snapshot(Moment::AfterServe)? {
                Some(rec) => points.push(point(Moment::AfterServe, &rec)),
                None => problems.push("no reading after the serve phase".to_owned()),
            },
        }
    }
    let fin = match ended {
        Some(e) => {
            problems.push(format!(
                "the worker ended during the serve phase: {}",
                short_error(&e)
            ));
            e.finished.as_deref().and_then(|f| f.rusage)
        }
        None => match w.shutdown(&target.shutdown_policy()) {
            Ok(f) => f.rusage,
            Err(e) => {
                problems.push(format!(
                    "the worker did not shut down cleanly: {}",
                    short_error(&e)
                ));
                e.finished.as_deref().and_then(|f| f.rusage)
            }
        },
    };
    match read_records(&record)
        .into_iter()
        .find(|r| r.get("type").and_then(Value::as_str) == Some("exit"))
    {
        Some(rec) => points.push(point(Moment::Exit, &rec)),
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
        peak_rss_bytes: fin.map(|r| r.max_rss_bytes),
        top_at_ready,
        problems,
    })
}

/// Waits for snapshot `seq` to appear in the record file. The bootstrap
/// writes it from its signal handler with one `write`; the harness polls
/// the file (a memory view is not timed), up to `timeout`.
fn wait_snapshot(path: &Path, seq: u64, timeout: Duration) -> Option<Value> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let found = read_records(path).into_iter().find(|r| {
            r.get("type").and_then(Value::as_str) == Some("snapshot")
                && r.get("seq").and_then(Value::as_u64) == Some(seq)
        });
        if found.is_some() || std::time::Instant::now() >= deadline {
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

fn point(at: Moment, rec: &Value) -> MemoryPoint {
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

/// One side of a bench run, as the serve phase and memory view need it.
pub struct Side<'a> {
    pub variant: Variant,
    pub target: &'a Target,
    pub cmd: &'a spawn::Command,
}

/// The serve phases and memory views of a bench run (`summary.json`'s
/// `serve` and `memory`).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Extras {
    pub serve: Vec<ServeStats>,
    pub memory: Vec<MemoryView>,
    /// A serve phase or memory view that could not be run, and why.
    #[serde(
        default,
        rename = "serve_failures",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub failures: Vec<String>,
    /// Every request of every serve phase (also in `requests.jsonl`).
    #[serde(skip)]
    pub requests: Vec<RequestRecord>,
}

impl Extras {
    /// `summary.json`: the run summary with `serve`, `memory` and
    /// `serve_failures` beside its own keys (left out when empty, so a run
    /// without them reads as before).
    pub fn summary_json(&self, summary: &phases::RunSummary) -> Result<String> {
        let mut value = serde_json::to_value(summary).context("the summary did not serialise")?;
        if let (Value::Object(map), Value::Object(mine)) = (
            &mut value,
            serde_json::to_value(self).context("the serve figures did not serialise")?,
        ) {
            for (k, v) in mine {
                let empty = v.as_array().is_some_and(Vec::is_empty);
                if !empty {
                    map.insert(k, v);
                }
            }
        }
        let mut json =
            serde_json::to_string_pretty(&value).context("the summary did not serialise")?;
        json.push('\n');
        Ok(json)
    }

    /// Whether anything went wrong beyond rejections: a view that could
    /// not run, a wrong reply, a serve phase that ended early.
    pub fn failed(&self) -> bool {
        !self.failures.is_empty()
            || self
                .serve
                .iter()
                .any(|s| s.wrong_replies > 0 || s.ended_early.is_some())
    }

    /// The Markdown sections for `summary.md` and the terminal.
    pub fn markdown(&self) -> String {
        let mut md = report::bench::serve::markdown(&self.serve, &self.memory);
        if !self.failures.is_empty() {
            md.push_str("## Serve phase and memory view failures\n\n");
            for f in &self.failures {
                md.push_str(&format!("- {f}\n"));
            }
            md.push('\n');
        }
        md
    }

    /// `phases.svg` with the serve and memory panels below.
    pub fn svg(&self, phases_svg: &str) -> String {
        report::bench::serve::extend_svg(phases_svg, &self.serve, &self.requests, &self.memory)
    }
}

/// Checks the serve flags against a target before any trial runs, so a
/// typo fails at once rather than after the timed trials.
pub fn check(args: &ServeArgs, target: &Target) -> Result<()> {
    if let Some(load) = args.load()? {
        Plan::new(load, args.request.as_deref(), target)?;
    } else if args.request.is_some() {
        bail!("--request needs a serve phase: add --requests N or --rate R");
    }
    Ok(())
}

/// After the timed trials: for each side, a serve phase on a fresh worker
/// (when --requests or --rate asked for one), then a memory view on
/// another (with --memory). Request records go to `dir/requests.jsonl`.
pub fn run_extras(
    sides: &[Side<'_>],
    args: &ServeArgs,
    dir: &Path,
    boot: &Bootstrap,
    stop: &dyn Fn() -> bool,
) -> Result<Extras> {
    let mut extras = Extras::default();
    let load = args.load()?;
    let mut log = match load {
        Some(_) => Some(RequestLog::create(dir)?),
        None => None,
    };
    for side in sides {
        if stop() {
            break;
        }
        let plan = match load {
            Some(load) => Some(Plan::new(load, args.request.as_deref(), side.target)?),
            None => None,
        };
        if let (Some(plan), Some(log)) = (&plan, log.as_mut()) {
            eprintln!(
                "serve phase ({}): {}, request {}",
                side.variant,
                plan.load.describe(),
                plan.describe()
            );
            match run_serve(side.target, side.cmd, side.variant, plan, log, boot, stop) {
                Ok((s, records)) => {
                    extras.serve.push(s);
                    extras.requests.extend(records);
                }
                Err(e) => extras
                    .failures
                    .push(format!("serve phase ({}): {e:#}", side.variant)),
            }
        }
        if args.memory {
            eprintln!(
                "memory view ({}): a separate untimed worker with tracemalloc",
                side.variant
            );
            match run_memory(side.target, side.cmd, side.variant, plan.as_ref(), stop) {
                Ok(m) => extras.memory.push(m),
                Err(e) => extras
                    .failures
                    .push(format!("memory view ({}): {e:#}", side.variant)),
            }
        }
    }
    Ok(extras)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target() -> Target {
        Target::reference_worker(Path::new("/nonexistent"))
    }

    fn reply(v: Value) -> Reply {
        serde_json::from_value(v).unwrap()
    }

    fn args(requests: Option<usize>, rate: Option<f64>, duration: Option<f64>) -> ServeArgs {
        ServeArgs {
            requests,
            rate,
            duration,
            ..ServeArgs::default()
        }
    }

    #[test]
    fn loads_from_flags() {
        assert_eq!(args(None, None, None).load().unwrap(), None);
        assert_eq!(
            args(Some(5), None, None).load().unwrap(),
            Some(Load::Closed { requests: 5 })
        );
        assert_eq!(
            args(None, Some(20.0), Some(2.0)).load().unwrap(),
            Some(Load::open(20.0, 2.0))
        );
        assert_eq!(
            args(Some(30), Some(10.0), None).load().unwrap(),
            Some(Load::open(10.0, 3.0))
        );
        assert_eq!(
            args(None, Some(3.0), None).load().unwrap(),
            Some(Load::open(3.0, 10.0))
        );
        assert!(args(Some(0), None, None).load().is_err());
        assert!(args(None, Some(0.0), None).load().is_err());
        assert!(args(None, Some(1.0), Some(-1.0)).load().is_err());
    }

    #[test]
    fn the_reference_worker_serves_infer_and_must_echo() {
        let plan = Plan::new(Load::Closed { requests: 1 }, None, &target()).unwrap();
        assert_eq!(plan.op, "infer");
        assert!(plan.expect_echo);
        let fields = Value::Object(plan.fields.clone());
        let good = reply(json!({"op": "infer", "response": {"echo": fields}, "id": 3}));
        assert_eq!(plan.check(3, &good), RequestOutcome::Ok);
        let wrong_id = plan.check(4, &good);
        assert!(
            matches!(wrong_id, RequestOutcome::WrongReply { ref problem } if problem.contains("id 3 where 4")),
            "{wrong_id:?}"
        );
        let no_echo = reply(json!({"op": "infer", "response": {}, "id": 3}));
        assert!(matches!(
            plan.check(3, &no_echo),
            RequestOutcome::WrongReply { .. }
        ));
        let other = reply(json!({"op": "infer", "response": {"echo": {"text": "else"}}}));
        assert!(matches!(
            plan.check(3, &other),
            RequestOutcome::WrongReply { .. }
        ));
        let err = reply(json!({"op": "error", "error": "busy", "id": 3}));
        assert_eq!(
            plan.check(3, &err),
            RequestOutcome::ErrorReply {
                error: "busy".into()
            }
        );
    }

    #[test]
    fn a_request_from_the_command_line() {
        let plan = Plan::new(
            Load::Closed { requests: 1 },
            Some(r#"{"op": "health", "id": 9, "x": 1}"#),
            &Target::ad_hoc(Path::new("/"), vec!["w".into()], "w"),
        )
        .unwrap();
        assert_eq!(plan.describe(), json!({"op": "health", "x": 1}));
        assert!(!plan.expect_echo);
        assert_eq!(
            serde_json::to_value(plan.request(7)).unwrap(),
            json!({"op": "health", "x": 1, "id": 7})
        );
        let unhealthy = reply(json!({"op": "health", "response": {"status": "loading"}, "id": 7}));
        assert!(matches!(
            plan.check(7, &unhealthy),
            RequestOutcome::WrongReply { .. }
        ));
        for bad in ["[1]", "{}", r#"{"op": "shutdown"}"#, "nope"] {
            assert!(
                Plan::new(Load::Closed { requests: 1 }, Some(bad), &target()).is_err(),
                "{bad}"
            );
        }
    }
}
