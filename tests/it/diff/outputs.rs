//! `diff` on a project with a compiled extension that git ignores, as
//! every maturin, PyO3, Cython or C-extension project has: the base's
//! fresh checkout lacks the built `.so`. A small C extension (`svc._speed`,
//! built in place by setuptools' `build_ext --inplace` with the test
//! venv's setuptools) decides at start-up whether the worker imports a
//! module that burns CPU: `_speed.value()` is 1 at the base (so the base
//! is slow) unless a test changes the C source.
//! - Only Python differs: the working tree's build is the base's too, so
//!   it is carried into the base's checkout, and the report says so.
//! - The C source differs and the target has a `setup`: each tree is built
//!   by it (the verdict proves the base ran its own build: with the working
//!   tree's, both sides would be fast), and a second run takes both from
//!   the cache.
//! - The C source differs and there is no `setup`: exit 2 naming the
//!   extension and the `setup` key.
//! - Side B is a commit (a bisect step): its checkout gets the extension
//!   carried as the base's does.

use std::process::Command;

use super::{Repo, verdict};
use crate::support::{self, python, venv_python};

const SETUP_PY: &str = r#"from setuptools import Extension, setup

setup(
    name="svc",
    version="0.1",
    package_dir={"": "src"},
    packages=["svc"],
    ext_modules=[Extension("svc._speed", ["src/svc/_speed.c"])],
)
"#;

fn speed_c(value: u32) -> String {
    format!(
        r#"#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *value(PyObject *self, PyObject *args) {{ return PyLong_FromLong({value}); }}

static PyMethodDef methods[] = {{{{"value", value, METH_NOARGS, "the build's value"}}, {{NULL, NULL, 0, NULL}}}};

static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "_speed", NULL, -1, methods}};

PyMODINIT_FUNC PyInit__speed(void) {{ return PyModule_Create(&module); }}
"#
    )
}

const WORKER: &str = "from svc import _speed, protokit\n\nif _speed.value() == 1:\n    from svc import heavy\n\nprotokit.serve()\n";

/// The build command, as a target's `setup` and as the user ran it once.
fn build_argv() -> Vec<String> {
    vec![
        venv_python().display().to_string(),
        "setup.py".into(),
        "-q".into(),
        "build_ext".into(),
        "--inplace".into(),
    ]
}

fn build(r: &Repo) {
    let argv = build_argv();
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(&r.root)
        .output()
        .unwrap();
    assert!(out.status.success(), "build_ext: {out:?}");
}

