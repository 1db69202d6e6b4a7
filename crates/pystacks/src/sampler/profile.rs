use crate::collapsed::CollapsedStack;

/// One sample: one thread of one process at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// CLOCK_MONOTONIC ns when the process's read began (the clock of
    /// `timeline::monotonic_ns` and of Python's `time.monotonic_ns()`).
    pub t_ns: u64,
    /// The process sampled.
    pub pid: u32,
    /// The thread: the kernel's thread id where the reader learnt it, else
    /// the interpreter's (as [`ThreadStack::id_text`](crate::ThreadStack::id_text) shows it); named in
    /// [`Profile::threads`].
    pub thread: u64,
    /// Index of its stack in [`Profile::stacks`].
    pub stack: u32,
    /// The thread was on CPU (running, not waiting); an idle thread's
    /// sample (kept with [`SamplerOptions::include_idle`](crate::SamplerOptions::include_idle)) is not CPU time.
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
    /// [`Sampler::stop`](crate::Sampler::stop) or a [`StopHandle`](crate::StopHandle).
    Stopped,
    /// [`SamplerOptions::deadline`](crate::SamplerOptions::deadline) passed.
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
    /// with [`SamplerOptions::native`](crate::SamplerOptions::native).
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
    /// [`SamplerOptions::pause`](crate::SamplerOptions::pause), each process is ptrace-stopped while it
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
    /// [`SamplerOptions::pause`](crate::SamplerOptions::pause), for one process, the share of its time it
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
    /// [`SamplerOptions::max_reading_share`](crate::SamplerOptions::max_reading_share), if it was.
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
    /// [`SamplerOptions::include_idle`](crate::SamplerOptions::include_idle)).
    pub on_cpu: u64,
    /// The CPU time the samples on CPU stand for: each weighted by the
    /// interval its read stood for ([`Sample::weight_ns`]), so a lowered
    /// rate or a late round counts at the rate actually used; idle samples
    /// count nothing.
    pub cpu_ns: u64,
}

impl SampledTime {
    /// One more sample.
    pub(super) fn add(&mut self, active: bool, weight_ns: u64) {
        self.samples += 1;
        if active {
            self.on_cpu += 1;
            self.cpu_ns += weight_ns;
        }
    }
}

impl Profile {
    /// How many samples (threads seen, summed over rounds; idle ones only
    /// with [`SamplerOptions::include_idle`](crate::SamplerOptions::include_idle)).
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
