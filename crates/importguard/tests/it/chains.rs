//! Import chains over the shapes of tests/fixtures/chains (one folder per
//! shape, a stand-in torch): each worker runs with importtime and the import
//! recorder, and the verdict's chain, the line of each link and the parent
//! packages imported on the way are checked against the shape's expected
//! chain and against the recorder's independent evidence (the modules
//! executing when torch was imported, with the line that imported each).
//! Run with `COLDSTART_PYTHON` (default `python3`) and, where found, the
//! other interpreters of the table below, since the order of importtime's
//! lines for parent packages is the interpreter's.

use crate::support::{fixtures, python};
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

use importguard::importtime;
use importguard::recorder::Recorder;
use importguard::verdict::{Evidence, Policy, Violation, judge};

/// One shape: its folder, the expected chain, and for each link the file
/// (relative to the folder) and line that imported it, and the name asked
/// for when it was imported as that name's parent package.
struct Shape {
    dir: &'static str,
    chain: &'static [&'static str],
    links: &'static [(&'static str, u32, Option<&'static str>)],
}

const SHAPES: &[Shape] = &[
    Shape {
        dir: "reexport",
        chain: &["svc.types", "svc.models", "svc.models.heavy", "torch"],
        links: &[
            ("worker.py", 2, None),
            ("svc/types.py", 2, Some("svc.models.heavy")),
            ("svc/models/__init__.py", 2, None),
            ("svc/models/heavy.py", 2, None),
        ],
    },
    Shape {
        dir: "from_sub",
        chain: &["svc.types", "svc.models.heavy", "torch"],
        links: &[
            ("worker.py", 2, None),
            ("svc/types.py", 2, None),
            ("svc/models/heavy.py", 2, None),
        ],
    },
    Shape {
        dir: "package_imports_sub",
        chain: &["pkgd", "pkgd.sub", "torch"],
        links: &[
            ("worker.py", 2, Some("pkgd.sub")),
            ("pkgd/__init__.py", 2, None),
            ("pkgd/sub.py", 2, None),
        ],
    },
    Shape {
        dir: "package_without_sub",
        chain: &["pkgd.sub", "torch"],
        links: &[("worker.py", 2, None), ("pkgd/sub.py", 2, None)],
    },
    Shape {
        dir: "leaf_of_heavy_package",
        chain: &["pkga.sub", "torch"],
        links: &[
            ("worker.py", 2, Some("pkga.sub.leaf")),
            ("pkga/sub/__init__.py", 2, None),
        ],
    },
    Shape {
        dir: "top_parent_heavy",
        chain: &["pkge", "torch"],
        links: &[
            ("worker.py", 2, Some("pkge.a.b")),
            ("pkge/__init__.py", 2, None),
        ],
    },
    Shape {
        dir: "relative",
        chain: &["pkgb", "pkgb.api", "pkgb.impl", "torch"],
        links: &[
            ("worker.py", 2, None),
            ("pkgb/__init__.py", 2, None),
            ("pkgb/api.py", 2, None),
            ("pkgb/impl.py", 2, None),
        ],
    },
    Shape {
        dir: "from_package_import_module",
        chain: &["pkgc.mod", "torch"],
        links: &[("worker.py", 2, None), ("pkgc/mod.py", 2, None)],
    },
];

/// A line of a shape: its file relative to the shape's folder, its number.
type Line = Option<(String, u32)>;

