//! The project's import roots: the folders that hold its own top-level
//! packages, read from its build config the way its build backend reads
//! them, so that a second tree of the same project (the base of a `diff`,
//! a patched copy) can put its own roots first on its path and win over an
//! editable install that points at the working tree.
//!
//! Read, in order, from the `pyproject.toml` (and `setup.cfg`) of the
//! project's folder and of each folder directly below it (a monorepo's
//! Python package beside its Rust crate):
//! - setuptools: `[tool.setuptools] package-dir` (`"" = "src"`, or a
//!   package mapped to a folder of its own name), `[tool.setuptools.packages.find]
//!   where`; `setup.cfg`'s `[options] package_dir` and `[options.packages.find] where`;
//! - hatchling: `[tool.hatch.build.targets.wheel] packages` (`src/pkg`) and
//!   `sources` (`["src"]` or `{ "src" = "" }`);
//! - maturin: `[tool.maturin] python-source`;
//! - poetry: `[tool.poetry] packages` (`{ include = "pkg", from = "src" }`);
//! - pdm: `[tool.pdm.build] package-dir`;
//! - else the layout itself: `src/` when it holds a package, else the
//!   project's folder (a flat layout).
//!
//! Reads files only; no process is started and nothing is imported.

use std::path::{Path, PathBuf};

/// One folder the project's top-level packages are imported from, and the
/// setting that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportRoot {
    /// The folder, absolute.
    pub dir: PathBuf,
    /// Where it was read: `pyproject.toml [tool.maturin] python-source`,
    /// `the src layout`, ...
    pub from: String,
}

/// The import roots of the project at `root`, each once, in the order
/// found (the build configs first, then the layout's default).
pub fn import_roots(root: &Path) -> Vec<ImportRoot> {
    let mut out: Vec<ImportRoot> = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    if let Ok(rd) = std::fs::read_dir(root) {
        let mut subs: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir() && !skipped(p))
            .collect();
        subs.sort();
        folders.extend(subs);
    }
    for folder in &folders {
        let found = from_build_config(folder);
        for r in found {
            if !out.iter().any(|o| o.dir == r.dir) {
                out.push(r);
            }
        }
    }
    if out.is_empty() {
        let src = root.join("src");
        let dir_holds_package = |d: &Path| {
            std::fs::read_dir(d)
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| {
                    let p = e.path();
                    (p.is_dir() && p.join("__init__.py").is_file())
                        || p.extension().is_some_and(|x| x == "py")
                })
        };
        if dir_holds_package(&src) {
            out.push(ImportRoot {
                dir: src,
                from: "the src layout (src/ holds a package)".to_owned(),
            });
        } else {
            out.push(ImportRoot {
                dir: root.to_path_buf(),
                from: "the flat layout (the project's folder)".to_owned(),
            });
        }
    }
    out
}

/// Hidden folders, virtual environments, build and cache folders.
fn skipped(p: &Path) -> bool {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    name.starts_with('.')
        || matches!(
            name.as_ref(),
            "node_modules" | "target" | "build" | "dist" | "__pycache__" | "venv"
        )
        || importguard::firstparty::excluded_dir(p)
}

fn root_of(folder: &Path, from: String, rel: &str) -> Option<ImportRoot> {
    let rel = rel.trim().trim_end_matches('/');
    let dir: PathBuf = if rel.is_empty() || rel == "." {
        folder.to_path_buf()
    } else {
        folder.join(rel).components().collect()
    };
    dir.is_dir().then_some(ImportRoot { dir, from })
}

/// A package path such as `src/pkg`: the folder above the package.
fn parent_of_package(folder: &Path, from: String, pkg_path: &str) -> Option<ImportRoot> {
    let p = Path::new(pkg_path.trim().trim_end_matches('/'));
    let parent = p.parent().map(|x| x.to_string_lossy().into_owned())?;
    root_of(folder, from, &parent)
}

/// The roots one folder's `pyproject.toml` and `setup.cfg` name.
fn from_build_config(folder: &Path) -> Vec<ImportRoot> {
    let mut out = Vec::new();
    if let Ok(text) = std::fs::read_to_string(folder.join("pyproject.toml"))
        && let Ok(doc) = text.parse::<toml::Table>()
    {
        out.extend(from_pyproject(folder, &doc));
    }
    if let Ok(text) = std::fs::read_to_string(folder.join("setup.cfg")) {
        out.extend(from_setup_cfg(folder, &text));
    }
    out
}

