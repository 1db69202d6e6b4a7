//! Live processes coldstart did not start: a running worker, a hung
//! pipeline, the Rust service that owns the workers. The stacks of every
//! Python process at or below a pid, once ([`dump`]); a sampler kept
//! running for a live view ([`sample`]); and a recording written in one of
//! the formats `profile` writes ([`StackRecorder`], [`record`]).
//!
//! The reading is `pystacks`'s (py-spy as a library), the rendering
//! `report`'s; nothing here starts, stops or signals the processes read:
//! they are not paused unless [`LiveOptions::blocking`] asks (or native
//! frames, which need the process stopped while it is unwound).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use pystacks::{
    CollapsedStack, Dump, FrameTotal, NATIVE, NATIVE_UNAVAILABLE, NativeStacks, ParentWait,
    ProcessDump, ProcessLabel, Profile, ProvenWait, PythonStacks, SampleWindow, SampledProcess,
    SampledTime, Sampler, SamplingEnd, ThreadStack, top_frames,
};

use crate::error::{Error, Result, invalid};
use crate::interrupt::Interrupt;

/// The rate when none is asked for: py-spy's default.
pub const DEFAULT_RATE: u32 = 100;

/// The most of the time the sampler spends reading when no rate is asked
/// for: the rate is lowered for a process too large to read that often.
pub const MAX_READING_SHARE: f64 = 0.05;

/// How to read a live process.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveOptions {
    /// Follow the process's descendants too.
    pub subprocesses: bool,
    /// Native (C/C++) frames under the Python ones (a build with the
    /// `native` feature).
    pub native: bool,
    /// Pause each process while it is read (py-spy's default; off here).
    pub blocking: bool,
    /// Samples per second; `None`: [`DEFAULT_RATE`], lowered when reading
    /// would take more than [`MAX_READING_SHARE`] of the time.
    pub rate: Option<u32>,
    /// Keep samples of idle threads too.
    pub idle: bool,
}

impl Default for LiveOptions {
    /// Subprocesses followed, Python frames only, not paused, the
    /// adaptive default rate, idle threads left out.
    fn default() -> Self {
        LiveOptions {
            subprocesses: true,
            native: false,
            blocking: false,
            rate: None,
            idle: false,
        }
    }
}

impl LiveOptions {
    /// The rate sampling starts at.
    pub fn rate_hz(&self) -> u32 {
        self.rate.unwrap_or(DEFAULT_RATE)
    }

    pub(crate) fn sampler(&self, deadline: Option<Duration>) -> Result<pystacks::SamplerOptions> {
        if self.rate == Some(0) {
            invalid!("--rate must be at least 1 sample per second");
        }
        Ok(pystacks::SamplerOptions {
            rate_hz: self.rate_hz(),
            subprocesses: self.subprocesses,
            include_idle: self.idle,
            deadline,
            pause: self.blocking,
            native: self.native,
            max_reading_share: self.rate.is_none().then_some(MAX_READING_SHARE),
            ..pystacks::SamplerOptions::default()
        })
    }
}

/// The processes a live command reads: the pids given, or those whose
/// command line matches a pattern (`pgrep -f`'s job).
pub fn select(pids: &[u32], pattern: Option<&str>) -> Result<Vec<u32>> {
    let mut out = pids.to_vec();
    if let Some(pattern) = pattern {
        let found = pystacks::tree::matching(pattern).map_err(Error::Pattern)?;
        if found.is_empty() && pids.is_empty() {
            invalid!("no running process has a command line matching {pattern:?}");
        }
        out.extend(found.into_iter().map(|p| p.pid));
    }
    if out.is_empty() {
        invalid!("name a process: a PID, or --match PATTERN on command lines");
    }
    // A match below another selected process is dumped with it already.
    let all = out.clone();
    out.retain(|pid| {
        !pystacks::tree::parent_chain(*pid)
            .iter()
            .any(|p| p.pid != *pid && all.contains(&p.pid))
    });
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|pid| seen.insert(*pid));
    Ok(out)
}

/// Every thread's stack of `pid` and, with [`LiveOptions::subprocesses`],
/// of every Python process below it, each with its chain of parents. A
/// `pid` that is not Python (a shell, the Rust service) is searched for
/// Python descendants and its own threads listed ([`NativeStacks`]; with
/// [`LiveOptions::native`] unwound); `Err` when no process could be read
/// (or the kernel refuses).
pub fn dump(pid: u32, options: &LiveOptions, timeout: Duration) -> Result<Dump> {
    pystacks::dump(
        pid,
        &pystacks::DumpOptions {
            timeout,
            subprocesses: options.subprocesses,
            pause: options.blocking,
            native: options.native,
            parent_chains: true,
        },
    )
    .map_err(Error::Stacks)
}

