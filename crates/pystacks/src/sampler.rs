//! Sampling a running process (and its subprocesses) at a fixed rate
//! until told to stop, every sample stamped on CLOCK_MONOTONIC.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use timeline::monotonic_ns;

use crate::collapsed::CollapsedStack;
use crate::error::Error;
use crate::native::NativeReader;
use crate::procfs;
use crate::spy::{Lines, Spy};
use crate::stack::{ThreadStack, sanitize};

/// How often descendants are looked for.
const SCAN_EVERY: Duration = Duration::from_millis(50);
/// The least time between two attempts to attach one process.
const RETRY_ATTACH: Duration = Duration::from_millis(10);
/// How many sampling errors are kept as examples.
const ERROR_EXAMPLES: usize = 5;

/// How to sample.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerOptions {
    /// Samples per second (per process).
    pub rate_hz: u32,
    /// Also sample the process's descendants (as they appear), each stack
    /// then rooted in `process PID:"command"` labels (`py-spy record
    /// --subprocesses`).
    pub subprocesses: bool,
    /// Keep samples of idle threads (py-spy's `--idle`); off by default,
    /// so a thread blocked reading its next request adds nothing.
    pub include_idle: bool,
    /// Which line a frame reports; [`Lines::Function`] by default, so a
    /// function is one frame (`py-spy record --function`).
    pub lines: Lines,
    /// Stop by itself this long after the start.
    pub deadline: Option<Duration>,
    /// How long [`Sampler::start`] waits for the first Python process to
    /// become readable (an interpreter still starting up, a launcher that
    /// has not yet started its Python child).
    pub attach_timeout: Duration,
    /// Pause each process (ptrace-stop every thread) while it is read, as
    /// `py-spy record` does by default, so no stack is read half-changed.
    /// Off by default (`py-spy --nonblocking`): a paused read costs the
    /// process several times the time of a plain one (see the `overhead`
    /// example), and a read of a running process without a pause only now
    /// and then fails (counted in [`Profile::errors`]).
    ///
    /// Children of this process are never paused, whatever this says:
    /// py-spy's pause waits on the process with `waitpid`, and when the
    /// process is a child of the reader and exits during a read, that wait
    /// collects its exit status, which the reader's own reaper (the
    /// harness's, through `spawn`) would then never see.
    pub pause: bool,
    /// Native (C/C++) frames merged under the Python ones (the `native`
    /// feature; [`Error::NativeUnavailable`] without it). Unwinding needs
    /// the process stopped, so it implies [`pause`](Self::pause). The
    /// asked-for process, when it is not Python (the Rust service above
    /// its workers), is then sampled too, its native stacks unwound; with
    /// [`subprocesses`](Self::subprocesses) its stacks and each
    /// descendant's are rooted in their own `process PID:"command"` label
    /// (separate roots, not the workers under the service).
    pub native: bool,
    /// The most of the time the sampler may spend reading, e.g. `0.05`:
    /// when a round of reads takes longer than that share of the period
    /// (a large process: many threads, deep stacks, a big heap to search),
    /// the rate is lowered until it fits ([`Profile::adapted_rate_hz`]).
    /// `None` (the default) keeps the asked rate whatever it costs.
    pub max_reading_share: Option<f64>,
}

impl Default for SamplerOptions {
    /// 100 Hz, subprocesses followed, idle threads left out, function
    /// lines, no deadline, 5 s to attach, no pausing.
    fn default() -> Self {
        SamplerOptions {
            rate_hz: 100,
            subprocesses: true,
            include_idle: false,
            lines: Lines::Function,
            deadline: None,
            attach_timeout: Duration::from_secs(5),
            pause: false,
            native: false,
            max_reading_share: None,
        }
    }
}

impl SamplerOptions {
    /// The defaults at another rate.
    pub fn at_rate(rate_hz: u32) -> Self {
        SamplerOptions {
            rate_hz,
            ..Self::default()
        }
    }
}

/// One sample: one thread of one process at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// CLOCK_MONOTONIC ns when the process's read began (the clock of
    /// `timeline::monotonic_ns` and of Python's `time.monotonic_ns()`).
    pub t_ns: u64,
    /// The process sampled.
    pub pid: u32,
    /// The thread: the kernel's thread id where the reader learnt it, else
    /// the interpreter's (as [`ThreadStack::id_text`] shows it); named in
    /// [`Profile::threads`].
    pub thread: u64,
    /// Index of its stack in [`Profile::stacks`].
    pub stack: u32,
    /// The thread was on CPU (running, not waiting); an idle thread's
    /// sample (kept with [`SamplerOptions::include_idle`]) is not CPU time.
    pub active: bool,
    /// The time this sample stands for: the interval since the previous
    /// read of its process (the period actually used, lowered rate and
    /// late rounds included), the period for a process's first read.
    pub weight_ns: u64,
}

/// Why sampling ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SamplingEnd {
    /// [`Sampler::stop`] or a [`StopHandle`].
    Stopped,
    /// [`SamplerOptions::deadline`] passed.
    Deadline,
    /// Every sampled process (and the asked-for one) exited.
    Exited,
}

