//! CPU placement: which CPUs a worker runs on, and moving the harness's own
//! thread off them, so a benchmark's trials all run on the same CPUs, A
//! and B alike, and the harness's reading and stamping does not compete
//! with the worker it times.
//!
//! - [`crate::Command::cpus`] starts a worker on a CPU set
//!   (`sched_setaffinity` in the child, after `fork` and before `exec`, so
//!   the interpreter's very first instruction already runs there; every
//!   thread and process it starts inherits the set).
//! - [`pin_current_thread`] moves the calling thread; threads it starts
//!   afterwards (each worker's reader and waiter threads) inherit its CPUs.
//! - [`plan`] splits the CPUs the harness may use between the workers and
//!   the harness; [`place`] does it for the calling thread and returns the
//!   [`Placement`] record for the run's environment block.
//!
//! Linux only (`sched_getaffinity`, `sched_setaffinity`); elsewhere every
//! call reports [`AffinityError::Unsupported`] and [`place`] records that
//! nothing was pinned.

use std::io;

pub use timeline::Placement;

/// What can go wrong when reading or setting CPU affinity.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AffinityError {
    /// An empty CPU set.
    #[error("no CPU given to run on: name at least one (e.g. 0)")]
    Empty,
    /// A CPU number a CPU set cannot hold.
    #[error(
        "CPU {cpu} is beyond the {max} CPUs a CPU set can name: pick CPUs from 0 to `nproc` - 1"
    )]
    OutOfRange {
        /// The CPU asked for.
        cpu: usize,
        /// How many CPUs a set can name.
        max: usize,
    },
    /// `sched_getaffinity` failed.
    #[error("could not read the CPUs this thread may run on: {0}")]
    Read(#[source] io::Error),
    /// `sched_setaffinity` failed.
    #[error(
        "could not pin {who} to CPU {cpus}: {source}; pick CPUs this process may run on (`taskset -pc $$` lists them)"
    )]
    Pin {
        /// `the worker` or `the harness thread`.
        who: &'static str,
        /// The set asked for, as a list (`1,3`).
        cpus: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Not on Linux.
    #[error("CPU pinning needs Linux (sched_setaffinity); run without pinning")]
    Unsupported,
}

/// A CPU list as `taskset -c` writes it: `0,2,3`.
pub fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(target_os = "linux")]
mod sys {
    use super::AffinityError;
    use std::io;

    /// How many CPUs a `cpu_set_t` can name.
    pub const MAX_CPUS: usize = 8 * std::mem::size_of::<libc::cpu_set_t>();

    /// A CPU set, built before `fork` so the child only makes the syscall.
    #[derive(Clone, Copy)]
    pub struct CpuSet(libc::cpu_set_t);

    impl std::fmt::Debug for CpuSet {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_list().entries(self.cpus()).finish()
        }
    }

    impl CpuSet {
        pub fn new(cpus: &[usize]) -> Result<CpuSet, AffinityError> {
            if cpus.is_empty() {
                return Err(AffinityError::Empty);
            }
            // SAFETY: cpu_set_t is a plain bit array; all zeros is empty.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            for &cpu in cpus {
                if cpu >= MAX_CPUS {
                    return Err(AffinityError::OutOfRange { cpu, max: MAX_CPUS });
                }
                // SAFETY: `cpu` is below the set's capacity (checked above).
                unsafe { libc::CPU_SET(cpu, &mut set) };
            }
            Ok(CpuSet(set))
        }

        pub fn cpus(&self) -> Vec<usize> {
            (0..MAX_CPUS)
                // SAFETY: `c` is below the set's capacity.
                .filter(|&c| unsafe { libc::CPU_ISSET(c, &self.0) })
                .collect()
        }

        /// Applies the set to the calling thread. Async-signal-safe (one
        /// syscall, no allocation): usable between `fork` and `exec`.
        pub fn apply(&self) -> io::Result<()> {
            // SAFETY: a valid cpu_set_t of the size given; pid 0 is the
            // calling thread.
            let rc = unsafe {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0)
            };
            if rc == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        }

        pub fn of_current_thread() -> io::Result<CpuSet> {
            // SAFETY: as in `new`.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: a valid, writable cpu_set_t of the size given.
            let rc = unsafe {
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set)
            };
            if rc == 0 {
                Ok(CpuSet(set))
            } else {
                Err(io::Error::last_os_error())
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use super::AffinityError;
    use std::io;

    pub const MAX_CPUS: usize = 1024;

    #[derive(Debug, Clone, Copy)]
    pub struct CpuSet;

    impl CpuSet {
        pub fn new(_: &[usize]) -> Result<CpuSet, AffinityError> {
            Err(AffinityError::Unsupported)
        }
        pub fn cpus(&self) -> Vec<usize> {
            Vec::new()
        }
        pub fn apply(&self) -> io::Result<()> {
            Err(io::ErrorKind::Unsupported.into())
        }
        pub fn of_current_thread() -> io::Result<CpuSet> {
            Err(io::ErrorKind::Unsupported.into())
        }
    }
}

pub(crate) use sys::CpuSet;

/// How many CPUs a CPU set can name (CPU numbers run below this).
pub const MAX_CPUS: usize = sys::MAX_CPUS;

