//! `check --suggest` and `--fix` end to end on the seed-shaped fixture
//! (`tests/fixtures/suggest/seed`: the loader imports the package whose
//! `__init__` re-exports the model class from the module that imports the
//! stand-in torch), copied to a temporary folder.

use std::path::Path;
use std::process::Output;

use crate::support::{self, code_and_text, copy_dir, fixtures, printed, python, xtask};

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
        .args(["check", "--processes", "1", "--suggest"])
        .args(extra)
        .arg("--")
        .arg(python())
        .args(["-m", "seedworker"]);
    printed(cmd.output().unwrap())
}

fn copy_seed() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixtures().join("suggest/seed"), &dir.path().join("seed"));
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
    support::redactions().bind(|| insta::assert_snapshot!("seed_suggestion", text));
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

/// A copy of `tests/fixtures/suggest/plugin` (its models module registers
/// the plugin `load` needs) with a `coldstart.toml` whose target has the
/// given extra lines.
fn plugin_project(extra: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("plugin");
    copy_dir(&fixtures().join("suggest/plugin"), &root);
    let suggest = fixtures().join("suggest");
    std::fs::write(
        root.join("coldstart.toml"),
        format!(
            "[[target]]\nname = \"plug\"\ncommand = [\"{}\", \"-m\", \"plugworker\"]\nenv = {{ PYTHONPATH = \"{}:{}\" }}\nprocesses = 1\n{extra}",
            python().display(),
            suggest.join("support").display(),
            suggest.join("stand-ins").display(),
        ),
    )
    .unwrap();
    (dir, root)
}

fn suggest_in(root: &Path) -> (Option<i32>, String) {
    code_and_text(
        crate::support::coldstart(root)
            .args(["check", "--suggest"])
            .env_remove("PYTHONPATH"),
    )
}

#[test]
fn a_cut_that_breaks_the_model_path_is_rejected_by_the_verify_request_and_the_next_one_offered() {
    // Without a model path, dropping the loader's import looks safe: ready,
    // health and shutdown hold and torch is gone from start-up.
    let (_dir, root) = plugin_project("");
    let (code, text) = suggest_in(&root);
    assert_eq!(code, Some(1), "{text}");
    support::redactions().bind(|| insta::assert_snapshot!("plugin_without_verify", text));

    // With `verify = [{ op = "load" }]` the same cut is rejected, with the
    // failing reply, and the cut that keeps the plugin registered is offered.
    let (_dir, root) = plugin_project("verify = [{ op = \"load\", model = \"ner\" }]\n");
    let (code, text) = suggest_in(&root);
    assert_eq!(code, Some(1), "{text}");
    support::redactions().bind(|| insta::assert_snapshot!("plugin_verify_request", text));
    let patch = text
        .split_once("`--fix` writes it):\n")
        .map(|(_, p)| p)
        .expect("a patch");
    assert!(patch.starts_with("--- a/plugworker/models.py\n"), "{patch}");
}

#[test]
fn a_failing_verify_command_rejects_the_cut_with_its_output() {
    // The user's own test loads the model in the copy; it fails once the
    // plugin is no longer registered at import.
    let check =
        "import sys; from plugworker import loader; loader.load('ner'); print('model loads')";
    let (_dir, root) = plugin_project(&format!(
        "verify_command = [\"{}\", \"-c\", \"{check}\"]\n",
        python().display()
    ));
    let (code, text) = suggest_in(&root);
    assert_eq!(code, Some(1), "{text}");
    let text = text.replace(&python().display().to_string(), "[PYTHON]");
    support::redactions().bind(|| insta::assert_snapshot!("plugin_verify_command", text));
}

/// `check --suggest` takes its cuts from the one search `lazy` uses: on a
/// worker that dispatches every request, health included, through one
/// `handle(req)` (`tests/fixtures/lazy/dispatchproject`, its `reports` a
/// stand-in module kept out of start-up by the policy), the import moves
/// into the `if op == "report":` branch, verified with the `report`
/// request; the top of `handle` stays an unverified candidate.
#[test]
fn a_dispatch_workers_import_moves_into_the_branch_that_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dispatchproject");
    copy_dir(&fixtures().join("lazy/dispatchproject"), &root);
    std::fs::write(
        root.join("coldstart.toml"),
        format!(
            "[[target]]\nname = \"d\"\ncommand = [\"{}\", \"-m\", \"app.worker\"]\nprocesses = 1\nforbidden = [\"app.reports\"]\nverify = [{{ op = \"report\", data = [1, 2] }}]\n",
            python().display(),
        ),
    )
    .unwrap();
    let (code, text) = suggest_in(&root);
    assert_eq!(code, Some(1), "{text}");
    support::redactions().bind(|| insta::assert_snapshot!("dispatch_suggestion", text));
}