/// A process the sampler met.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SampledProcess {
    /// The process.
    pub pid: u32,
    /// Its parent, for a descendant.
    pub parent: Option<u32>,
    /// Its command line when it was attached (or last looked at).
    pub command: String,
    /// The interpreter's version, for a Python process that was sampled.
    pub python_version: Option<String>,
    /// Sampled for its native stacks: the asked-for process, not Python,
    /// with [`SamplerOptions::native`].
    pub native: bool,
    /// Why it was never sampled, for one that was not (not Python,
    /// denied, gone before its interpreter was readable, ...).
    pub not_sampled: Option<String>,
    /// CLOCK_MONOTONIC ns when the sampler first met it.
    pub seen_ns: u64,
    /// CLOCK_MONOTONIC ns when the sampler found it exited, for one that
    /// exited while sampled.
    pub gone_ns: Option<u64>,
}

/// A thread the sampler read a stack of.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SampledThread {
    /// Its process.
    pub pid: u32,
    /// The thread, as [`Sample::thread`] names it.
    pub thread: u64,
    /// Its name (Python's `threading` name, or the kernel's for a native
    /// process), the last one read.
    pub name: Option<String>,
}

/// What sampling itself cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SamplerCost {
    /// CLOCK_MONOTONIC ns when sampling began and ended.
    pub started_ns: u64,
    /// See `started_ns`.
    pub stopped_ns: u64,
    /// Time spent reading stacks, summed over processes. With
    /// [`SamplerOptions::pause`], each process is ptrace-stopped while it
    /// is read, so for one process this is the time it was kept from
    /// running; without, the process runs on while it is read.
    pub read_ns: u64,
    /// Time spent attaching (parsing the interpreter's binary, finding its
    /// state), included in neither `read_ns` nor the samples.
    pub attach_ns: u64,
    /// CPU time of the sampling thread (CLOCK_THREAD_CPUTIME_ID).
    pub cpu_ns: u64,
}

impl SamplerCost {
    /// Wall time from start to stop.
    pub fn wall_ns(&self) -> u64 {
        self.stopped_ns.saturating_sub(self.started_ns)
    }

    /// `read_ns / wall_ns`: the share of the time spent reading (with
    /// [`SamplerOptions::pause`], for one process, the share of its time it
    /// was kept from running).
    pub fn reading_share(&self) -> f64 {
        match self.wall_ns() {
            0 => 0.0,
            wall => self.read_ns as f64 / wall as f64,
        }
    }
}

/// Everything a sampling run collected.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Profile {
    /// The rate asked for.
    pub rate_hz: u32,
    /// Every sample, in time order per process.
    pub samples: Vec<Sample>,
    /// The distinct stacks (frame labels root first), indexed by
    /// [`Sample::stack`].
    pub stacks: Vec<Vec<String>>,
    /// Sampling rounds run.
    pub ticks: u64,
    /// Rounds that started more than one period late (the sampler could
    /// not keep up; the gaps hold no samples).
    pub late_ticks: u64,
    /// Reads of an attached process that failed (it was changing too fast,
    /// or was exiting).
    pub errors: u64,
    /// The first few of those errors.
    pub error_examples: Vec<String>,
    /// Every process met, the asked-for one first.
    pub processes: Vec<SampledProcess>,
    /// Every thread sampled, in the order first sampled.
    pub threads: Vec<SampledThread>,
    /// What sampling cost.
    pub cost: SamplerCost,
    /// Why it ended.
    pub stop_reason: SamplingEnd,
    /// The lowest rate sampling was slowed to by
    /// [`SamplerOptions::max_reading_share`], if it was.
    pub adapted_rate_hz: Option<f64>,
    /// The CPU time the kernel counted for the sampled processes from
    /// each one's first read to its last (`utime + stime`, summed; the
    /// kernel's ticks are 10 ms at the usual 100 Hz): the measured figure
    /// beside the one the samples stand for, which on a loaded machine
    /// also counts a thread's waits for a CPU (a runnable thread looks
    /// running to the sampler). `None` when no process was read.
    pub kernel_cpu_ns: Option<u64>,
}

/// What a set of samples stands for in time: how many, how many of them
/// were of threads on CPU, and the CPU time those stand for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SampledTime {
    /// Samples (threads seen, summed over rounds).
    pub samples: u64,
    /// Those of threads on CPU; the rest were idle (kept with
    /// [`SamplerOptions::include_idle`]).
    pub on_cpu: u64,
    /// The CPU time the samples on CPU stand for: each weighted by the
    /// interval its read stood for ([`Sample::weight_ns`]), so a lowered
    /// rate or a late round counts at the rate actually used; idle samples
    /// count nothing.
    pub cpu_ns: u64,
}

impl SampledTime {
    /// One more sample.
    fn add(&mut self, active: bool, weight_ns: u64) {
        self.samples += 1;
        if active {
            self.on_cpu += 1;
            self.cpu_ns += weight_ns;
        }
    }
}

