//! Sampling a running process (and its subprocesses) at a fixed rate
//! until told to stop, every sample stamped on CLOCK_MONOTONIC.
//!
//! [`Sampler::start`] runs the sampling on a thread of its own and hands
//! back the [`Sampler`]: a [`StopHandle`] any thread may press, the live
//! [`SampleWindow`] that `top` reads each refresh, and, once stopped or
//! ended, the [`Profile`] (every sample weighed by the interval it stood
//! for, the processes and threads seen, what the reading cost).
//!
//! By job: `options.rs` how to sample ([`SamplerOptions`]); `profile.rs`
//! what a run gives back ([`Profile`] and its parts); `run.rs` the
//! sampling thread's loop (a round of reads, the rate lowered to keep
//! reading under its share of the time, the end); `attach.rs` the
//! processes it follows (descendants found every [`SCAN_EVERY`] and once
//! more at a stop or deadline, so one started since the last scan is
//! listed; each attached once it is a started interpreter, or read
//! natively when it is the asked-for process and not Python); this file
//! the handle.
//!
//! What it does not do: start or signal a process (it reads, and with
//! `native` stops a thread only while unwinding it), render, or decide
//! when to read: the caller asks.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::collapsed::CollapsedStack;
use crate::error::Error;
use run::Run;

mod attach;
mod options;
mod profile;
mod run;
#[cfg(test)]
mod tests;

pub use options::SamplerOptions;
pub use profile::{
    Profile, Sample, SampledProcess, SampledThread, SampledTime, SamplerCost, SamplingEnd,
};

/// How often descendants are looked for.
const SCAN_EVERY: Duration = Duration::from_millis(50);
/// The least time between two attempts to attach one process.
const RETRY_ATTACH: Duration = Duration::from_millis(10);
/// How many sampling errors are kept as examples.
const ERROR_EXAMPLES: usize = 5;

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
