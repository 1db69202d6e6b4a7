//! `diff` on the layouts users develop in: a src-layout service installed
//! into its own `.venv` in editable mode, as `pip install -e .` (and `uv
//! sync`) leave it. Each kind of editable install is made for real, by pip
//! with the build backend of the test venv (`--no-build-isolation`), into
//! a venv of the fixture project's own: setuptools' static `.pth` (a src
//! layout found with `packages.find`), setuptools' editable finder (a
//! package mapped with `package-dir`), hatchling's `editables` redirect
//! (`dev-mode-exact`). The base commit imports a module that burns CPU at
//! start-up and the working tree drops it: each side must run its own
//! code, so the verdict is `faster`; with the project's import roots
//! emptied the base would run the working tree's code through the editable
//! install, and `diff` must refuse to judge (exit 2) naming the module,
//! its file and the install behind it.

use std::process::Command;

use super::{Repo, busy};
use crate::support::{self, python, site_packages, venv_python};

/// The build configs of the three editable installs.
const SETUPTOOLS_PTH: &str = r#"[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "svc"
version = "0.1"

[tool.setuptools.packages.find]
where = ["src"]
"#;

const SETUPTOOLS_FINDER: &str = r#"[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "svc"
version = "0.1"

[tool.setuptools]
packages = ["svc"]
package-dir = { svc = "src/svc" }
"#;

const HATCH_EDITABLES: &str = r#"[build-system]
requires = ["hatchling", "editables"]
build-backend = "hatchling.build"

[project]
name = "svc"
version = "0.1"

[tool.hatch.build]
dev-mode-exact = true

[tool.hatch.build.targets.wheel]
packages = ["src/svc"]
"#;

const WORKER_EAGER: &str = "from svc import protokit\nfrom svc import heavy\n\nprotokit.serve()\n";
const WORKER_LEAN: &str = "from svc import protokit\n\nprotokit.serve()\n";

/// A service in a git repository with its own `.venv` (git-ignored), the
/// project installed into it in editable mode by `pyproject`'s backend.
/// The commit holds the eager worker; the working tree the lean one.
fn service(pyproject: &str) -> Repo {
    let r = Repo::empty();
    r.svc_package(
        "__pycache__/\n.venv/\n*.egg-info/\nbuild/\n",
        "pyproject.toml",
        pyproject,
    );
    r.write("src/svc/worker.py", WORKER_EAGER);
    r.write(
        "coldstart.toml",
        "[[target]]\nname = \"svc\"\ncommand = [\".venv/bin/python\", \"-m\", \"svc.worker\"]\nmax_slowdown = 0.05\n",
    );
    // The project's own venv; its build tools are the test venv's (a .pth
    // naming the test venv's site-packages), so pip builds offline.
    let venv = r.root.join(".venv");
    let made = Command::new(python())
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    let tools = site_packages(&venv_python());
    std::fs::write(
        site_packages(&venv.join("bin/python")).join("_test_venv_tools.pth"),
        format!("{}\n", tools.display()),
    )
    .unwrap();
    let pip = Command::new(venv.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-build-isolation",
            "--no-deps",
            "--no-index",
            "-e",
            ".",
        ])
        .current_dir(&r.root)
        .output()
        .unwrap();
    assert!(
        pip.status.success(),
        "pip install -e: {}",
        String::from_utf8_lossy(&pip.stderr)
    );
    r.commit("eager worker");
    r.write("src/svc/worker.py", WORKER_LEAN);
    std::fs::remove_file(r.root.join("src/svc/heavy.py")).unwrap();
    r
}

/// What the editable install left in the venv's site-packages, by name.
fn installed(r: &Repo) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(site_packages(&r.root.join(".venv/bin/python")))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("svc") || n.contains("editable"))
        .collect();
    v.sort();
    v
}