impl Profile {
    /// How many samples (threads seen, summed over rounds; idle ones only
    /// with [`SamplerOptions::include_idle`]).
    pub fn sample_count(&self) -> u64 {
        self.samples.len() as u64
    }

    /// The samples `keep` accepts, in time: how many, how many on CPU, and
    /// the CPU time those stand for at the rate actually used.
    pub fn time_where(&self, keep: impl Fn(&Sample) -> bool) -> SampledTime {
        let mut time = SampledTime::default();
        for s in self.samples.iter().filter(|s| keep(s)) {
            time.add(s.active, s.weight_ns);
        }
        time
    }

    /// The rate sampling actually ran at: rounds over the wall time (below
    /// [`rate_hz`](Self::rate_hz) when it was lowered or rounds were late).
    pub fn rounds_per_second(&self) -> f64 {
        match self.cost.wall_ns() {
            0 => 0.0,
            wall => self.ticks as f64 * 1e9 / wall as f64,
        }
    }

    /// All samples aggregated, stacks in order of first appearance.
    pub fn collapsed(&self) -> Vec<CollapsedStack> {
        self.collapsed_where(|_| true)
    }

    /// Samples taken before `t_ns` (CLOCK_MONOTONIC), aggregated: the
    /// start-up profile up to the ready line's stamp.
    pub fn collapsed_before(&self, t_ns: u64) -> Vec<CollapsedStack> {
        self.collapsed_where(|s| s.t_ns < t_ns)
    }

    /// The samples `keep` accepts, aggregated.
    pub fn collapsed_where(&self, keep: impl Fn(&Sample) -> bool) -> Vec<CollapsedStack> {
        let mut counts = vec![0u64; self.stacks.len()];
        for s in self.samples.iter().filter(|s| keep(s)) {
            counts[s.stack as usize] += 1;
        }
        counts
            .into_iter()
            .enumerate()
            .filter(|(_, n)| *n > 0)
            .map(|(i, samples)| CollapsedStack {
                frames: self.stacks[i].clone(),
                samples,
            })
            .collect()
    }
}

/// Stops a [`Sampler`] from any thread; clones stop the same sampler.
#[derive(Debug, Clone, Default)]
pub struct StopHandle {
    inner: Arc<(Mutex<bool>, Condvar)>,
}

impl StopHandle {
    /// Asks the sampler to stop; it ends its current round first.
    pub fn stop(&self) {
        let (flag, cv) = &*self.inner;
        *flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }

    /// Whether [`stop`](Self::stop) was called.
    pub fn is_stopped(&self) -> bool {
        *self.inner.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sleeps up to `dur`, waking at once on a stop; true when stopped.
    fn sleep(&self, dur: Duration) -> bool {
        let (flag, cv) = &*self.inner;
        let guard = flag.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = cv
            .wait_timeout_while(guard, dur, |stopped| !*stopped)
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }
}

/// A sampling run in progress on its own thread.
#[derive(Debug)]
pub struct Sampler {
    pid: u32,
    stop: StopHandle,
    window: Arc<Mutex<Window>>,
    thread: Option<JoinHandle<Profile>>,
}

/// What was sampled since the last [`Sampler::take_window`].
#[derive(Debug, Default)]
struct Window {
    /// Samples per stack id since the last take.
    counts: HashMap<u32, u64>,
    /// A copy of the run's distinct stacks, by id.
    stacks: Vec<Vec<String>>,
    /// Rounds run since the last take.
    ticks: u64,
    /// Failed reads since the last take.
    errors: u64,
    /// The samples since the last take, in time.
    time: SampledTime,
    /// The kernel's CPU time of the sampled processes since the last take.
    kernel_cpu_ns: Option<u64>,
}

/// The samples of one stretch of a running [`Sampler`] (a live view's
/// refresh): what [`Sampler::take_window`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SampleWindow {
    /// The stacks seen, aggregated, most samples first.
    pub stacks: Vec<CollapsedStack>,
    /// Sampling rounds run in the stretch.
    pub ticks: u64,
    /// Reads that failed in the stretch.
    pub errors: u64,
    /// The stretch's samples in time: how many on CPU, and the CPU time
    /// they stand for at the rate actually used.
    pub time: SampledTime,
    /// The CPU time the kernel counted for the sampled processes over the
    /// stretch (see [`Profile::kernel_cpu_ns`]).
    pub kernel_cpu_ns: Option<u64>,
}

