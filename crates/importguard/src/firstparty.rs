//! What "first party" means, once for the whole project.
//!
//! A file is the project's own code when it lies under the project root and
//! no folder between the root and the file is installed code: a folder named
//! like an installation target ([`INSTALLED_DIRS`]: `site-packages`,
//! `dist-packages`, `__pypackages__`) or a virtual environment (a folder
//! holding [`VENV_MARKER`], whatever its name). Frozen and generated code
//! (`<frozen ...>`, `<string>`) is never first party. On the Python side the
//! interpreter's own library (its `stdlib`, `purelib`, ... folders, which only
//! the interpreter knows) is not first party either, even inside the root.
//!
//! The Rust side is [`require`] (and [`is_first_party`], [`excluded_dir`],
//! [`top_level_names`]); the embedded Python scripts (the import recorder,
//! suggest's classifier) share one function, [`PY`] (`_cs_first_party`),
//! given the same data; a test holds both to one table. This module reads
//! the file system (for the marker) and starts no process.

use std::path::{Path, PathBuf};

/// Folder names that hold installed, not first-party, code.
pub const INSTALLED_DIRS: &[&str] = &["site-packages", "dist-packages", "__pypackages__"];

/// The file that makes a folder a virtual environment (PEP 405).
pub const VENV_MARKER: &str = "pyvenv.cfg";

/// The Python side of the rule: `_cs_first_party(path, root, libs=())`
/// returns `None` for first-party code, else the reason in the words of
/// [`NotFirstParty`]; `_cs_excluded_dir(path)` is [`excluded_dir`]. Put it
/// before a script's code; it uses only `os` (loaded at interpreter start).
pub const PY: &str = include_str!("firstparty.py");

/// Why a file is not first party.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotFirstParty {
    /// Frozen or generated code: no file.
    #[error("{file} is not a source file (frozen or generated code)")]
    NotAFile {
        /// The name the code carries.
        file: String,
    },
    /// The file lies outside the project root.
    #[error("{file} is outside the project ({root})")]
    Outside {
        /// The file.
        file: String,
        /// The project root.
        root: String,
    },
    /// A folder on the way is an installation target.
    #[error("{file} is installed code ({dir})")]
    Installed {
        /// The file.
        file: String,
        /// The folder's name.
        dir: String,
    },
    /// A folder on the way is a virtual environment.
    #[error("{file} is inside a virtual environment ({venv})")]
    Venv {
        /// The file.
        file: String,
        /// The environment's folder.
        venv: String,
    },
}

/// Whether `dir` (a folder) is never first party: it is named like an
/// installation target or holds a virtual environment's marker.
pub fn excluded_dir(dir: &Path) -> bool {
    dir.file_name()
        .is_some_and(|n| INSTALLED_DIRS.iter().any(|d| n == *d))
        || dir.join(VENV_MARKER).is_file()
}

/// Whether `file` is first-party code under `root` (see the module doc).
pub fn require(file: &str, root: &Path) -> Result<(), NotFirstParty> {
    if file.starts_with('<') {
        return Err(NotFirstParty::NotAFile {
            file: file.to_owned(),
        });
    }
    let given = Path::new(file);
    let (path, root_used) = if given.starts_with(root) {
        (given.to_path_buf(), root.to_path_buf())
    } else {
        // Symbolic links on either side: compare where they lead.
        let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        (real(given), real(root))
    };
    let Ok(rel) = path.strip_prefix(&root_used) else {
        return Err(NotFirstParty::Outside {
            file: file.to_owned(),
            root: root.display().to_string(),
        });
    };
    let mut dir = root_used.clone();
    let parts: Vec<_> = rel.components().collect();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        dir.push(part);
        let name = part.as_os_str();
        if let Some(d) = INSTALLED_DIRS.iter().find(|d| name == **d) {
            return Err(NotFirstParty::Installed {
                file: file.to_owned(),
                dir: (*d).to_owned(),
            });
        }
        if dir.join(VENV_MARKER).is_file() {
            return Err(NotFirstParty::Venv {
                file: file.to_owned(),
                venv: dir.display().to_string(),
            });
        }
    }
    Ok(())
}

/// [`require`] as a yes or no.
pub fn is_first_party(file: &str, root: &Path) -> bool {
    require(file, root).is_ok()
}

/// The top-level module names of the project's own code: the packages
/// (folders with `__init__.py`) and modules (`*.py`, except `setup.py` and
/// `conftest.py`) directly in each of `dirs` that lies under `root` and is
/// not [`excluded_dir`]; sorted, each once.
pub fn top_level_names(dirs: impl IntoIterator<Item = PathBuf>, root: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for dir in dirs {
        if !dir.starts_with(root) || excluded_dir(&dir) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            let module = if path.is_dir() {
                (path.join("__init__.py").is_file() && !excluded_dir(&path)).then_some(name)
            } else {
                name.strip_suffix(".py").map(str::to_owned)
            };
            if let Some(m) =
                module.filter(|m| !m.starts_with('.') && m != "setup" && m != "conftest")
            {
                names.push(m);
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The folders whose top-level modules are the project's own when a
/// command runs in `cwd` with `pythonpath` (the `PYTHONPATH` it gets):
/// `cwd`, its `src/` (the "src layout"), and the `PYTHONPATH` entries
/// under `root` (an entry relative to `cwd` is resolved against it, so
/// `../shared` beside the project is not under it).
pub fn source_dirs(cwd: &Path, pythonpath: Option<&std::ffi::OsStr>, root: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![cwd.to_path_buf(), cwd.join("src")];
    if let Some(pp) = pythonpath {
        dirs.extend(
            std::env::split_paths(pp)
                .filter(|p| !p.as_os_str().is_empty())
                .map(|p| lexical(&cwd.join(p)))
                .filter(|p| p.starts_with(root)),
        );
    }
    dirs
}

/// `p` with its `.` and `..` components resolved by name, without asking
/// the file system: `/repo/service/../shared` is `/repo/shared`. What
/// tells whether a path lies under the project (a `..` that leaves it
/// leaves it, though [`Path::starts_with`] compares names).
pub fn lexical(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(
                    out.components().next_back(),
                    None | Some(Component::ParentDir)
                ) {
                    out.push("..");
                } else {
                    out.pop();
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
