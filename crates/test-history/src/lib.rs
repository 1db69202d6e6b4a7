//! A generated git repository whose worker's start-up changes at known
//! commits: the one history that `cargo xtask bench-history` (beside
//! other change detectors) and the suite's end-to-end history test (every
//! change found at its commit) both measure.
//!
//! The worker (the boundary fixtures' protocol loop, whose source the
//! caller passes) burns a fixed [`BASE_MS`] of CPU at start-up; then, at
//! known commits of the [`COMMITS`]:
//! - [`STEP_UP`]: a +40% step (a module burning [`STEP_MS`] more);
//! - [`DRIFT`]: a drift of about +3% a commit (a module burning
//!   [`DRIFT_MS`] more each commit);
//! - [`FORBIDDEN`]: a forbidden import arriving (`import torch` at
//!   `src/app/__main__.py`, line [`FORBIDDEN_LINE`] at that commit; torch is a
//!   **stand-in** generated here, not the real library, that burns
//!   [`TORCH_MS`] as an import does);
//! - [`STEP_DOWN`]: the first step reversed.
//!
//! The other commits change only `NOTES.md`: the flat stretches.
//!
//! It owns the repository's shape and nothing of how it is measured or
//! judged (the callers run coldstart on it).

use std::io;
use std::ops::RangeInclusive;
use std::path::Path;
use std::process::Command;

/// The commits generated.
pub const COMMITS: usize = 40;
/// CPU burnt at start-up by every commit's worker, in ms.
pub const BASE_MS: usize = 100;
/// The commit of the +40% step.
pub const STEP_UP: usize = 8;
/// The step's CPU, in ms.
pub const STEP_MS: usize = 55;
/// The drift's commits, each burning [`DRIFT_MS`] more than the one before.
pub const DRIFT: RangeInclusive<usize> = 16..=25;
/// The drift's CPU a commit, in ms.
pub const DRIFT_MS: usize = 6;
/// The commit where the forbidden import (the stand-in torch) arrives.
pub const FORBIDDEN: usize = 31;
/// The line of `src/app/__main__.py` that imports it, at [`FORBIDDEN`].
pub const FORBIDDEN_LINE: u32 = 5;
/// The stand-in torch's CPU at import, in ms.
pub const TORCH_MS: usize = 60;
/// The commit where the first step is reversed.
pub const STEP_DOWN: usize = 36;

/// Python source that burns `ms` of CPU when imported (measured with
/// `time.process_time`, so a loaded machine stretches its wall time, not
/// its CPU time).
pub fn busy(ms: usize) -> String {
    format!(
        "import time\n\n_start = time.process_time()\nwhile time.process_time() - _start < {}:\n    pass\n",
        ms as f64 / 1e3
    )
}

fn write(root: &Path, rel: &str, text: &str) -> io::Result<()> {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("a file in a folder"))?;
    std::fs::write(&p, text)
}

/// Runs git in `root` as a fixed author; its trimmed stdout.
pub fn git(root: &Path, args: &[&str]) -> io::Result<String> {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=history",
            "-c",
            "user.email=history@example.com",
        ])
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(root)
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "git {args:?} in {}: {}",
            root.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The worker's `__main__.py` at commit `i`.
fn main_at(i: usize) -> String {
    let mut main = String::from("import protokit\nimport app.base_work\n");
    if (STEP_UP..STEP_DOWN).contains(&i) {
        main.push_str("import app.step\n");
    }
    if i >= *DRIFT.start() {
        main.push_str("import app.drift\n");
    }
    if i >= FORBIDDEN {
        main.push_str("import torch\n");
    }
    main.push_str("\nprotokit.serve()\n");
    main
}

/// Generates the repository at `root` (removed first if it exists): a
/// `coldstart.toml` whose one target `w` runs `python -m app` with
/// `src` and `stand-ins` on its path, `src/protokit.py` from
/// `protokit_source`, and the [`COMMITS`] commits on branch `main`; their
/// hashes, oldest first. Commit `i`'s subject is `subject(i)`.
pub fn generate(
    root: &Path,
    python: &str,
    protokit_source: &str,
    subject: &dyn Fn(usize) -> String,
) -> io::Result<Vec<String>> {
    if root.exists() {
        std::fs::remove_dir_all(root)?;
    }
    std::fs::create_dir_all(root)?;
    git(root, &["init", "-q", "-b", "main"])?;
    write(root, "src/protokit.py", protokit_source)?;
    write(root, ".gitignore", "__pycache__/\n")?;
    write(root, "src/app/__init__.py", "")?;
    write(root, "src/app/base_work.py", &busy(BASE_MS))?;
    let python = python.replace('\\', "\\\\").replace('"', "\\\"");
    write(
        root,
        "coldstart.toml",
        &format!(
            "[[target]]\nname = \"w\"\ncommand = [\"{python}\", \"-m\", \"app\"]\nenv = {{ PYTHONPATH = \"src:stand-ins\" }}\n"
        ),
    )?;
    let mut commits = Vec::with_capacity(COMMITS);
    for i in 0..COMMITS {
        if i == STEP_UP {
            write(root, "src/app/step.py", &busy(STEP_MS))?;
        }
        if DRIFT.contains(&i) {
            let k = i + 1 - DRIFT.start();
            write(root, "src/app/drift.py", &busy(DRIFT_MS * k))?;
        }
        if i == FORBIDDEN {
            write(
                root,
                "stand-ins/torch/__init__.py",
                &format!(
                    "\"\"\"STAND-IN generated by coldstart's test-history: not the real torch; burns CPU as an import does.\"\"\"\n{}",
                    busy(TORCH_MS)
                ),
            )?;
        }
        write(root, "src/app/__main__.py", &main_at(i))?;
        write(root, "NOTES.md", &format!("commit {i}\n"))?;
        git(root, &["add", "-A"])?;
        git(root, &["commit", "-q", "-m", &subject(i)])?;
        commits.push(git(root, &["rev-parse", "HEAD"])?);
    }
    Ok(commits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forbidden_import_is_on_its_line_from_its_commit_on() {
        for i in 0..COMMITS {
            let main = main_at(i);
            let line = main.lines().position(|l| l == "import torch");
            assert_eq!(line.is_some(), i >= FORBIDDEN, "commit {i}:\n{main}");
        }
        let at = main_at(FORBIDDEN).lines().position(|l| l == "import torch");
        assert_eq!(at, Some(FORBIDDEN_LINE as usize - 1));
    }
}
