//! What one stored run is: its keys (commit, target, environment), its
//! raw trials and its start-up import tree.

use importguard::recorder::CallSite;
use serde::{Deserialize, Serialize};
use timeline::TrialRecord;

/// The commit a run measured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commit {
    /// Its full object name.
    pub sha: String,
    /// Its first parent (none for a root commit).
    pub parent: Option<String>,
    /// The branch it was recorded on, when it was on one.
    pub branch: Option<String>,
    /// Its committer time, seconds since the Unix epoch.
    pub time_unix_s: i64,
}

/// What has to be equal for two runs to be one series: the interpreter
/// build, the installed distributions, the CPU and the limits the workers
/// ran under. Runs of different environments are never compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    /// The interpreter build: implementation, version, free-threaded or
    /// not, its `sys.executable`.
    pub interpreter: String,
    /// [`content_hash`] of the sorted `name==version` lines of the
    /// distributions installed for that interpreter.
    pub packages_hash: String,
    /// The CPU's `model name` from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// The CPU quota and memory limit of each worker (`timeline::Limits`),
    /// `none` when unconfined.
    pub limits: String,
}

impl Environment {
    /// The environment's key in the store: [`content_hash`] of its four
    /// fields.
    pub fn fingerprint(&self) -> String {
        content_hash([
            self.interpreter.as_str(),
            self.packages_hash.as_str(),
            self.cpu_model.as_str(),
            self.limits.as_str(),
        ])
    }
}

/// A stable 128-bit hash of `parts` in order, as 32 hex digits: two
/// FNV-1a 64 passes with different offsets, each part ended by a NUL so
/// `["ab", "c"]` and `["a", "bc"]` differ. Stable across builds and
/// machines (it is stored), not a defence against a chosen collision.
pub fn content_hash<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = [0xcbf2_9ce4_8422_2325_u64, 0x6c62_272e_07bb_0142_u64];
    for part in parts {
        for b in part.bytes().chain([0]) {
            for x in &mut h {
                *x ^= u64::from(b);
                *x = x.wrapping_mul(PRIME);
            }
        }
    }
    format!("{:016x}{:016x}", h[0], h[1])
}

/// One run's natural key: a commit, a target, an environment
/// ([`Environment::fingerprint`]). The store holds at most one run per key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RunKey {
    /// The commit's full object name.
    pub commit: String,
    /// The target's name.
    pub target: String,
    /// The environment's fingerprint.
    pub environment: String,
}

/// Whether the run measured its commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RunOutcome {
    /// The trials ran (each trial keeps its own outcome).
    Measured,
    /// The commit could not be measured (its worker did not start, its
    /// `setup` failed, it ran code from outside its tree): stored so the
    /// commit is not tried again in this environment.
    Failed {
        /// What went wrong, for a person.
        message: String,
    },
}

/// One module of a start-up import tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleTime {
    /// The module's dotted name.
    pub module: String,
    /// Its cumulative import time (itself and what it imported), µs.
    pub cumulative_us: u64,
    /// Its own import time, µs.
    pub self_us: u64,
    /// Whether it is the project's own code.
    pub first_party: bool,
    /// The first-party line that imported it, when the recorder saw one.
    pub imported_at: Option<CallSite>,
}

/// One measured commit of one target in one environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    /// The commit.
    pub commit: Commit,
    /// The target's name.
    pub target: String,
    /// The coldstart version that measured it.
    pub tool_version: String,
    /// Where it was measured.
    pub environment: Environment,
    /// When it was stored, milliseconds since the Unix epoch.
    pub recorded_unix_ms: i64,
    /// Measured, or why not.
    pub outcome: RunOutcome,
    /// The raw trials, in order.
    pub trials: Vec<TrialRecord>,
    /// The start-up import tree of one instrumented process.
    pub modules: Vec<ModuleTime>,
}

impl Run {
    /// The run's natural key.
    pub fn key(&self) -> RunKey {
        RunKey {
            commit: self.commit.sha.clone(),
            target: self.target.clone(),
            environment: self.environment.fingerprint(),
        }
    }
}

/// A run read back from the store, with its row id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRun {
    /// The store's id of the run (stable within one store).
    pub id: i64,
    /// The run.
    pub run: Run,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_content_hash_is_stable_and_separates_parts() {
        // Stored in every history: a change here splits every series.
        assert_eq!(content_hash([""]), content_hash([""]));
        assert_eq!(content_hash(["a", "b"]).len(), 32);
        assert_ne!(content_hash(["ab", "c"]), content_hash(["a", "bc"]));
        assert_eq!(
            content_hash(["numpy==2.1.0"]),
            "11e5dfeed5bee671a862ee3f882a91a0"
        );
    }
}