/// `coldstart dump --format json`'s answer ([`answers::dump`]): every process of
/// `dumps`, and each pid of `failed` with what went wrong.
pub fn dump_answer(dumps: &[Dump], failed: &[(u32, Error)]) -> answers::dump::DumpJson {
    use answers::dump::{
        ChainLink, DumpError, DumpJson, DumpedFrame, DumpedProcess, DumpedThread, NativeThreads,
        Python, SCHEMA, WorkerState,
    };
    let frame = |f: &pystacks::Frame| DumpedFrame {
        name: f.name.clone(),
        filename: f.filename.clone(),
        short_filename: f.short_filename.clone(),
        line: f.line,
    };
    let thread = |t: &ThreadStack| DumpedThread {
        thread_id: t.thread_id,
        os_thread_id: t.os_thread_id,
        name: t.name.clone(),
        status: t.status(),
        active: t.active,
        owns_gil: t.owns_gil,
        frames: t.frames.iter().map(frame).collect(),
    };
    let process = |p: &ProcessDump| {
        let (python, threads, error) = match &p.outcome {
            Ok(s) => (
                Some(Python {
                    version: s.version.clone(),
                    exe: s.exe.clone(),
                }),
                s.threads.iter().map(thread).collect(),
                None,
            ),
            // A process that is not Python whose threads were read is no
            // error: it was read, as what it is.
            Err(pystacks::Error::NotPython { .. }) if matches!(p.native, Some(Ok(_))) => {
                (None, Vec::new(), None)
            }
            Err(e) => (None, Vec::new(), Some(e.to_string())),
        };
        let native = p.native.as_ref().map(|n| match n {
            Ok(n) => NativeThreads::Read {
                exe: n.exe.clone(),
                unwound: n.unwound,
                threads: n.threads.iter().map(thread).collect(),
                unknown_frames: n.unknown_frames(),
            },
            Err(e) => NativeThreads::Failed {
                error: e.to_string(),
            },
        });
        DumpedProcess {
            pid: p.pid,
            parent: p.parent,
            command: p.command.clone(),
            parent_chain: p
                .chain
                .iter()
                .map(|c| ChainLink {
                    pid: c.pid,
                    command: c.command.clone(),
                })
                .collect(),
            python,
            threads,
            error,
            native,
        }
    };
    DumpJson {
        schema: SCHEMA,
        processes: dumps
            .iter()
            .flat_map(|d| d.processes.iter().map(process))
            .collect(),
        parent_wait: dumps
            .first()
            .and_then(Dump::parent_wait)
            .map(|w| answers::dump::ParentWait {
                pid: w.pid,
                threads: w.threads,
                idle: w.idle,
                workers: w
                    .workers
                    .iter()
                    .map(|s| WorkerState {
                        pid: s.pid,
                        busy: s.busy,
                        active_threads: s.active_threads,
                        at: s.at.as_ref().map(frame),
                        in_python: s.in_python,
                    })
                    .collect(),
                waits: w
                    .waits
                    .iter()
                    .map(|p| answers::dump::ProvenWait {
                        thread: p.thread,
                        name: p.name.clone(),
                        fd: p.fd,
                        worker: p.worker,
                    })
                    .collect(),
            }),
        errors: failed
            .iter()
            .map(|(pid, e)| DumpError {
                pid: *pid,
                error: e.to_string(),
            })
            .collect(),
    }
}

/// What a table of sampled frames stands for ([`report::profile::top_table`]'s
/// header): `time`'s samples and CPU time, over `rounds` sampling rounds in
/// `seconds` (the rate actually used), beside the CPU time the kernel
/// counted for the sampled processes over them (`kernel_cpu_ns`).
pub fn sample_summary(
    time: &SampledTime,
    rounds: u64,
    seconds: f64,
    kernel_cpu_ns: Option<u64>,
) -> report::profile::SampleSummary {
    report::profile::SampleSummary {
        samples: time.samples,
        on_cpu: time.on_cpu,
        cpu_ms: time.cpu_ns as f64 / 1e6,
        rounds,
        seconds,
        kernel_cpu_ms: kernel_cpu_ns.map(|ns| ns as f64 / 1e6),
    }
}

