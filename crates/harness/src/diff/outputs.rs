//! Build outputs: what the base's fresh checkout lacks because git ignores
//! it (a maturin, PyO3, Cython or C extension built in place), and the
//! target's `setup`, which builds it.
//!
//! Before anything is measured:
//! - with a `setup` command, it runs in each tree (`COLDSTART_SIDE=base`
//!   or `head` in its environment, in the tree's counterpart of the
//!   target's `cwd`); its result is cached by the tree's hash (git's tree
//!   id of the commit, or of the working tree with its untracked files): a
//!   working tree whose hash and outputs are unchanged since the last
//!   successful run is not built again, and the base's new ignored files
//!   are kept in the cache and copied into the next checkout of the same
//!   tree;
//! - without one, every extension module the working tree has and git
//!   ignores, which the base's checkout lacks, is carried into it when no
//!   non-Python file differs between the two trees (the build's inputs are
//!   the same, so the working tree's build is the base's too). When
//!   non-Python files differ it is not carried: a base that then fails to
//!   start is told to set `setup` ([`advice`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::git::git_ok as git;
use crate::error::{Error, Result};
use crate::target::Target;

/// How long a `setup` command may take.
const SETUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1800);

/// What was done to the trees, and what could not be.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prepared {
    /// Lines for the report: each file carried, each setup run or reused.
    pub notes: Vec<String>,
    /// Ignored extension modules of the working tree the base lacks and
    /// did not get (non-Python files differ and there is no `setup`).
    pub missing: Vec<PathBuf>,
    /// The non-Python files that differ (at most a few, for messages).
    pub changed: Vec<String>,
}

/// Whether a file name is a compiled extension module's.
pub fn is_extension(name: &str) -> bool {
    name.ends_with(".so") || name.ends_with(".pyd") || name.contains(".so.")
}

/// The files git ignores in `tree`, relative (ignored folders collapsed:
/// a `target/` or `.venv/` is one entry, and skipped).
fn ignored_files(tree: &Path) -> Result<Vec<PathBuf>> {
    let text = git(
        tree,
        &[
            "ls-files",
            "-z",
            "--others",
            "--ignored",
            "--exclude-standard",
            "--directory",
        ],
    )?;
    Ok(text
        .split('\0')
        .filter(|e| !e.is_empty() && !e.ends_with('/'))
        .map(PathBuf::from)
        .collect())
}

/// The extension modules git ignores in `tree` (outside virtual
/// environments and installed folders).
pub fn ignored_extensions(tree: &Path) -> Result<Vec<PathBuf>> {
    Ok(ignored_files(tree)?
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| is_extension(&n.to_string_lossy()))
                && !tree
                    .join(p)
                    .ancestors()
                    .take_while(|a| *a != tree)
                    .any(importguard::firstparty::excluded_dir)
        })
        .collect())
}

/// The files that differ between `commit` and the working tree at `top`
/// (tracked changes and untracked files git does not ignore) other than
/// Python sources and prose (`.py`, `.pyi`, `.md`, `.rst`).
pub fn non_python_changes(top: &Path, commit: &str) -> Result<Vec<String>> {
    let mut names: Vec<String> = git(top, &["diff", "--name-only", "-z", commit, "--"])?
        .split('\0')
        .map(str::to_owned)
        .collect();
    names.extend(
        git(top, &["ls-files", "-z", "--others", "--exclude-standard"])?
            .split('\0')
            .map(str::to_owned),
    );
    names.retain(|n| {
        !n.is_empty()
            && ![".py", ".pyi", ".md", ".rst"]
                .iter()
                .any(|x| n.ends_with(x))
    });
    names.sort();
    names.dedup();
    Ok(names)
}

/// The tree id of the working tree at `top` with its untracked files
/// (through a private index, so the user's own is untouched).
fn working_tree_id(top: &Path) -> Result<String> {
    let dir = tempfile::tempdir().map_err(|e| Error::io("create", &std::env::temp_dir(), e))?;
    let index = dir.path().join("index");
    let run = |args: &[&str]| -> Result<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(top)
            .args(args)
            .env("GIT_INDEX_FILE", &index)
            .output()
            .map_err(|e| Error::Invalid(format!("could not run git ({e})")))?;
        if !out.status.success() {
            return Err(Error::Invalid(format!(
                "git {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    run(&["read-tree", "HEAD"])?;
    run(&["add", "-A", "."])?;
    run(&["write-tree"])
}

/// FNV-1a, 64 bits: the cache key of a tree and a setup command.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The cache folder of `setup` results: `$XDG_CACHE_HOME/coldstart/setup`,
/// else `~/.cache/coldstart/setup`, else under the temporary folder.
fn cache_root() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("coldstart").join("setup")
}

/// Runs the target's `setup` in one tree.
fn run_setup(t: &Target, side: &str) -> Result<()> {
    let mut cmd = Command::new(&t.setup[0]);
    cmd.args(&t.setup[1..])
        .current_dir(&t.cwd)
        .envs(&t.env)
        .env("COLDSTART_SIDE", side);
    let out = spawn::run_helper(cmd, SETUP_TIMEOUT).map_err(|e| {
        Error::Invalid(format!(
            "could not run the target's setup {} in {}: {e}",
            crate::target::display_argv(&t.setup),
            t.cwd.display()
        ))
    })?;
    if !out.status.success() {
        return Err(Error::Invalid(format!(
            "the target's setup {} failed in the {side} tree ({}) with {}; fix it or the `setup` key, then run diff again\n{}{}",
            crate::target::display_argv(&t.setup),
            t.cwd.display(),
            out.status,
            out.stdout,
            out.stderr
        )));
    }
    Ok(())
}

fn copy_file(from: &Path, to: &Path) -> Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io("create", parent, e))?;
    }
    std::fs::copy(from, to).map_err(|e| Error::io("copy", from, e))?;
    Ok(())
}

