//! Which code a tree's worker really ran: every import of one of the
//! project's own modules, as the recorder wrote it (the file its spec
//! named, the finder that answered, `sys.path` at start), must come from
//! that tree. A `diff`'s base whose worker imported the working tree's
//! package through an editable install compared the working tree with
//! itself; a patched copy whose worker imported the original verified
//! nothing. Either is found here, with the file, the reason (an editable
//! install's finder or `.pth` file, an absolute `PYTHONPATH` entry, an
//! installed copy) and what to do.
//!
//! Reads the records and the interpreter's `site-packages` folders (for
//! the `.pth` file behind an entry); starts no process.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use importguard::firstparty;
use importguard::importtime::top_level;
use importguard::recorder::Recording;

/// How a module of the project came to be imported from outside the tree
/// that was meant to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// An editable install's own finder on `sys.meta_path` (setuptools'
    /// `__editable___*_finder`, hatchling's `editables`).
    EditableFinder {
        /// `module.QualName` of the finder.
        finder: String,
    },
    /// A `sys.path` entry that a `.pth` file in site-packages adds (a
    /// static editable install: setuptools on a src layout, hatchling's
    /// default, `uv sync`).
    PthFile {
        /// The entry.
        entry: PathBuf,
        /// The `.pth` file that names it.
        pth: PathBuf,
    },
    /// An entry of the worker's `PYTHONPATH`.
    PythonPath {
        /// The entry.
        entry: PathBuf,
    },
    /// An installed (not editable) copy of the project in site-packages.
    Installed {
        /// The `sys.path` entry holding it.
        entry: PathBuf,
    },
    /// Another `sys.path` entry, or a finder that cannot be told apart.
    Other {
        /// The `sys.path` entry, when one holds the file.
        entry: Option<PathBuf>,
    },
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Route::EditableFinder { finder } => write!(
                f,
                "an editable install's finder ({finder}, put on sys.meta_path by `pip install -e`, `uv sync`) maps it there"
            ),
            Route::PthFile { entry, pth } => write!(
                f,
                "{} adds {} to sys.path (an editable install: `pip install -e`, `uv sync`)",
                pth.display(),
                entry.display()
            ),
            Route::PythonPath { entry } => {
                write!(f, "the PYTHONPATH entry {} points there", entry.display())
            }
            Route::Installed { entry } => write!(
                f,
                "an installed copy of the project in {} (`pip install .` without -e)",
                entry.display()
            ),
            Route::Other { entry: Some(e) } => write!(f, "sys.path holds {}", e.display()),
            Route::Other { entry: None } => f.write_str("a finder on sys.meta_path maps it there"),
        }
    }
}

/// One of the project's modules that a tree's worker imported from
/// somewhere else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Foreign {
    /// The module.
    pub module: String,
    /// The file it was imported from.
    pub file: String,
    /// The tree that was meant to run.
    pub tree: PathBuf,
    /// How it got there.
    pub route: Route,
}

impl Foreign {
    /// What to do about it, for the message.
    pub fn advice(&self) -> &'static str {
        match self.route {
            Route::PythonPath { .. } => {
                "make that entry relative in the target's `env` (relative entries are resolved in each tree) or drop it"
            }
            _ => {
                "name the folders that hold the project's packages in the target's `import_roots` (coldstart puts each tree's own first on its path), or run from an environment where the project is not installed"
            }
        }
    }
}

impl std::fmt::Display for Foreign {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the project's module `{}` was imported from {}, outside the tree being measured ({}): {}; no verdict from a side that did not run its own code; {}",
            self.module,
            self.file,
            self.tree.display(),
            self.route,
            self.advice()
        )
    }
}

/// What one process's records show of the project's own modules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provenance {
    /// Imports of the project's own modules that named a file.
    pub own_files: usize,
    /// Those whose file is outside the tree.
    pub foreign: Vec<Foreign>,
}