impl Sampler {
    /// Starts sampling `pid` (and, with
    /// [`SamplerOptions::subprocesses`], its descendants) and returns once
    /// a first Python process is readable.
    ///
    /// `Err` when `pid` is gone, when the kernel refuses access to it
    /// ([`Error::PermissionDenied`]), or when no Python process became
    /// readable within [`SamplerOptions::attach_timeout`] (the last reason,
    /// e.g. [`Error::NotPython`]). Nothing keeps running after an `Err`.
    pub fn start(pid: u32, options: SamplerOptions) -> Result<Sampler, Error> {
        if options.rate_hz == 0 {
            return Err(Error::ZeroRate);
        }
        if options.native && !crate::NATIVE {
            return Err(Error::NativeUnavailable);
        }
        Error::check_access(pid)?;
        let stop = StopHandle::default();
        let (attached_tx, attached_rx) = mpsc::channel();
        let window = Arc::new(Mutex::new(Window::default()));
        let (run_stop, run_window) = (stop.clone(), Arc::clone(&window));
        let thread = std::thread::Builder::new()
            .name("pystacks-sample".into())
            // The run is made on its thread: with native frames, a reader
            // holds libunwind state that may not move between threads.
            .spawn(move || Run::new(pid, options, run_stop, run_window).sample(attached_tx))
            .map_err(Error::Thread)?;
        match attached_rx.recv() {
            Ok(Ok(())) => Ok(Sampler {
                pid,
                stop,
                window,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                // The thread ended without a word: it panicked.
                match thread.join() {
                    Err(panic) => std::panic::resume_unwind(panic),
                    Ok(_) => unreachable!("the sampling thread always reports its attachment"),
                }
            }
        }
    }

    /// The process asked for.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A handle that stops this sampler from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    /// What was sampled since the last call (or the start), aggregated;
    /// the sampling goes on. A live view calls it once per refresh.
    pub fn take_window(&self) -> SampleWindow {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let counts = std::mem::take(&mut w.counts);
        let mut stacks: Vec<CollapsedStack> = counts
            .into_iter()
            .map(|(id, samples)| CollapsedStack {
                frames: w.stacks[id as usize].clone(),
                samples,
            })
            .collect();
        stacks.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.frames.cmp(&b.frames)));
        SampleWindow {
            stacks,
            ticks: std::mem::take(&mut w.ticks),
            errors: std::mem::take(&mut w.errors),
            time: std::mem::take(&mut w.time),
            kernel_cpu_ns: w.kernel_cpu_ns.take(),
        }
    }

    /// Whether sampling has ended by itself (deadline, processes exited)
    /// or was stopped.
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Stops sampling and returns what was collected.
    pub fn stop(mut self) -> Profile {
        self.stop.stop();
        self.join()
    }

    /// Waits until sampling ends by itself (the processes exit, the
    /// deadline passes) or a [`StopHandle`] stops it.
    pub fn wait(mut self) -> Profile {
        self.join()
    }

    fn join(&mut self) -> Profile {
        let thread = self.thread.take().expect("joined once");
        match thread.join() {
            Ok(profile) => profile,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.stop.stop();
            let _ = thread.join();
        }
    }
}

/// A process the sampling thread knows of.
struct Tracked {
    parent: Option<u32>,
    command: String,
    state: State,
    /// The kernel's CPU time of the process at its latest successful read
    /// (ns): each next read adds what it spent on CPU since.
    cpu_at_read: Option<u64>,
    /// When it was met and when found gone (CLOCK_MONOTONIC ns).
    seen_ns: u64,
    gone_ns: Option<u64>,
}

enum State {
    /// Not (yet) readable: waiting for it to be a started interpreter.
    Pending {
        since: Instant,
        last: Option<String>,
        /// When py-spy was last asked to attach (attempts are spaced by
        /// [`RETRY_ATTACH`]: each parses the interpreter's binary).
        tried: Option<Instant>,
    },
    Attached {
        reader: Reader,
        exe: String,
        labels: Vec<String>,
        /// When it was last read: its next samples stand for the time
        /// since.
        last_read: Option<Instant>,
        /// The interpreter's version; `None` for a native process.
        version: Option<String>,
    },
    /// Given up on, or exited.
    Done {
        version: Option<String>,
        native: bool,
        why: Option<String>,
    },
}

/// What reads an attached process.
enum Reader {
    /// py-spy, for a Python process.
    Python(Box<Spy>),
    /// The native unwinder, for the asked-for process when it is not
    /// Python and native stacks are asked for.
    Native(Box<NativeReader>),
}

impl Reader {
    /// Every thread's stack; a native process's idle threads without
    /// frames unless `include_idle` (they are not sampled then).
    fn threads(&mut self, include_idle: bool) -> Result<Vec<ThreadStack>, Error> {
        match self {
            Reader::Python(spy) => spy.threads(),
            Reader::Native(native) => native.read(!include_idle).map(|s| s.threads),
        }
    }
}

/// The sampling thread's state.
struct Run {
    root: u32,
    options: SamplerOptions,
    stop: StopHandle,
    tracked: BTreeMap<u32, Tracked>,
    order: Vec<u32>,
    stacks: Vec<Vec<String>>,
    stack_ids: HashMap<Vec<String>, u32>,
    samples: Vec<Sample>,
    /// Index in `threads` of each `(pid, thread)` sampled.
    thread_ids: HashMap<(u32, u64), usize>,
    threads: Vec<SampledThread>,
    ticks: u64,
    late_ticks: u64,
    errors: u64,
    error_examples: Vec<String>,
    read_ns: u64,
    attach_ns: u64,
    started: Instant,
    root_error: Option<Error>,
    /// The asked-for process is read natively (its label is not put above
    /// its descendants' stacks).
    root_native: bool,
    tree: procfs::ProcessTree,
    window: Arc<Mutex<Window>>,
    adapted_rate_hz: Option<f64>,
    kernel_cpu_ns: Option<u64>,
}