/// A sampler started on `pid` and left running (a live view takes its
/// windows); it stops when dropped.
pub fn sample(pid: u32, options: &LiveOptions) -> Result<Sampler> {
    Sampler::start(pid, options.sampler(None)?).map_err(Error::Stacks)
}

/// The file format of a recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// A flame graph SVG (inferno).
    Flamegraph,
    /// A speedscope JSON file.
    Speedscope,
    /// Collapsed stacks (`py-spy record --format raw`).
    Collapsed,
}

/// How to record.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// How to read.
    pub live: LiveOptions,
    /// Stop after this long (else at the processes' exit or an interrupt).
    pub duration: Option<Duration>,
    /// What to write.
    pub format: Format,
    /// Where.
    pub out: PathBuf,
}

/// A finished recording, its file written.
#[derive(Debug)]
pub struct StackRecording {
    /// What was sampled.
    pub profile: Profile,
    /// The aggregated stacks written.
    pub stacks: Vec<CollapsedStack>,
    /// Why it ended: [`SamplingEnd::Stopped`] when a signal (Ctrl-C,
    /// SIGTERM, SIGHUP) asked to stop, even if the duration passed or the
    /// processes exited meanwhile.
    pub ended: SamplingEnd,
    /// The file.
    pub out: PathBuf,
}

/// A recording in progress: the sampler attached, the file created.
#[derive(Debug)]
pub struct StackRecorder {
    pid: u32,
    sampler: Sampler,
    file: std::fs::File,
    format: Format,
    out: PathBuf,
}

impl StackRecorder {
    /// Creates the file (so a folder that cannot be written fails before
    /// any sampling) and starts sampling `pid` (and its subprocesses);
    /// returns once a first Python process is being read.
    pub fn start(pid: u32, options: &RecordOptions) -> Result<StackRecorder> {
        let sampling = options.live.sampler(options.duration)?;
        let (file, created) = open_output(&options.out)?;
        let sampler = match Sampler::start(pid, sampling) {
            Ok(sampler) => sampler,
            Err(e) => {
                // Nothing was recorded: leave the path as it was.
                undo_output(&created);
                return Err(Error::Stacks(e));
            }
        };
        Ok(StackRecorder {
            pid,
            sampler,
            file,
            format: options.format,
            out: options.out.clone(),
        })
    }

    /// Samples until the duration ends, the processes exit, or
    /// `interrupt` is pressed, then writes what was sampled in the asked
    /// format, in every one of those cases.
    pub fn finish(mut self, interrupt: &Interrupt) -> Result<StackRecording> {
        let (profile, ended) = sample_until(self.sampler, interrupt);
        let stacks = profile.collapsed();
        let title = format!("{} (pid {})", command_of(&profile, self.pid), self.pid);
        let report_stacks: Vec<report::profile::SampledStack> = stacks
            .iter()
            .map(|s| report::profile::SampledStack {
                frames: s.frames.clone(),
                samples: s.samples,
            })
            .collect();
        let file = &mut self.file;
        // A file that was there keeps its content until now.
        file.set_len(0)
            .map_err(|e| Error::io("write", &self.out, e))?;
        let written = match self.format {
            Format::Flamegraph => report::profile::flamegraph_svg(&report_stacks, &title, file),
            Format::Speedscope => {
                report::profile::speedscope_profiles(&per_process(&profile), &title, file)
            }
            Format::Collapsed => pystacks::write_collapsed(&stacks, file),
        };
        written.map_err(|e| Error::io("write", &self.out, e))?;
        Ok(StackRecording {
            profile,
            stacks,
            ended,
            out: self.out,
        })
    }
}