/// Every import of a module under one of `own` (top-level names) in
/// `rec` and the images it started, checked to come from `tree` (first
/// party under it by [`firstparty::require`]: a copy in a virtual environment
/// inside the tree is not the tree's code). `pythonpath` is the worker's
/// own, for the reason.
pub fn of(
    rec: &Recording,
    own: &BTreeSet<String>,
    tree: &Path,
    pythonpath: Option<&std::ffi::OsStr>,
) -> Provenance {
    let mut out = Provenance::default();
    let mut seen = BTreeSet::new();
    for image in rec.images() {
        let path: Vec<PathBuf> = image
            .start
            .as_ref()
            .map(|s| s.path.iter().map(PathBuf::from).collect())
            .unwrap_or_default();
        for i in &image.imports {
            if i.found != Some(true) || !own.contains(top_level(&i.name)) {
                continue;
            }
            let Some(file) = &i.file else { continue };
            out.own_files += 1;
            if firstparty::require(file, tree).is_ok() || !seen.insert(i.name.clone()) {
                continue;
            }
            out.foreign.push(Foreign {
                module: i.name.clone(),
                file: file.clone(),
                tree: tree.to_path_buf(),
                route: route(file, i.finder.as_deref(), &path, pythonpath),
            });
        }
    }
    out
}

/// Why `file` was found where it was.
fn route(
    file: &str,
    finder: Option<&str>,
    sys_path: &[PathBuf],
    pythonpath: Option<&std::ffi::OsStr>,
) -> Route {
    if let Some(f) = finder
        && (f.contains("__editable__") || f.contains("editables") || f.contains("_editable_impl"))
    {
        return Route::EditableFinder {
            finder: f.to_owned(),
        };
    }
    let file = Path::new(file);
    let Some(entry) = sys_path
        .iter()
        .filter(|e| !e.as_os_str().is_empty() && file.starts_with(e))
        .max_by_key(|e| e.as_os_str().len())
        .cloned()
    else {
        return Route::Other { entry: None };
    };
    if entry.ancestors().any(firstparty::excluded_dir) {
        return Route::Installed { entry };
    }
    if let Some(pp) = pythonpath
        && std::env::split_paths(pp).any(|p| p == entry)
    {
        return Route::PythonPath { entry };
    }
    if let Some(pth) = pth_naming(&entry, sys_path) {
        return Route::PthFile { entry, pth };
    }
    Route::Other { entry: Some(entry) }
}

