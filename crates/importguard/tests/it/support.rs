//! The one support module of importguard's integration tests: where the
//! workspace's fixtures are and which Python runs them.

use std::path::{Path, PathBuf};

/// The real interpreter behind `python3` (or `$COLDSTART_PYTHON`): the one
/// lookup, `test_interpreters::default_python`.
pub use test_interpreters::default_python as python;

/// The workspace's `tests/fixtures/`, as an absolute path without `..`
/// (the recorder reports files by their real paths).
pub fn fixtures() -> PathBuf {
    std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures"))
        .expect("the workspace's tests/fixtures")
}