fn get<'a>(t: &'a toml::Table, path: &[&str]) -> Option<&'a toml::Value> {
    let (last, head) = path.split_last()?;
    let mut cur = t;
    for k in head {
        cur = cur.get(*k)?.as_table()?;
    }
    cur.get(*last)
}

fn strings(v: &toml::Value) -> Vec<String> {
    match v {
        toml::Value::String(s) => vec![s.clone()],
        toml::Value::Array(a) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

fn from_pyproject(folder: &Path, doc: &toml::Table) -> Vec<ImportRoot> {
    let here = |key: &str| format!("{} {key}", folder.join("pyproject.toml").display());
    let mut out = Vec::new();
    // maturin
    if let Some(s) = get(doc, &["tool", "maturin", "python-source"]).and_then(|v| v.as_str()) {
        out.extend(root_of(folder, here("[tool.maturin] python-source"), s));
    }
    // setuptools
    if let Some(t) = get(doc, &["tool", "setuptools", "package-dir"]).and_then(|v| v.as_table()) {
        for (pkg, dir) in t {
            let Some(dir) = dir.as_str() else { continue };
            let from = here("[tool.setuptools] package-dir");
            if pkg.is_empty() {
                out.extend(root_of(folder, from, dir));
            } else if !pkg.contains('.')
                && Path::new(dir)
                    .file_name()
                    .is_some_and(|n| n == pkg.as_str())
            {
                out.extend(parent_of_package(folder, from, dir));
            }
        }
    }
    if let Some(v) = get(doc, &["tool", "setuptools", "packages", "find", "where"]) {
        for w in strings(v) {
            out.extend(root_of(
                folder,
                here("[tool.setuptools.packages.find] where"),
                &w,
            ));
        }
    }
    // hatchling
    let wheel = ["tool", "hatch", "build", "targets", "wheel"];
    for base in [&wheel[..], &["tool", "hatch", "build"][..]] {
        let key = |k: &'static str| -> Vec<&'static str> { [base, &[k]].concat() };
        if let Some(v) = get(doc, &key("packages")) {
            for p in strings(v) {
                out.extend(parent_of_package(
                    folder,
                    here("[tool.hatch.build] packages"),
                    &p,
                ));
            }
        }
        match get(doc, &key("sources")) {
            Some(toml::Value::Array(a)) => {
                for s in a.iter().filter_map(|x| x.as_str()) {
                    out.extend(root_of(folder, here("[tool.hatch.build] sources"), s));
                }
            }
            Some(toml::Value::Table(t)) => {
                for (from_dir, to) in t {
                    if to.as_str().is_some_and(str::is_empty) {
                        out.extend(root_of(
                            folder,
                            here("[tool.hatch.build] sources"),
                            from_dir,
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    // poetry
    if let Some(toml::Value::Array(a)) = get(doc, &["tool", "poetry", "packages"]) {
        for p in a.iter().filter_map(|x| x.as_table()) {
            if let Some(from) = p.get("from").and_then(|f| f.as_str()) {
                out.extend(root_of(folder, here("[tool.poetry] packages from"), from));
            }
        }
    }
    // pdm
    if let Some(s) = get(doc, &["tool", "pdm", "build", "package-dir"]).and_then(|v| v.as_str()) {
        out.extend(root_of(folder, here("[tool.pdm.build] package-dir"), s));
    }
    out
}

/// `setup.cfg`: `[options] package_dir = =src` (or a `\n    =src` list)
/// and `[options.packages.find] where = src`.
fn from_setup_cfg(folder: &Path, text: &str) -> Vec<ImportRoot> {
    let here = |key: &str| format!("{} {key}", folder.join("setup.cfg").display());
    let mut out = Vec::new();
    let mut section = String::new();
    let mut key = String::new();
    for raw in text.lines() {
        let line = raw.trim_end();
        if line.trim_start().starts_with(['#', ';']) || line.trim().is_empty() {
            continue;
        }
        if line.starts_with('[') {
            section = line.trim_matches(['[', ']']).trim().to_owned();
            key.clear();
            continue;
        }
        let continued = raw.starts_with([' ', '\t']);
        let value = if continued {
            line.trim().to_owned()
        } else if let Some((k, v)) = line.split_once('=') {
            key = k.trim().to_owned();
            v.trim().to_owned()
        } else {
            continue;
        };
        match (section.as_str(), key.as_str()) {
            ("options", "package_dir") => {
                // `=src` maps the root package; `pkg = lib/pkg` maps one.
                if let Some(dir) = value.strip_prefix('=') {
                    out.extend(root_of(folder, here("[options] package_dir"), dir));
                }
            }
            ("options.packages.find", "where") if !value.is_empty() => {
                out.extend(root_of(
                    folder,
                    here("[options.packages.find] where"),
                    &value,
                ));
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A project's files: path and text.
    type Files<'a> = &'a [(&'a str, &'a str)];

    fn project(files: Files<'_>) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = d.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        d
    }

    fn dirs(root: &Path) -> Vec<String> {
        import_roots(root)
            .into_iter()
            .map(|r| r.dir.strip_prefix(root).unwrap().display().to_string())
            .collect()
    }

    #[test]
    fn each_build_backend_names_its_roots() {
        let cases: &[(Files<'_>, &[&str])] = &[
            // setuptools, find where
            (
                &[
                    (
                        "pyproject.toml",
                        "[tool.setuptools.packages.find]\nwhere = [\"lib\"]\n",
                    ),
                    ("lib/svc/__init__.py", ""),
                ],
                &["lib"],
            ),
            // setuptools, the root package mapped
            (
                &[
                    (
                        "pyproject.toml",
                        "[tool.setuptools]\npackage-dir = { \"\" = \"src\" }\n",
                    ),
                    ("src/svc/__init__.py", ""),
                ],
                &["src"],
            ),
            // setuptools, one package mapped to a folder of its name
            (
                &[
                    (
                        "pyproject.toml",
                        "[tool.setuptools]\npackage-dir = { svc = \"code/svc\" }\n",
                    ),
                    ("code/svc/__init__.py", ""),
                ],
                &["code"],
            ),
            // hatchling packages
            (
                &[
                    (
                        "pyproject.toml",
                        "[tool.hatch.build.targets.wheel]\npackages = [\"src/svc\"]\n",
                    ),
                    ("src/svc/__init__.py", ""),
                ],
                &["src"],
            ),
            // hatchling sources as a table
            (
                &[
                    (
                        "pyproject.toml",
                        "[tool.hatch.build.targets.wheel.sources]\n\"py\" = \"\"\n",
                    ),
                    ("py/svc/__init__.py", ""),
                ],
                &["py"],
            ),
            // maturin in a subfolder (a monorepo)
            (
                &[
                    (
                        "core/pyproject.toml",
                        "[tool.maturin]\npython-source = \"python\"\n",
                    ),
                    ("core/python/fast/__init__.py", ""),
                    ("app/__init__.py", ""),
                ],
                &["core/python"],
            ),
            // poetry
            (
                &[
                    (
                        "pyproject.toml",
                        "[tool.poetry]\npackages = [{ include = \"svc\", from = \"src\" }]\n",
                    ),
                    ("src/svc/__init__.py", ""),
                ],
                &["src"],
            ),
            // setup.cfg
            (
                &[
                    (
                        "setup.cfg",
                        "[options]\npackage_dir =\n    =src\n[options.packages.find]\nwhere = src\n",
                    ),
                    ("src/svc/__init__.py", ""),
                ],
                &["src"],
            ),
            // no build config: the src layout, then the flat one
            (&[("src/svc/__init__.py", "")], &["src"]),
            (&[("svc/__init__.py", "")], &[""]),
            // a root a config names that does not exist is not a root
            (
                &[
                    (
                        "pyproject.toml",
                        "[tool.maturin]\npython-source = \"python\"\n",
                    ),
                    ("svc/__init__.py", ""),
                ],
                &[""],
            ),
        ];
        for (files, want) in cases {
            let d = project(files);
            assert_eq!(dirs(d.path()), *want, "{files:?}");
        }
    }

    #[test]
    fn a_root_says_where_it_was_read() {
        let d = project(&[
            (
                "pyproject.toml",
                "[tool.maturin]\npython-source = \"python\"\n",
            ),
            ("python/fast/__init__.py", ""),
        ]);
        let r = import_roots(d.path());
        assert!(
            r[0].from
                .ends_with("pyproject.toml [tool.maturin] python-source"),
            "{r:?}"
        );
    }
}