/// The CPUs the calling thread may run on, ascending.
pub fn current_cpus() -> Result<Vec<usize>, AffinityError> {
    if cfg!(not(target_os = "linux")) {
        return Err(AffinityError::Unsupported);
    }
    CpuSet::of_current_thread()
        .map(|s| s.cpus())
        .map_err(AffinityError::Read)
}

/// Pins the calling thread to `cpus`. Threads it starts afterwards inherit
/// the set; processes it starts do too, unless their [`crate::Command`]
/// names its own.
pub fn pin_current_thread(cpus: &[usize]) -> Result<(), AffinityError> {
    let set = CpuSet::new(cpus)?;
    set.apply().map_err(|source| AffinityError::Pin {
        who: "the harness thread",
        cpus: cpu_list(cpus),
        source,
    })
}

/// Splits `available` CPUs (ascending) between the workers and the
/// harness, without doing anything: with two or more, the workers get the
/// last `workers_at_once` (at least one, leaving at least one) and the
/// harness the rest; with one, nothing is pinned.
pub fn plan(available: &[usize], workers_at_once: usize) -> Placement {
    let mut available = available.to_vec();
    available.sort_unstable();
    available.dedup();
    let n = available.len();
    if n < 2 {
        return Placement {
            note: Some(if n == 1 {
                "one CPU available: the workers and the harness share it".to_owned()
            } else {
                "no CPU list available: nothing pinned".to_owned()
            }),
            available,
            workers: Vec::new(),
            harness: None,
        };
    }
    let k = workers_at_once.clamp(1, n - 1);
    Placement {
        workers: available[n - k..].to_vec(),
        harness: Some(available[..n - k].to_vec()),
        available,
        note: None,
    }
}

/// Reads the calling thread's CPUs, [`plan`]s them, and pins the calling
/// thread to the harness's share. Returns the record; pass its `workers` to
/// [`crate::Command::cpus`] (when not empty) for every trial, A and B. Call
/// it once, from the thread that will start the workers, before the first.
/// Nothing here fails the run: what could not be done is in `note` (and
/// then `harness` is absent; `workers` stays, so A and B still share CPUs).
pub fn place(workers_at_once: usize) -> Placement {
    let available = match current_cpus() {
        Ok(cpus) => cpus,
        Err(e) => {
            return Placement {
                available: Vec::new(),
                workers: Vec::new(),
                harness: None,
                note: Some(format!("nothing pinned: {e}")),
            };
        }
    };
    let mut p = plan(&available, workers_at_once);
    if let Some(harness) = p.harness.clone()
        && let Err(e) = pin_current_thread(&harness)
    {
        p.harness = None;
        p.note = Some(format!("the harness was not moved: {e}"));
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_split_the_cpus() {
        let p = plan(&[0, 1], 1);
        assert_eq!(
            (p.workers.as_slice(), p.harness.as_deref()),
            (&[1][..], Some(&[0][..]))
        );
        let p = plan(&[3, 0, 2, 1], 2);
        assert_eq!(p.available, [0, 1, 2, 3]);
        assert_eq!(
            (p.workers.as_slice(), p.harness.as_deref()),
            (&[2, 3][..], Some(&[0, 1][..]))
        );
        // More workers than CPUs: the harness keeps one.
        let p = plan(&[0, 1, 2], 8);
        assert_eq!(p.workers, [1, 2]);
        assert_eq!(p.harness, Some(vec![0]));
        // One CPU: nothing to separate.
        let p = plan(&[5], 1);
        assert!(p.workers.is_empty() && p.harness.is_none());
        assert!(p.note.unwrap().starts_with("one CPU available"));
    }

    #[test]
    fn sets_are_checked() {
        assert!(matches!(CpuSet::new(&[]), Err(AffinityError::Empty)));
        assert!(matches!(
            CpuSet::new(&[MAX_CPUS]),
            Err(AffinityError::OutOfRange { .. })
        ));
        assert_eq!(CpuSet::new(&[3, 1]).unwrap().cpus(), [1, 3]);
        assert_eq!(cpu_list(&[0, 2, 3]), "0,2,3");
        let e = AffinityError::OutOfRange {
            cpu: 5000,
            max: 1024,
        };
        assert_eq!(
            e.to_string(),
            "CPU 5000 is beyond the 1024 CPUs a CPU set can name: pick CPUs from 0 to `nproc` - 1"
        );
    }

    #[test]
    fn a_thread_pins_itself_and_its_children_inherit() {
        // On a thread of its own, so the test runner's threads keep theirs.
        std::thread::spawn(|| {
            let all = current_cpus().unwrap();
            assert!(!all.is_empty());
            let last = *all.last().unwrap();
            pin_current_thread(&[last]).unwrap();
            assert_eq!(current_cpus().unwrap(), [last]);
            let inherited = std::thread::spawn(|| current_cpus().unwrap())
                .join()
                .unwrap();
            assert_eq!(inherited, [last]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn place_records_what_it_did() {
        std::thread::spawn(|| {
            let before = current_cpus().unwrap();
            let p = place(1);
            assert_eq!(p.available, before);
            match &p.harness {
                Some(h) => {
                    assert_eq!(&current_cpus().unwrap(), h);
                    assert!(h.iter().all(|c| !p.workers.contains(c)));
                    assert_eq!(h.len() + p.workers.len(), before.len());
                }
                None => assert!(p.note.is_some(), "{p:?}"),
            }
        })
        .join()
        .unwrap();
    }
}
