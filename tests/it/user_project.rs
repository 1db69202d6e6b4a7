//! coldstart as a new user runs it: the installed `coldstart` binary in a
//! project of their own, in a temporary folder outside this workspace. The
//! project is a worker package laid out like the system before its fix (the
//! package `__init__` re-exports the model class from the module that
//! imports torch), with the stand-in torch and transformers packages of
//! `tests/fixtures/boundary/stand-ins` (stand-ins, not the real libraries),
//! configured by `[tool.coldstart]` in its `pyproject.toml`.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::{
    self, Env, code_and_text, coldstart_bin, coldstart_run, copy_dir, example_cargo, fixtures, git,
    python, site_packages, venv_python,
};

/// A user's project: its root (kept alive by the temp dir).
struct UserProject {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn project() -> UserProject {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ml-service");
    let workers = fixtures().join("boundary").join("workers");
    copy_dir(&workers.join("eagerworker"), &root.join("src/eagerworker"));
    std::fs::copy(workers.join("protokit.py"), root.join("src/protokit.py")).unwrap();
    copy_dir(
        &fixtures().join("boundary").join("stand-ins"),
        &root.join("stand-ins"),
    );
    std::fs::create_dir_all(root.join("docs/deep")).unwrap();
    std::fs::write(
        root.join("pyproject.toml"),
        format!(
            "[project]\nname = \"ml-service\"\n\n[[tool.coldstart.target]]\nname = \"ner\"\ncommand = [\"{}\", \"-m\", \"eagerworker\"]\nenv = {{ PYTHONPATH = \"src:stand-ins\" }}\nprocesses = 2\n",
            python().display()
        ),
    )
    .unwrap();
    UserProject { _dir: dir, root }
}

/// The user's environment: no PYTHONPATH of this workspace's, the
/// project's own configuration says where its code is.
const NO_PYTHONPATH: &[Env<'static>] = &[Env::Unset("PYTHONPATH")];

use crate::support::stdout;

/// Drops the eager re-export: the fix of the system this fixture mirrors.
fn fix(root: &Path) {
    let init = root.join("src/eagerworker/__init__.py");
    let text = std::fs::read_to_string(&init).unwrap();
    let fixed: String = text
        .lines()
        .filter(|l| !l.starts_with("from eagerworker.model import"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(text, fixed, "the fixture's re-export line moved");
    std::fs::write(&init, fixed).unwrap();
}

#[test]
fn a_check_from_a_subfolder_names_the_chain_at_project_relative_lines_in_every_format() {
    let p = project();
    let here = p.root.join("docs/deep");
    let text = coldstart_run(&here, &["check"], &[], NO_PYTHONPATH);
    assert_eq!(text.status.code(), Some(1));
    let t = stdout(&text);
    support::redactions().bind(|| insta::assert_snapshot!("check_from_a_subfolder_text", t));

    let gh = coldstart_run(&here, &["check", "--format", "github"], &[], NO_PYTHONPATH);
    assert_eq!(gh.status.code(), Some(1));
    // The error at the first-party line the chain started from (the
    // re-export), not at the line importing torch, which gets a notice. The
    // whole output, through the one redaction.
    support::redactions()
        .bind(|| insta::assert_snapshot!("check_from_a_subfolder_github", stdout(&gh)));

    let junit = coldstart_run(&here, &["check", "--format", "junit"], &[], NO_PYTHONPATH);
    assert_eq!(junit.status.code(), Some(1));
    // The failure at the line the chain started from, as the GitHub error
    // says; stanza, not imported, a passing case.
    support::redactions()
        .bind(|| insta::assert_snapshot!("check_from_a_subfolder_junit", stdout(&junit)));

    fix(&p.root);
    let after = coldstart_run(&here, &["check", "--format", "github"], &[], NO_PYTHONPATH);
    assert_eq!(after.status.code(), Some(0), "the fixed worker passes");
    assert_eq!(stdout(&after), "");
    let text = coldstart_run(&p.root.join("src"), &["check"], &[], NO_PYTHONPATH);
    assert_eq!(text.status.code(), Some(0));
    assert!(stdout(&text).starts_with("PASS  ner (pyproject.toml)"));
}

#[test]
fn snapshots_are_written_checked_for_drift_and_accepted() {
    let p = project();
    fix(&p.root);
    let here = p.root.join("docs");
    let snap = p.root.join(".coldstart/snapshots/ner.snap");

    assert_eq!(
        coldstart_run(&here, &["snapshot"], &[], NO_PYTHONPATH)
            .status
            .code(),
        Some(0)
    );
    let stored = std::fs::read_to_string(&snap).unwrap();
    assert!(stored.starts_with("---\nsource: coldstart\n"), "{stored}");
    assert!(stored.contains("  eagerworker\n"), "{stored}");
    assert!(!stored.contains("ms"), "no times in a snapshot: {stored}");
    assert!(
        !stored.contains(p.root.to_str().unwrap()),
        "no machine paths: {stored}"
    );
    assert_eq!(
        coldstart_run(&here, &["snapshot", "--check"], &[], NO_PYTHONPATH)
            .status
            .code(),
        Some(0)
    );

    // A new start-up import: the standard library's `csv`, from the package.
    let init = p.root.join("src/eagerworker/__init__.py");
    let text = std::fs::read_to_string(&init).unwrap();
    std::fs::write(&init, format!("import csv  # noqa: F401\n{text}")).unwrap();
    let drifted = coldstart_run(&here, &["snapshot", "--check"], &[], NO_PYTHONPATH);
    assert_eq!(drifted.status.code(), Some(1));
    let d = stdout(&drifted);
    assert!(d.contains("+    csv [stdlib]"), "{d}");
    assert!(snap.with_extension("snap.new").exists());
    assert_eq!(
        std::fs::read_to_string(&snap).unwrap(),
        stored,
        "--check writes no .snap"
    );

    assert_eq!(
        coldstart_run(&here, &["snapshot", "--accept"], &[], NO_PYTHONPATH)
            .status
            .code(),
        Some(0)
    );
    assert!(!snap.with_extension("snap.new").exists());
    assert_eq!(
        coldstart_run(&here, &["snapshot", "--check"], &[], NO_PYTHONPATH)
            .status
            .code(),
        Some(0)
    );

    // `snapshot = true` makes `check` fail on drift too.
    let pyproject = p.root.join("pyproject.toml");
    let cfg = std::fs::read_to_string(&pyproject).unwrap();
    std::fs::write(&pyproject, format!("{cfg}snapshot = true\n")).unwrap();
    assert_eq!(
        coldstart_run(&here, &["check"], &[], NO_PYTHONPATH)
            .status
            .code(),
        Some(0)
    );
    std::fs::write(&init, text).unwrap();
    let check = coldstart_run(&here, &["check"], &[], NO_PYTHONPATH);
    assert_eq!(check.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&check.stderr).contains("-    csv [stdlib]"));
}

#[test]
fn config_errors_say_what_to_fix() {
    let p = project();
    let err = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();

    std::fs::write(
        p.root.join("coldstart.toml"),
        "[[target]]\nname='x'\ncommand=['y']\n",
    )
    .unwrap();
    // Both kinds in one folder: the coldstart.toml is read, as ruff reads
    // its ruff.toml first (its target cannot start: exit 2).
    let both = coldstart_run(&p.root, &["check"], &[], NO_PYTHONPATH);
    assert_eq!(both.status.code(), Some(2));
    let both = format!("{}{}", String::from_utf8_lossy(&both.stdout), err(&both));
    support::redactions().bind(|| insta::assert_snapshot!("config_both_kinds", both));

    std::fs::write(
        p.root.join("coldstart.toml"),
        "[[target]]\nname='x'\ncommand=['y']\nprocesess=2\n",
    )
    .unwrap();
    std::fs::remove_file(p.root.join("pyproject.toml")).unwrap();
    let unknown = coldstart_run(&p.root, &["check"], &[], NO_PYTHONPATH);
    assert_eq!(unknown.status.code(), Some(2));
    // The misspelt key and every key a target has, `processes` among them.
    support::redactions()
        .bind(|| insta::assert_snapshot!("config_error_unknown_key", err(&unknown)));

    std::fs::write(
        p.root.join("coldstart.toml"),
        "[[target]]\nname='x'\ncommand=['y']\ncwd='nowhere'\n",
    )
    .unwrap();
    let missing = coldstart_run(&p.root.join("docs"), &["check"], &[], NO_PYTHONPATH);
    assert_eq!(missing.status.code(), Some(2));
    support::redactions()
        .bind(|| insta::assert_snapshot!("config_error_missing_cwd", err(&missing)));

    std::fs::remove_file(p.root.join("coldstart.toml")).unwrap();
    let none = coldstart_run(&p.root, &["check"], &[], NO_PYTHONPATH);
    assert_eq!(none.status.code(), Some(2));
    // What is missing, where it was looked for, and a config to start from.
    support::redactions().bind(|| insta::assert_snapshot!("config_error_none_found", err(&none)));
    assert_eq!(
        coldstart_run(&p.root, &["init"], &[], NO_PYTHONPATH)
            .status
            .code(),
        Some(0)
    );
    assert!(p.root.join("coldstart.toml").is_file());
    assert_eq!(
        coldstart_run(&p.root, &["init"], &[], NO_PYTHONPATH)
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn the_version_names_the_git_revision() {
    let v = coldstart_run(Path::new("/"), &["--version"], &[], NO_PYTHONPATH);
    assert_eq!(v.status.code(), Some(0));
    let s = stdout(&v);
    assert!(s.starts_with("coldstart 0."), "{s}");
    assert!(s.contains("(git "), "{s}");
}

#[test]
fn the_wheel_installs_with_pip_its_pytest_plugin_fails_with_the_chain_and_its_command_checks_a_project()
 {
    let work = tempfile::tempdir().unwrap();
    let wheels = work.path().join("wheels");
    // The portable wheel, as `cargo xtask dist` builds it for a release
    // (zig, glibc 2.17), in the `wheel-test` profile: a whole build for the
    // zig target of its own, unoptimised so it costs the suite least, in a
    // target folder kept outside the clone, so a clean clone rebuilds only
    // the workspace's own crates (cargo's fingerprints decide).
    let built = crate::support::xtask()
        // The venv is the suite's, provisioned before the suite ran.
        .args(["dist", "--no-provision", "--profile", "wheel-test", "--out"])
        .arg(&wheels)
        .env("CARGO_TARGET_DIR", crate::support::wheel_test_target())
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let wheel = std::fs::read_dir(&wheels)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .expect("a wheel");
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    let size = std::fs::metadata(&wheel).unwrap().len();
    eprintln!("wheel: {name} ({size} bytes)");
    // A binary wheel for any Python 3 on any manylinux2014 (glibc 2.17)
    // system, as maturin's own check tagged it ...
    assert!(
        name.starts_with("coldstart-0.")
            && name.ends_with("-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"),
        "{name}"
    );
    // ... and as auditwheel, reading every versioned glibc symbol the
    // binary needs, finds it.
    let auditwheel = venv_python().with_file_name("auditwheel");
    let shown = std::process::Command::new(&auditwheel)
        .arg("show")
        .arg(&wheel)
        .output()
        .unwrap();
    let shown_text = String::from_utf8_lossy(&shown.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(shown.status.success(), "{shown:?}");
    assert!(
        shown_text
            .contains("consistent with the following platform tag: \"manylinux_2_17_x86_64\""),
        "{shown_text}"
    );
    man_page_renders(&wheels.join("man/coldstart.1"));

    let venv = work.path().join("venv");
    let made = std::process::Command::new(python())
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    let installed = std::process::Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--no-index", "--no-deps"])
        .arg(&wheel)
        .output()
        .unwrap();
    assert!(installed.status.success(), "{installed:?}");
    let exe = venv.join("bin/coldstart");
    let version = std::process::Command::new(&exe)
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("coldstart 0."));
    // The wheel's binary is built without the `native` feature (the suite's
    // own build has it): asking it for native frames says how to get them.
    native_frames_say_how_to_get_them(&exe);

    let p = project();
    pytest_plugin_fails_with_the_chain_then_passes_after_the_fix(&venv, &p.root);
    let check = std::process::Command::new(&exe)
        .arg("check")
        .current_dir(p.root.join("docs"))
        .env_remove("PYTHONPATH")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&check.stdout);
    assert_eq!(
        check.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(out.starts_with("PASS  ner (pyproject.toml)"), "{out}");
}

/// `coldstart dump --native` and `record --native` of a build without the
/// `native` feature (the wheel's) exit 2 and say how to get native frames.
/// The dumped Python is started by the shell that then becomes coldstart,
/// so it is coldstart's own child (readable under any ptrace scope); it
/// ends as soon as coldstart has, so `output()` returns.
fn native_frames_say_how_to_get_them(exe: &Path) {
    // The shell's pid is coldstart's after `exec`: the child waits while it
    // is its parent (and not at all if coldstart has ended already).
    let child =
        "import os, sys, time\nwhile os.getppid() == int(sys.argv[1]):\n    time.sleep(0.05)";
    let cwd = tempfile::tempdir().unwrap();
    for how in [
        "dump --native \"$!\"",
        "record --native --duration 1 \"$!\"",
    ] {
        let script = format!("\"$0\" -c \"$2\" $$ & exec \"$1\" {how}");
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .arg(python())
            .arg(exe)
            .arg(child)
            .current_dir(cwd.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{how}: {err}");
        assert!(err.contains("libunwind-dev"), "{how}: {err}");
        assert!(err.contains("--features native"), "{how}: {err}");
    }
    // `record` wrote no file for a recording that never started.
    assert_eq!(std::fs::read_dir(cwd.path()).unwrap().count(), 0);
}

/// The man page `cargo xtask dist` wrote renders: with `man -l` where man
/// is installed, else with groff or mandoc.
fn man_page_renders(page: &Path) {
    let tools: [(&str, &[&str]); 3] = [
        ("man", &["-l"]),
        ("groff", &["-man", "-Tutf8"]),
        ("mandoc", &[]),
    ];
    let (tool, args) = tools
        .iter()
        .find(|(tool, _)| {
            std::process::Command::new(tool)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("man, groff or mandoc to render the man page");
    eprintln!("$ {tool} {} {}", args.join(" "), page.display());
    let out = std::process::Command::new(tool)
        .args(*args)
        .arg(page)
        .env("MANWIDTH", "100")
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        // man reads a page from stdin when it is not closed.
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    // groff overstrikes bold and underlined letters (`X\bX`): keep the last.
    let mut plain = String::new();
    for c in text.chars() {
        if c == '\u{8}' {
            plain.pop();
        } else {
            plain.push(c);
        }
    }
    for word in [
        "NAME",
        "SUBCOMMANDS",
        "coldstart-completions(1)",
        "The three jobs",
    ] {
        assert!(plain.contains(word), "{word} not in:\n{plain}");
    }
}

/// The wheel's pytest plugin, found by pytest through its `pytest11` entry
/// point in `venv` (pytest itself and pytest-xdist come from the test venv,
/// through a `.pth` file: the fresh venv gets nothing from the network): the
/// project's boundary tests fail with the chain, plain and under xdist, and
/// pass once the project is fixed.
fn pytest_plugin_fails_with_the_chain_then_passes_after_the_fix(venv: &Path, root: &Path) {
    let py = venv.join("bin/python");
    let test_venv_site = site_packages(&venv_python());
    std::fs::write(
        site_packages(&py).join("coldstart-test-venv.pth"),
        format!("{}\n", test_venv_site.display()),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("tests")).unwrap();
    std::fs::copy(
        fixtures().join("pytest-plugin/test_boundary.py"),
        root.join("tests/test_boundary.py"),
    )
    .unwrap();
    let pytest = |args: &[&str]| {
        eprintln!(
            "$ cd {} && python -m pytest {}",
            root.display(),
            args.join(" ")
        );
        code_and_text(
            std::process::Command::new(&py)
                .args(["-m", "pytest", "-p", "no:cacheprovider"])
                .args(args)
                .current_dir(root)
                // For `coldstart.module("eagerworker")`: the package and its stand-ins.
                .env(
                    "PYTHONPATH",
                    format!(
                        "{}:{}",
                        root.join("src").display(),
                        root.join("stand-ins").display()
                    ),
                )
                .env_remove("COLDSTART_BIN"),
        )
    };
    for args in [&["-q"][..], &["-q", "-n", "2"][..]] {
        let (code, text) = pytest(args);
        assert_eq!(code, Some(1), "{text}");
        assert!(text.contains("2 failed"), "{text}");
        assert!(
            text.contains("coldstart: target 'ner' imports a forbidden module at start-up"),
            "{text}"
        );
        assert!(
            text.contains("chain: eagerworker -> eagerworker.model -> torch"),
            "{text}"
        );
        assert!(
            text.contains("eagerworker.model  imported at src/eagerworker/__init__.py:5"),
            "{text}"
        );
        assert!(text.contains("phase: start-up"), "{text}");
        assert!(text.contains("ms cumulative"), "{text}");
        assert!(
            text.contains("FAIL  import eagerworker (--module)"),
            "{text}"
        );
    }
    fix(root);
    for args in [&["-q"][..], &["-q", "-n", "2"][..]] {
        let (code, text) = pytest(args);
        assert_eq!(code, Some(0), "{text}");
        assert!(text.contains("2 passed"), "{text}");
    }
}

#[test]
fn the_example_projects_own_xtask_runs_the_check_through_the_library() {
    let out = example_cargo(&["xtask", "check"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with("PASS  mlworker (pyproject.toml): 3 processes"),
        "{text}"
    );
}

/// A project holding one shape of tests/fixtures/chains at its root (the
/// worker `worker.py` and its packages), with the protocol loop and the
/// stand-in torch; its target runs `python worker.py`.
fn shape_project(shape: &str) -> UserProject {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("svc-project");
    copy_dir(&fixtures().join("chains").join(shape), &root);
    std::fs::copy(
        fixtures().join("boundary/workers/protokit.py"),
        root.join("protokit.py"),
    )
    .unwrap();
    copy_dir(
        &fixtures().join("boundary").join("stand-ins"),
        &root.join("stand-ins"),
    );
    std::fs::write(
        root.join("pyproject.toml"),
        format!(
            "[project]\nname = \"svc\"\n\n[[tool.coldstart.target]]\nname = \"svc\"\ncommand = [\"{}\", \"worker.py\"]\nenv = {{ PYTHONPATH = \"stand-ins\" }}\nprocesses = 1\n",
            python().display()
        ),
    )
    .unwrap();
    UserProject { _dir: dir, root }
}

/// `from svc.types import Wrapper`, where svc/types.py imports
/// svc.models.heavy and svc/models/__init__.py re-exports it: the chain is
/// the one that ran, each module once, svc.models shown as imported for
/// the name svc/types.py asked for; in text, JSON and GitHub annotations.
#[test]
fn a_re_exported_submodule_gives_the_chain_that_ran_in_every_format() {
    let p = shape_project("reexport");
    let text = coldstart_run(&p.root, &["check"], &[], NO_PYTHONPATH);
    assert_eq!(text.status.code(), Some(1));
    let t = stdout(&text);
    support::redactions().bind(|| insta::assert_snapshot!("reexported_submodule_text", t));

    let json = coldstart_run(&p.root, &["check", "--json"], &[], NO_PYTHONPATH);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let torch = &v["targets"][0]["violations"][0];
    assert_eq!(torch["module"], "torch", "{v:#}");
    assert_eq!(
        torch["chain"],
        serde_json::json!(["svc.types", "svc.models", "svc.models.heavy", "torch"])
    );
    assert_eq!(
        torch["chain_parent_of"],
        serde_json::json!([null, "svc.models.heavy", null, null])
    );
    let lines: Vec<(String, u64)> = torch["chain_lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let file = Path::new(f["file"].as_str().unwrap());
            let rel = file.strip_prefix(&p.root).unwrap_or(file);
            (rel.display().to_string(), f["line"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(
        lines,
        [
            ("worker.py".to_owned(), 2),
            ("svc/types.py".to_owned(), 2),
            ("svc/models/__init__.py".to_owned(), 2),
            ("svc/models/heavy.py".to_owned(), 2),
        ]
    );

    let gh = coldstart_run(
        &p.root,
        &["check", "--format", "github"],
        &[],
        NO_PYTHONPATH,
    );
    let g = stdout(&gh);
    let errors: Vec<&str> = g.lines().filter(|l| l.starts_with("::error")).collect();
    assert_eq!(errors.len(), 1, "{g}");
    assert!(
        errors[0].starts_with("::error file=worker.py,line=2,"),
        "the error is at the line the chain started from: {g}"
    );
    for place in [
        "svc/types.py,line=2",
        "svc/models/__init__.py,line=2",
        "svc/models/heavy.py,line=2",
    ] {
        assert!(
            g.contains(&format!("::notice file={place},")),
            "{place}: {g}"
        );
    }
}

/// `import pkga.sub.leaf`, where pkga/sub/__init__.py imports torch: the
/// leaf imported nothing; pkga.sub was imported for it at the worker's line.
#[test]
fn a_heavy_parent_package_of_the_requested_name_heads_the_chain_with_its_line() {
    let p = shape_project("leaf_of_heavy_package");
    let text = coldstart_run(&p.root, &["check"], &[], NO_PYTHONPATH);
    assert_eq!(text.status.code(), Some(1));
    let t = stdout(&text);
    support::redactions().bind(|| insta::assert_snapshot!("heavy_parent_package_text", t));
}

/// A fresh git repository holding only `.pre-commit-hooks.yaml` as this
/// workspace ships it: what `pre-commit try-repo` clones the hooks from.
fn hooks_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("coldstart-hooks");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::copy(
        crate::support::root().join(".pre-commit-hooks.yaml"),
        repo.join(".pre-commit-hooks.yaml"),
    )
    .unwrap();
    git(&repo, &["init", "--quiet"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "--quiet", "-m", "hooks"]);
    repo
}

#[test]
fn the_pre_commit_hooks_run_through_try_repo_and_fail_with_the_chain_until_the_fix() {
    let p = project();
    let hooks = hooks_repo(p._dir.path());
    git(&p.root, &["init", "--quiet"]);
    git(&p.root, &["add", "."]);
    git(&p.root, &["commit", "--quiet", "-m", "project"]);
    let bin_dir = coldstart_bin().parent().unwrap().to_path_buf();
    let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let cache = p._dir.path().join("pre-commit-home");
    let try_repo = |hook: &str| {
        eprintln!(
            "$ cd {} && pre-commit try-repo {} {hook} --all-files",
            p.root.display(),
            hooks.display()
        );
        code_and_text(
            std::process::Command::new(venv_python())
                .args(["-m", "pre_commit", "try-repo"])
                .arg(&hooks)
                .args([hook, "--all-files", "--verbose"])
                .current_dir(&p.root)
                .env("PATH", &path)
                .env("PRE_COMMIT_HOME", &cache)
                .env_remove("PYTHONPATH"),
        )
    };
    let (code, text) = try_repo("coldstart-check");
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("coldstart check"), "{text}");
    assert!(text.contains("Failed"), "{text}");
    assert!(
        text.contains("chain: eagerworker -> eagerworker.model -> torch"),
        "{text}"
    );

    fix(&p.root);
    let (code, text) = try_repo("coldstart-check");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("PASS  ner (pyproject.toml)"), "{text}");

    // No snapshot reviewed yet: the hook fails and says how to take one;
    // once taken, it passes.
    let (code, text) = try_repo("coldstart-snapshot");
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(
        coldstart_run(&p.root, &["snapshot"], &[], NO_PYTHONPATH)
            .status
            .code(),
        Some(0)
    );
    let (code, text) = try_repo("coldstart-snapshot");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("coldstart snapshot --check"), "{text}");
}