impl Run {
    fn new(
        root: u32,
        options: SamplerOptions,
        stop: StopHandle,
        window: Arc<Mutex<Window>>,
    ) -> Run {
        Run {
            root,
            options,
            stop,
            tracked: BTreeMap::new(),
            order: Vec::new(),
            stacks: Vec::new(),
            stack_ids: HashMap::new(),
            samples: Vec::new(),
            thread_ids: HashMap::new(),
            threads: Vec::new(),
            ticks: 0,
            late_ticks: 0,
            errors: 0,
            error_examples: Vec::new(),
            read_ns: 0,
            attach_ns: 0,
            started: Instant::now(),
            root_error: None,
            root_native: false,
            tree: procfs::ProcessTree::default(),
            window,
            adapted_rate_hz: None,
            kernel_cpu_ns: None,
        }
    }

    fn sample(mut self, attached: mpsc::Sender<Result<(), Error>>) -> Profile {
        let cpu0 = thread_cpu_ns();
        let started_ns = monotonic_ns();
        self.started = Instant::now();
        let start = self.started;
        let asked_period = Duration::from_secs_f64(1.0 / f64::from(self.options.rate_hz));
        let mut period = asked_period;
        // The time a round of reads takes, smoothed over rounds.
        let mut round_ns = 0.0f64;
        self.track(self.root, None);
        let mut attached = Some(attached);
        let mut next_scan = start;
        let mut next_tick = start;
        let stop_reason = 'rounds: loop {
            let now = Instant::now();
            if self.options.subprocesses && now >= next_scan {
                for (pid, parent) in self.tree.descendants(self.root) {
                    self.track(pid, Some(parent));
                }
                next_scan = now + SCAN_EVERY;
            }
            self.attach_pending();
            if let Some(tx) = &attached {
                match self.attachment() {
                    Some(Ok(())) => {
                        let _ = tx.send(Ok(()));
                        attached = None;
                    }
                    Some(Err(e)) => {
                        let _ = tx.send(Err(e));
                        attached = None;
                        break 'rounds SamplingEnd::Exited;
                    }
                    None => {}
                }
            }
            self.ticks += 1;
            let read_before = self.read_ns;
            self.read_attached(period);
            if let Some(share) = self.options.max_reading_share.filter(|s| *s > 0.0) {
                let this_round = (self.read_ns - read_before) as f64;
                round_ns = if self.ticks == 1 {
                    this_round
                } else {
                    0.8 * round_ns + 0.2 * this_round
                };
                let needed = Duration::from_secs_f64(round_ns / share / 1e9);
                // Slower when a round costs too much, back towards the
                // asked rate when it costs less; never above it, never
                // below one round a second.
                period = needed.clamp(asked_period, Duration::from_secs(1));
                if period > asked_period {
                    let rate = 1.0 / period.as_secs_f64();
                    self.adapted_rate_hz =
                        Some(self.adapted_rate_hz.map_or(rate, |r: f64| r.min(rate)));
                }
            }
            if self.all_gone() {
                break SamplingEnd::Exited;
            }
            if let Some(deadline) = self.options.deadline
                && start.elapsed() >= deadline
            {
                break SamplingEnd::Deadline;
            }
            next_tick += period;
            let now = Instant::now();
            if now > next_tick + period {
                // More than a period behind: skip the missed rounds.
                self.late_ticks += 1;
                next_tick = now;
            }
            let mut wait = next_tick.saturating_duration_since(now);
            if let Some(deadline) = self.options.deadline {
                wait = wait.min(deadline.saturating_sub(start.elapsed()));
            }
            if self.stop.sleep(wait) {
                break SamplingEnd::Stopped;
            }
        };
        if let Some(tx) = attached {
            // Ended (all gone, deadline) before any process was readable.
            let _ = tx.send(Err(self.attach_failure()));
        }
        let cost = SamplerCost {
            started_ns,
            stopped_ns: monotonic_ns(),
            read_ns: self.read_ns,
            attach_ns: self.attach_ns,
            cpu_ns: thread_cpu_ns().saturating_sub(cpu0),
        };
        self.finish(cost, stop_reason)
    }

    /// Starts tracking `pid` if it is new.
    fn track(&mut self, pid: u32, parent: Option<u32>) {
        if self.tracked.contains_key(&pid) {
            return;
        }
        self.order.push(pid);
        self.tracked.insert(
            pid,
            Tracked {
                parent,
                command: procfs::cmdline(pid),
                state: State::Pending {
                    since: Instant::now(),
                    last: None,
                    tried: None,
                },
                cpu_at_read: None,
                seen_ns: monotonic_ns(),
                gone_ns: None,
            },
        );
    }

    /// Tries to attach every pending process; gives up on those that
    /// stayed unreadable past the attach timeout or that the kernel
    /// refuses.
    fn attach_pending(&mut self) {
        let pending: Vec<u32> = self
            .order
            .iter()
            .copied()
            .filter(|pid| match self.tracked[pid].state {
                State::Pending { tried, .. } => tried.is_none_or(|t| t.elapsed() >= RETRY_ATTACH),
                _ => false,
            })
            .collect();
        for pid in pending {
            let mut tried = None;
            let gone = procfs::is_gone(pid);
            let python_mapped = procfs::maps_mention_python(pid);
            let outcome = if gone {
                Err(Error::ProcessGone { pid })
            } else if python_mapped == Some(false)
                && pid == self.root
                && self.options.native
                && procfs::parent_of(pid) != Some(std::process::id())
            {
                // The service above the workers: its native stacks (not
                // of this process's own child, a launcher whose Python
                // child is what is wanted; see `NativeOfChild`).
                let t0 = Instant::now();
                tried = Some(t0);
                let r = NativeReader::attach(pid).and_then(|mut native| {
                    native.read(false)?;
                    Ok(Reader::Native(Box::new(native)))
                });
                self.attach_ns += t0.elapsed().as_nanos() as u64;
                self.root_native = r.is_ok();
                r
            } else if python_mapped == Some(false) {
                // Not (yet) an interpreter: a launcher, or a fork about to
                // exec Python. Cheap to look again next round.
                Err(Error::NotPython {
                    pid,
                    command: procfs::cmdline(pid),
                    searched_children: false,
                    detail: String::new(),
                })
            } else {
                let t0 = Instant::now();
                tried = Some(t0);
                let r = Spy::attach(
                    pid,
                    self.options.lines,
                    self.options.pause,
                    self.options.native,
                )
                .map(|spy| Reader::Python(Box::new(spy)));
                self.attach_ns += t0.elapsed().as_nanos() as u64;
                r
            };
            let labels = self.labels_for(pid);
            let t = self.tracked.get_mut(&pid).expect("tracked");
            match outcome {
                Ok(reader) => {
                    t.command = procfs::cmdline(pid);
                    let (version, exe) = match &reader {
                        Reader::Python(spy) => (Some(spy.version()), spy.exe()),
                        Reader::Native(_) => (
                            None,
                            std::fs::read_link(format!("/proc/{pid}/exe"))
                                .map(|p| p.to_string_lossy().into_owned())
                                .unwrap_or_default(),
                        ),
                    };
                    t.state = State::Attached {
                        version,
                        exe,
                        reader,
                        labels,
                        last_read: None,
                    };
                }
                Err(e) => {
                    let State::Pending {
                        since,
                        tried: tried_before,
                        ..
                    } = t.state
                    else {
                        unreachable!("only pending processes are attached")
                    };
                    let fatal = matches!(e, Error::ProcessGone { .. } | Error::PermissionDenied(_));
                    if matches!(e, Error::ProcessGone { .. }) {
                        t.gone_ns = Some(monotonic_ns());
                    }
                    let why = e.to_string();
                    if pid == self.root {
                        self.root_error = Some(e);
                    }
                    t.state = if fatal || since.elapsed() >= self.options.attach_timeout {
                        State::Done {
                            version: None,
                            native: false,
                            why: Some(why),
                        }
                    } else {
                        State::Pending {
                            since,
                            last: Some(why),
                            tried: tried.or(tried_before),
                        }
                    };
                }
            }
        }
    }

    /// Whether [`Sampler::start`] can return: `Ok` once a process is
    /// attached, `Err` when none can be any more, `None` meanwhile.
    fn attachment(&mut self) -> Option<Result<(), Error>> {
        let states = || self.tracked.values().map(|t| &t.state);
        if states().any(|s| matches!(s, State::Attached { .. })) {
            return Some(Ok(()));
        }
        let root_refused = matches!(self.root_error, Some(Error::PermissionDenied(_)));
        let none_pending = !states().any(|s| matches!(s, State::Pending { .. }));
        let root_gone = procfs::is_gone(self.root);
        let can_still_appear = self.options.subprocesses && !root_gone;
        let timed_out = self.started.elapsed() >= self.options.attach_timeout;
        if !(root_refused || timed_out || (none_pending && !can_still_appear)) {
            return None;
        }
        Some(Err(self.attach_failure()))
    }

    /// Why no process could be attached: the asked-for process's last
    /// error, or that it is gone or not Python.
    fn attach_failure(&mut self) -> Error {
        let searched_children = self.options.subprocesses;
        let root_gone = procfs::is_gone(self.root);
        match self.root_error.take() {
            Some(Error::NotPython {
                pid,
                command,
                detail,
                ..
            }) => Error::NotPython {
                pid,
                command,
                searched_children,
                detail,
            },
            Some(e) => e,
            None if root_gone => Error::ProcessGone { pid: self.root },
            None => Error::NotPython {
                pid: self.root,
                command: procfs::cmdline(self.root),
                searched_children,
                detail: String::new(),
            },
        }
    }

    /// The `process PID:"command"` labels from the asked-for process down
    /// to `pid` (none unless subprocesses are followed).
    fn labels_for(&self, pid: u32) -> Vec<String> {
        if !self.options.subprocesses {
            return Vec::new();
        }
        let mut chain = vec![(pid, procfs::cmdline(pid))];
        let mut at = pid;
        while let Some(parent) = self.tracked.get(&at).and_then(|t| t.parent) {
            if parent == self.root && self.root_native {
                // The native parent is a root of its own beside them.
                break;
            }
            let command = self
                .tracked
                .get(&parent)
                .map(|t| t.command.clone())
                .unwrap_or_default();
            chain.push((parent, command));
            at = parent;
        }
        chain
            .into_iter()
            .rev()
            .map(|(pid, command)| sanitize(&format!("process {pid}:\"{command}\"")))
            .collect()
    }

    /// One round: every attached process read once, its samples also
    /// counted in the live window; `period` is the one in force (a first
    /// read's samples stand for it).
    fn read_attached(&mut self, period: Duration) {
        let window = Arc::clone(&self.window);
        let mut window = window.lock().unwrap_or_else(|e| e.into_inner());
        window.ticks += 1;
        for pid in self.order.clone() {
            let t = self.tracked.get_mut(&pid).expect("tracked");
            let State::Attached {
                reader,
                exe,
                labels,
                version,
                last_read,
            } = &mut t.state
            else {
                continue;
            };
            let t_ns = monotonic_ns();
            let t0 = Instant::now();
            let weight_ns = last_read
                .map_or(period, |at| t0.duration_since(at))
                .as_nanos() as u64;
            *last_read = Some(t0);
            let read = reader.threads(self.options.include_idle);
            self.read_ns += t0.elapsed().as_nanos() as u64;
            match read {
                Ok(threads) => {
                    if let Some(now) = procfs::cpu_ns(pid) {
                        let spent = t.cpu_at_read.map_or(0, |was| now.saturating_sub(was));
                        t.cpu_at_read = Some(now);
                        *self.kernel_cpu_ns.get_or_insert(0) += spent;
                        *window.kernel_cpu_ns.get_or_insert(0) += spent;
                    }
                    for thread in threads {
                        if !(thread.active || self.options.include_idle) {
                            continue;
                        }
                        let id = thread.os_thread_id.unwrap_or(thread.thread_id);
                        match self.thread_ids.get(&(pid, id)) {
                            Some(&i) if self.threads[i].name == thread.name => {}
                            Some(&i) => self.threads[i].name.clone_from(&thread.name),
                            None => {
                                self.thread_ids.insert((pid, id), self.threads.len());
                                self.threads.push(SampledThread {
                                    pid,
                                    thread: id,
                                    name: thread.name.clone(),
                                });
                            }
                        }
                        let mut frames = labels.clone();
                        frames.extend(thread.frames.iter().rev().map(|f| f.label()));
                        let next = self.stacks.len() as u32;
                        let stack = *self.stack_ids.entry(frames).or_insert_with_key(|k| {
                            self.stacks.push(k.clone());
                            window.stacks.push(k.clone());
                            next
                        });
                        *window.counts.entry(stack).or_default() += 1;
                        window.time.add(thread.active, weight_ns);
                        self.samples.push(Sample {
                            t_ns,
                            pid,
                            thread: id,
                            stack,
                            active: thread.active,
                            weight_ns,
                        });
                    }
                }
                Err(e) => {
                    if procfs::is_gone(pid) {
                        t.gone_ns = Some(monotonic_ns());
                        t.state = State::Done {
                            native: version.is_none(),
                            version: version.clone(),
                            why: None,
                        };
                    } else if std::fs::read_link(format!("/proc/{pid}/exe"))
                        .map(|p| p.to_string_lossy() != exe.as_str())
                        .unwrap_or(false)
                    {
                        // It exec'd another program (a fork of Python that
                        // became something else): look at it afresh.
                        t.command = procfs::cmdline(pid);
                        t.state = State::Pending {
                            since: Instant::now(),
                            last: Some(e.to_string()),
                            tried: None,
                        };
                    } else {
                        self.errors += 1;
                        window.errors += 1;
                        if self.error_examples.len() < ERROR_EXAMPLES {
                            self.error_examples.push(e.to_string());
                        }
                    }
                }
            }
        }
    }

    /// True when nothing is or can be sampled any more.
    fn all_gone(&self) -> bool {
        let live = self
            .tracked
            .values()
            .any(|t| !matches!(t.state, State::Done { .. }));
        !live && (!self.options.subprocesses || procfs::is_gone(self.root))
    }

    fn finish(self, cost: SamplerCost, stop_reason: SamplingEnd) -> Profile {
        let mut tracked = self.tracked;
        let processes = self
            .order
            .iter()
            .map(|pid| {
                let t = tracked.remove(pid).expect("tracked");
                let (python_version, native, not_sampled) = match t.state {
                    State::Attached { version, .. } => {
                        let native = version.is_none();
                        (version, native, None)
                    }
                    State::Done {
                        version,
                        native,
                        why,
                    } => (version, native, why),
                    State::Pending { last, .. } => (
                        None,
                        false,
                        Some(last.unwrap_or_else(|| {
                            "sampling ended before it could be read".to_owned()
                        })),
                    ),
                };
                SampledProcess {
                    pid: *pid,
                    parent: t.parent,
                    command: t.command,
                    python_version,
                    native,
                    not_sampled,
                    seen_ns: t.seen_ns,
                    gone_ns: t.gone_ns,
                }
            })
            .collect();
        Profile {
            rate_hz: self.options.rate_hz,
            samples: self.samples,
            stacks: self.stacks,
            ticks: self.ticks,
            late_ticks: self.late_ticks,
            errors: self.errors,
            error_examples: self.error_examples,
            processes,
            threads: self.threads,
            cost,
            stop_reason,
            adapted_rate_hz: self.adapted_rate_hz,
            kernel_cpu_ns: self.kernel_cpu_ns,
        }
    }
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock always exists.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_that_never_becomes_python_is_an_error_after_the_attach_timeout() {
        let mut cat = std::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("cat runs");
        let options = SamplerOptions {
            attach_timeout: Duration::from_millis(200),
            ..SamplerOptions::default()
        };
        let t0 = Instant::now();
        let err = Sampler::start(cat.id(), options).expect_err("cat is not Python");
        let waited = t0.elapsed();
        let _ = cat.kill();
        let _ = cat.wait();
        assert!(
            matches!(
                err,
                Error::NotPython {
                    searched_children: true,
                    ..
                }
            ),
            "{err}"
        );
        assert!(waited >= Duration::from_millis(200), "{waited:?}");
        assert!(
            err.to_string().contains("none of its subprocesses"),
            "{err}"
        );
    }

    #[test]
    fn a_gone_process_or_a_zero_rate_is_an_error_at_once() {
        let err = Sampler::start(u32::MAX - 1, SamplerOptions::default()).expect_err("gone");
        assert!(matches!(err, Error::ProcessGone { .. }), "{err}");
        let err = Sampler::start(std::process::id(), SamplerOptions::at_rate(0)).expect_err("0");
        assert!(matches!(err, Error::ZeroRate), "{err}");
    }

    #[test]
    fn the_profile_aggregates_in_order_of_first_appearance() {
        let profile = Profile {
            rate_hz: 100,
            samples: [(10, 0), (20, 1), (30, 0), (40, 0)]
                .into_iter()
                .map(|(t_ns, stack)| Sample {
                    t_ns,
                    pid: 1,
                    thread: 1,
                    stack,
                    active: true,
                    weight_ns: 10_000_000,
                })
                .collect(),
            stacks: vec![vec!["a".into(), "b".into()], vec!["a".into()]],
            ticks: 4,
            late_ticks: 0,
            errors: 0,
            error_examples: vec![],
            processes: vec![],
            threads: vec![],
            cost: SamplerCost::default(),
            stop_reason: SamplingEnd::Stopped,
            adapted_rate_hz: None,
            kernel_cpu_ns: None,
        };
        let all = profile.collapsed();
        assert_eq!(crate::collapsed_text(&all), "a;b 3\na 1\n");
        let before = profile.collapsed_before(30);
        assert_eq!(crate::collapsed_text(&before), "a;b 1\na 1\n");
        assert_eq!(profile.sample_count(), 4);
    }

    /// A worker on CPU for 5 s read at a rate lowered to 5 Hz (25 samples
    /// of 200 ms each) and its idle thread kept with `--idle`: 5000 ms of
    /// CPU, not 25 samples at the asked 100 Hz (250 ms), nor 50 samples.
    #[test]
    fn cpu_time_weighs_each_sample_by_its_interval_and_counts_no_idle_one() {
        let sample = |t_ns: u64, active: bool| Sample {
            t_ns,
            pid: 1,
            thread: 1,
            stack: u32::from(!active),
            active,
            weight_ns: 200_000_000,
        };
        let samples = (0..25u64)
            .flat_map(|i| {
                [
                    sample(i * 200_000_000, true),
                    sample(i * 200_000_000, false),
                ]
            })
            .collect();
        let profile = Profile {
            rate_hz: 100,
            samples,
            stacks: vec![vec!["busy".into()], vec!["waits".into()]],
            ticks: 25,
            late_ticks: 0,
            errors: 0,
            error_examples: vec![],
            processes: vec![],
            threads: vec![],
            cost: SamplerCost {
                started_ns: 0,
                stopped_ns: 5_000_000_000,
                ..SamplerCost::default()
            },
            stop_reason: SamplingEnd::Deadline,
            adapted_rate_hz: Some(5.0),
            kernel_cpu_ns: None,
        };
        let time = profile.time_where(|_| true);
        assert_eq!((time.samples, time.on_cpu), (50, 25));
        assert_eq!(time.cpu_ns, 5_000_000_000);
        assert!((profile.rounds_per_second() - 5.0).abs() < 1e-9);
        assert_eq!(profile.time_where(|s| !s.active).cpu_ns, 0);
    }
}
