//! `coldstart trace`: the whole process tree on one timeline. A parent
//! (any language) and every Python process below it sampled on one clock
//! (`pystacks`'s sampler: the parent natively with
//! [`LiveOptions::native`], each Python descendant's Python frames), the
//! processes watched beside it a few times a tenth of a second (their CPU
//! and RSS, the parent's thread names, and the parent's waits on a worker
//! that `/proc` proves: [`pystacks::proven_waits`]), all of it turned into
//! a [`::trace::Trace`] that the `trace` crate writes.
//!
//! A wait is drawn only where it was proven: a parent thread blocked
//! reading a pipe whose write end a worker holds gets a slice `waiting on
//! worker PID` and a flow to what that worker was doing; a thread blocked
//! on anything else (a socket, a futex, a pipe of no worker) gets nothing.
//! A span the command exports over OTLP that says its thread
//! (`thread.name`, naming one thread of its process) flows to the worker
//! that thread was proven waiting on while the span was open: the request
//! drawn to the worker it waited for. A span whose thread is parked in
//! `epoll_wait` (a tokio task awaiting a reply) proves nothing, and gets
//! no flow.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ::trace::flame::{Frame, TimedStack};
use ::trace::{Counter, Flow, Point, Process, Slice, SliceAt, Thread, Trace, Unit};
use pystacks::{Profile, Sampler, SamplingEnd};
use timeline::monotonic_ns;

use crate::error::{Error, Result, invalid};
use crate::interrupt::Interrupt;
use crate::live::LiveOptions;
use crate::otlp::{ReceivedSpan, Receiver};

/// How often the processes are watched (CPU, RSS, thread names, waits).
pub const WATCH_PERIOD: Duration = Duration::from_millis(50);

/// How long a launched command may take to appear under its shell.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the launched command, then what is left of its process
/// group, has after SIGTERM before SIGKILL.
const END_GRACE: Duration = Duration::from_secs(5);

/// How long the sampler waits for a first process it can read: a
/// command's workers may take a while to start.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(30);

/// The category of a proven wait's slice.
pub const WAIT_CATEGORY: &str = "wait";

/// The category of a span received over OTLP.
pub const SPAN_CATEGORY: &str = "span";

/// The first id of the tracks that hold spans (above any kernel thread
/// id: Linux's `pid_max` is at most 2^22).
const SPAN_TRACK_TIDS: u32 = 1 << 30;

