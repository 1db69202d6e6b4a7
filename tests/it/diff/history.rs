//! `coldstart history record` on the diff's user repositories: each
//! commit measured in its own checkout (nothing left behind), stored in
//! the start-up history, skipped when already stored; a commit whose
//! worker cannot start stored as failed; an interrupted recording keeps
//! every commit it finished and the next one resumes.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use history::{Location, RunFilter, RunOutcome, Store, StoredRun};

use super::{MAIN, Repo, busy};
use crate::support::{self, printed};

impl Repo {
    /// The history file of these tests, outside the repository.
    pub(crate) fn history_file(&self) -> PathBuf {
        self.tmp.parent().unwrap().join("history.db")
    }

    pub(crate) fn record(&self, args: &[&str]) -> Output {
        let file = self.history_file();
        let mut all = vec!["history", "record"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--history", file.to_str().unwrap()]);
        let out = printed(self.command(&all).output().expect("coldstart runs"));
        self.assert_nothing_left();
        out
    }

    fn stored(&self) -> Vec<StoredRun> {
        let mut store = Store::open(&Location::Sqlite(self.history_file())).unwrap();
        store.runs(&RunFilter::default()).unwrap()
    }

    /// Three commits after the README: the worker, a module burning 30 ms
    /// imported from `app`, the same burning 60 ms.
    fn three_commits() -> Repo {
        let r = Repo::new();
        r.write("src/app/heavy.py", &busy(30));
        r.write("src/app/__init__.py", "from app import heavy\n");
        r.commit("heavy");
        r.write("src/app/heavy.py", &busy(60));
        r.commit("heavier");
        r
    }

    /// `bench --record` of two trials into the history at `file`.
    fn bench_record(&self, file: &str) -> Output {
        printed(
            self.command(&[
                "bench",
                "--trials",
                "2",
                "--warmup",
                "0",
                "--record",
                "--history",
                file,
            ])
            .output()
            .unwrap(),
        )
    }

    fn head_commits(&self, n: usize) -> Vec<String> {
        let out = std::process::Command::new("git")
            .args(["rev-list", "--reverse", &format!("HEAD~{n}..HEAD")])
            .current_dir(&self.root)
            .output()
            .unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_range_is_recorded_oldest_first_and_a_second_run_skips_every_commit() {
    let r = Repo::three_commits();
    let out = r.record(&["HEAD~3..HEAD", "--trials", "2", "--warmup", "0"]);
    assert_eq!(out.status.code(), Some(0));
    let first = stdout(&out);
    let runs = r.stored();
    let commits: Vec<&str> = runs.iter().map(|s| s.run.commit.sha.as_str()).collect();
    assert_eq!(commits, r.head_commits(3), "oldest first, each once");
    for s in &runs {
        assert_eq!(s.run.outcome, RunOutcome::Measured);
        assert_eq!(s.run.target, "w");
        assert_eq!(s.run.trials.len(), 2);
        assert!(s.run.trials.iter().all(|t| t.outcome.is_correct()));
        assert!(
            s.run
                .modules
                .iter()
                .any(|m| m.module == "app" && m.first_party)
        );
    }
    // The import tree of each commit is its own: heavy appears with the
    // second commit, imported from app/__init__.py line 1.
    let heavy = |s: &StoredRun| {
        s.run
            .modules
            .iter()
            .find(|m| m.module == "app.heavy")
            .cloned()
    };
    assert!(heavy(&runs[0]).is_none());
    let h = heavy(&runs[2]).expect("app.heavy at the third commit");
    assert!(h.cumulative_us >= 50_000, "{h:?}");
    let at = h.imported_at.expect("the line that imports it");
    assert!(
        at.file.ends_with("src/app/__init__.py") && at.line == 1,
        "{at:?}"
    );
    // One environment for the three runs: one series.
    let fingerprints: std::collections::BTreeSet<String> = runs
        .iter()
        .map(|s| s.run.environment.fingerprint())
        .collect();
    assert_eq!(fingerprints.len(), 1);

    let again = r.record(&["HEAD~3..HEAD", "--trials", "2", "--warmup", "0"]);
    assert_eq!(again.status.code(), Some(0));
    // What each run says, whole: three commits stored oldest first, then
    // the three skipped.
    let said = format!(
        "$ history record\n{first}$ history record (again)\n{}",
        stdout(&again)
    );
    let said = r.placed(&said);
    support::redactions().bind(|| insta::assert_snapshot!("history_record_twice", said));
    assert_eq!(r.stored().len(), 3, "nothing doubled");
}

#[test]
fn a_commit_whose_worker_cannot_start_is_stored_as_failed() {
    let r = Repo::new();
    r.write(
        "src/app/__main__.py",
        "raise SystemExit('broken at start-up')\n",
    );
    r.commit("broken");
    let out = r.record(&["--trials", "1", "--warmup", "0"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("1 stored (1 could not be measured)"));
    let runs = r.stored();
    assert_eq!(runs.len(), 1);
    match &runs[0].run.outcome {
        RunOutcome::Failed { message } => {
            assert!(message.contains("broken at start-up"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert!(runs[0].run.trials.is_empty());
    // Stored as failed: not tried again in this environment.
    let again = r.record(&["--trials", "1", "--warmup", "0"]);
    assert!(stdout(&again).contains("1 already stored"));
}

/// Starts a long recording of the three commits (1000 trials each) and
/// returns it once it has opened the store, with what it printed so far.
fn long_recording(r: &Repo) -> (std::process::Child, String) {
    let file = r.history_file();
    let args = [
        "history",
        "record",
        "HEAD~3..HEAD",
        "--trials",
        "1000",
        "--warmup",
        "0",
        "--history",
        file.to_str().unwrap(),
        "--shard",
        "1/1",
    ];
    let (child, seen, mut err) = super::started_until(r, &args, "recording 3 commit");
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    (child, seen)
}

#[test]
fn ctrl_c_keeps_every_stored_commit_leaves_no_checkout_and_the_next_run_resumes() {
    let r = Repo::three_commits();
    // The oldest commit stored first, by a short recording.
    let first = &r.head_commits(3)[0];
    let out = r.record(&[first, "--trials", "1", "--warmup", "0"]);
    assert!(stdout(&out).contains("1 stored"));

    let (mut child, seen) = long_recording(&r);
    // The first commit is skipped; wait (polling, with a deadline) until
    // the second one's checkout exists, then press Ctrl-C in its trials.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !checkout_made(&r) {
        assert!(std::time::Instant::now() < deadline, "no checkout: {seen}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{seen}");
    r.assert_nothing_left();
    let runs = r.stored();
    assert_eq!(
        runs.len(),
        1,
        "the finished commit kept, the cut one not stored"
    );
    assert_eq!(&runs[0].run.commit.sha, first);

    let out = r.record(&["HEAD~3..HEAD", "--trials", "1", "--warmup", "0"]);
    assert!(
        stdout(&out).contains("2 stored (0 could not be measured), 1 already stored"),
        "{}",
        stdout(&out)
    );
    assert_eq!(r.stored().len(), 3);
}

/// Whether a checkout is made: registered with git and no longer locked
/// by `git worktree add` ("initializing"), which a kill of coldstart does
/// not stop, and which would register it again after a sweep.
fn checkout_made(r: &Repo) -> bool {
    let list = std::process::Command::new("git")
        .args(["worktree", "list", "--porcelain"])
        .current_dir(&r.root)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    checkout_exists(&r.tmp) && text.matches("worktree ").count() == 2 && !text.contains("locked")
}

/// Whether a checkout's folder exists under `tmp`.
fn checkout_exists(tmp: &Path) -> bool {
    std::fs::read_dir(tmp).is_ok_and(|d| {
        d.flatten().any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("coldstart-base-")
        })
    })
}

/// SIGKILL skips every drop: the checkout stays until the next recording,
/// which removes it even with nothing left to measure; no stored run is lost.
#[test]
fn a_killed_recording_loses_no_stored_run_and_the_next_removes_its_checkout() {
    let r = Repo::three_commits();
    let first = &r.head_commits(3)[0];
    r.record(&[first, "--trials", "1", "--warmup", "0"]);
    let (mut child, seen) = long_recording(&r);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !checkout_made(&r) {
        assert!(std::time::Instant::now() < deadline, "no checkout: {seen}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(checkout_exists(&r.tmp), "SIGKILL left the checkout: {seen}");
    assert_eq!(r.stored().len(), 1, "the stored commit is still there");
    // Nothing to measure: the first commit again, already stored.
    let out = r.record(&[first, "--trials", "1", "--warmup", "0"]);
    assert!(
        stdout(&out).contains("1 already stored"),
        "{}",
        stdout(&out)
    );
    // `record` has checked that no checkout and no record of one is left.
}

/// `bench --record` stores the trials it ran as the current commit's run
/// (no import tree: it ran none), which `history record` then skips; with
/// uncommitted changes its figures are not the commit's, and it says so.
#[test]
fn bench_record_stores_the_current_commits_trials_once() {
    let r = Repo::new();
    let file = r.history_file();
    let bench = |r: &Repo| r.bench_record(file.to_str().unwrap());
    let out = bench(&r);
    assert_eq!(out.status.code(), Some(0));
    let runs = r.stored();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].run.trials.len(), 2);
    assert!(runs[0].run.modules.is_empty());
    assert_eq!(runs[0].run.commit.sha, r.head_commits(1)[0]);
    let again = r.record(&["--trials", "1", "--warmup", "0"]);
    assert!(
        stdout(&again).contains("1 already stored"),
        "{}",
        stdout(&again)
    );

    r.write("src/app/__init__.py", "# changed\n");
    let out = bench(&r);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("uncommitted changes to tracked files"),
        "{err}"
    );
    assert_eq!(r.stored().len(), 1);
}

/// `check --record` stores the commit's import tree (the forbidden module
/// at the line that imports it) and no trial; `bench --record` then adds
/// its trials to that run, and `history record` skips the commit.
#[test]
fn check_record_stores_the_tree_and_bench_record_completes_the_run() {
    let r = Repo::new();
    r.write(
        "src/app/__main__.py",
        &format!("import torch  # the stand-in\n{MAIN}"),
    );
    r.commit("import torch at start-up");
    let file = r.history_file();
    let file = file.to_str().unwrap();
    let out = printed(
        r.command(&["check", "--record", "--history", file])
            .output()
            .unwrap(),
    );
    assert_eq!(out.status.code(), Some(1), "torch is imported at start-up");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("recorded in"), "{err}");
    let runs = r.stored();
    assert_eq!(runs.len(), 1);
    let run = &runs[0].run;
    assert!(run.trials.is_empty(), "a checked process is no trial");
    assert_eq!(run.commit.sha, r.head_commits(1)[0]);
    let torch = run
        .modules
        .iter()
        .find(|m| m.module == "torch")
        .expect("torch in the stored tree");
    let at = torch
        .imported_at
        .as_ref()
        .expect("the line that imports it");
    assert_eq!((at.file.as_str(), at.line), ("src/app/__main__.py", 1));
    assert!(
        run.modules
            .iter()
            .any(|m| m.module == "app" && m.first_party)
    );

    let out = r.bench_record(file);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("added to the run already recorded"), "{err}");
    let runs = r.stored();
    assert_eq!(runs.len(), 1, "one run, completed");
    assert_eq!(runs[0].run.trials.len(), 2);
    assert_eq!(runs[0].run.modules, run.modules, "the tree kept as it was");

    let out = printed(
        r.command(&["check", "--record", "--fix", "--suggest", "--history", file])
            .output()
            .unwrap(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("drop --fix"));
}

/// `diff --record` stores what the diff measured, each side as its own
/// commit's run (A the base, B HEAD), with the rounds of its side only;
/// with uncommitted changes side B is not HEAD's, so only A is stored,
/// and it says so.
#[test]
fn diff_record_stores_each_sides_rounds_as_its_commits_run() {
    let r = Repo::three_commits();
    let file = r.history_file();
    let diff = |r: &Repo| {
        printed(
            r.command(&[
                "diff",
                "HEAD~1",
                "--max-seconds",
                "10",
                "--record",
                "--history",
                file.to_str().unwrap(),
            ])
            .output()
            .unwrap(),
        )
    };
    let out = diff(&r);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    r.assert_nothing_left();
    let runs = r.stored();
    let commits: Vec<&str> = runs.iter().map(|s| s.run.commit.sha.as_str()).collect();
    let head = r.head_commits(2);
    assert_eq!(
        commits,
        [head[0].as_str(), head[1].as_str()],
        "base, then HEAD"
    );
    for (s, variant) in runs
        .iter()
        .zip([timeline::Variant::A, timeline::Variant::B])
    {
        assert!(!s.run.trials.is_empty(), "{s:?}");
        assert!(s.run.trials.iter().all(|t| t.variant == variant), "{s:?}");
        assert_eq!(s.run.outcome, RunOutcome::Measured);
    }

    r.write("src/app/heavy.py", &busy(10));
    let out = diff(&r);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("side B not stored"), "{err}");
    assert!(err.contains("already recorded (kept as it was)"), "{err}");
    assert_eq!(r.stored().len(), 2);
}

/// The same commits recorded into a SQLite file and into a real
/// PostgreSQL database (a server this test starts) store the same
/// answers: commits, outcomes, trial counts and import trees' modules;
/// and the URL's password appears in no output of the command.
#[test]
fn sqlite_and_postgres_store_the_same_runs_and_the_password_is_never_shown() {
    let case = "sqlite_and_postgres_store_the_same_runs_and_the_password_is_never_shown";
    let Some(server) = history::testpg::PgServer::start(case) else {
        return;
    };
    let r = Repo::three_commits();
    let range = ["HEAD~3..HEAD", "--trials", "2", "--warmup", "0"];
    assert_eq!(r.record(&range).status.code(), Some(0));
    let location = server.database("svc");
    let url = format!(
        "postgres://{}:{}@127.0.0.1:{}/svc",
        history::testpg::USER,
        history::testpg::PASSWORD,
        server.port()
    );
    assert_eq!(
        url.replace(history::testpg::PASSWORD, "***"),
        location.to_string()
    );
    let mut args = vec!["history", "record"];
    args.extend_from_slice(&range);
    args.extend_from_slice(&["--history", &url]);
    let out = printed(r.command(&args).output().unwrap());
    assert_eq!(out.status.code(), Some(0));
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        shown.contains("postgres://coldstart:***@127.0.0.1"),
        "{shown}"
    );
    assert!(!shown.contains(history::testpg::PASSWORD), "{shown}");

    let answers = |runs: Vec<StoredRun>| -> Vec<String> {
        runs.into_iter()
            .map(|s| {
                let modules: Vec<String> = s.run.modules.iter().map(|m| m.module.clone()).collect();
                format!(
                    "{} {} {:?} {} {} {:?}",
                    s.run.commit.sha,
                    s.run.target,
                    s.run.outcome,
                    s.run.trials.len(),
                    s.run.environment.fingerprint(),
                    modules
                )
            })
            .collect()
    };
    let on_postgres = Store::open(&location)
        .unwrap()
        .runs(&RunFilter::default())
        .unwrap();
    assert_eq!(answers(r.stored()), answers(on_postgres));
}

/// Two CI jobs sharing one range and one store (`--shard 1/2`, `--shard
/// 2/2`) at once: every commit stored once, none lost, none doubled.
#[test]
fn two_shards_at_once_store_every_commit_once() {
    let r = Repo::three_commits();
    let file = r.history_file();
    let children: Vec<std::process::Child> = ["1/2", "2/2"]
        .into_iter()
        .map(|shard| {
            r.command(&[
                "history",
                "record",
                "HEAD~3..HEAD",
                "--trials",
                "2",
                "--warmup",
                "0",
                "--shard",
                shard,
                "--history",
                file.to_str().unwrap(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for c in children {
        let out = printed(c.wait_with_output().unwrap());
        assert_eq!(out.status.code(), Some(0));
    }
    r.assert_nothing_left();
    // Committed within one second, stored in whichever order the shards
    // finished: compared as sets, each commit once.
    let mut commits: Vec<String> = r.stored().into_iter().map(|s| s.run.commit.sha).collect();
    commits.sort();
    let mut wanted = r.head_commits(3);
    wanted.sort();
    assert_eq!(commits, wanted);
}

/// A second Ctrl-C kills the worker of the commit in progress: that end
/// is the interrupt's, not the commit's, so nothing is stored for it and
/// the next recording measures it.
#[test]
fn a_worker_killed_by_a_second_ctrl_c_is_not_stored_as_failed() {
    let r = Repo::new();
    let marker = r.tmp.parent().unwrap().join("started");
    r.write(
        "src/app/__init__.py",
        &format!(
            "import pathlib, time\npathlib.Path({:?}).write_text('x')\ntime.sleep(60)\n",
            marker.display().to_string()
        ),
    );
    r.commit("slow to start");
    let file = r.history_file();
    let mut child = r
        .command(&[
            "history",
            "record",
            "--trials",
            "1",
            "--warmup",
            "0",
            "--history",
            file.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !marker.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // The second press once the first is told (two signals at once may
    // arrive as one).
    for told in ["stopping after the current trial", "killing every worker"] {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
        let mut seen = String::new();
        while !seen.contains(told) {
            let mut line = String::new();
            assert!(err.read_line(&mut line).unwrap() > 0, "not told: {seen}");
            seen.push_str(&line);
        }
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    r.assert_nothing_left();
    let stored = Store::open(&Location::Sqlite(file))
        .unwrap()
        .runs(&RunFilter::default())
        .unwrap();
    assert!(stored.is_empty(), "{stored:?}");
}