/// The `.pth` file in one of the site-packages folders on `sys_path` that
/// names `entry`.
fn pth_naming(entry: &Path, sys_path: &[PathBuf]) -> Option<PathBuf> {
    let want = entry.display().to_string();
    for dir in sys_path.iter().filter(|d| {
        d.file_name()
            .is_some_and(|n| firstparty::INSTALLED_DIRS.iter().any(|x| n == *x))
    }) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut pths: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "pth"))
            .collect();
        pths.sort();
        for p in pths {
            if std::fs::read_to_string(&p)
                .is_ok_and(|t| t.lines().any(|l| l.trim().trim_end_matches('/') == want))
            {
                return Some(p);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use importguard::recorder::Recording;

    fn recording(start_path: &[&Path], imports: &[(&str, &str, &str)]) -> Recording {
        let mut text = format!(
            "{{\"type\":\"start\",\"t_ns\":1,\"pid\":7,\"version\":{},\"path\":{}}}\n",
            importguard::recorder::FORMAT_VERSION,
            serde_json::to_string(
                &start_path
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
            )
            .unwrap()
        );
        for (name, file, finder) in imports {
            text.push_str(
                &serde_json::json!({
                    "type": "import", "name": name, "t_ns": 2, "found": true,
                    "file": file, "finder": finder,
                })
                .to_string(),
            );
            text.push('\n');
        }
        Recording::parse(text.as_bytes())
    }

    const PATH_FINDER: &str = "importlib._bootstrap_external.PathFinder";

    #[test]
    fn each_route_is_told_apart() {
        let d = tempfile::tempdir().unwrap();
        let (base, head) = (d.path().join("base"), d.path().join("head"));
        let site = d.path().join("venv/lib/python3.11/site-packages");
        std::fs::create_dir_all(&site).unwrap();
        std::fs::write(
            site.join("__editable__.svc-0.1.pth"),
            format!("{}\n", head.join("src").display()),
        )
        .unwrap();
        let own: BTreeSet<String> = ["svc".to_owned()].into();
        let head_file = head.join("src/svc/__init__.py").display().to_string();
        let base_file = base.join("src/svc/__init__.py").display().to_string();

        // The base's own tree: nothing foreign.
        let r = recording(
            &[&base.join("src"), &site],
            &[("svc", &base_file, PATH_FINDER)],
        );
        let p = of(&r, &own, &base, None);
        assert_eq!((p.own_files, p.foreign.len()), (1, 0));

        // A static .pth pointing at the working tree.
        let r = recording(
            &[&head.join("src"), &site],
            &[
                ("svc", &head_file, PATH_FINDER),
                ("json", "/usr/lib/json/__init__.py", PATH_FINDER),
            ],
        );
        let p = of(&r, &own, &base, None);
        assert_eq!(p.own_files, 1);
        let f = &p.foreign[0];
        assert_eq!(
            (f.module.as_str(), f.file.as_str()),
            ("svc", head_file.as_str())
        );
        assert_eq!(
            f.route,
            Route::PthFile {
                entry: head.join("src"),
                pth: site.join("__editable__.svc-0.1.pth")
            }
        );
        let msg = f.to_string();
        assert!(
            msg.contains("`svc`") && msg.contains("__editable__.svc-0.1.pth"),
            "{msg}"
        );
        assert!(msg.contains("import_roots"), "{msg}");

        // setuptools' editable finder.
        let r = recording(
            &[&site],
            &[(
                "svc",
                &head_file,
                "__editable___svc_0_1_finder._EditableFinder",
            )],
        );
        assert!(matches!(
            of(&r, &own, &base, None).foreign[0].route,
            Route::EditableFinder { .. }
        ));

        // An absolute PYTHONPATH entry.
        let r = recording(
            &[&head.join("src"), &site],
            &[("svc", &head_file, PATH_FINDER)],
        );
        let pp = head.join("src").into_os_string();
        let f = &of(&r, &own, &base, Some(&pp)).foreign[0];
        assert_eq!(
            f.route,
            Route::PythonPath {
                entry: head.join("src")
            }
        );
        assert!(f.to_string().contains("relative"), "{f}");

        // An installed copy, even inside the tree's own folder.
        let inside = base.join(".venv/lib/python3.11/site-packages");
        std::fs::create_dir_all(&inside).unwrap();
        let copy = inside.join("svc/__init__.py").display().to_string();
        let r = recording(&[&inside], &[("svc", &copy, PATH_FINDER)]);
        let f = &of(&r, &own, &base, None).foreign[0];
        assert!(matches!(f.route, Route::Installed { .. }), "{f:?}");
    }

    #[test]
    fn a_module_is_reported_once_and_not_found_attempts_are_not_evidence() {
        let d = tempfile::tempdir().unwrap();
        let own: BTreeSet<String> = ["svc".to_owned()].into();
        let other = d.path().join("other/svc/__init__.py").display().to_string();
        let mut text = format!(
            "{{\"type\":\"start\",\"t_ns\":1,\"pid\":7,\"version\":{}}}\n",
            importguard::recorder::FORMAT_VERSION
        );
        for found in [true, true, false] {
            text.push_str(
                &serde_json::json!({"type": "import", "name": "svc", "t_ns": 2, "found": found, "file": other})
                    .to_string(),
            );
            text.push('\n');
        }
        let p = of(
            &Recording::parse(text.as_bytes()),
            &own,
            &d.path().join("tree"),
            None,
        );
        assert_eq!((p.own_files, p.foreign.len()), (2, 1));
    }
}
