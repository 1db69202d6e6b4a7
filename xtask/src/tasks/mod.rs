//! The workspace-only tasks; each has an `Args` (clap) and a `run`.

pub mod bench_history;
pub mod bench_native;
pub mod bench_parser;
pub mod dist;
pub mod dupnames;
pub mod interpreters;
pub mod modcycles;
pub mod self_check;
pub mod steps;
pub mod system;
pub mod test;
pub mod venv;
pub mod viewers;

use std::path::{Path, PathBuf};

/// The workspace root: the parent of xtask's manifest directory.
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}
