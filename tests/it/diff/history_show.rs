//! `coldstart history show` end to end on a generated history: twelve
//! commits of the diff tests' user repository (its worker burns 100 ms
//! of CPU at start-up), the seventh of which imports the stand-in torch
//! and `app.heavy` (70 ms more, about +50% of ready) at known lines of
//! `src/app/__main__.py`. Every commit is recorded, then shown: the one
//! step is found at its commit, confirmed by re-measuring its two commits
//! interleaved, and named with what arrived; the flat stretches hold no
//! confirmed change. The page is opened in headless Chromium, whose
//! screenshot and DOM are read back.

use std::path::Path;

use crate::diff::{MAIN, Repo, busy};
use crate::support::printed;

/// Commits, and the index of the step among them.
const COMMITS: usize = 12;
const STEP: usize = 6;
/// The lines of `src/app/__main__.py` at the step that import the
/// stand-in torch and `app.heavy`.
const TORCH_LINE: u32 = 3;
const HEAVY_LINE: u32 = 4;

fn stepped_history() -> (Repo, Vec<String>) {
    let r = Repo::empty();
    r.write_worker();
    r.write("src/app/base_work.py", &busy(100));
    let slow = "import protokit\nimport app.base_work\nimport torch\nimport app.heavy\n\nprotokit.serve()\n";
    assert_eq!(
        slow.lines().nth(TORCH_LINE as usize - 1),
        Some("import torch")
    );
    assert_eq!(
        slow.lines().nth(HEAVY_LINE as usize - 1),
        Some("import app.heavy")
    );
    let mut commits = Vec::new();
    for i in 0..COMMITS {
        r.write("NOTES.md", &format!("note {i}\n"));
        match i {
            0 => r.write(
                "src/app/__main__.py",
                &format!("import app.base_work\n{MAIN}"),
            ),
            STEP => {
                r.write("src/app/heavy.py", &busy(70));
                r.write("src/app/__main__.py", slow);
            }
            _ => {}
        }
        // One subject that a page or a table must show as text.
        let subject = match i {
            2 => "<script>alert('a subject')</script> | *not bold*".to_owned(),
            _ => format!("change {i}"),
        };
        r.commit(&subject);
        commits.push(crate::support::git_out(&r.root, &["rev-parse", "HEAD"]));
    }
    (r, commits)
}

#[test]
fn history_show_finds_the_one_step_confirms_it_and_names_what_arrived() {
    let (r, commits) = stepped_history();
    let rec = r.record(&[
        &format!("HEAD~{}..HEAD", COMMITS - 1),
        "--trials",
        "5",
        "--warmup",
        "1",
    ]);
    assert_eq!(rec.status.code(), Some(0));
    // The root commit too: a range leaves it out.
    assert_eq!(
        r.record(&[&commits[0], "--trials", "5", "--warmup", "1"])
            .status
            .code(),
        Some(0)
    );
    let (page, md) = (r.tmp.join("out/history.html"), r.tmp.join("out/history.md"));
    let history = r.history_file();
    let out = printed(
        r.command(&[
            "history",
            "show",
            "--history",
            history.to_str().unwrap(),
            "--max-seconds",
            "30",
            "--format",
            "json",
            "--output",
            &format!("html={}", page.display()),
            "--output",
            &format!("markdown={}", md.display()),
        ])
        .output()
        .expect("coldstart runs"),
    );
    r.assert_nothing_left();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the report is JSON");
    assert_eq!(v["schema"], "coldstart.history/1");
    let t = &v["targets"][0];
    let points = t["points"].as_array().unwrap();
    let shown: Vec<&str> = points
        .iter()
        .map(|p| p["commit"].as_str().unwrap())
        .collect();
    assert_eq!(shown, commits, "every commit, oldest first: {t:#}");
    let changes = t["changes"].as_array().unwrap();
    assert_eq!(
        changes.len(),
        1,
        "one confirmed change, none in the flat stretches: {t:#}"
    );
    let c = &changes[0];
    assert_eq!(
        c["commit"], commits[STEP],
        "at the step, by full hash: {c:#}"
    );
    assert_eq!(c["parent"], commits[STEP - 1]);
    assert_eq!(c["confirmation"]["status"], "confirmed", "{c:#}");
    let cmp = &c["confirmation"]["comparison"];
    assert_eq!(cmp["verdict"], "slower");
    // The step adds 70 ms of CPU to about 130: the estimate is near +50%
    // (its interval's width is the machine's load, which the verdict
    // already weighs).
    assert!(cmp["ratio"].as_f64().unwrap() > 1.2, "{cmp:#}");
    assert!(c["series"]["change"].as_f64().unwrap() > 0.2, "{c:#}");
    let arrived = |module: &str| {
        c["imports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["module"] == module && i["change"] == "added")
            .unwrap_or_else(|| panic!("{module} arrived: {c:#}"))
            .clone()
    };
    for (module, line) in [("torch", TORCH_LINE), ("app.heavy", HEAVY_LINE)] {
        let i = arrived(module);
        assert_eq!(i["at"]["file"], "src/app/__main__.py", "{i:#}");
        assert_eq!(i["at"]["line"], line, "{i:#}");
    }
    // Whatever the flat stretches showed under load was re-measured and
    // not confirmed: a candidate, never a change.
    for cand in t["candidates"].as_array().unwrap() {
        assert_ne!(cand["confirmation"]["status"], "confirmed", "{cand:#}");
    }
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.contains(&commits[STEP][..12]) && !md.contains("<script>"),
        "{md}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("<script>alert"),
        "a subject is text on the page"
    );
    the_page_opens_in_chromium(&page, &r.tmp);
}

/// The page in headless Chromium: its script ran (it marks the body
/// ready), the step's mark and every point are in the DOM, the subject is
/// text, and the screenshot shows the interval band and the red mark.
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
    assert_eq!(dom.matches("class=\"change slower\"").count(), 1, "{dom}");
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
    assert!(count([214, 39, 40]) > 50, "the change is marked in red");
}
