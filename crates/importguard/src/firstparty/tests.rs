//! One table of paths, the Rust rule and the Python function held to it.

use std::path::Path;
use std::process::Command;

use super::*;

/// What the rule says of a path: first party, or the kind of refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Says {
    Yes,
    NotAFile,
    Outside,
    Installed,
    Venv,
}

/// A project tree: (path relative to the root, or absolute/synthetic as
/// given, what the rule says). Files listed are created.
const TABLE: &[(&str, Says)] = &[
    ("svc/models/heavy.py", Says::Yes),
    ("worker.py", Says::Yes),
    ("src/app/__init__.py", Says::Yes),
    // A first-party package may be called `venv`: only the marker counts.
    ("venv/__init__.py", Says::Yes),
    (
        ".venv/lib/python3.11/site-packages/dep/__init__.py",
        Says::Venv,
    ),
    ("env-odd-name/lib/python3.11/x.py", Says::Venv),
    ("vendor/site-packages/dep.py", Says::Installed),
    ("vendor/dist-packages/dep.py", Says::Installed),
    ("__pypackages__/3.11/lib/dep.py", Says::Installed),
    ("<frozen importlib._bootstrap>", Says::NotAFile),
    ("<string>", Says::NotAFile),
    ("/outside/of/the/project.py", Says::Outside),
];

fn layout() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (p, _) in TABLE {
        if p.starts_with('<') || p.starts_with('/') {
            continue;
        }
        let f = dir.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, "").unwrap();
    }
    for venv in [".venv", "env-odd-name"] {
        std::fs::write(dir.path().join(venv).join(VENV_MARKER), "home = /usr\n").unwrap();
    }
    dir
}

fn full(root: &Path, p: &str) -> String {
    if p.starts_with('<') || p.starts_with('/') {
        p.to_owned()
    } else {
        root.join(p).display().to_string()
    }
}

fn rust_says(file: &str, root: &Path) -> Says {
    match require(file, root) {
        Ok(()) => Says::Yes,
        Err(NotFirstParty::NotAFile { .. }) => Says::NotAFile,
        Err(NotFirstParty::Outside { .. }) => Says::Outside,
        Err(NotFirstParty::Installed { .. }) => Says::Installed,
        Err(NotFirstParty::Venv { .. }) => Says::Venv,
    }
}

#[test]
fn the_rust_rule_follows_the_table() {
    let dir = layout();
    for (p, want) in TABLE {
        assert_eq!(rust_says(&full(dir.path(), p), dir.path()), *want, "{p}");
    }
}

#[test]
fn the_python_function_gives_the_rust_rule_answers_word_for_word() {
    let dir = layout();
    let files: Vec<String> = TABLE.iter().map(|(p, _)| full(dir.path(), p)).collect();
    let script = format!(
        "import os, sys\n{PY}\nroot = sys.argv[1]\nfor p in sys.argv[2:]:\n    print(_cs_first_party(p, root) or '')\n"
    );
    let out = Command::new(test_interpreters::default_python())
        .args(["-I", "-B", "-c", &script])
        .arg(dir.path())
        .args(&files)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(said.len(), files.len());
    for (file, py) in files.iter().zip(&said) {
        let rust = require(file, dir.path()).err().map(|e| e.to_string());
        assert_eq!(py.as_str(), rust.as_deref().unwrap_or(""), "{file}");
    }
}

#[test]
fn top_level_names_skip_installed_and_environment_folders() {
    let dir = layout();
    std::fs::write(dir.path().join("setup.py"), "").unwrap();
    std::fs::write(dir.path().join("vendor/site-packages/__init__.py"), "").unwrap();
    std::fs::create_dir_all(dir.path().join("svc")).unwrap();
    std::fs::write(dir.path().join("svc/__init__.py"), "").unwrap();
    std::fs::write(dir.path().join(".venv/__init__.py"), "").unwrap();
    let dirs = source_dirs(dir.path(), None, dir.path());
    assert_eq!(
        top_level_names(dirs, dir.path()),
        ["app", "svc", "venv", "worker"]
    );
}

#[test]
fn a_pythonpath_entry_beside_the_project_is_not_under_it() {
    // A monorepo: the service's PYTHONPATH is `src:../shared`.
    let root = Path::new("/repo/service");
    let dirs = source_dirs(root, Some(std::ffi::OsStr::new("src:../shared")), root);
    assert!(dirs.contains(&root.join("src")), "{dirs:?}");
    assert!(
        !dirs.iter().any(|d| d.ends_with("shared")),
        "../shared is outside the project: {dirs:?}"
    );
    assert_eq!(
        lexical(Path::new("/repo/service/../shared")),
        Path::new("/repo/shared")
    );
    assert_eq!(
        lexical(Path::new("/repo/./a/b/../c")),
        Path::new("/repo/a/c")
    );
    assert_eq!(lexical(Path::new("../up/x/..")), Path::new("../up"));
    assert_eq!(lexical(Path::new("/..")), Path::new("/"));
}
