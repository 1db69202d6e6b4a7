//! The project's own virtual environment, which a fresh checkout of the
//! base lacks: a `.venv` (uv, poetry, pdm, `python -m venv`) that git
//! ignores holds the interpreter and packages every side runs with.
//!
//! Without it the base cannot start as the working tree does: `uv run
//! --no-sync python -m app.worker` in the base's checkout makes a new,
//! empty `.venv` there and the worker fails on its first third-party
//! import; a command `.venv/bin/python -m app.worker` names a file the
//! checkout does not have. So each virtual environment at the top of the
//! working tree or of the target's folder in it (a folder holding
//! `pyvenv.cfg`), that the base's checkout lacks, is linked into it
//! (a symlink: nothing is copied, nothing in it is changed), and the
//! report says so. It is the one environment both sides run with, as a
//! developer's `git stash` and rerun would; which code each side ran is
//! still proven by the recorder's module files, never assumed.
//!
//! Not done for a target with a `setup`: that command prepares each tree
//! itself (and may install into an environment, which must not be the
//! working tree's).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The virtual environments of the working tree at `top` the base's
/// checkout at `tree` lacks, relative to `top`: the folders holding a
/// `pyvenv.cfg` at `top` itself and at `cwd` (the target's folder, when
/// it is inside `top`).
pub fn lacking(top: &Path, tree: &Path, cwd: &Path) -> Vec<PathBuf> {
    let mut folders = vec![PathBuf::new()];
    if let Ok(rel) = cwd.strip_prefix(top)
        && !rel.as_os_str().is_empty()
    {
        folders.push(rel.to_path_buf());
    }
    let mut found = Vec::new();
    for folder in folders {
        let Ok(entries) = std::fs::read_dir(top.join(&folder)) else {
            continue;
        };
        let mut here: Vec<PathBuf> = entries
            .flatten()
            .map(|e| folder.join(e.file_name()))
            .filter(|rel| top.join(rel).join("pyvenv.cfg").is_file())
            .filter(|rel| std::fs::symlink_metadata(tree.join(rel)).is_err())
            .collect();
        here.sort();
        found.extend(here);
    }
    found
}

/// Links each of `lacking` from the working tree at `top` into a checkout
/// at `tree` (`words`: the checkout as the notes name it, "the base's
/// checkout"); a note for the report for each.
pub fn link(top: &Path, tree: &Path, lacking: &[PathBuf], words: &str) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    for rel in lacking {
        let (from, to) = (top.join(rel), tree.join(rel));
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io("create", parent, e))?;
        }
        std::os::unix::fs::symlink(&from, &to).map_err(|e| Error::io("link", &to, e))?;
        notes.push(format!(
            "{} linked into {words}: the project's virtual environment, which git does not track, so both sides run with it",
            rel.display()
        ));
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn venv(at: &Path) {
        std::fs::create_dir_all(at.join("bin")).unwrap();
        std::fs::write(at.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    }

    #[test]
    fn a_virtual_environment_the_base_lacks_is_linked_and_nothing_else() {
        let (top, tree) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        venv(&top.path().join(".venv"));
        venv(&top.path().join("svc/env"));
        std::fs::create_dir_all(top.path().join("src")).unwrap();
        std::fs::create_dir_all(tree.path().join("svc")).unwrap();
        let cwd = top.path().join("svc");
        let found = lacking(top.path(), tree.path(), &cwd);
        assert_eq!(found, [PathBuf::from(".venv"), PathBuf::from("svc/env")]);
        let notes = link(top.path(), tree.path(), &found, "the base's checkout").unwrap();
        assert_eq!(notes.len(), 2);
        assert!(notes[0].starts_with(".venv linked into the base's checkout"));
        assert!(tree.path().join(".venv/pyvenv.cfg").is_file());
        assert_eq!(
            std::fs::read_link(tree.path().join("svc/env")).unwrap(),
            top.path().join("svc/env")
        );
        // Linked once: a second look finds nothing lacking.
        assert!(lacking(top.path(), tree.path(), &cwd).is_empty());
    }

    #[test]
    fn a_folder_outside_the_tree_is_not_looked_in() {
        let (top, tree, elsewhere) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        venv(&elsewhere.path().join(".venv"));
        assert!(lacking(top.path(), tree.path(), elsewhere.path()).is_empty());
    }
}
