//! `coldstart bisect`'s report: text for people, and the JSON
//! (`coldstart.bisect/1`, [`answers::bisect`]).

use std::fmt::Write as _;

use answers::bisect::{BisectJson, BisectReport, Outcome, Step};
use answers::words::{fmt_pct, fmt_ratio};

/// The JSON report.
pub fn json(r: &BisectReport) -> String {
    let mut s = serde_json::to_string_pretty(&BisectJson::of(r)).expect("plain data");
    s.push('\n');
    s
}

/// One step's line: the commit, its answer, its ratio and rounds, and
/// the first line of its message.
pub fn step_line(s: &Step) -> String {
    let name = if s.at.commit.is_empty() {
        s.at.subject.clone()
    } else {
        format!("{} {}", s.at.short(), crate::printable(&s.at.subject))
    };
    let mut line = format!("{name}: {}", s.answer.words());
    if let Some(c) = &s.change {
        let _ = write!(
            line,
            ", CPU time / good {} in {} rounds",
            fmt_ratio(c),
            s.rounds
        );
    }
    if let Some(m) = s.message.as_deref().and_then(|m| m.lines().next()) {
        let _ = write!(line, " ({})", crate::printable(m));
    }
    line
}

/// The text report: the outcome, the culprit with its size and what
/// arrived at it, then every step.
pub fn text(r: &BisectReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "bisect `{}` from good {} to bad {}: slower means CPU time above 1 + {}",
        r.target,
        r.good.short(),
        r.bad.short(),
        fmt_pct(r.threshold)
    );
    match r.outcome {
        Outcome::Found => {
            if let Some(c) = &r.culprit {
                let _ = writeln!(
                    out,
                    "first slow commit: {} {}",
                    c.at.commit,
                    crate::printable(&c.at.subject)
                );
                if let Some(ch) = &c.change {
                    let _ = writeln!(out, "  start-up against good: {}", fmt_ratio(ch));
                }
                for a in &c.imports {
                    let at =
                        a.at.as_ref()
                            .map_or_else(String::new, |s| format!(" at {s}"));
                    let _ = writeln!(out, "  arrived ({}): {}{at}", a.kind, a.module);
                }
                if let Some(e) = &c.imports_error {
                    let _ = writeln!(out, "  its imports could not be compared: {e}");
                }
            }
        }
        Outcome::Range => {
            let _ = writeln!(
                out,
                "the first slow commit is one of these {} (steps between were skipped or inconclusive, so none is named):",
                r.range.len()
            );
            for c in &r.range {
                let _ = writeln!(out, "  {} {}", c.commit, crate::printable(&c.subject));
            }
        }
        Outcome::NotSlower => {
            let _ = writeln!(
                out,
                "the bad commit is not shown slower than the good one by more than {}: nothing to search",
                fmt_pct(r.threshold)
            );
        }
        Outcome::GoodFailed => {
            let _ = writeln!(
                out,
                "the good commit's worker could not be run, so nothing can be compared against it: {}",
                r.error.as_deref().unwrap_or("no reason was given")
            );
        }
    }
    for s in r.skipped() {
        let _ = writeln!(
            out,
            "skipped {} {}:",
            s.at.commit,
            crate::printable(&s.at.subject)
        );
        for l in s
            .message
            .as_deref()
            .unwrap_or("no reason was given")
            .lines()
        {
            let _ = writeln!(out, "  {}", crate::printable(l));
        }
    }
    if let Some(g) = &r.history {
        let _ = match &g.suggested {
            Some(c) => writeln!(
                out,
                "the start-up history ({} commits stored in {}) pointed at {} {}: it and the commit before it were compared first",
                g.stored,
                crate::printable(&g.store),
                c.short(),
                crate::printable(&c.subject)
            ),
            None => writeln!(
                out,
                "the start-up history ({} commits stored in {}) pointed at no commit: the search halved the range",
                g.stored,
                crate::printable(&g.store)
            ),
        };
    }
    let _ = writeln!(out, "steps ({}):", r.steps.len());
    for s in &r.steps {
        let _ = writeln!(out, "  {}", step_line(s));
    }
    out
}

#[cfg(test)]
mod tests {
    use answers::bisect::{Answer, Arrived, BisectReport, CommitRef, Culprit, Outcome, Step};
    use importguard::recorder::CallSite;

    fn at(n: u8, subject: &str) -> CommitRef {
        CommitRef {
            commit: format!("{n}").repeat(40),
            subject: subject.to_owned(),
        }
    }

    #[test]
    fn the_text_names_the_culprit_its_import_lines_and_the_skipped_commit() {
        let skipped = Step {
            at: at(4, "change 4"),
            answer: Answer::Skipped,
            change: None,
            rounds: 0,
            message: Some("the worker could not be run: it exited\nstderr: boom".to_owned()),
            run_dir: None,
        };
        let r = BisectReport {
            target: "w".to_owned(),
            threshold: 0.1,
            basis: phases::Measure::Cpu,
            good: at(1, "good"),
            bad: at(9, "bad"),
            outcome: Outcome::Found,
            culprit: Some(Culprit {
                at: at(6, "change 6"),
                parent: at(5, "change 5").commit,
                change: None,
                imports: vec![Arrived {
                    kind: "forbidden",
                    module: "torch".to_owned(),
                    at: Some(CallSite {
                        file: "src/app/__main__.py".to_owned(),
                        line: 3,
                        func: "<module>".to_owned(),
                    }),
                }],
                imports_error: None,
            }),
            range: Vec::new(),
            steps: vec![skipped],
            error: None,
            history: Some(answers::bisect::Guide {
                store: "postgres://ci:***@db/history".to_owned(),
                stored: 9,
                suggested: Some(at(6, "change 6")),
            }),
        };
        let text = super::text(&r);
        assert!(
            text.contains(&format!("first slow commit: {} change 6", "6".repeat(40))),
            "{text}"
        );
        assert!(
            text.contains("arrived (forbidden): torch at src/app/__main__.py:3"),
            "{text}"
        );
        assert!(
            text.contains("  stderr: boom"),
            "the whole reason, a line each: {text}"
        );
        assert!(
            text.contains(
                "444444444444 change 4: skipped (the worker could not be run: it exited)"
            ),
            "{text}"
        );
        assert!(
            text.contains("the start-up history (9 commits stored in postgres://ci:***@db/history) pointed at 666666666666 change 6"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&super::json(&r)).unwrap();
        assert_eq!(json["history"]["suggested"]["commit"], "6".repeat(40));
        assert_eq!(json["schema"], "coldstart.bisect/1");
        assert_eq!(json["culprit"]["commit"], "6".repeat(40));
        assert_eq!(json["skipped"][0]["commit"], "4".repeat(40));
        assert_eq!(json["exit_code"], 0);
    }
}