/// Runs one shape's worker (stdin closed: it stops after ready) and judges
/// it: torch's violation, and the recorder's stack and lines at its import.
fn torch_of(python: &OsString, shape: &Shape) -> (Violation, Vec<String>, Vec<Line>) {
    let policy = Policy::new(vec!["torch".to_owned()], Vec::new()).unwrap();
    let dir = fixtures().join("chains").join(shape.dir);
    let pythonpath = [
        dir.clone(),
        fixtures().join("boundary/workers"),
        fixtures().join("boundary/stand-ins"),
    ]
    .map(|p| p.display().to_string())
    .join(":");
    let setup =
        Recorder::prepare(&policy.recorder_policy(false), Some(pythonpath.as_ref())).unwrap();
    let out = Command::new(python)
        .arg(dir.join("worker.py"))
        .envs(setup.env().iter().map(|(k, v)| (k, v)))
        .env("PYTHONPROFILEIMPORTTIME", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}: {out:?}", shape.dir);
    let log = importtime::parse(&out.stderr);
    let recording = setup.read().unwrap();
    let verdict = judge(
        &policy,
        &Evidence {
            importtime: Some(&log),
            recording: Some(&recording),
            timeline: None,
        },
    );
    let v = verdict
        .violations
        .iter()
        .find(|v| v.module == "torch")
        .unwrap_or_else(|| panic!("{}: no torch violation: {verdict:#?}", shape.dir))
        .clone();
    // The recorder's own reading: the modules executing at torch's import
    // (outermost first, without `__main__`) and the line behind each.
    let rec = recording
        .imports
        .iter()
        .find(|a| a.name == "torch")
        .unwrap();
    let rel = |f: &importguard::recorder::CallSite| {
        let p = Path::new(&f.file);
        (
            p.strip_prefix(&dir).unwrap_or(p).display().to_string(),
            f.line,
        )
    };
    let (stack, stack_by): (Vec<String>, Vec<Line>) = rec
        .stack
        .iter()
        .zip(&rec.stack_by)
        .filter(|(m, _)| *m != "__main__")
        .map(|(m, b)| (m.clone(), b.as_ref().map(rel)))
        .chain([(rec.name.clone(), rec.by.as_ref().map(rel))])
        .unzip();
    (v, stack, stack_by)
}

fn check_shapes(python: &OsString) {
    for shape in SHAPES {
        let (v, stack, stack_by) = torch_of(python, shape);
        let dir = fixtures().join("chains").join(shape.dir);
        let what = format!("{} with {}", shape.dir, python.to_string_lossy());
        assert_eq!(v.chain, shape.chain, "{what}: the chain");
        assert_eq!(v.chain, stack, "{what}: the chain is the recorder's stack");
        let mut seen = std::collections::HashSet::new();
        assert!(
            v.chain.iter().all(|m| seen.insert(m)),
            "{what}: a module twice"
        );
        let lines: Vec<Line> = v
            .chain_lines
            .iter()
            .map(|f| {
                f.as_ref().map(|f| {
                    let p = Path::new(&f.file);
                    (
                        p.strip_prefix(&dir).unwrap_or(p).display().to_string(),
                        f.line,
                    )
                })
            })
            .collect();
        let want: Vec<Line> = shape
            .links
            .iter()
            .map(|(f, l, _)| Some(((*f).to_owned(), *l)))
            .collect();
        assert_eq!(lines, want, "{what}: the line of each link");
        assert_eq!(lines, stack_by, "{what}: the lines are the recorder's");
        let parent_of: Vec<Option<&str>> = v.chain_parent_of.iter().map(Option::as_deref).collect();
        let want: Vec<Option<&str>> = shape.links.iter().map(|l| l.2).collect();
        assert_eq!(parent_of, want, "{what}: parent packages");
    }
}

#[test]
fn every_shape_gives_the_chain_that_ran() {
    check_shapes(&python().as_os_str().to_owned());
}

/// The oldest and newest interpreters the project supports (3.15: the one
/// `cargo xtask test` provisions). Under `cargo xtask test` each must be
/// found; elsewhere a missing one says NOT RUN.
#[test]
fn every_shape_gives_the_same_chain_on_other_interpreters() {
    for minor in [8, 13, 15] {
        let case = format!("the chains on Python 3.{minor}");
        if let Some(p) = test_interpreters::required(minor, &case) {
            check_shapes(&p.into_os_string());
        }
    }
}