/// How to trace.
#[derive(Debug, Clone, Default)]
pub struct TraceOptions {
    /// How to read (subprocesses are always followed).
    pub live: LiveOptions,
    /// Stop after this long (else when every process exits, or at an
    /// interrupt).
    pub duration: Option<Duration>,
}

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
    shell: Child,
    /// The command's pid.
    pub pid: u32,
    /// Whether [`Launched::end`] ran (else dropping it ends the command:
    /// an error between the start and the end leaves nothing running).
    ended: bool,
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
    fn end(mut self) -> Result<ExitStatus> {
        self.end_all()
    }

    /// [`Launched::end`]'s work, once.
    fn end_all(&mut self) -> Result<ExitStatus> {
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
    fn shell_exited(&self) -> bool {
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
fn orphans(shell: u32) -> Vec<i32> {
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
fn end_orphans(shell: u32) {
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
fn group_alive(pgid: i32) -> bool {
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
fn wait_until(bound: Duration, mut done: impl FnMut() -> bool) -> bool {
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

/// A finished trace.
#[derive(Debug)]
pub struct TreeTrace {
    /// The trace, ready for a writer.
    pub trace: Trace,
    /// What the sampler read.
    pub profile: Profile,
    /// Why it ended ([`SamplingEnd::Stopped`] on an interrupt).
    pub ended: SamplingEnd,
    /// The proven waits drawn.
    pub waits: usize,
    /// The spans received over OTLP and drawn.
    pub spans: usize,
    /// The OTLP export requests received (0: the exporter never sent).
    pub span_requests: usize,
    /// The tracks that hold those spans (beside the threads' own).
    pub span_tracks: usize,
    /// The flows from a span to the worker its thread was proven waiting
    /// on while it was open.
    pub span_flows: usize,
    /// The launched command's exit status, for `trace -- CMD`.
    pub exit: Option<ExitStatus>,
}

/// A trace in progress: the sampler and the watcher running.
#[derive(Debug)]
pub struct TreeTracer {
    root: u32,
    sampler: Sampler,
    watch: Watch,
    launched: Option<Launched>,
    spans: Option<Receiver>,
}

impl TreeTracer {
    /// Starts tracing `pid` (and what `launched` started, when it is that
    /// command; with the spans `spans` receives, when the command was told
    /// its endpoint); returns once a first process is read.
    pub fn start(
        pid: u32,
        options: &TraceOptions,
        launched: Option<Launched>,
        spans: Option<Receiver>,
    ) -> Result<TreeTracer> {
        let live = LiveOptions {
            subprocesses: true,
            ..options.live.clone()
        };
        let sampler_options = pystacks::SamplerOptions {
            attach_timeout: ATTACH_TIMEOUT,
            lines: pystacks::Lines::Function,
            ..live.sampler(options.duration)?
        };
        let watch = Watch::start(pid);
        let sampler = match Sampler::start(pid, sampler_options) {
            Ok(s) => s,
            Err(e) => {
                watch.stop();
                if let Some(l) = launched {
                    let _ = l.end();
                }
                return Err(Error::Stacks(e));
            }
        };
        Ok(TreeTracer {
            root: pid,
            sampler,
            watch,
            launched,
            spans,
        })
    }

    /// Traces until the duration ends, every process exits, or
    /// `interrupt` is pressed; then builds the trace, in every one of
    /// those cases. A launched command still running is ended.
    pub fn finish(self, interrupt: &Interrupt) -> Result<TreeTrace> {
        let poll = Duration::from_millis(50);
        let mut next = Instant::now();
        while !self.sampler.is_finished() && !interrupt.is_set() {
            next += poll;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
        let profile = self.sampler.stop();
        let watched = self.watch.stop();
        let ended = if interrupt.is_set() {
            SamplingEnd::Stopped
        } else {
            profile.stop_reason
        };
        let exit = self.launched.map(Launched::end).transpose()?;
        let spans = self.spans.map(Receiver::stop).unwrap_or_default();
        let mut trace = build(self.root, &profile, &watched);
        let tracks = add_spans(&mut trace, self.root, &spans.spans);
        let span_flows = span_flows(&mut trace, &tracks);
        trace.check().map_err(Error::Trace)?;
        let waits = wait_slices(&trace, self.root).len();
        Ok(TreeTrace {
            trace,
            profile,
            ended,
            waits,
            spans: spans.spans.len(),
            span_requests: spans.requests,
            span_tracks: tracks.len(),
            span_flows,
            exit,
        })
    }
}

/// What the watcher read.
#[derive(Debug, Default)]
struct Watched {
    /// Each process's readings: (t_ns, CPU ns, RSS bytes).
    usage: BTreeMap<u32, Vec<(u64, u64, u64)>>,
    /// The root's threads, by tid, with their kernel names.
    root_threads: BTreeMap<u32, String>,
    /// Each proven wait seen: (t_ns, the root's thread, the worker).
    waits: Vec<(u64, u32, u32)>,
}

#[derive(Debug)]
struct Watch {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Watched>,
}

impl Watch {
    fn start(root: u32) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut watched = Watched::default();
            let mut tree = pystacks::tree::ProcessTree::default();
            let mut next = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                watch_once(root, &mut tree, &mut watched);
                next += WATCH_PERIOD;
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
            watched
        });
        Watch { stop, thread }
    }

    fn stop(self) -> Watched {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// One look at the tree: each process's CPU and RSS, the root's thread
/// names, and its proven waits on its descendants.
fn watch_once(root: u32, tree: &mut pystacks::tree::ProcessTree, watched: &mut Watched) {
    let t_ns = monotonic_ns();
    let below: Vec<u32> = tree.descendants(root).into_iter().map(|(p, _)| p).collect();
    for pid in std::iter::once(root).chain(below.iter().copied()) {
        if let (Some(cpu), Some(rss)) =
            (pystacks::tree::cpu_ns(pid), pystacks::tree::rss_bytes(pid))
        {
            watched.usage.entry(pid).or_default().push((t_ns, cpu, rss));
        }
    }
    if let Ok(threads) = pystacks::NativeStacks::list(root) {
        for t in threads.threads {
            if let (Some(tid), Some(name)) = (t.os_thread_id, t.name) {
                watched.root_threads.insert(tid as u32, name);
            }
        }
    }
    for w in pystacks::proven_waits(root, &below) {
        watched.waits.push((t_ns, w.thread, w.worker));
    }
}

/// A sampled thread's id as the trace's: the kernel's, or the
/// interpreter's folded into 32 bits where the kernel's was not read.
fn tid_of(thread: u64) -> u32 {
    u32::try_from(thread).unwrap_or((thread ^ (thread >> 32)) as u32)
}

/// The trace of what was sampled and watched.
fn build(root: u32, profile: &Profile, watched: &Watched) -> Trace {
    let mut processes: Vec<Process> = profile
        .processes
        .iter()
        .map(|p| process_track(p, watched))
        .collect();
    // Each thread's samples as timed stacks, by (pid, tid).
    let mut stacks: BTreeMap<(u32, u32), Vec<TimedStack>> = BTreeMap::new();
    let native: BTreeSet<u32> = profile
        .processes
        .iter()
        .filter(|p| p.native)
        .map(|p| p.pid)
        .collect();
    for s in &profile.samples {
        let category = if native.contains(&s.pid) {
            "native"
        } else {
            "python"
        };
        let frames = profile.stacks[s.stack as usize]
            .iter()
            .filter(|f| !pystacks::is_label_frame(f))
            .map(|f| Frame {
                name: f.clone(),
                category: category.to_owned(),
            })
            .collect();
        stacks
            .entry((s.pid, tid_of(s.thread)))
            .or_default()
            .push(TimedStack {
                start_ns: s.t_ns.saturating_sub(s.weight_ns),
                end_ns: s.t_ns,
                frames,
            });
    }
    // A wait is drawn only on a process the trace holds: a shell's
    // subshell also holds the pipe it reads, between its fork and the
    // worker's, and is no worker to point at.
    let mut waits = wait_runs(&watched.waits);
    waits.retain(|w| w.worker != root && profile.processes.iter().any(|p| p.pid == w.worker));
    for w in &waits {
        add_wait(stacks.entry((root, w.tid)).or_default(), w);
    }
    let names: BTreeMap<(u32, u32), String> = profile
        .threads
        .iter()
        .filter_map(|t| Some(((t.pid, tid_of(t.thread)), t.name.clone()?)))
        .chain(
            watched
                .root_threads
                .iter()
                .map(|(tid, name)| ((root, *tid), name.clone())),
        )
        .collect();
    let mut keys: BTreeSet<(u32, u32)> = stacks.keys().copied().collect();
    keys.extend(watched.root_threads.keys().map(|tid| (root, *tid)));
    for (pid, tid) in keys {
        let Some(p) = processes.iter_mut().find(|p| p.pid == pid) else {
            continue;
        };
        let mut items = stacks.remove(&(pid, tid)).unwrap_or_default();
        items.sort_by_key(|s| s.start_ns);
        p.threads.push(Thread {
            tid,
            name: names
                .get(&(pid, tid))
                .cloned()
                .unwrap_or_else(|| format!("thread {tid}")),
            slices: ::trace::flame::slices(&items),
            instants: Vec::new(),
            beside: None,
        });
    }
    let flows = wait_flows(root, &processes);
    Trace { processes, flows }
}

/// A process's track: its name, its first sight (the traced command's
/// own: when the trace began to watch it) and exit, its CPU and RSS.
fn process_track(p: &pystacks::SampledProcess, watched: &Watched) -> Process {
    let mut instants = vec![::trace::Instant {
        name: "first seen".into(),
        t_ns: p.seen_ns,
    }];
    if let Some(t_ns) = p.gone_ns {
        instants.push(::trace::Instant {
            name: "exited".into(),
            t_ns,
        });
    }
    let readings = watched.usage.get(&p.pid).map(Vec::as_slice).unwrap_or(&[]);
    let cpu = readings
        .windows(2)
        .filter(|w| w[1].0 > w[0].0)
        .map(|w| Point {
            t_ns: w[1].0,
            value: w[1].1.saturating_sub(w[0].1) as f64 * 100.0 / (w[1].0 - w[0].0) as f64,
        })
        .collect();
    let rss = readings
        .iter()
        .map(|r| Point {
            t_ns: r.0,
            value: r.2 as f64,
        })
        .collect();
    // Every viewer shows the pid beside the name (speedscope, Perfetto,
    // chrome://tracing): the name is the command alone.
    let name = if p.command.is_empty() {
        format!("process {}", p.pid)
    } else {
        p.command.clone()
    };
    Process {
        pid: p.pid,
        name,
        threads: Vec::new(),
        instants,
        counters: vec![
            Counter {
                name: "CPU".into(),
                unit: Unit::Percent,
                points: cpu,
            },
            Counter {
                name: "RSS".into(),
                unit: Unit::Bytes,
                points: rss,
            },
        ],
    }
}

/// A run of consecutive looks proving one thread waits on one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
struct WaitRun {
    tid: u32,
    worker: u32,
    first_ns: u64,
    last_ns: u64,
}

/// The proven waits grouped into runs: looks of one (thread, worker) at
/// most one and a half watch periods apart are one run.
fn wait_runs(waits: &[(u64, u32, u32)]) -> Vec<WaitRun> {
    let gap = WATCH_PERIOD.as_nanos() as u64 * 3 / 2;
    let mut by_pair: BTreeMap<(u32, u32), Vec<u64>> = BTreeMap::new();
    for &(t, tid, worker) in waits {
        by_pair.entry((tid, worker)).or_default().push(t);
    }
    let mut runs = Vec::new();
    for ((tid, worker), times) in by_pair {
        let mut run: Option<WaitRun> = None;
        for t in times {
            match &mut run {
                Some(r) if t <= r.last_ns + gap => r.last_ns = t,
                _ => {
                    runs.extend(run.take());
                    run = Some(WaitRun {
                        tid,
                        worker,
                        first_ns: t,
                        last_ns: t,
                    });
                }
            }
        }
        runs.extend(run);
    }
    runs
}

/// The name of a wait's slice.
fn wait_name(worker: u32) -> String {
    format!("waiting on worker {worker}")
}

/// A proven wait on a thread's stacks: the samples taken within it get
/// the wait as their outermost frame; with none (the thread idle, so not
/// sampled), the wait is a stack of its own over the run.
fn add_wait(items: &mut Vec<TimedStack>, w: &WaitRun) {
    let frame = Frame {
        name: wait_name(w.worker),
        category: WAIT_CATEGORY.into(),
    };
    let mut covered = false;
    for s in items
        .iter_mut()
        .filter(|s| s.end_ns >= w.first_ns && s.end_ns <= w.last_ns)
    {
        s.frames.insert(0, frame.clone());
        covered = true;
    }
    if !covered {
        items.push(TimedStack {
            start_ns: w.first_ns,
            end_ns: w.last_ns,
            frames: vec![frame],
        });
    }
}

/// A flow from each wait slice of the root to the outermost slice of the
/// worker it waits on that overlaps it (what the worker was doing); none
/// where the worker has no slice then.
fn wait_flows(root: u32, processes: &[Process]) -> Vec<Flow> {
    let mut flows = Vec::new();
    let Some(parent) = processes.iter().find(|p| p.pid == root) else {
        return flows;
    };
    for t in &parent.threads {
        for (i, s) in t.slices.iter().enumerate() {
            // A wait seen in one look only, on a thread not sampled then,
            // is an instant: a reader binds a flow to the slice open at
            // its time, and a zero-length slice is open at none.
            if s.category != WAIT_CATEGORY || s.start_ns == s.end_ns {
                continue;
            }
            let Some(worker) = waited_worker(s).and_then(|w| processes.iter().find(|p| p.pid == w))
            else {
                continue;
            };
            if let Some(to) = outermost_within(worker, s.start_ns, s.end_ns) {
                flows.push(Flow {
                    id: flows.len() as u64 + 1,
                    from: SliceAt {
                        pid: root,
                        tid: t.tid,
                        index: i,
                    },
                    to,
                });
            }
        }
    }
    flows
}

/// A lane of a span track: its slices, and the spans still open on it
/// (their end and span id).
type Lane<'a> = (Vec<Slice>, Vec<(u64, &'a str)>);

/// A track of spans added to a process: its track's id, and the kernel
/// thread its spans ran on, where their `thread.name` names exactly one of
/// the process's threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SpanTrack {
    pid: u32,
    track: u32,
    thread: Option<u32>,
}

/// The one thread of `process` named `name` (or its first 15 bytes, all
/// the kernel keeps of a thread's name); none when no thread or several
/// have it, so a span is never put on a thread by a guess.
fn thread_named(process: &Process, name: &str) -> Option<u32> {
    let kernel = name.get(..15).unwrap_or(name);
    let mut found = process
        .threads
        .iter()
        .filter(|t| t.tid < SPAN_TRACK_TIDS && (t.name == name || t.name == kernel));
    let first = found.next()?;
    found.next().is_none().then_some(first.tid)
}

/// The spans received, each on a track of its process (the resource's
/// `process.pid` when the trace has that process, else the root): one
/// named after its thread (`spans on NAME` from `thread.name`, else
/// `spans on thread.id N`, the SDK's number, which need not be a kernel
/// tid) for spans that say one, else one per service (`spans: SERVICE`).
/// A span nests under the innermost span open on a lane only when that
/// span is its parent (by span id); a span that overlaps others without
/// being their child (a root of another trace, a sibling) goes to a
/// further lane, so no lane shows a nesting the spans do not have. Each
/// slice is named by the span's name and its descriptive attributes'
/// values (`request GET /health`). Returns the tracks added, each with
/// the kernel thread its `thread.name` finds ([`thread_named`]).
fn add_spans(trace: &mut Trace, root: u32, spans: &[ReceivedSpan]) -> Vec<SpanTrack> {
    let mut groups: BTreeMap<(u32, String), Vec<&ReceivedSpan>> = BTreeMap::new();
    for s in spans {
        let pid = s
            .pid
            .filter(|p| trace.processes.iter().any(|q| q.pid == *p))
            .unwrap_or(root);
        let label = match (&s.thread_name, s.thread) {
            (Some(name), _) => format!("spans on {name}"),
            (None, Some(t)) => format!("spans on thread.id {t}"),
            (None, None) if s.service.is_empty() => "spans".to_owned(),
            (None, None) => format!("spans: {}", s.service),
        };
        groups.entry((pid, label)).or_default().push(s);
    }
    let mut next_tid = SPAN_TRACK_TIDS;
    let mut added = Vec::new();
    for ((pid, label), group) in groups {
        let thread_name = group[0].thread_name.clone();
        let lanes = span_lanes(group);
        let Some(process) = trace.processes.iter_mut().find(|p| p.pid == pid) else {
            continue;
        };
        let thread = thread_name.and_then(|n| thread_named(process, &n));
        let count = lanes.len();
        for (i, (slices, _)) in lanes.into_iter().enumerate() {
            process.threads.push(Thread {
                tid: next_tid,
                name: if count == 1 {
                    label.clone()
                } else {
                    format!("{label} ({})", i + 1)
                },
                slices,
                instants: Vec::new(),
                beside: thread,
            });
            added.push(SpanTrack {
                pid,
                track: next_tid,
                thread,
            });
            next_tid += 1;
        }
    }
    added
}

/// One track's spans laid out in lanes (see [`add_spans`]).
fn span_lanes(mut group: Vec<&ReceivedSpan>) -> Vec<Lane<'_>> {
    group.sort_by_key(|s| (s.start_ns, std::cmp::Reverse(s.end_ns)));
    // Each lane: its slices and the spans still open on it (end, id).
    let mut lanes: Vec<Lane<'_>> = Vec::new();
    for s in group {
        let fits =
            |open: &Vec<(u64, &str)>| match open.iter().rev().find(|(end, _)| *end > s.start_ns) {
                None => true,
                Some((end, id)) => s.end_ns <= *end && !s.parent.is_empty() && s.parent == *id,
            };
        let lane = match lanes.iter().position(|(_, open)| fits(open)) {
            Some(i) => i,
            None => {
                lanes.push((Vec::new(), Vec::new()));
                lanes.len() - 1
            }
        };
        let (slices, open) = &mut lanes[lane];
        open.retain(|(end, _)| *end > s.start_ns);
        open.push((s.end_ns, s.id.as_str()));
        let mut name = s.name.clone();
        for d in &s.detail {
            name.push(' ');
            name.push_str(d);
        }
        slices.push(Slice {
            name,
            category: SPAN_CATEGORY.into(),
            start_ns: s.start_ns,
            end_ns: s.end_ns,
        });
    }
    lanes
}

/// A flow from each span to the worker its thread was proven waiting on
/// while the span was open: to what the worker was doing then (its
/// outermost slice within both). Of nested spans that cover one wait, the
/// innermost has the flow. A span whose thread is not known (no
/// `thread.name`, or one that names no single thread) has none: the
/// kernel proves a thread's wait, not a span's. Returns the flows added.
fn span_flows(trace: &mut Trace, tracks: &[SpanTrack]) -> usize {
    let mut flows = Vec::new();
    for t in tracks {
        let Some(thread) = t.thread else { continue };
        let Some(process) = trace.processes.iter().find(|p| p.pid == t.pid) else {
            continue;
        };
        let waits: Vec<(u64, u64, u32)> = process
            .threads
            .iter()
            .filter(|th| th.tid == thread)
            .flat_map(|th| &th.slices)
            .filter(|s| s.category == WAIT_CATEGORY)
            .filter_map(|s| Some((s.start_ns, s.end_ns, waited_worker(s)?)))
            .collect();
        let Some(track) = process.threads.iter().find(|th| th.tid == t.track) else {
            continue;
        };
        let overlap = |s: &Slice, w: &(u64, u64, u32)| s.start_ns <= w.1 && s.end_ns >= w.0;
        for (i, s) in track.slices.iter().enumerate() {
            if s.start_ns == s.end_ns {
                continue;
            }
            for w in waits.iter().filter(|w| overlap(s, w)) {
                let inner = track.slices.iter().enumerate().any(|(j, x)| {
                    j != i
                        && x.start_ns >= s.start_ns
                        && x.end_ns <= s.end_ns
                        && (x.start_ns, x.end_ns) != (s.start_ns, s.end_ns)
                        && overlap(x, w)
                });
                let (lo, hi) = (s.start_ns.max(w.0), s.end_ns.min(w.1));
                let target = trace
                    .processes
                    .iter()
                    .find(|p| p.pid == w.2)
                    .and_then(|p| outermost_within(p, lo, hi));
                if let (false, Some(to)) = (inner, target) {
                    let from = SliceAt {
                        pid: t.pid,
                        tid: t.track,
                        index: i,
                    };
                    flows.push((from, to));
                }
            }
        }
    }
    let added = flows.len();
    for (from, to) in flows {
        let id = trace.flows.len() as u64 + 1;
        trace.flows.push(Flow { id, from, to });
    }
    added
}

/// The worker a wait slice names.
fn waited_worker(s: &Slice) -> Option<u32> {
    s.name.strip_prefix("waiting on worker ")?.parse().ok()
}

/// The earliest-starting (and, of those, longest) slice of `worker` that
/// overlaps `lo..=hi` and lasts (a flow cannot reach a zero-length one).
fn outermost_within(worker: &Process, lo: u64, hi: u64) -> Option<SliceAt> {
    worker
        .threads
        .iter()
        .flat_map(|wt| {
            wt.slices
                .iter()
                .enumerate()
                .map(move |(j, x)| (wt.tid, j, x))
        })
        .filter(|(_, _, x)| x.start_ns <= hi && x.end_ns >= lo && x.end_ns > x.start_ns)
        .min_by_key(|(_, _, x)| (x.start_ns, std::cmp::Reverse(x.end_ns)))
        .map(|(tid, index, _)| SliceAt {
            pid: worker.pid,
            tid,
            index,
        })
}

/// The slices of `trace` on the root's threads that are proven waits.
pub fn wait_slices(trace: &Trace, root: u32) -> Vec<&Slice> {
    trace
        .processes
        .iter()
        .filter(|p| p.pid == root)
        .flat_map(|p| p.threads.iter().flat_map(|t| &t.slices))
        .filter(|s| s.category == WAIT_CATEGORY)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn looks_a_watch_period_apart_are_one_wait_and_a_longer_gap_two() {
        let p = WATCH_PERIOD.as_nanos() as u64;
        let looks = [
            (0, 7, 9),
            (p, 7, 9),
            (2 * p, 7, 9),
            (10 * p, 7, 9),
            (p, 8, 9),
        ];
        let runs = wait_runs(&looks);
        let spans: Vec<(u32, u64, u64)> = runs
            .iter()
            .map(|r| (r.tid, r.first_ns, r.last_ns))
            .collect();
        assert_eq!(spans, vec![(7, 0, 2 * p), (7, 10 * p, 10 * p), (8, p, p)]);
    }

    fn stack(start_ns: u64, end_ns: u64, name: &str) -> TimedStack {
        TimedStack {
            start_ns,
            end_ns,
            frames: vec![Frame {
                name: name.into(),
                category: "native".into(),
            }],
        }
    }

    #[test]
    fn a_wait_is_the_outermost_frame_of_the_samples_it_covers_or_a_slice_of_its_own() {
        let run = WaitRun {
            tid: 1,
            worker: 9,
            first_ns: 10 * MS,
            last_ns: 30 * MS,
        };
        let mut sampled = vec![stack(0, 10 * MS, "a"), stack(10 * MS, 20 * MS, "read")];
        add_wait(&mut sampled, &run);
        assert_eq!(sampled.len(), 2);
        assert_eq!(sampled[1].frames[0].name, "waiting on worker 9");
        assert_eq!(sampled[0].frames[0].name, "waiting on worker 9");
        let mut idle = Vec::new();
        add_wait(&mut idle, &run);
        assert_eq!(
            idle,
            vec![TimedStack {
                start_ns: 10 * MS,
                end_ns: 30 * MS,
                frames: vec![Frame {
                    name: "waiting on worker 9".into(),
                    category: WAIT_CATEGORY.into(),
                }],
            }]
        );
    }

    #[test]
    fn a_wait_flows_to_what_its_worker_did_then_and_not_when_it_did_nothing_or_was_an_instant() {
        let slice = |name: &str, category: &str, start_ns, end_ns| Slice {
            name: name.into(),
            category: category.into(),
            start_ns,
            end_ns,
        };
        let thread = |tid, slices| Thread {
            tid,
            name: String::new(),
            slices,
            instants: Vec::new(),
            beside: None,
        };
        let process = |pid, threads| Process {
            pid,
            threads,
            ..Process::default()
        };
        let trace = vec![
            process(
                1,
                vec![thread(
                    1,
                    vec![
                        slice("waiting on worker 9", WAIT_CATEGORY, 10, 30),
                        slice("waiting on worker 8", WAIT_CATEGORY, 40, 50),
                        // One look: an instant no reader binds a flow to.
                        slice("waiting on worker 9", WAIT_CATEGORY, 60, 60),
                    ],
                )],
            ),
            process(
                9,
                vec![thread(
                    9,
                    vec![
                        slice("main", "python", 0, 100),
                        slice("load", "python", 0, 20),
                    ],
                )],
            ),
            process(8, vec![thread(8, Vec::new())]),
        ];
        let flows = wait_flows(1, &trace);
        assert_eq!(
            flows,
            vec![Flow {
                id: 1,
                from: SliceAt {
                    pid: 1,
                    tid: 1,
                    index: 0,
                },
                to: SliceAt {
                    pid: 9,
                    tid: 9,
                    index: 0,
                },
            }]
        );
    }

    #[test]
    fn spans_nest_only_under_their_parent_and_are_named_by_thread_and_detail() {
        let span = |name: &str, range, ids, thread| ReceivedSpan {
            pid: Some(5),
            thread,
            ..received(name, ids, range)
        };
        let mut trace = Trace {
            processes: vec![Process {
                pid: 1,
                ..Process::default()
            }],
            flows: Vec::new(),
        };
        let named = ReceivedSpan {
            thread_name: Some("temporal-worker".into()),
            detail: vec!["GET".into(), "/health".into()],
            ..span("request", (30, 31), ("e", ""), Some(13))
        };
        let tracks = add_spans(
            &mut trace,
            1,
            &[
                span("a", (0, 10), ("a", ""), None),
                span("b", (2, 5), ("b", "a"), None),
                // Inside `a` in time, but the root of another trace.
                span("poll", (6, 9), ("p", ""), None),
                span("c", (8, 20), ("c", ""), None),
                span("d", (0, 1), ("d", ""), Some(7)),
                named,
            ],
        );
        // Process 5 is not on the trace: the root holds them.
        let lanes: Vec<(&str, Vec<&str>)> = trace.processes[0]
            .threads
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    t.slices.iter().map(|s| s.name.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(
            lanes,
            vec![
                ("spans on temporal-worker", vec!["request GET /health"]),
                ("spans on thread.id 7", vec!["d"]),
                ("spans: svc (1)", vec!["a", "b"]),
                ("spans: svc (2)", vec!["poll"]),
                ("spans: svc (3)", vec!["c"]),
            ]
        );
        assert_eq!(tracks.len(), 5);
        // No thread of the root is named temporal-worker: no thread found.
        assert!(tracks.iter().all(|t| t.thread.is_none()), "{tracks:?}");
        assert_eq!(trace.check(), Ok(()));
    }

    /// A span of service `svc` in process 1, with no thread.
    fn received(
        name: &str,
        (id, parent): (&str, &str),
        (start_ns, end_ns): (u64, u64),
    ) -> ReceivedSpan {
        ReceivedSpan {
            service: "svc".into(),
            pid: Some(1),
            thread: None,
            thread_name: None,
            name: name.into(),
            detail: Vec::new(),
            id: id.into(),
            parent: parent.into(),
            start_ns,
            end_ns,
        }
    }

    fn span_on(thread: &str, name: &str, ids: (&str, &str), range: (u64, u64)) -> ReceivedSpan {
        ReceivedSpan {
            thread_name: Some(thread.into()),
            ..received(name, ids, range)
        }
    }
    fn named_thread(tid: u32, name: &str, slices: Vec<Slice>) -> Thread {
        Thread {
            tid,
            name: name.into(),
            slices,
            instants: Vec::new(),
            beside: None,
        }
    }

    fn wait_on(worker: u32, start_ns: u64, end_ns: u64) -> Slice {
        Slice {
            name: wait_name(worker),
            category: WAIT_CATEGORY.into(),
            start_ns,
            end_ns,
        }
    }

    #[test]
    fn a_span_is_put_on_the_one_thread_its_name_finds_and_the_kernel_keeps_15_bytes() {
        let process = Process {
            pid: 1,
            threads: vec![
                named_thread(2, "dispatch-blocki", Vec::new()),
                named_thread(3, "tokio-rt-worker", Vec::new()),
                named_thread(4, "tokio-rt-worker", Vec::new()),
            ],
            ..Process::default()
        };
        assert_eq!(thread_named(&process, "dispatch-blocking-1"), Some(2));
        assert_eq!(thread_named(&process, "dispatch-blocki"), Some(2));
        // Two threads have the name: no guess.
        assert_eq!(thread_named(&process, "tokio-rt-worker"), None);
        assert_eq!(thread_named(&process, "main"), None);
    }

    /// The request's round trip ran on thread 3, which was proven waiting
    /// on worker 9 during it: the inner span flows to what worker 9 did
    /// then, its enclosing span does not, and a span on a thread with no
    /// proven wait (thread 2, in epoll) has no flow.
    #[test]
    fn a_span_flows_to_the_worker_its_thread_was_proven_waiting_on_and_only_the_innermost() {
        let python = |name: &str, start_ns, end_ns| Slice {
            name: name.into(),
            category: "python".into(),
            start_ns,
            end_ns,
        };
        let mut trace = Trace {
            processes: vec![
                Process {
                    pid: 1,
                    threads: vec![
                        named_thread(2, "dispatch-0", Vec::new()),
                        named_thread(3, "dispatch-3", vec![wait_on(9, 120, 180)]),
                    ],
                    ..Process::default()
                },
                Process {
                    pid: 9,
                    threads: vec![named_thread(
                        9,
                        "MainThread",
                        vec![python("main", 0, 300), python("stall", 110, 190)],
                    )],
                    ..Process::default()
                },
            ],
            flows: Vec::new(),
        };
        let tracks = add_spans(
            &mut trace,
            1,
            &[
                span_on("dispatch-0", "request", ("r", ""), (90, 210)),
                span_on("dispatch-3", "round trip", ("a", "r"), (100, 200)),
                span_on("dispatch-3", "await reply", ("b", "a"), (110, 195)),
            ],
        );
        let threads: Vec<Option<u32>> = tracks.iter().map(|t| t.thread).collect();
        assert_eq!(threads, vec![Some(2), Some(3)]);
        assert_eq!(span_flows(&mut trace, &tracks), 1);
        let track = tracks[1].track;
        assert_eq!(
            trace.flows,
            vec![Flow {
                id: 1,
                from: SliceAt {
                    pid: 1,
                    tid: track,
                    index: 1,
                },
                to: SliceAt {
                    pid: 9,
                    tid: 9,
                    index: 0,
                },
            }]
        );
        assert_eq!(trace.check(), Ok(()));
    }
}