/// The service committed with `_speed` at 1 (slow start-up) and built in
/// place; the working tree's worker is unchanged. `setup` is the target's.
fn service(setup: bool) -> Repo {
    let r = Repo::empty();
    r.svc_package(
        "__pycache__/\n*.so\nbuild/\n*.egg-info/\n",
        "setup.py",
        SETUP_PY,
    );
    r.write("src/svc/_speed.c", &speed_c(1));
    r.write("src/svc/worker.py", WORKER);
    let setup_key = if setup {
        format!(
            "setup = [{}]\n",
            build_argv()
                .iter()
                .map(|a| format!("{a:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        String::new()
    };
    r.write(
        "coldstart.toml",
        &format!(
            "[[target]]\nname = \"svc\"\ncommand = [\"{}\", \"-m\", \"svc.worker\"]\nenv = {{ PYTHONPATH = \"src\" }}\n{setup_key}",
            python().display()
        ),
    );
    r.commit("service with its extension");
    build(&r);
    r
}

fn prepared(v: &serde_json::Value) -> Vec<String> {
    v["targets"][0]["prepared"]
        .as_array()
        .map(|a| a.iter().map(|n| n.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

#[test]
fn an_ignored_extension_is_carried_into_the_base_when_only_python_differs() {
    let r = service(false);
    // The fix, in Python only: the busy module is gone.
    r.write(
        "src/svc/worker.py",
        "from svc import _speed, protokit\n\nprotokit.serve()\n",
    );
    let (code, v) = r.diff_json(&["HEAD"]);
    assert_eq!(v["targets"][0]["status"], "compared", "{v:#}");
    assert_eq!(verdict(&v), "faster", "{v:#}");
    assert_eq!(code, Some(0), "{v:#}");
    let notes = prepared(&v);
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("src/svc/_speed.") && n.contains("carried into the base")),
        "{notes:?}"
    );
}

#[test]
fn the_jobs_own_reports_do_not_keep_the_extension_out_of_the_base() {
    let r = service(false);
    r.write(
        "src/svc/worker.py",
        "from svc import _speed, protokit\n\nprotokit.serve()\n",
    );
    // A bench earlier in the job left its folder, untracked.
    for name in ["trials.jsonl", "summary.json", "summary.md", "phases.svg"] {
        r.write(&format!("bench-out/20261205T070000Z/{name}"), "{}\n");
    }
    // `coldstart diff HEAD --format junit > diff.xml`, as the docs show it:
    // the shell makes diff.xml, untracked, before the diff looks.
    let json = r.tmp.join("diff.json");
    let mut cmd = r.command(&[
        "diff",
        "HEAD",
        "--format",
        "junit",
        "--instrumented",
        "2",
        "--output",
        &format!("json={}", json.display()),
    ]);
    cmd.stdout(std::fs::File::create(r.root.join("diff.xml")).unwrap());
    let out = cmd.output().unwrap();
    r.assert_nothing_left();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(verdict(&v), "faster", "{v:#}");
    let junit = std::fs::read_to_string(r.root.join("diff.xml")).unwrap();
    assert!(
        junit.contains("<testcase classname=\"coldstart.diff\""),
        "{junit}"
    );
    let notes = prepared(&v);
    let carried = notes
        .iter()
        .find(|n| n.starts_with("src/svc/_speed.") && n.contains("carried into the base"))
        .unwrap_or_else(|| panic!("carried: {notes:?}"));
    // The note names the files it left out of the judgement.
    assert!(
        carried.contains("diff.xml") && carried.contains("bench-out/ (4 files)"),
        "{carried}"
    );
}

#[test]
fn a_changed_extension_is_rebuilt_in_each_tree_by_setup_and_cached() {
    let r = service(true);
    // The fix is in C: the working tree's build skips the busy module.
    r.write("src/svc/_speed.c", &speed_c(2));
    build(&r);
    // An empty XDG_CACHE_HOME is no folder (the XDG rule): the cache goes
    // to ~/.cache, not to a `coldstart/` in the folder diff runs in.
    let home = r.tmp.join("home");
    let env: [(&str, &std::ffi::OsStr); 2] =
        [("XDG_CACHE_HOME", "".as_ref()), ("HOME", home.as_os_str())];
    let (code, v) = r.diff_json_with(&["HEAD"], &env);
    assert_eq!(v["targets"][0]["status"], "compared", "{v:#}");
    assert!(
        home.join(".cache/coldstart/setup").is_dir(),
        "the setup cache is under HOME's .cache"
    );
    assert!(
        !r.root.join("coldstart").exists(),
        "nothing in the repository"
    );
    // With the working tree's build carried over, both sides would be fast.
    assert_eq!(verdict(&v), "faster", "{v:#}");
    assert_eq!(code, Some(0), "{v:#}");
    let notes = prepared(&v);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("run in the base's checkout")),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(|n| n.contains("run in the working tree")),
        "{notes:?}"
    );
    // Again: nothing changed, so both come from the cache.
    let (_, again) = r.diff_json_with(&["HEAD", "--max-seconds", "3"], &env);
    let notes = prepared(&again);
    assert!(
        notes.iter().any(|n| n.contains("taken from the cache")),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(|n| n.contains("not run again")),
        "{notes:?}"
    );
    assert_ne!(verdict(&again), "slower", "{again:#}");
}

#[test]
fn a_changed_extension_without_setup_exits_2_naming_it_and_the_key() {
    let r = service(false);
    r.write("src/svc/_speed.c", &speed_c(2));
    build(&r);
    let (code, v) = r.diff_json(&["HEAD"]);
    assert_eq!(code, Some(2), "{v:#}");
    let t = &v["targets"][0];
    assert_eq!(t["error"]["side"], "A", "{t:#}");
    // It names the extension, what differs and the `setup` that builds it.
    let msg = t["error"]["message"].as_str().unwrap();
    let msg = r.placed(msg);
    support::redactions().bind(|| insta::assert_snapshot!("diff_extension_differs", msg));
}

/// Side B a commit too (a bisect step): its fresh checkout lacks the
/// extension as the base's does, and gets it carried by the same rule (no
/// build input differs between the working tree and either commit), so
/// both sides start and a Python-only slowdown is found at its commit
/// rather than skipped as a worker that cannot start.
#[test]
fn a_commit_as_side_b_gets_the_extension_carried_as_the_base_does() {
    let r = service(false);
    r.write("src/svc/extra.py", &super::busy(120));
    r.write("src/svc/worker.py", &format!("import svc.extra\n{WORKER}"));
    r.commit("a busy module at start-up");
    let out = crate::support::printed(
        r.command(&[
            "bisect",
            "HEAD~1",
            "HEAD",
            "--instrumented",
            "2",
            "--format",
            "json",
        ])
        .output()
        .unwrap(),
    );
    r.assert_nothing_left();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the report is JSON");
    assert_eq!(v["steps"][0]["answer"], "slower", "{v:#}");
    assert_eq!(v["outcome"], "found", "{v:#}");
    assert_eq!(v["culprit"]["subject"], "a busy module at start-up");
    assert!(v["skipped"].as_array().unwrap().is_empty(), "{v:#}");
    assert_eq!(out.status.code(), Some(0));
}
