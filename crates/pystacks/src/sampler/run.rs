use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use timeline::monotonic_ns;

use crate::error::Error;
use crate::native::NativeReader;
use crate::procfs;
use crate::spy::Spy;
use crate::stack::ThreadStack;

use super::options::SamplerOptions;
use super::profile::{Profile, Sample, SampledProcess, SampledThread, SamplerCost, SamplingEnd};
use super::{ERROR_EXAMPLES, SCAN_EVERY, StopHandle, Window};

/// A process the sampling thread knows of.
pub(super) struct Tracked {
    pub(super) parent: Option<u32>,
    pub(super) command: String,
    pub(super) state: State,
    /// The kernel's CPU time of the process at its latest successful read
    /// (ns): each next read adds what it spent on CPU since.
    pub(super) cpu_at_read: Option<u64>,
    /// When it was met and when found gone (CLOCK_MONOTONIC ns).
    pub(super) seen_ns: u64,
    pub(super) gone_ns: Option<u64>,
}

pub(super) enum State {
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
pub(super) enum Reader {
    /// py-spy, for a Python process.
    Python(Box<Spy>),
    /// The native unwinder, for the asked-for process when it is not
    /// Python and native stacks are asked for.
    Native(Box<NativeReader>),
}

impl Reader {
    /// Every thread's stack; a native process's idle threads without
    /// frames unless `include_idle` (they are not sampled then).
    pub(super) fn threads(&mut self, include_idle: bool) -> Result<Vec<ThreadStack>, Error> {
        match self {
            Reader::Python(spy) => spy.threads(),
            Reader::Native(native) => native.read(!include_idle).map(|s| s.threads),
        }
    }
}

/// The sampling thread's state.
pub(super) struct Run {
    pub(super) root: u32,
    pub(super) options: SamplerOptions,
    pub(super) stop: StopHandle,
    pub(super) tracked: BTreeMap<u32, Tracked>,
    pub(super) order: Vec<u32>,
    pub(super) stacks: Vec<Vec<String>>,
    pub(super) stack_ids: HashMap<Vec<String>, u32>,
    pub(super) samples: Vec<Sample>,
    /// Index in `threads` of each `(pid, thread)` sampled.
    pub(super) thread_ids: HashMap<(u32, u64), usize>,
    pub(super) threads: Vec<SampledThread>,
    pub(super) ticks: u64,
    pub(super) late_ticks: u64,
    pub(super) errors: u64,
    pub(super) error_examples: Vec<String>,
    pub(super) read_ns: u64,
    pub(super) attach_ns: u64,
    pub(super) started: Instant,
    pub(super) root_error: Option<Error>,
    /// The asked-for process is read natively (its label is not put above
    /// its descendants' stacks).
    pub(super) root_native: bool,
    pub(super) tree: procfs::ProcessTree,
    pub(super) window: Arc<Mutex<Window>>,
    pub(super) adapted_rate_hz: Option<f64>,
    pub(super) kernel_cpu_ns: Option<u64>,
}

impl Run {
    pub(super) fn new(
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

    pub(super) fn sample(mut self, attached: mpsc::Sender<Result<(), Error>>) -> Profile {
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
            if now >= next_scan {
                self.scan_descendants();
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
        if stop_reason != SamplingEnd::Exited {
            // A descendant that appeared since the last scan is alive at
            // the end: listed, though sampling ended before it was read.
            self.scan_descendants();
        }
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
    /// Tracks each descendant of the root not tracked yet (when
    /// subprocesses are followed).
    fn scan_descendants(&mut self) {
        if !self.options.subprocesses {
            return;
        }
        for (pid, parent) in self.tree.descendants(self.root) {
            self.track(pid, Some(parent));
        }
    }

    /// One round: every attached process read once, its samples also
    /// counted in the live window; `period` is the one in force (a first
    /// read's samples stand for it).
    pub(super) fn read_attached(&mut self, period: Duration) {
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
    pub(super) fn all_gone(&self) -> bool {
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
