//! The history's renderings of one report with a confirmed change, a
//! candidate, a drift and a failed commit: whole text and Markdown
//! snapshots, and the HTML page's escaping.

use answers::bisect::CommitRef;
use answers::history::{
    Change, Confirmation, DriftFound, Estimate, HistoryReport, ImportChange, ImportsAt, Point,
    SeriesChange, TargetHistory,
};
use importguard::recorder::CallSite;
use phases::changepoint::ChangeRule;
use phases::compare::{Comparison, Method, Verdict};
use phases::stats::Interval;

fn commit(i: usize, subject: &str) -> CommitRef {
    CommitRef {
        commit: format!("{i:x}").repeat(40)[..40].to_owned(),
        subject: subject.to_owned(),
    }
}

fn point(i: usize, ms: Option<f64>) -> Point {
    Point {
        commit: commit(
            i,
            if i == 3 {
                "<script>alert(1)</script> | *bold*"
            } else {
                "work"
            },
        ),
        time_unix_s: i as i64,
        ready_ms: ms.map(|m| Estimate {
            median: m,
            lo: m * 0.98,
            hi: m * 1.02,
        }),
        cpu_ms: ms.map(|m| m * 0.8),
        trials: 10,
        failures: 0,
        peak_rss_bytes: ms.map(|_| 40.0 * 1024.0 * 1024.0),
        modules: if ms.is_some() { 120 + i } else { 0 },
        failed: ms
            .is_none()
            .then(|| {
                "its worker could not be run: worker failed at start-up: exit 1\n  expected: a ready line\n  stderr: (empty)\n".to_owned()
            }),
    }
}

fn comparison(verdict: Verdict, ratio: f64) -> Comparison {
    Comparison {
        ratio,
        ci: Interval {
            lo: ratio - 0.05,
            hi: ratio + 0.05,
            level: 0.95,
        },
        verdict,
        threshold: 0.05,
        paired: true,
        n_a: 14,
        n_b: 14,
        method: Method::default(),
        unsettled: None,
    }
}

fn report() -> HistoryReport {
    let points: Vec<Point> = (1..=8)
        .map(|i| match i {
            2 => point(i, None),
            i if i < 4 => point(i, Some(100.0)),
            _ => point(i, Some(140.0)),
        })
        .collect();
    let change = Change {
        at: commit(4, "load the model at import"),
        parent: commit(3, "").commit,
        series: SeriesChange {
            before_ms: 100.0,
            after_ms: 140.0,
            change: 0.4,
            p: 0.005,
        },
        confirmation: Confirmation::of(comparison(Verdict::Slower, 1.41), 0.4),
        imports: vec![ImportChange {
            change: "added",
            module: "torch".to_owned(),
            first_party: false,
            at: Some(CallSite {
                file: "src/app/worker.py".to_owned(),
                line: 7,
                func: "<module>".to_owned(),
            }),
        }],
        imports_error: None,
    };
    let candidate = Change {
        at: commit(6, "tidy"),
        parent: commit(5, "").commit,
        confirmation: Confirmation::of(comparison(Verdict::Equivalent, 1.0), 0.06),
        imports: Vec::new(),
        ..change.clone()
    };
    let drift = DriftFound {
        from: commit(5, "a"),
        to: commit(8, "b"),
        commits: 3,
        total: 0.09,
        per_commit: 0.03,
        p: 0.01,
        confirmation: Confirmation::not_measured("not re-measured: interrupted"),
        imports: vec![ImportsAt {
            at: commit(7, "<b>drop</b> pyparsing"),
            changes: vec![ImportChange {
                change: "removed",
                module: "pyparsing".to_owned(),
                first_party: false,
                at: Some(CallSite {
                    file: "pkg/requirements.py".to_owned(),
                    line: 10,
                    func: "<module>".to_owned(),
                }),
            }],
        }],
    };
    HistoryReport {
        rule: ChangeRule::default(),
        targets: vec![TargetHistory {
            target: "worker".to_owned(),
            environment: "0123456789abcdef0123456789abcdef".to_owned(),
            interpreter: "CPython 3.11.7 GIL /usr/bin/python3".to_owned(),
            other_environments: 2,
            points,
            changes: vec![change],
            candidates: vec![candidate],
            drifts: vec![DriftFound {
                confirmation: Confirmation::of(comparison(Verdict::Slower, 1.09), 0.09),
                imports: Vec::new(),
                ..drift.clone()
            }],
            drift_candidates: vec![drift],
        }],
    }
}

#[test]
fn the_text_report_names_the_change_its_confirmation_and_what_arrived() {
    insta::assert_snapshot!(super::text(&report()));
}

#[test]
fn the_markdown_report_escapes_what_a_commit_brings() {
    let md = super::markdown(&report());
    assert!(!md.contains("<script>"), "{md}");
    insta::assert_snapshot!(md);
}

#[test]
fn the_json_report_carries_its_schema_and_full_hashes() {
    let v: serde_json::Value = serde_json::from_str(&super::json(&report())).unwrap();
    assert_eq!(v["schema"], "coldstart.history/1");
    let t = &v["targets"][0];
    assert_eq!(t["changes"][0]["commit"].as_str().unwrap().len(), 40);
    assert_eq!(t["changes"][0]["confirmation"]["status"], "confirmed");
    assert_eq!(
        t["candidates"][0]["confirmation"]["status"],
        "not_confirmed"
    );
    assert_eq!(t["changes"][0]["imports"][0]["at"]["line"], 7);
}

#[test]
fn the_html_page_is_one_file_with_its_marks_and_no_markup_from_a_commit() {
    let page = super::html(&report());
    assert!(!page.contains("<script>alert"), "the subject is text");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(
        page.contains("\\u003cscript\\u003ealert"),
        "and data, not markup"
    );
    for needle in [
        r#"class="band""#,
        r#"class="change slower""#,
        r#"<li class="change rise">"#,
        r#"class="candidate""#,
        r#"class="drift""#,
        r#"class="pt failed""#,
    ] {
        assert!(page.contains(needle), "{needle}");
    }
    assert_eq!(
        page.matches("<circle class=\"pt\"").count(),
        7,
        "one per measured commit"
    );
    for external in ["src=\"http", "href=\"http", "@import", "url("] {
        assert!(!page.contains(external), "no network: {external}");
    }
}
