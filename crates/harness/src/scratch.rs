//! The private temporary folders of instrumented workers (the import
//! recorder's records, lazy's RSS readings and trial files, the memory
//! view's readings), each owned by this process ([`spawn::owned`]): a run
//! killed outright (SIGKILL: a CI job's hard timeout, the OOM killer)
//! cannot remove them, and the next run of any of these instruments does,
//! once, at its first folder.
//!
//! It owns where those folders are and when orphans go; what is written
//! into them is the instruments' own.

use std::sync::Once;

use crate::error::{Error, Result};

/// The recorder's private folders.
pub(crate) const RECORDER: &str = importguard::recorder::PRIVATE_PREFIX;
/// Lazy's RSS readings and its trials' bench files.
pub(crate) const LAZY: &str = "coldstart-lazy-";
/// The memory view's readings.
pub(crate) const MEMORY: &str = "coldstart-memory-";

/// A fresh private folder named `prefix`..., owned by this process, `note`
/// saying what it holds; the first call of a process first removes every
/// folder of these prefixes whose owner is gone.
pub(crate) fn private_dir(prefix: &str, note: &str) -> Result<tempfile::TempDir> {
    static SWEPT: Once = Once::new();
    SWEPT.call_once(|| {
        for p in [RECORDER, LAZY, MEMORY] {
            for orphan in spawn::owned::sweep(p) {
                let _ = spawn::owned::remove(&orphan);
            }
        }
    });
    spawn::owned::tempdir(prefix, note).map_err(|e| Error::io("create", &std::env::temp_dir(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_owned_and_an_orphan_of_a_dead_owner_is_swept_first() {
        // An orphan: its owner's pid is above the kernel's maximum.
        let orphan = tempfile::Builder::new()
            .prefix(MEMORY)
            .tempdir()
            .unwrap()
            .keep();
        std::fs::write(
            orphan.join(spawn::owned::OWNER_FILE),
            format!("{}\n1\nan old view\n", u32::MAX - 1),
        )
        .unwrap();
        let dir = private_dir(RECORDER, "a test's records").unwrap();
        let owner = std::fs::read_to_string(dir.path().join(spawn::owned::OWNER_FILE)).unwrap();
        assert!(
            owner.starts_with(&format!("{}\n", std::process::id())),
            "{owner}"
        );
        assert!(
            dir.path()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(RECORDER)
        );
        assert!(!orphan.exists(), "{} was swept", orphan.display());
    }
}
