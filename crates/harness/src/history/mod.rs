//! The start-up history's two jobs over [`history::Store`]: measuring
//! commits into it ([`mod@record`]: `history record`, `bench --record`) and
//! reading a target's series back ([`show`]: `history show`, its change
//! points confirmed by re-measuring).
//!
//! It does not own the store's schema (`history`), the change-point
//! statistics (`phases::changepoint`) or the way two commits are
//! compared (`crate::diff::compare_commits`): it joins them.

pub mod record;
pub mod show;
#[cfg(test)]
pub(crate) mod testruns;

pub use record::{
    HistoryOptions, RecordProgress, Recorded, Shard, check_run, commit_info, commits, current_run,
    diff_runs, dirty, environment, record,
};