/// Waits until `sampler` finishes (its deadline, or every process it reads
/// exited) or `interrupt` is pressed, then stops it: what it sampled, and
/// why it ended (`Stopped` for the interrupt). The interrupt token has no
/// waiting call, so it is looked at a few times a second; the sampler's own
/// deadline and exit detection do the rest. `record` and `trace` both end
/// their sampling here.
pub(crate) fn sample_until(sampler: Sampler, interrupt: &Interrupt) -> (Profile, SamplingEnd) {
    let poll = Duration::from_millis(50);
    let mut next = Instant::now();
    while !sampler.is_finished() && !interrupt.is_set() {
        next += poll;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let profile = sampler.stop();
    let ended = if interrupt.is_set() {
        SamplingEnd::Stopped
    } else {
        profile.stop_reason
    };
    (profile, ended)
}

/// [`StackRecorder::start`] then [`StackRecorder::finish`].
pub fn record(pid: u32, options: &RecordOptions, interrupt: &Interrupt) -> Result<StackRecording> {
    StackRecorder::start(pid, options)?.finish(interrupt)
}

/// One speedscope profile per process sampled (the service and each
/// worker side by side), named `process PID: command`, in the order they
/// were met; one profile even when nothing was sampled.
fn per_process(profile: &Profile) -> Vec<(String, Vec<report::profile::SampledStack>)> {
    let groups: Vec<_> = profile
        .processes
        .iter()
        .map(|p| {
            let stacks: Vec<_> = profile
                .collapsed_where(|s| s.pid == p.pid)
                .into_iter()
                .map(|s| report::profile::SampledStack {
                    frames: s.frames,
                    samples: s.samples,
                })
                .collect();
            (format!("process {}: {}", p.pid, p.command), stacks)
        })
        .filter(|(_, stacks)| !stacks.is_empty())
        .collect();
    if groups.is_empty() {
        let pid = profile.processes.first().map_or(0, |p| p.pid);
        return vec![(command_of(profile, pid), Vec::new())];
    }
    groups
}

fn command_of(profile: &Profile, pid: u32) -> String {
    profile
        .processes
        .iter()
        .find(|p| p.pid == pid)
        .map(|p| p.command.clone())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| format!("process {pid}"))
}

/// The recording's file, opened before sampling starts so that a path
/// that cannot be written fails first, and what was created for it here
/// (the file, then the folders made for it, deepest first), for
/// [`undo_output`] to remove if sampling cannot start. A file that was
/// there is not truncated, so a recording that never starts loses
/// nothing; [`StackRecorder::finish`] empties it before writing.
fn open_output(path: &Path) -> Result<(std::fs::File, Vec<PathBuf>)> {
    let mut created = Vec::new();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let missing = dir
            .ancestors()
            .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
            .map(Path::to_path_buf);
        created.extend(missing);
        if let Err(e) = std::fs::create_dir_all(dir) {
            undo_output(&created);
            return Err(Error::io("create", dir, e));
        }
    }
    let mut open = std::fs::OpenOptions::new();
    open.write(true);
    match open.clone().create_new(true).open(path) {
        Ok(file) => {
            created.insert(0, path.to_path_buf());
            Ok((file, created))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => open
            .open(path)
            .map(|file| (file, created))
            .map_err(|e| Error::io("open", path, e)),
        Err(e) => {
            undo_output(&created);
            Err(Error::io("create", path, e))
        }
    }
}

/// Removes what [`open_output`] created, in its order (a folder only if
/// it is still empty).
fn undo_output(created: &[PathBuf]) {
    for path in created {
        let _ = if path.is_dir() {
            std::fs::remove_dir(path)
        } else {
            std::fs::remove_file(path)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_opened_then_undone_leaves_the_path_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b/rec.svg");
        let (_file, created) = open_output(&nested).unwrap();
        assert_eq!(
            created,
            [nested.clone(), dir.path().join("a/b"), dir.path().join("a")]
        );
        undo_output(&created);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

        let kept = dir.path().join("kept.svg");
        std::fs::write(&kept, "earlier").unwrap();
        let (_file, created) = open_output(&kept).unwrap();
        assert!(created.is_empty());
        undo_output(&created);
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "earlier");
    }

    #[test]
    fn the_default_rate_adapts_and_an_asked_rate_does_not() {
        let auto = LiveOptions::default().sampler(None).expect("valid");
        assert_eq!(auto.rate_hz, DEFAULT_RATE);
        assert_eq!(auto.max_reading_share, Some(MAX_READING_SHARE));
        assert!(!auto.pause);
        let asked = LiveOptions {
            rate: Some(250),
            ..LiveOptions::default()
        }
        .sampler(Some(Duration::from_secs(2)))
        .expect("valid");
        assert_eq!(asked.rate_hz, 250);
        assert_eq!(asked.max_reading_share, None);
        assert_eq!(asked.deadline, Some(Duration::from_secs(2)));
        let zero = LiveOptions {
            rate: Some(0),
            ..LiveOptions::default()
        };
        assert!(zero.sampler(None).is_err());
    }

    #[test]
    fn nothing_selected_says_how_to_name_a_process() {
        let e = select(&[], None).unwrap_err();
        assert!(e.to_string().contains("--match"), "{e}");
        let e = select(&[], Some("(")).unwrap_err();
        assert!(e.to_string().contains("not a valid pattern"), "{e}");
        let e = select(&[], Some("no-process-has-this-command-line-7c1f")).unwrap_err();
        assert!(e.to_string().contains("no running process"), "{e}");
    }
}
