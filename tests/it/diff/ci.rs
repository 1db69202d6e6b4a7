//! `diff` in CI as the docs show it: its GitHub annotations for failures
//! that have no line, and a monorepo's `PYTHONPATH` entry beside the
//! project (`src:../shared`), with the shared folder outside the
//! project's repository or in the same one.

use std::path::Path;

use super::{MAIN, Repo};
use crate::support::{git, python};

#[test]
fn a_module_budget_without_a_line_is_an_annotation_github_reads() {
    let r = Repo::new();
    // A budget no worker meets: the failure has no first-party line.
    r.write(
        "coldstart.toml",
        &format!(
            "[[target]]\nname = \"w\"\ncommand = [\"{}\", \"-m\", \"app\"]\nenv = {{ PYTHONPATH = \"src:stand-ins\" }}\nmax_modules = 1\n",
            python().display()
        ),
    );
    let gh = r.diff(&[
        "diff",
        "HEAD",
        "--format",
        "github",
        "--instrumented",
        "2",
        "--max-seconds",
        "3",
    ]);
    assert_eq!(gh.status.code(), Some(1), "{gh:?}");
    let text = String::from_utf8_lossy(&gh.stdout);
    let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("::error")).collect();
    assert!(!errors.is_empty(), "{text}");
    for line in text.lines().filter(|l| l.starts_with("::")) {
        assert!(
            ["::error ", "::warning ", "::notice "]
                .iter()
                .any(|k| line.starts_with(k)),
            "GitHub drops a command whose properties do not open with a space: {line}"
        );
    }
    assert!(
        errors
            .iter()
            .any(|l| l.starts_with("::error title=w%3A max_modules::")),
        "{text}"
    );
}

#[test]
fn a_failed_setup_names_the_side_it_failed_in() {
    // The working tree's setup runs first; each command fails on one side.
    for (fails_in, side) in [("head", "B"), ("base", "A")] {
        let r = Repo::empty();
        r.write_worker();
        let config = std::fs::read_to_string(r.root.join("coldstart.toml")).unwrap();
        r.write(
            "coldstart.toml",
            &format!(
                "{config}setup = [\"sh\", \"-c\", \"test \\\"$COLDSTART_SIDE\\\" != {fails_in}\"]\n"
            ),
        );
        r.commit("worker with a setup");
        let (code, v) = r.diff_json(&["HEAD", "--max-seconds", "3"]);
        assert_eq!(code, Some(2), "{v:#}");
        let e = &v["targets"][0]["error"];
        assert_eq!(e["side"], side, "{v:#}");
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains(&format!("failed in the {fails_in} tree")),
            "{e:#}"
        );
    }
}

/// The worker of [`Repo::write_worker`] importing `sharedlib` from
/// `../shared` (`src:stand-ins:../shared`), committed with it.
fn worker_with_shared(r: &Repo, shared: &Path) {
    r.write_worker();
    std::fs::create_dir_all(shared).unwrap();
    std::fs::write(shared.join("sharedlib.py"), "VALUE = 1\n").unwrap();
    r.write("src/app/__main__.py", &format!("import sharedlib\n{MAIN}"));
    r.write(
        "coldstart.toml",
        &format!(
            "[[target]]\nname = \"w\"\ncommand = [\"{}\", \"-m\", \"app\"]\nenv = {{ PYTHONPATH = \"src:stand-ins:../shared\" }}\n",
            python().display()
        ),
    );
    r.commit("worker with the shared library");
}

fn compared(r: &Repo) {
    let (code, v) = r.diff_json(&["HEAD", "--max-seconds", "3"]);
    let t = &v["targets"][0];
    assert_eq!(t["status"], "compared", "{t:#}");
    assert!(t["error"].is_null(), "{t:#}");
    assert_eq!(code, Some(0), "{v:#}");
}

#[test]
fn a_shared_folder_beside_the_repository_is_imported_by_both_sides() {
    let r = Repo::empty();
    let shared = r.root.parent().unwrap().join("shared");
    worker_with_shared(&r, &shared);
    compared(&r);
}

#[test]
fn a_shared_folder_beside_the_project_in_one_repository_is_imported_by_both_sides() {
    // A monorepo: `mono/svc` (the project, its coldstart.toml) beside
    // `mono/shared`, one git repository at `mono`.
    let dir = tempfile::tempdir().unwrap();
    let mono = dir.path().join("mono");
    let root = mono.join("svc");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(mono.join(".gitignore"), "__pycache__/\n").unwrap();
    git(&mono, &["init", "-q", "-b", "main"]);
    let r = Repo {
        _dir: dir,
        root,
        tmp,
    };
    worker_with_shared(&r, &mono.join("shared"));
    compared(&r);
}
