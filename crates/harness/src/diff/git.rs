//! The base revision: which commit side A is, and a temporary `git
//! worktree` of it that is removed when the [`Worktree`] is dropped (also
//! when the run fails or is interrupted: the Ctrl-C token lets the run
//! return, and the drop runs on the way out).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result, invalid};

/// The commit side A is checked out from, and how it was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseRev {
    /// As given or chosen (`origin/main`, `HEAD`).
    pub rev: String,
    /// The full commit id.
    pub commit: String,
    /// `given`, `merge base of HEAD and UPSTREAM`, or `HEAD (no upstream branch)`.
    pub how: String,
}

fn git(dir: &Path, args: &[&str]) -> Result<std::process::Output> {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .map_err(|e| Error::Invalid(format!("could not run git ({e}); install git to use diff")))
}

/// git's output in `dir`, or an error that names the command and git's
/// message when it fails.
pub(crate) fn git_ok(dir: &Path, args: &[&str]) -> Result<String> {
    let out = git(dir, args)?;
    if !out.status.success() {
        invalid!(
            "git {} in {} failed: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn git_text(dir: &Path, args: &[&str]) -> Result<Option<String>> {
    let out = git(dir, args)?;
    Ok(out
        .status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned()))
}

/// The top folder of the git checkout holding `dir`.
pub fn toplevel(dir: &Path) -> Result<PathBuf> {
    match git_text(dir, &["rev-parse", "--show-toplevel"])? {
        Some(t) if !t.is_empty() => Ok(PathBuf::from(t)),
        _ => invalid!(
            "{} is not inside a git repository: this command works on the project's git revisions (it compares, stores or searches them), so run it in a checkout",
            dir.display()
        ),
    }
}

fn commit_of(top: &Path, rev: &str) -> Result<Option<String>> {
    git_text(
        top,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ],
    )
}

/// The base: `rev` when given; else the merge base of HEAD with its
/// upstream branch; else HEAD (so uncommitted changes are compared with
/// the last commit).
pub fn resolve(top: &Path, rev: Option<&str>) -> Result<BaseRev> {
    if let Some(rev) = rev {
        return match commit_of(top, rev)? {
            Some(commit) => Ok(BaseRev {
                rev: rev.to_owned(),
                commit,
                how: "given".to_owned(),
            }),
            None => invalid!(
                "revision `{rev}` does not exist in {}; give a branch, tag or commit that does (in CI, fetch it first, e.g. `git fetch origin main` for `origin/main`)",
                top.display()
            ),
        };
    }
    let upstream = git_text(
        top,
        &[
            "rev-parse",
            "--abbrev-ref",
            "--symbolic-full-name",
            "@{upstream}",
        ],
    )?;
    if let Some(up) = upstream.filter(|u| !u.is_empty())
        && let Some(base) = git_text(top, &["merge-base", "HEAD", &up])?
    {
        return Ok(BaseRev {
            rev: up.clone(),
            commit: base,
            how: format!("merge base of HEAD and {up}"),
        });
    }
    match commit_of(top, "HEAD")? {
        Some(commit) => Ok(BaseRev {
            rev: "HEAD".to_owned(),
            commit,
            how: "HEAD (no upstream branch)".to_owned(),
        }),
        None => invalid!(
            "{} has no commit yet; commit once, or name a revision to compare with",
            top.display()
        ),
    }
}

/// Whether the working tree has changes to tracked files or untracked
/// files (ignored ones aside).
pub fn dirty(top: &Path) -> Result<bool> {
    Ok(git_text(top, &["status", "--porcelain"])?.is_some_and(|s| !s.is_empty()))
}

/// The prefix of a base checkout's temporary folder.
pub const PREFIX: &str = "coldstart-base-";

/// Removes every base checkout whose owner is gone: git's record of it in
/// the repository its owner file names, then the folder.
pub(crate) fn remove_orphans() {
    for o in spawn::owned::sweep(PREFIX) {
        let repo = PathBuf::from(&o.note);
        let _held = repo.is_dir().then(|| registry_lock(&repo));
        if repo.is_dir() {
            let path = o.dir.join("base");
            let _ = git(
                &repo,
                &["worktree", "remove", "--force", &path.display().to_string()],
            );
        }
        let _ = spawn::owned::remove(&o);
        if repo.is_dir() {
            let _ = git(&repo, &["worktree", "prune"]);
        }
    }
}

/// Holds, until dropped, the lock on `repo`'s record of worktrees that
/// every coldstart process takes around `git worktree add`, `remove` and
/// `prune` in that repository: a prune removes `.git/worktrees` when it is
/// empty, and one that runs while another process's add is between making
/// that folder and the worktree's own fails the add ("could not create
/// directory of '.git/worktrees/base'"), as two shards of one history run
/// did. The lock file sits in the temporary folder, named by a hash of the
/// repository's canonical path; `None` (no lock, the old behaviour) where
/// it cannot be opened or locked.
fn registry_lock(repo: &Path) -> Option<std::fs::File> {
    use std::hash::{Hash, Hasher};
    let canonical = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    canonical.hash(&mut hasher);
    let path =
        std::env::temp_dir().join(format!("coldstart-worktrees-{:016x}.lock", hasher.finish()));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .ok()?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).ok()?;
    Some(file)
}

/// A temporary detached checkout of a commit, removed (folder and git's
/// record of it) when dropped.
#[derive(Debug)]
pub struct Worktree {
    top: PathBuf,
    path: PathBuf,
    dir: Option<tempfile::TempDir>,
}

impl Worktree {
    /// Checks `commit` of the repository at `top` out into a fresh
    /// temporary folder that names its owner ([`spawn::owned`]). The
    /// checkouts of runs whose coldstart process is gone (killed, SIGKILL
    /// skips every drop) are removed first, from the repository that
    /// registered each, and stale records pruned.
    pub fn add(top: &Path, commit: &str) -> Result<Worktree> {
        remove_orphans();
        let _held = registry_lock(top);
        let _ = git(top, &["worktree", "prune"]);
        let dir = spawn::owned::tempdir(PREFIX, &top.display().to_string())
            .map_err(|e| Error::io("create", &std::env::temp_dir(), e))?;
        let path = dir.path().join("base");
        let out = git(
            top,
            &[
                "worktree",
                "add",
                "--detach",
                "--quiet",
                &path.display().to_string(),
                commit,
            ],
        )?;
        if !out.status.success() {
            invalid!(
                "could not check out {commit} into {}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(Worktree {
            top: top.to_path_buf(),
            path,
            dir: Some(dir),
        })
    }

    /// The checkout's folder (the base's counterpart of `top`).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Worktree {
    fn drop(&mut self) {
        let _held = registry_lock(&self.top);
        let _ = git(
            &self.top,
            &[
                "worktree",
                "remove",
                "--force",
                &self.path.display().to_string(),
            ],
        );
        if let Some(d) = self.dir.take() {
            let _ = d.close();
        }
        let _ = git(&self.top, &["worktree", "prune"]);
    }
}
