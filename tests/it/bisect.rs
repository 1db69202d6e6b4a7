//! `coldstart bisect` on a generated history: a user's repository (the
//! diff tests' [`Repo`]: the boundary fixtures' protocol loop, the
//! stand-in torch, a `coldstart.toml`) whose worker burns a fixed 100 ms
//! of CPU at start-up, then commits that change nothing of start-up, one
//! whose worker cannot start (fixed by the next), and one commit that
//! imports the stand-in torch (forbidden, third-party) and `heavylib` (a
//! generated stand-in package in the repository's `stand-ins/`, so the
//! project's own code to coldstart, that burns 55 ms of CPU when
//! imported: about +40%), each at a known line of `src/app/__main__.py`.
//! Every commit is made by the test.

use std::process::Command;

use crate::diff::{MAIN, Repo, busy};
use crate::support::{coldstart_bin, git, git_out, printed};

/// Commits after the good one, oldest first.
const AFTER_GOOD: usize = 10;
/// The index (among those) of the commit whose worker cannot start.
const BROKEN: usize = 4;
/// The index of the first slow commit.
const STEP: usize = 6;
/// The first-party line of `src/app/__main__.py` at the step that imports
/// the stand-in torch, and the one that imports `heavylib`.
const TORCH_LINE: u32 = 3;
const HEAVY_LINE: u32 = 4;

/// The generated history; the good commit's hash and every later one's.
fn history() -> (Repo, String, Vec<String>) {
    let r = Repo::empty();
    r.write_worker();
    r.write("src/app/base_work.py", &busy(100));
    let main_good = format!("import app.base_work\n{MAIN}");
    r.write("src/app/__main__.py", &main_good);
    r.commit("a worker with 100 ms of start-up work");
    let good = head(&r);
    let main_slow = "import protokit\nimport app.base_work\nimport torch\nimport heavylib\n\nprotokit.serve()\n";
    assert_eq!(
        main_slow.lines().nth(TORCH_LINE as usize - 1),
        Some("import torch")
    );
    assert_eq!(
        main_slow.lines().nth(HEAVY_LINE as usize - 1),
        Some("import heavylib")
    );
    let mut after = Vec::new();
    for i in 0..AFTER_GOOD {
        r.write("NOTES.md", &format!("note {i}\n"));
        if i == BROKEN {
            r.write(
                "src/app/__main__.py",
                "raise SystemExit('a commit whose worker cannot start')\n",
            );
        } else if i == BROKEN + 1 {
            r.write("src/app/__main__.py", &main_good);
        }
        if i == STEP {
            r.write("stand-ins/heavylib/__init__.py", &busy(55));
            r.write("src/app/__main__.py", main_slow);
        }
        r.commit(&format!("change {i}"));
        after.push(head(&r));
    }
    (r, good, after)
}

fn head(r: &Repo) -> String {
    git_out(&r.root, &["rev-parse", "HEAD"])
}

#[test]
fn bisect_names_the_slow_commit_and_its_import_lines_and_git_bisect_run_agrees() {
    let (r, good, after) = history();
    let bad = after.last().unwrap().clone();
    let out = printed(
        r.command(&[
            "bisect",
            &good,
            &bad,
            "--threshold",
            "10%",
            "--instrumented",
            "2",
            "--format",
            "json",
        ])
        .output()
        .expect("coldstart runs"),
    );
    r.assert_nothing_left();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the report is JSON");
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(v["schema"], "coldstart.bisect/1");
    assert_eq!(v["outcome"], "found", "{v:#}");
    let culprit = &v["culprit"];
    assert_eq!(culprit["commit"], after[STEP], "the full hash: {v:#}");
    assert_eq!(culprit["subject"], format!("change {STEP}"));
    assert_eq!(culprit["parent"], after[STEP - 1]);
    let change = &culprit["change"];
    assert!(change["ci"]["lo"].as_f64().unwrap() > 1.1, "{change:#}");
    let imports = culprit["imports"].as_array().unwrap();
    let at = |module: &str| {
        imports
            .iter()
            .find(|i| i["module"] == module)
            .unwrap_or_else(|| panic!("{module} arrived at the culprit: {culprit:#}"))
    };
    let torch = at("torch");
    assert_eq!(torch["kind"], "forbidden");
    assert_eq!(torch["at"]["file"], "src/app/__main__.py", "{torch:#}");
    assert_eq!(torch["at"]["line"], TORCH_LINE);
    // In the repository's own folders, so the project's own code.
    let heavy = at("heavylib");
    assert_eq!(heavy["kind"], "first_party");
    assert_eq!(heavy["at"]["file"], "src/app/__main__.py", "{heavy:#}");
    assert_eq!(heavy["at"]["line"], HEAVY_LINE);
    // The commit that cannot start was met, skipped and named.
    let skipped = v["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{v:#}");
    assert_eq!(skipped[0]["commit"], after[BROKEN]);
    assert!(
        skipped[0]["message"]
            .as_str()
            .unwrap()
            .contains("could not be run"),
        "{v:#}"
    );
    // Every step is a decided comparison but the skipped one.
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps[0]["commit"], bad, "the bad commit is confirmed first");
    for s in steps {
        let answer = s["answer"].as_str().unwrap();
        let i = after.iter().position(|c| *c == s["commit"]).unwrap();
        let due = match i {
            BROKEN => "skipped",
            i if i >= STEP => "slower",
            _ => "not_slower",
        };
        assert_eq!(answer, due, "{s:#}");
    }

    // The same search by git itself, coldstart answering each step.
    git(&r.root, &["bisect", "start", &bad, &good]);
    let run = printed(
        Command::new("git")
            .args(["bisect", "run"])
            .arg(coldstart_bin())
            .args(["bisect", "--run", &good, "--instrumented", "2"])
            .current_dir(&r.root)
            .env_remove("PYTHONPATH")
            .env("TMPDIR", &r.tmp)
            .env("XDG_CACHE_HOME", r.tmp.join("cache"))
            .output()
            .unwrap(),
    );
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{text}");
    assert!(
        text.contains(&format!("{} is the first bad commit", after[STEP])),
        "{text}"
    );
    git(&r.root, &["bisect", "reset"]);
}

/// `--run` on its own: 0 at the good commit's twin, 1 at a slow one, 125
/// where the worker cannot start; a bad commit not slower ends a search
/// with exit 2, said.
#[test]
fn bisect_run_answers_0_1_125_and_a_bad_commit_not_slower_is_said() {
    let (r, good, after) = history();
    let step = |commit: &str| {
        git(&r.root, &["checkout", "-q", commit]);
        let out = printed(
            r.command(&["bisect", "--run", &good, "--instrumented", "2"])
                .output()
                .unwrap(),
        );
        out.status.code()
    };
    assert_eq!(step(&after[0]), Some(0));
    assert_eq!(step(&after[BROKEN]), Some(125));
    assert_eq!(step(&after[STEP]), Some(1));
    let out = printed(
        r.command(&["bisect", &good, &after[STEP - 1], "--instrumented", "2"])
            .output()
            .unwrap(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("is not shown slower"), "{text}");
    r.assert_nothing_left();
}
