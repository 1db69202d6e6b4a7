//! The start-up history end to end on `test_history`'s generated
//! repository of 40 commits with known changes (its worker burns a fixed
//! CPU at start-up; a +40% step at commit 8, a drift of about +3% a
//! commit over 16..=25, the stand-in torch arriving at 31, the step
//! reversed at 36). Every commit is recorded, then shown: each step is
//! found at its commit and confirmed by re-measuring, with what arrived or
//! left at its line; the drift is reported as one drift, confirmed; the
//! flat stretches hold no change and no drift. Then bisect over the first
//! step, guided by the stored history, names its commit and the import
//! line that made it slower. One subject holds markup, which the
//! Markdown and the page show as text; the page is opened in headless
//! Chromium and its DOM and screenshot read back.

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use test_history::{COMMITS, DRIFT, FORBIDDEN, FORBIDDEN_LINE, STEP_DOWN, STEP_UP};

use crate::diff::Repo;
use crate::support::{fixtures, printed, python};

/// The commit whose subject holds markup (a flat one).
const MARKUP: usize = 2;

fn subject(i: usize) -> String {
    match i {
        MARKUP => "<script>alert('a subject')</script> | *not bold*".to_owned(),
        _ => format!("commit {i}"),
    }
}

/// The generated repository, in a [`Repo`] (its private `TMPDIR`).
fn known_history() -> (Repo, Vec<String>) {
    let r = Repo::empty();
    let protokit =
        std::fs::read_to_string(fixtures().join("boundary/workers/protokit.py")).unwrap();
    let python = python();
    let commits = test_history::generate(&r.root, python.to_str().unwrap(), &protokit, &subject)
        .expect("the repository is generated");
    (r, commits)
}

fn run(r: &Repo, args: &[&str]) -> Output {
    let out = printed(r.command(args).output().expect("coldstart runs"));
    r.assert_nothing_left();
    out
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).expect("the report is JSON")
}

/// The index of `v`'s commit among `commits`.
fn index(commits: &[String], v: &Value) -> usize {
    commits
        .iter()
        .position(|c| *c == v["commit"])
        .unwrap_or_else(|| panic!("a full hash of the history: {v:#}"))
}

