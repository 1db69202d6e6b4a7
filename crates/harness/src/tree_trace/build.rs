//! The finished trace: each sampled process a track with its threads'
//! timed stacks, counters and proven waits, the spans placed on theirs.

use std::collections::{BTreeMap, BTreeSet};

use ::trace::flame::{Frame, TimedStack};
use ::trace::{Counter, Point, Process, Thread, Trace, Unit};
use pystacks::Profile;

use super::waits::{add_wait, wait_flows, wait_runs};
use super::watch::Watched;

/// A sampled thread's id as the trace's: the kernel's, or the
/// interpreter's folded into 32 bits where the kernel's was not read.
pub(super) fn tid_of(thread: u64) -> u32 {
    u32::try_from(thread).unwrap_or((thread ^ (thread >> 32)) as u32)
}

/// The trace of what was sampled and watched.
pub(super) fn build(root: u32, profile: &Profile, watched: &Watched) -> Trace {
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
pub(super) fn process_track(p: &pystacks::SampledProcess, watched: &Watched) -> Process {
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