/// The target's `setup` in the working tree (`head`, at `top`) and the
/// base's checkout (`base`, at `tree`, of `commit`), each cached.
fn setup_both(
    base: &Target,
    head: &Target,
    top: &Path,
    tree: &Path,
    commit: &str,
) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    let argv = head.setup.join("\0");
    let cache = cache_root();
    let shown = crate::target::display_argv(&head.setup);

    // The working tree: skipped when its hash and its ignored files are as
    // the last successful run left them.
    let head_id = working_tree_id(top)?;
    let head_key = format!(
        "{:016x}",
        fnv1a64(format!("head\0{head_id}\0{argv}\0{}", top.display()).as_bytes())
    );
    let marker = cache.join(format!("{head_key}.head"));
    let outputs_now = ignored_files(top)?;
    let listed = |v: &[PathBuf]| {
        v.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(listed(&outputs_now).as_str()) {
        notes.push(format!(
            "setup {shown}: the working tree is unchanged since its last run (tree {}), not run again",
            &head_id[..head_id.len().min(12)]
        ));
    } else {
        run_setup(head, "head")?;
        std::fs::create_dir_all(&cache).map_err(|e| Error::io("create", &cache, e))?;
        let after = ignored_files(top)?;
        std::fs::write(&marker, listed(&after)).map_err(|e| Error::io("write", &marker, e))?;
        notes.push(format!("setup {shown}: run in the working tree"));
    }

    // The base: its new ignored files are kept, keyed by its tree.
    let base_id = git(top, &["rev-parse", &format!("{commit}^{{tree}}")])?
        .trim()
        .to_owned();
    let base_key = format!(
        "{:016x}",
        fnv1a64(format!("base\0{base_id}\0{argv}").as_bytes())
    );
    let kept = cache.join(&base_key);
    let list = kept.join("files.txt");
    if let Ok(text) = std::fs::read_to_string(&list) {
        for rel in text.lines().filter(|l| !l.is_empty()) {
            copy_file(&kept.join("files").join(rel), &tree.join(rel))?;
        }
        notes.push(format!(
            "setup {shown}: the base's outputs taken from the cache (tree {})",
            &base_id[..base_id.len().min(12)]
        ));
    } else {
        let before = ignored_files(tree)?;
        run_setup(base, "base")?;
        let new: Vec<PathBuf> = ignored_files(tree)?
            .into_iter()
            .filter(|p| !before.contains(p))
            .collect();
        let _ = std::fs::remove_dir_all(&kept);
        for rel in &new {
            copy_file(&tree.join(rel), &kept.join("files").join(rel))?;
        }
        std::fs::write(&list, listed(&new)).map_err(|e| Error::io("write", &list, e))?;
        notes.push(format!("setup {shown}: run in the base's checkout"));
    }
    Ok(notes)
}

/// Prepares both trees of one target: the `setup` (when the target has
/// one), else the ignored extension modules carried into the base where
/// that is safe.
pub fn prepare(
    base: &Target,
    head: &Target,
    top: &Path,
    tree: &Path,
    commit: &str,
) -> Result<Prepared> {
    let mut p = Prepared::default();
    if !head.setup.is_empty() {
        p.notes = setup_both(base, head, top, tree, commit)?;
        return Ok(p);
    }
    let lacking: Vec<PathBuf> = ignored_extensions(top)?
        .into_iter()
        .filter(|rel| !tree.join(rel).exists())
        .collect();
    if lacking.is_empty() {
        return Ok(p);
    }
    p.changed = non_python_changes(top, commit)?;
    if !p.changed.is_empty() {
        p.missing = lacking;
        return Ok(p);
    }
    for rel in &lacking {
        copy_file(&top.join(rel), &tree.join(rel))?;
        p.notes.push(format!(
            "{} carried into the base's checkout: a build output git ignores, and no non-Python file differs between the trees",
            rel.display()
        ));
    }
    Ok(p)
}

/// What to add to a base's start-up failure when extension modules could
/// not be carried into it.
pub fn advice(p: &Prepared) -> Option<String> {
    if p.missing.is_empty() {
        return None;
    }
    let names: Vec<String> = p.missing.iter().map(|m| m.display().to_string()).collect();
    let mut changed: Vec<&str> = p.changed.iter().map(String::as_str).take(5).collect();
    if p.changed.len() > 5 {
        changed.push("...");
    }
    Some(format!(
        "the base's checkout lacks {} (built in the working tree, ignored by git), and it was not carried over because non-Python files differ between the trees ({}); set the target's `setup` to the command that builds it (run in each tree with COLDSTART_SIDE=base|head, e.g. setup = [\"maturin\", \"develop\"])",
        names.join(", "),
        changed.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extension_names_are_told_from_sources() {
        for yes in [
            "core.cpython-311-x86_64-linux-gnu.so",
            "_speedups.abi3.so",
            "native.pyd",
            "libfoo.so.1",
        ] {
            assert!(is_extension(yes), "{yes}");
        }
        for no in ["core.py", "soap.txt", "module.sox"] {
            assert!(!is_extension(no), "{no}");
        }
    }

    #[test]
    fn the_cache_key_is_stable() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_ne!(fnv1a64(b"a"), fnv1a64(b"b"));
    }
}
