//! Where a run's processes ran: the CPU pinning that was done, as the
//! run's environment record keeps it.

use serde::{Deserialize, Serialize};

/// Where the trials' processes ran: the CPU pinning that was done, for the
/// environment record. Filled by `spawn::affinity::place`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The CPUs the harness could run on when it started (its affinity).
    pub available: Vec<usize>,
    /// The CPU set every worker, A and B alike, was started on; empty when
    /// the workers were not pinned.
    pub workers: Vec<usize>,
    /// The CPUs the harness's trial thread was moved to, off the workers'
    /// set; absent when it stayed where it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<Vec<usize>>,
    /// What was not done, and why (one CPU only, a refused
    /// `sched_setaffinity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}