/// Each side runs its own code: the base's busy module is gone from the
/// working tree, so B is faster, and the report names the module removed.
fn faster_with_its_own_code(pyproject: &str, install_holds: &str) {
    let r = service(pyproject);
    let files = installed(&r);
    assert!(
        files.iter().any(|f| f.contains(install_holds)),
        "the editable install is the kind under test: {files:?}"
    );
    let (code, v) = r.diff_json(&["HEAD"]);
    let t = &v["targets"][0];
    assert_eq!(t["status"], "compared", "{v:#}");
    assert_eq!(super::verdict(&v), "faster", "{v:#}");
    assert_eq!(code, Some(0), "{v:#}");
    let removed = t["imports"]["removed_first_party"].as_array().unwrap();
    assert!(removed.iter().any(|m| m == "svc.heavy"), "{t:#}");
}

#[test]
fn setuptools_static_pth_each_side_runs_its_own_code() {
    faster_with_its_own_code(SETUPTOOLS_PTH, "__editable__.svc-0.1.pth");
}

#[test]
fn setuptools_editable_finder_each_side_runs_its_own_code() {
    faster_with_its_own_code(SETUPTOOLS_FINDER, "__editable___svc_0_1_finder.py");
}

#[test]
fn hatchling_editables_each_side_runs_its_own_code() {
    faster_with_its_own_code(HATCH_EDITABLES, "_editable_impl_svc");
}

#[test]
fn a_side_that_imports_the_other_trees_module_exits_2_naming_it() {
    let r = service(SETUPTOOLS_PTH);
    // No import roots: nothing puts the base's own src first, so the
    // editable install serves it the working tree's package.
    r.write(
        "coldstart.toml",
        "[[target]]\nname = \"svc\"\ncommand = [\".venv/bin/python\", \"-m\", \"svc.worker\"]\nimport_roots = []\n",
    );
    let (code, v) = r.diff_json(&["HEAD"]);
    assert_eq!(code, Some(2), "{v:#}");
    let t = &v["targets"][0];
    assert_eq!(t["status"], "error", "{t:#}");
    assert_eq!(t["error"]["side"], "A", "{t:#}");
    assert!(t["time"].is_null(), "no timed verdict: {t:#}");
    // It names the module, the file in the working tree, the install that
    // served it, and says what to do.
    let msg = t["error"]["message"].as_str().unwrap();
    let msg = r.placed(msg);
    support::redactions().bind(|| insta::assert_snapshot!("diff_side_imports_other_tree", msg));
}

/// A patched copy is held to the same proof: `lazy` on the editable
/// service prices `svc.heavy` and verifies its cut on a copy whose own
/// `src` comes first (safe); with the import roots emptied, every copy's
/// worker imports the original's package through the editable install,
/// so no cut can be judged: even the unpatched copy fails the proof, and
/// `lazy` exits 2 saying so rather than calling the cut unsafe.
#[test]
fn lazy_verifies_a_cut_on_the_copys_own_code_under_an_editable_install() {
    let r = service(SETUPTOOLS_PTH);
    r.write("src/svc/heavy.py", &busy(150));
    r.write("src/svc/worker.py", WORKER_EAGER);
    let lazy = |r: &Repo| -> serde_json::Value {
        let out = r
            .command(&[
                "lazy",
                "--format",
                "json",
                "--processes",
                "1",
                "--min-ms",
                "50",
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(&text).unwrap()
    };
    let heavy_row = |v: &serde_json::Value| -> serde_json::Value {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["module"] == "svc.heavy")
            .unwrap_or_else(|| panic!("svc.heavy priced: {v:#}"))
            .clone()
    };
    let v = lazy(&r);
    assert_eq!(heavy_row(&v)["verdict"], "safe", "{v:#}");
    r.write(
        "coldstart.toml",
        "[[target]]\nname = \"svc\"\ncommand = [\".venv/bin/python\", \"-m\", \"svc.worker\"]\nimport_roots = []\n",
    );
    let out = r
        .command(&["lazy", "--processes", "1", "--min-ms", "50"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("a copy of the project with no cut applied could not run")
            && stderr.contains("outside the tree being measured"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no row is reported");
}
