//! `coldstart diff` in a user's git repository: a temporary repository
//! outside this workspace, with a small worker (the boundary fixtures'
//! protocol loop) and the stand-in torch of `tests/fixtures/boundary/
//! stand-ins` (a stand-in, not the real library), configured by a
//! `coldstart.toml`; every commit is made by the test. Each run gets a
//! private `TMPDIR`, so the tests can see that nothing of the base's
//! checkout is left behind. `history record` checks commits out as the
//! diff checks out its base, and is tested on the same repositories
//! (`history.rs`).

use crate::support;
use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

mod ci;
mod history;
mod history_known;
mod layouts;
mod outputs;

use crate::support::{fixtures, git, printed, python, site_packages, uv, uv_project, worker_dir};

/// A user's repository (kept alive by the temp dir).
pub(crate) struct Repo {
    _dir: tempfile::TempDir,
    pub(crate) root: PathBuf,
    pub(crate) tmp: PathBuf,
}

pub(crate) const MAIN: &str = "import protokit\nimport app\n\nprotokit.serve()\n";

/// Burns `ms` of CPU when imported.
pub(crate) use test_history::busy;

impl Repo {
    /// `text` with the repository's place written `<repo>`, before the one
    /// redaction reads the rest (the base's checkout, in the temporary
    /// folder too, stays `[TMP]`, so the two trees stay told apart).
    pub(crate) fn placed(&self, text: &str) -> String {
        text.replace(
            &self.root.canonicalize().unwrap().display().to_string(),
            "<repo>",
        )
    }

    /// A repository whose first commit holds the worker and its config.
    fn new() -> Repo {
        let r = Repo::empty();
        r.write_worker();
        r.commit("worker");
        r
    }

