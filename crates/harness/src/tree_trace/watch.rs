//! The processes watched beside the sampler every [`super::WATCH_PERIOD`]:
//! their CPU time, RSS, thread names, and the parent's waits that `/proc`
//! proves.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use timeline::monotonic_ns;

use super::WATCH_PERIOD;

/// What the watcher read.
#[derive(Debug, Default)]
pub(super) struct Watched {
    /// Each process's readings: (t_ns, CPU ns, RSS bytes).
    pub(super) usage: BTreeMap<u32, Vec<(u64, u64, u64)>>,
    /// The root's threads, by tid, with their kernel names.
    pub(super) root_threads: BTreeMap<u32, String>,
    /// Each proven wait seen: (t_ns, the root's thread, the worker).
    pub(super) waits: Vec<(u64, u32, u32)>,
}

#[derive(Debug)]
pub(super) struct Watch {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) thread: JoinHandle<Watched>,
}

impl Watch {
    pub(super) fn start(root: u32) -> Watch {
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

    pub(super) fn stop(self) -> Watched {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// One look at the tree: each process's CPU and RSS, the root's thread
/// names, and its proven waits on its descendants.
pub(super) fn watch_once(root: u32, tree: &mut pystacks::tree::ProcessTree, watched: &mut Watched) {
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