#[test]
fn every_known_change_is_found_at_its_commit_and_bisect_names_the_step_and_its_line() {
    let (r, commits) = known_history();
    for range in [commits[0].clone(), format!("{}..HEAD", commits[0])] {
        let out = r.record(&[&range, "--trials", "5", "--warmup", "1"]);
        assert_eq!(out.status.code(), Some(0));
    }
    let history = r.history_file();
    let history = history.to_str().unwrap();
    let (page, md) = (r.tmp.join("out/history.html"), r.tmp.join("out/history.md"));
    let out = run(
        &r,
        &[
            "history",
            "show",
            "--history",
            history,
            "--max-seconds",
            "40",
            "--format",
            "json",
            "--output",
            &format!("html={}", page.display()),
            "--output",
            &format!("markdown={}", md.display()),
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    let t = &v["targets"][0];
    let shown: Vec<&str> = t["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["commit"].as_str().unwrap())
        .collect();
    assert_eq!(shown, commits, "every commit, oldest first");
    the_steps_are_found_at_their_commits(t, &commits);
    the_drift_is_one_drift(t, &commits);
    the_reports_show_subjects_as_text(&md, &page, &commits);
    the_page_opens_in_chromium(&page, &r.tmp);
    bisect_names_the_step_and_its_line(&r, &commits, history);
}

fn the_steps_are_found_at_their_commits(t: &Value, commits: &[String]) {
    let changes = t["changes"].as_array().unwrap();
    let at: Vec<usize> = changes.iter().map(|c| index(commits, c)).collect();
    assert_eq!(
        at,
        [STEP_UP, FORBIDDEN, STEP_DOWN],
        "the three steps, confirmed, and no change in the flat stretches: {t:#}"
    );
    for (c, (verdict, module, change, line)) in changes.iter().zip([
        ("slower", "app.step", "added", 3),
        ("slower", "torch", "added", FORBIDDEN_LINE),
        ("faster", "app.step", "removed", 3),
    ]) {
        assert_eq!(c["confirmation"]["status"], "confirmed", "{c:#}");
        assert_eq!(c["confirmation"]["comparison"]["verdict"], verdict, "{c:#}");
        let i = c["imports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["module"] == module && i["change"] == change)
            .unwrap_or_else(|| panic!("{module} {change}: {c:#}"));
        assert_eq!(i["at"]["file"], "src/app/__main__.py", "{i:#}");
        assert_eq!(i["at"]["line"], line, "{i:#}");
    }
    for cand in t["candidates"].as_array().unwrap() {
        assert_ne!(cand["confirmation"]["status"], "confirmed", "{cand:#}");
    }
}

fn the_drift_is_one_drift(t: &Value, commits: &[String]) {
    let drifts = t["drifts"].as_array().unwrap();
    assert_eq!(drifts.len(), 1, "one drift, confirmed: {t:#}");
    let d = &drifts[0];
    let (from, to) = (index(commits, &d["from"]), index(commits, &d["to"]));
    // Between the steps around it, and over at least half of the true
    // ramp (its ends move with the noise of ten flat commits each side:
    // five commits early at load 4 in one benchmark run).
    assert!(STEP_UP <= from && to < FORBIDDEN, "{from}..{to}: {d:#}");
    let overlap = (from.max(DRIFT.start() - 1)..to.min(*DRIFT.end())).len();
    assert!(overlap * 2 >= DRIFT.clone().count(), "{from}..{to}: {d:#}");
    assert_eq!(d["confirmation"]["status"], "confirmed", "{d:#}");
    assert!(d["total"].as_f64().unwrap() > 0.15, "{d:#}");
    for d in t["drift_candidates"].as_array().unwrap() {
        let (from, to) = (index(commits, &d["from"]), index(commits, &d["to"]));
        assert_ne!(d["confirmation"]["status"], "confirmed", "{from}..{to}");
    }
}

fn the_reports_show_subjects_as_text(md: &Path, page: &Path, commits: &[String]) {
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains(&commits[STEP_UP][..12]), "{md}");
    assert!(!md.contains("<script>"), "{md}");
    let html = std::fs::read_to_string(page).unwrap();
    assert!(
        !html.contains("<script>alert"),
        "a subject is text on the page"
    );
}

fn bisect_names_the_step_and_its_line(r: &Repo, commits: &[String], history: &str) {
    let out = run(
        r,
        &[
            "bisect",
            &commits[0],
            &commits[15],
            "--history",
            history,
            "--format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let b = json(&out);
    let culprit = &b["culprit"];
    assert_eq!(index(commits, culprit), STEP_UP, "{b:#}");
    let arrived = culprit["imports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["module"] == "app.step")
        .unwrap_or_else(|| panic!("app.step arrived: {culprit:#}"));
    assert_eq!(arrived["at"]["file"], "src/app/__main__.py");
    assert_eq!(arrived["at"]["line"], 3);
    // The stored history pointed at the step: the bad commit, the step
    // and the commit before it are the only comparisons made.
    assert_eq!(index(commits, &b["history"]["suggested"]), STEP_UP, "{b:#}");
    let steps: Vec<usize> = b["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| index(commits, s))
        .collect();
    assert_eq!(steps, [15, STEP_UP, STEP_UP - 1], "{b:#}");
}

/// The page in headless Chromium: its script ran (it marks the body
/// ready), the three changes' marks (two slower, one faster) and every
/// point are in the DOM, the subject is text, and the screenshot shows
/// the interval band and the red marks.
fn the_page_opens_in_chromium(page: &Path, tmp: &Path) {
    let case = "history show's page in Chromium";
    let Some(chromium) = test_interpreters::installed("/usr/bin/chromium", case) else {
        return;
    };
    let run = |extra: &[&str]| {
        let (mut browser, _profile) = crate::support::headless_chromium(chromium, tmp);
        printed(
            browser
                .args(["--window-size=1000,1300", "--virtual-time-budget=2000"])
                .args(extra)
                .arg(format!("file://{}", page.display()))
                .output()
                .expect("chromium runs"),
        )
    };
    let dom = run(&["--dump-dom"]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.contains("data-ready=\"1\""),
        "the page's script ran: {dom}"
    );
    assert_eq!(dom.matches("class=\"change slower\"").count(), 2, "{dom}");
    assert_eq!(dom.matches("class=\"change faster\"").count(), 1, "{dom}");
    assert_eq!(dom.matches("<circle class=\"pt\"").count(), COMMITS);
    assert!(dom.contains("&lt;script&gt;alert"), "the subject as text");
    let shot = tmp.join("history.png");
    let out = run(&[&format!("--screenshot={}", shot.display())]);
    assert!(shot.exists(), "no screenshot: {out:?}");
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let near = |px: &[u8], rgb: [u8; 3]| px.iter().zip(rgb).all(|(a, b)| a.abs_diff(b) <= 12);
    let count = |rgb: [u8; 3]| {
        buf[..info.buffer_size()]
            .chunks(channels)
            .filter(|px| near(&px[..3], rgb))
            .count()
    };
    // #9ecae1 at half opacity on white, and #d62728.
    assert!(count([206, 228, 240]) > 500, "the interval band is drawn");
    assert!(count([214, 39, 40]) > 50, "the changes are marked in red");
}