    /// A repository whose first commit holds a README only.
    pub(crate) fn empty() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("svc");
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&tmp).unwrap();
        std::fs::write(root.join("README.md"), "a service\n").unwrap();
        std::fs::write(root.join(".gitignore"), "__pycache__/\n").unwrap();
        git(&root, &["init", "-q", "-b", "main"]);
        let r = Repo {
            _dir: dir,
            root,
            tmp,
        };
        r.commit("readme");
        r
    }

    pub(crate) fn write_worker(&self) {
        let src = self.root.join("src");
        std::fs::create_dir_all(src.join("app")).unwrap();
        std::fs::copy(
            fixtures().join("boundary/workers/protokit.py"),
            src.join("protokit.py"),
        )
        .unwrap();
        self.write("src/app/__init__.py", "");
        self.write("src/app/__main__.py", MAIN);
        let stand_ins = fixtures().join("boundary/stand-ins/torch");
        let to = self.root.join("stand-ins/torch");
        std::fs::create_dir_all(&to).unwrap();
        for e in std::fs::read_dir(stand_ins).unwrap() {
            let e = e.unwrap();
            if e.path().is_file() {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
        self.write(
            "coldstart.toml",
            &format!(
                "[[target]]\nname = \"w\"\ncommand = [\"{}\", \"-m\", \"app\"]\nenv = {{ PYTHONPATH = \"src:stand-ins\" }}\nmax_slowdown = 0.05\n",
                python().display()
            ),
        );
    }

    /// The reference worker, serving over TCP (`transport = "tcp"`), with
    /// the stand-in torch beside it.
    fn write_tcp_worker(&self) {
        let to = self.root.join("src/refworker");
        for dir in ["", "models"] {
            std::fs::create_dir_all(to.join(dir)).unwrap();
            for e in std::fs::read_dir(worker_dir().join("refworker").join(dir)).unwrap() {
                let e = e.unwrap();
                if e.path().extension().is_some_and(|x| x == "py") {
                    std::fs::copy(e.path(), to.join(dir).join(e.file_name())).unwrap();
                }
            }
        }
        self.write_worker();
        self.write(
            "coldstart.toml",
            &format!(
                "[[target]]\nname = \"w\"\ncommand = [\"{}\", \"-m\", \"refworker\", \"--test-echo\", \"--profile\", \"io\", \"--transport\", \"tcp\"]\ntransport = \"tcp\"\nenv = {{ PYTHONPATH = \"src:stand-ins\" }}\nmax_slowdown = 0.05\n",
                python().display()
            ),
        );
    }

    /// A src-layout service package `svc` (its protocol loop and a module
    /// that burns 150 ms of CPU when imported) with `gitignore` and its
    /// build config `build_file` holding `build`: what the layout and
    /// build-output tests start from.
    fn svc_package(&self, gitignore: &str, build_file: &str, build: &str) {
        self.write(".gitignore", gitignore);
        self.write(build_file, build);
        self.write("src/svc/__init__.py", "");
        std::fs::copy(
            fixtures().join("boundary/workers/protokit.py"),
            self.root.join("src/svc/protokit.py"),
        )
        .unwrap();
        self.write("src/svc/heavy.py", &busy(150));
    }

    pub(crate) fn write(&self, rel: &str, text: &str) {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub(crate) fn commit(&self, msg: &str) {
        git(&self.root, &["add", "-A"]);
        git(&self.root, &["commit", "-q", "-m", msg]);
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        eprintln!(
            "$ cd {} && coldstart {}",
            self.root.display(),
            args.join(" ")
        );
        let mut c = crate::support::coldstart(&self.root);
        c.args(args)
            .env_remove("PYTHONPATH")
            .env("TMPDIR", &self.tmp)
            .env("XDG_CACHE_HOME", self.tmp.join("cache"));
        c
    }

    fn diff(&self, args: &[&str]) -> Output {
        self.diff_with(args, &[])
    }

    /// `diff ARGS` with `envs` set on top of [`Repo::command`]'s.
    fn diff_with(&self, args: &[&str], envs: &[(&str, &std::ffi::OsStr)]) -> Output {
        let mut cmd = self.command(args);
        cmd.envs(envs.iter().copied());
        let out = printed(cmd.output().expect("coldstart runs"));
        self.assert_nothing_left();
        out
    }

    /// JSON report of `diff ARGS --format json`.
    fn diff_json(&self, args: &[&str]) -> (Option<i32>, serde_json::Value) {
        self.diff_json_with(args, &[])
    }

    /// JSON report of `diff ARGS --format json` with `envs` set.
    fn diff_json_with(
        &self,
        args: &[&str],
        envs: &[(&str, &std::ffi::OsStr)],
    ) -> (Option<i32>, serde_json::Value) {
        let mut all = vec!["diff"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--format", "json", "--instrumented", "2"]);
        let out = self.diff_with(&all, envs);
        let v = serde_json::from_slice(&out.stdout).expect("the report is JSON");
        (out.status.code(), v)
    }

    /// No checkout of the base and no record of one remain.
    pub(crate) fn assert_nothing_left(&self) {
        let left: Vec<String> = std::fs::read_dir(&self.tmp)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("coldstart-base-"))
            .collect();
        assert!(left.is_empty(), "left behind in TMPDIR: {left:?}");
        let list = Command::new("git")
            .args(["worktree", "list", "--porcelain"])
            .current_dir(&self.root)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&list.stdout);
        assert_eq!(
            text.matches("worktree ").count(),
            1,
            "only the repository's own worktree remains: {text}"
        );
    }
}

fn verdict(v: &serde_json::Value) -> &str {
    v["targets"][0]["time"]["cpu"]["verdict"]
        .as_str()
        .unwrap_or("none")
}

/// A third of the worker's CPU time at start-up, in ms (from a plain
/// A/A run), at least 15 ms.
fn a_third(v: &serde_json::Value) -> usize {
    let res = &v["targets"][0]["time"]["summary"]["resources"][0];
    let cpu = res["user_ms"].as_f64().unwrap() + res["sys_ms"].as_f64().unwrap();
    ((cpu / 3.0) as usize).max(15)
}

/// One rule for what answers health, whatever the task: a worker whose
/// health reply has no `response.status` (`{"op": "health", "ok": true}`),
/// with a costly first-party import for `lazy` to price, is refused by
/// `check`, by `bench`'s trials, by `lazy` and by `diff` alike, each
/// saying what came and the reply that was due.
#[test]
fn a_health_reply_without_status_ok_is_refused_alike_by_check_bench_lazy_and_diff() {
    let r = Repo::empty();
    r.write_worker();
    r.write("src/app/heavy.py", &busy(150));
    r.write(
        "src/app/__main__.py",
        "import protokit\nimport app.heavy\n\nprotokit.serve(health_reply={\"op\": \"health\", \"ok\": True})\n",
    );
    r.commit("a worker whose health reply has no status");
    let came = r#"health was answered with `{"op":"health","ok":true}`"#;
    let due =
        r#"a worker that can serve answers {"op": "health", "response": {"status": "ok", ...}}"#;
    let bench_out = r.tmp.join("bench");
    let bench_out = bench_out.display().to_string();
    for args in [
        &["check"][..],
        &[
            "bench", "--warmup", "0", "--trials", "2", "--out", &bench_out,
        ],
        &["lazy"],
        &["diff", "HEAD", "--instrumented", "2"],
    ] {
        let out = r.diff(args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_ne!(out.status.code(), Some(0), "{args:?}: {text}");
        assert!(text.contains(came), "{args:?} says what came: {text}");
        assert!(text.contains(due), "{args:?} names the reply due: {text}");
    }
}

#[test]
fn the_same_worker_is_never_slower_and_a_busy_first_party_module_is_caught_with_its_line() {
    let r = Repo::new();
    // A against A: nothing changed.
    let (code, aa) = r.diff_json(&["HEAD"]);
    assert_eq!(code, Some(0), "{aa:#}");
    assert_ne!(verdict(&aa), "slower", "{aa:#}");
    assert_ne!(verdict(&aa), "faster", "{aa:#}");
    assert_eq!(aa["base"]["how"], "given");
    assert_eq!(aa["base"]["dirty"], false);
    let t = &aa["targets"][0];
    assert_eq!(t["status"], "compared");
    assert!(t["imports"]["forbidden_new"].as_array().unwrap().is_empty());
    assert!(
        t["time"]["wall_ready"]["verdict"].is_string(),
        "wall time is beside it"
    );

    // A first-party module that burns a third of the start-up, imported at
    // start-up (uncommitted: the working tree is side B).
    let ms = a_third(&aa);
    r.write("src/app/heavy.py", &busy(ms));
    r.write("src/app/__main__.py", &format!("import app.heavy\n{MAIN}"));
    let (code, slow) = r.diff_json(&["HEAD"]);
    assert_eq!(slow["base"]["dirty"], true);
    assert_eq!(verdict(&slow), "slower", "{slow:#}");
    assert_eq!(code, Some(1), "{slow:#}");
    let t = &slow["targets"][0];
    assert_eq!(t["problems"][0]["kind"], "slower");
    let added = t["imports"]["added_first_party"].as_array().unwrap();
    let heavy = added
        .iter()
        .find(|m| m["module"] == "app.heavy")
        .unwrap_or_else(|| panic!("app.heavy is listed as added: {t:#}"));
    let at = &heavy["imported_at"];
    assert!(
        at["file"]
            .as_str()
            .unwrap()
            .ends_with("src/app/__main__.py"),
        "{heavy:#}"
    );
    assert_eq!(at["line"], 1, "{heavy:#}");

    // The annotations and the markdown comment, from one run.
    let md_path = r.tmp.join("summary.md");
    let gh = r.diff(&[
        "diff",
        "HEAD",
        "--format",
        "github",
        "--instrumented",
        "2",
        "--output",
        &format!("markdown={}", md_path.display()),
    ]);
    let gh_text = String::from_utf8_lossy(&gh.stdout);
    assert!(
        gh_text.contains("::error file=src/app/__main__.py,line=1"),
        "{gh_text}"
    );
    let md_text = std::fs::read_to_string(&md_path).unwrap();
    std::fs::remove_file(&md_path).unwrap();
    assert!(
        md_text.starts_with("### ❌ coldstart diff against HEAD"),
        "{md_text}"
    );
    assert!(md_text.contains("<details>"), "{md_text}");

    // The reverse: the busy module committed as the base, then removed.
    r.commit("heavy start-up");
    std::fs::remove_file(r.root.join("src/app/heavy.py")).unwrap();
    r.write("src/app/__main__.py", MAIN);
    let (code, fast) = r.diff_json(&["HEAD"]);
    assert_eq!(verdict(&fast), "faster", "{fast:#}");
    assert_eq!(code, Some(0), "{fast:#}");
    let removed = fast["targets"][0]["imports"]["removed_first_party"]
        .as_array()
        .unwrap();
    assert!(removed.iter().any(|m| m == "app.heavy"), "{fast:#}");
}

#[test]
fn each_side_started_through_a_shell_is_judged_by_the_python_below_it() {
    // `bash -c "PYTHON -m app; echo done"`: bash forks each side's worker
    // and stays its parent, as a launcher does.
    let r = Repo::new();
    r.write(
        "coldstart.toml",
        &format!(
            "[[target]]\nname = \"w\"\ncommand = [\"bash\", \"-c\", \"'{}' -m app; echo done\"]\nenv = {{ PYTHONPATH = \"src:stand-ins\" }}\nmax_slowdown = 0.05\n",
            python().display()
        ),
    );
    r.commit("the worker through a shell");
    r.write("src/app/model.py", "import torch\n");
    r.write("src/app/__init__.py", "from . import model\n");
    let (code, v) = r.diff_json(&["HEAD", "--max-seconds", "5"]);
    assert_eq!(code, Some(1), "{v:#}");
    let t = &v["targets"][0];
    assert_eq!(t["status"], "compared", "{t:#}");
    let new = &t["imports"]["forbidden_new"][0];
    assert_eq!(new["module"], "torch", "{t:#}");
    assert!(
        new["chain"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "app.model"),
        "{t:#}"
    );
}

/// A uv project as users run it: `uv run --no-sync --offline python -m
/// app`, its `.venv` ignored by git and holding a package the worker
/// imports at start-up (`thirdparty`, a stand-in installed only there).
/// The base's fresh checkout has no `.venv`: without the working tree's
/// linked into it, `uv run` there makes an empty one and the base fails
/// on `import thirdparty`. Linked, both sides run with the one
/// environment, the new torch is found with its chain, the report says
/// what was linked, and the environment is intact after the base's
/// checkout is removed.
#[test]
fn a_uv_projects_base_runs_with_the_projects_own_environment() {
    let r = Repo::new();
    r.write(".gitignore", "__pycache__/\n.venv/\n");
    uv_project(&r.root, "svc");
    let venv_site = site_packages(&r.root.join(".venv/bin/python"));
    std::fs::write(venv_site.join("thirdparty.py"), "VERSION = 1\n").unwrap();
    r.write("src/app/__main__.py", &format!("import thirdparty\n{MAIN}"));
    r.write(
        "coldstart.toml",
        &format!(
            "[[target]]\nname = \"w\"\ncommand = [\"{}\", \"run\", \"--no-sync\", \"--offline\", \"python\", \"-m\", \"app\"]\nenv = {{ PYTHONPATH = \"src:stand-ins\" }}\nmax_slowdown = 0.05\n",
            uv().display()
        ),
    );
    r.commit("the worker as a uv project");
    r.write("src/app/model.py", "import torch\n");
    r.write("src/app/__init__.py", "from . import model\n");
    let (code, v) = r.diff_json(&["HEAD", "--max-seconds", "5"]);
    let t = &v["targets"][0];
    assert_eq!(t["status"], "compared", "{t:#}");
    assert_eq!(code, Some(1), "{v:#}");
    assert_eq!(t["imports"]["forbidden_new"][0]["module"], "torch", "{t:#}");
    let notes: Vec<&str> = t["prepared"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with(".venv linked into the base's checkout")),
        "{notes:?}"
    );
    assert!(r.root.join(".venv/pyvenv.cfg").is_file());
    assert!(venv_site.join("thirdparty.py").is_file());
}

#[test]
fn a_re_exported_stand_in_torch_fails_with_its_chain() {
    let r = Repo::new();
    r.write(
        "src/app/model.py",
        "import torch\n\n\nclass Model:\n    pass\n",
    );
    r.write("src/app/__init__.py", "from .model import Model\n");
    let (code, v) = r.diff_json(&["HEAD", "--max-seconds", "5"]);
    assert_eq!(code, Some(1), "{v:#}");
    let t = &v["targets"][0];
    let new = &t["imports"]["forbidden_new"][0];
    assert_eq!(new["module"], "torch", "{t:#}");
    let chain: Vec<&str> = new["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(chain.last(), Some(&"torch"), "{chain:?}");
    assert!(chain.contains(&"app.model"), "{chain:?}");
    assert!(
        t["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["kind"] == "forbidden"),
        "{t:#}"
    );
    // In GitHub's format: an error at the first-party line of the chain.
    let gh = r.diff(&[
        "diff",
        "HEAD",
        "--format",
        "github",
        "--instrumented",
        "2",
        "--max-seconds",
        "5",
    ]);
    let text = String::from_utf8_lossy(&gh.stdout);
    assert!(text.contains("::error file=src/app/"), "{text}");
    assert!(text.contains("::notice title=coldstart diff::"), "{text}");
    assert_eq!(gh.status.code(), Some(1));
}

#[test]
fn a_base_without_the_target_is_reported_not_an_error() {
    let r = Repo::empty();
    r.write_worker();
    r.commit("add the worker");
    let (code, v) = r.diff_json(&["HEAD~1"]);
    assert_eq!(code, Some(0), "{v:#}");
    assert_eq!(v["targets"][0]["status"], "new");
    let text = r.diff(&["diff", "HEAD~1"]);
    assert_eq!(text.status.code(), Some(0), "{text:?}");
    let stdout = String::from_utf8_lossy(&text.stdout);
    support::redactions().bind(|| insta::assert_snapshot!("diff_base_without_target", stdout));
}

#[test]
fn without_a_revision_a_dirty_tree_is_compared_with_head() {
    let r = Repo::new();
    r.write("src/app/extra.py", "X = 1\n");
    r.write("src/app/__main__.py", &format!("import app.extra\n{MAIN}"));
    let (code, v) = r.diff_json(&["--max-seconds", "5"]);
    assert_eq!(v["base"]["rev"], "HEAD", "{v:#}");
    assert_eq!(v["base"]["how"], "HEAD (no upstream branch)");
    assert_eq!(v["base"]["dirty"], true);
    assert_ne!(code, Some(2), "{v:#}");
    let added = v["targets"][0]["imports"]["added_first_party"]
        .as_array()
        .unwrap();
    assert!(added.iter().any(|m| m["module"] == "app.extra"), "{v:#}");
}

#[test]
fn a_revision_that_does_not_exist_exits_2_and_says_what_to_do() {
    let r = Repo::new();
    let out = r.diff(&["diff", "no-such-branch"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    support::redactions().bind(|| insta::assert_snapshot!("diff_no_such_revision", err));
}

#[test]
fn a_side_that_cannot_start_exits_2_and_says_which() {
    let r = Repo::new();
    r.write(
        "src/app/__main__.py",
        "raise SystemExit('broken at start-up')\n",
    );
    let (code, v) = r.diff_json(&["HEAD"]);
    assert_eq!(code, Some(2), "{v:#}");
    assert_eq!(v["targets"][0]["status"], "error");
    assert_eq!(v["targets"][0]["error"]["side"], "B");
}

/// Starts `coldstart ARGS` in the repository (its stdout dropped) and
/// returns it once a line of its stderr holds `marker`, with what it
/// printed so far and the rest of its stderr, still to read.
pub(super) fn started_until(
    r: &Repo,
    args: &[&str],
    marker: &str,
) -> (
    std::process::Child,
    String,
    BufReader<std::process::ChildStderr>,
) {
    let mut child = r
        .command(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "ended before `{marker}`: {seen}"
        );
        seen.push_str(&line);
        if line.contains(marker) {
            break;
        }
    }
    (child, seen, err)
}

/// Starts `diff HEAD` with a long time budget and returns it once its
/// timed rounds have begun (the base's checkout exists), with what it
/// printed so far and its stderr.
fn diff_in_its_timed_rounds(
    r: &Repo,
) -> (
    std::process::Child,
    String,
    BufReader<std::process::ChildStderr>,
) {
    let args = [
        "diff",
        "HEAD",
        "--instrumented",
        "1",
        "--max-seconds",
        "120",
    ];
    started_until(r, &args, "timed rounds")
}

#[test]
fn ctrl_c_during_the_timed_rounds_leaves_no_checkout_behind() {
    let r = Repo::new();
    let (mut child, seen, mut err) = diff_in_its_timed_rounds(&r);
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{seen}{rest}");
    r.assert_nothing_left();
}

/// SIGKILL skips every drop: the base's checkout stays registered until
/// the next run, which sees that its owner is gone and removes it.
#[test]
fn a_killed_diff_leaves_its_checkout_for_the_next_run_to_remove() {
    let r = Repo::new();
    let (mut child, seen, _err) = diff_in_its_timed_rounds(&r);
    child.kill().unwrap();
    child.wait().unwrap();
    let list = |r: &Repo| {
        let out = Command::new("git")
            .args(["worktree", "list", "--porcelain"])
            .current_dir(&r.root)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .matches("worktree ")
            .count()
    };
    assert_eq!(
        list(&r),
        2,
        "the killed run's checkout is still registered: {seen}"
    );
    let (code, v) = r.diff_json(&["HEAD", "--max-seconds", "3"]);
    assert!(matches!(code, Some(0 | 1)), "{v:#}");
    // diff_json has checked that nothing is left, the killed run's too.
    assert_eq!(list(&r), 1);
}

/// A worker that serves over TCP is compared over its connection like a
/// stdio one: both sides start, answer and end; a stand-in torch its change
/// imports at start-up is a new forbidden module with its chain.
#[test]
fn a_tcp_worker_is_compared_and_a_new_stand_in_torch_is_caught() {
    let r = Repo::empty();
    r.write_tcp_worker();
    r.commit("tcp worker");
    let init = r.root.join("src/refworker/__init__.py");
    let before = std::fs::read_to_string(&init).unwrap();
    r.write(
        "src/refworker/__init__.py",
        &format!("import torch\n{before}"),
    );
    let (code, v) = r.diff_json(&["HEAD", "--max-seconds", "5"]);
    assert_eq!(code, Some(1), "{v:#}");
    let t = &v["targets"][0];
    assert_eq!(t["imports"]["forbidden_new"][0]["module"], "torch", "{t:#}");
    let chain = t["imports"]["forbidden_new"][0]["chain"]
        .as_array()
        .unwrap();
    assert_eq!(
        chain.first().and_then(|c| c.as_str()),
        Some("refworker"),
        "{t:#}"
    );
    // Both sides ran whole lifecycles over the connection: rounds measured,
    // none failed, and the connection's first reply timed on both sides.
    let trials = &t["time"]["summary"]["trials"];
    assert!(trials["measured"].as_u64().unwrap() >= 4, "{trials:#}");
    assert_eq!(trials["failed"], 0, "{trials:#}");
    let first_reply = &t["time"]["summary"]["phases"]["connect-first-reply"];
    for side in ["a", "b"] {
        assert!(
            first_reply[side]["n"].as_u64().unwrap() > 0,
            "{first_reply:#}"
        );
    }
}
