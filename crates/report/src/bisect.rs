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

/// One step's line: the commit, its answer, its ratio and rounds.
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
    if let Some(m) = &s.message {
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
            "skipped {} {}",
            s.at.commit,
            s.message.as_deref().unwrap_or("")
        );
    }
    let _ = writeln!(out, "steps ({}):", r.steps.len());
    for s in &r.steps {
        let _ = writeln!(out, "  {}", step_line(s));
    }
    out
}
