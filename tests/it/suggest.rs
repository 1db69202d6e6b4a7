//! `check --suggest` and `--fix` end to end on the seed-shaped fixture
//! (`tests/fixtures/suggest/seed`: the loader imports the package whose
//! `__init__` re-exports the model class from the module that imports the
//! stand-in torch), copied to a temporary folder.

use std::path::Path;
use std::process::Output;

use crate::support::{fixtures, python, xtask};

fn run(dir: &Path, extra: &[&str]) -> Output {
    let suggest = fixtures().join("suggest");
    let pythonpath = format!(
        "{}:{}",
        suggest.join("support").display(),
        suggest.join("stand-ins").display()
    );
    let mut cmd = xtask();
    cmd.current_dir(dir)
        .env("PYTHONPATH", pythonpath)
        .args(["import-boundary", "--processes", "1", "--suggest"])
        .args(extra)
        .arg("--")
        .arg(python())
        .args(["-m", "seedworker"]);
    let out = cmd.output().unwrap();
    eprintln!(
        "exit {:?}\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn copy_seed() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(fixtures().join("suggest/seed"))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    dir
}

#[test]
fn suggest_prints_a_verified_patch_that_git_applies_and_changes_nothing() {
    let dir = copy_seed();
    let root = dir.path().join("seed");
    let before = std::fs::read_to_string(root.join("seedworker/loader.py")).unwrap();
    let out = run(&root, &[]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("suggestion for torch (verified on a patched copy"),
        "{text}"
    );
    let patch = text
        .split_once("`--fix` writes it):\n")
        .map(|(_, p)| p)
        .expect("a patch");
    assert!(patch.starts_with("--- a/seedworker/loader.py\n"), "{patch}");
    assert_eq!(
        std::fs::read_to_string(root.join("seedworker/loader.py")).unwrap(),
        before,
        "--suggest writes nothing"
    );
    std::fs::write(dir.path().join("p.diff"), patch).unwrap();
    let applied = std::process::Command::new("git")
        .args(["apply", "--check", "-p1"])
        .arg(dir.path().join("p.diff"))
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(applied.status.success(), "{applied:?}");
}

#[test]
fn fix_writes_the_cut_and_the_check_then_passes() {
    let dir = copy_seed();
    let root = dir.path().join("seed");
    let out = run(&root, &["--fix"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("PASS"));
    let loader = std::fs::read_to_string(root.join("seedworker/loader.py")).unwrap();
    assert!(
        loader.contains("    from seedworker.models import NerModel"),
        "{loader}"
    );
}
