//! `coldstart diff`'s renderings: text, Markdown for a pull-request
//! comment, GitHub workflow commands, JUnit XML and the JSON
//! ([`answers::diff::DiffJson`]). The answer itself (its data, budgets,
//! problems and exit code) is [`answers::diff`]'s.

use std::fmt::Write as _;
use std::path::Path;

use answers::diff::{
    DiffJson, DiffReport, DiffStatus, ImportDiff, PackageCount, PackageTime, TimeDiff, exit_code,
    fmt_opt_ms, headline, short,
};
use importguard::recorder::CallSite;
use phases::stats::SignedRank;

use crate::bench::{answer_lines, fmt_mib, fmt_ms, fmt_ratio, fmt_verdict};

use crate::check::ci::{command, place_of, relative, xml};

fn fmt_change(c: &Option<SignedRank>) -> String {
    match c {
        Some(s) => format!(
            "{}{} [{}, {}]",
            if s.estimate >= 0.0 { "+" } else { "" },
            fmt_ms(s.estimate),
            fmt_ms(s.lo),
            fmt_ms(s.hi)
        ),
        None => "-".to_owned(),
    }
}

fn at(f: &CallSite, root: &Path) -> String {
    format!("{}:{}", relative(&f.file, root), f.line)
}

/// The JSON report (schema [`answers::diff::SCHEMA`]).
pub fn json(r: &DiffReport, strict: bool) -> String {
    let mut s = serde_json::to_string_pretty(&DiffJson::new(r, strict)).expect("plain data");
    s.push('\n');
    s
}

fn imports_text(i: &ImportDiff, root: &Path, out: &mut String) {
    let _ = writeln!(
        out,
        "modules at ready: A {}, B {} (instrumented, {} processes per side)",
        i.modules_a.map_or("-".into(), |n| n.to_string()),
        i.modules_b.map_or("-".into(), |n| n.to_string()),
        i.processes
    );
    for m in &i.added_first_party {
        let _ = writeln!(
            out,
            "first-party added: {}{}",
            m.module,
            m.imported_at
                .as_ref()
                .map_or(String::new(), |f| format!(", imported at {}", at(f, root)))
        );
    }
    if !i.removed_first_party.is_empty() {
        let _ = writeln!(
            out,
            "first-party removed: {}",
            i.removed_first_party.join(", ")
        );
    }
    let counts = |v: &[PackageCount]| {
        v.iter()
            .map(|p| {
                let s = crate::plural(p.modules, "s");
                format!("{} ({} module{s})", p.package, p.modules)
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !i.added_packages.is_empty() {
        let _ = writeln!(out, "third-party added: {}", counts(&i.added_packages));
    }
    if !i.removed_packages.is_empty() {
        let _ = writeln!(out, "third-party removed: {}", counts(&i.removed_packages));
    }
    for f in &i.forbidden_new {
        let _ = writeln!(
            out,
            "forbidden NEW: {} via {}{}",
            f.module,
            f.chain.join(" -> "),
            f.origin
                .as_ref()
                .map_or(String::new(), |o| format!(", started at {}", at(o, root)))
        );
    }
    for f in &i.forbidden_gone {
        let _ = writeln!(
            out,
            "forbidden gone: {} (was {})",
            f.module,
            f.chain.join(" -> ")
        );
    }
    if !i.forbidden_kept.is_empty() {
        let _ = writeln!(
            out,
            "forbidden on both sides: {}",
            i.forbidden_kept.join(", ")
        );
    }
    let changed: Vec<&PackageTime> = i
        .packages
        .iter()
        .filter(|p| p.a_ms != p.b_ms)
        .take(10)
        .collect();
    if !changed.is_empty() {
        let _ = writeln!(
            out,
            "{:<24} {:>10} {:>10}  {:<32} imported at",
            "package (cumulative)", "A", "B", "B - A [95% CI]"
        );
        for p in changed {
            let _ = writeln!(
                out,
                "{:<24} {:>10} {:>10}  {:<32} {}",
                format!("{}{}", p.package, if p.first_party { " *" } else { "" }),
                fmt_opt_ms(p.a_ms),
                fmt_opt_ms(p.b_ms),
                fmt_change(&p.change),
                p.imported_at
                    .as_ref()
                    .map_or(String::new(), |f| at(f, root))
            );
        }
        let _ = writeln!(out, "(* first-party)");
    }
}

/// Every phase's wall-time ratio with its interval and verdict.
fn phase_lines(t: &TimeDiff) -> Vec<String> {
    t.summary
        .phases
        .iter()
        .filter_map(|p| {
            p.ratio.as_ref().map(|c| {
                format!(
                    "{} (wall): B/A {} {}",
                    p.phase(),
                    fmt_ratio(c),
                    fmt_verdict(c)
                )
            })
        })
        .collect()
}

fn rss_line(t: &TimeDiff) -> String {
    let f = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), fmt_mib);
    format!(
        "peak RSS A {} B {}; RSS at ready A {} B {}",
        f(t.rss[0].peak_bytes),
        f(t.rss[1].peak_bytes),
        f(t.rss[0].at_ready_bytes),
        f(t.rss[1].at_ready_bytes)
    )
}

/// The terminal report; paths relative to `root`.
pub fn text(r: &DiffReport, root: &Path, strict: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "base (A): {} = {} ({}){}; B: the working tree",
        r.base.rev,
        short(&r.base.commit),
        r.base.how,
        if r.base.dirty {
            ", uncommitted changes included in B"
        } else {
            ""
        }
    );
    for t in &r.targets {
        let _ = writeln!(out, "\n== {}", t.verdict_line());
        if let Some(time) = &t.time {
            for l in answer_lines(&time.summary) {
                let _ = writeln!(out, "{l}");
            }
            for l in phase_lines(time) {
                let _ = writeln!(out, "  {l}");
            }
            let _ = writeln!(out, "{}", rss_line(time));
            let _ = writeln!(out, "trials written to {}", time.run_dir.display());
        }
        if let Some(i) = &t.imports {
            imports_text(i, root, &mut out);
        }
        for n in &t.prepared {
            let _ = writeln!(out, "note: {n}");
        }
        for w in &t.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        for p in t.problems(strict) {
            let _ = writeln!(out, "FAIL ({}): {}", p.kind, p.message);
        }
    }
    let _ = writeln!(out, "\n{}", headline(r, strict));
    out
}

/// Markdown for a pull-request comment: the headline, a table per target,
/// the details folded.
pub fn markdown(r: &DiffReport, root: &Path, strict: bool) -> String {
    let mut o = String::new();
    let code = exit_code(r, strict);
    let mark = match code {
        0 => "✅",
        1 => "❌",
        _ => "⚠️",
    };
    let _ = writeln!(o, "### {mark} {}\n", headline(r, strict));
    let _ = writeln!(
        o,
        "Base (A): `{}` = `{}` ({}); B: the working tree{}.\n",
        r.base.rev,
        short(&r.base.commit),
        r.base.how,
        if r.base.dirty {
            " with uncommitted changes"
        } else {
            ""
        }
    );
    for t in &r.targets {
        let _ = writeln!(o, "#### `{}`\n", t.name);
        let Some(time) = &t.time else {
            let _ = writeln!(o, "{}\n", t.verdict_line());
            continue;
        };
        let _ = writeln!(o, "| measure | B/A | 95%+ interval | verdict |");
        let _ = writeln!(o, "|---|---|---|---|");
        for (name, c) in [
            ("CPU time (user + sys), the basis", &time.cpu),
            ("ready (wall time)", &time.wall_ready),
        ] {
            match c {
                Some(c) => {
                    let _ = writeln!(
                        o,
                        "| {name} | {:.3} | [{:.3}, {:.3}] | {} |",
                        c.ratio,
                        c.ci.lo,
                        c.ci.hi,
                        fmt_verdict(c)
                    );
                }
                None => {
                    let _ = writeln!(o, "| {name} | - | - | no comparison |");
                }
            }
        }
        if let Some(i) = &t.imports {
            let _ = writeln!(
                o,
                "| modules at ready | A {} | B {} | |",
                i.modules_a.map_or("-".into(), |n| n.to_string()),
                i.modules_b.map_or("-".into(), |n| n.to_string())
            );
        }
        let f = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), fmt_mib);
        let _ = writeln!(
            o,
            "| peak RSS | A {} | B {} | |\n| RSS at ready | A {} | B {} | |\n",
            f(time.rss[0].peak_bytes),
            f(time.rss[1].peak_bytes),
            f(time.rss[0].at_ready_bytes),
            f(time.rss[1].at_ready_bytes)
        );
        for p in t.problems(strict) {
            let _ = writeln!(o, "- **{}**: {}", p.kind, p.message);
        }
        for n in &t.prepared {
            let _ = writeln!(o, "- note: {n}");
        }
        for w in &t.warnings {
            let _ = writeln!(o, "- warning: {w}");
        }
        let _ = writeln!(o, "\n<details><summary>details</summary>\n");
        for l in answer_lines(&time.summary) {
            let _ = writeln!(o, "- {l}");
        }
        for l in phase_lines(time) {
            let _ = writeln!(o, "- {l}");
        }
        let _ = writeln!(o, "- trials: `{}`", time.run_dir.display());
        if let Some(i) = &t.imports {
            let _ = writeln!(o, "\n```text");
            imports_text(i, root, &mut o);
            let _ = writeln!(o, "```");
        }
        let _ = writeln!(o, "\n</details>\n");
    }
    o
}

/// GitHub workflow commands: an `::error` at the first-party line that
/// brought in the costliest new package (or at the start of a new
/// forbidden module's chain) of a failing target, and a `::notice` with
/// the headline.
pub fn github(r: &DiffReport, root: &Path, strict: bool) -> String {
    let mut o = String::new();
    for t in &r.targets {
        let problems = t.problems(strict);
        if let Some(i) = &t.imports {
            for f in &i.forbidden_new {
                command(
                    &mut o,
                    "error",
                    f.origin.as_ref().and_then(|f| place_of(f, root)).as_ref(),
                    &format!("{}: forbidden module at start-up", t.name),
                    &format!(
                        "{} is imported at start-up now: {}",
                        f.module,
                        f.chain.join(" -> ")
                    ),
                );
            }
        }
        for p in problems.iter().filter(|p| p.kind != "forbidden") {
            let culprit = t.culprit();
            let at = culprit.as_ref().and_then(|(f, _)| place_of(f, root));
            let cause = culprit.map_or(String::new(), |(_, why)| format!("; {why}"));
            command(
                &mut o,
                "error",
                at.as_ref(),
                &format!("{}: {}", t.name, p.kind),
                &format!("{}{cause}", p.message),
            );
        }
        for n in &t.prepared {
            command(&mut o, "notice", None, &t.name, n);
        }
        for w in &t.warnings {
            command(&mut o, "warning", None, &t.name, w);
        }
    }
    command(
        &mut o,
        "notice",
        None,
        "coldstart diff",
        &headline(r, strict),
    );
    o
}

/// JUnit XML: a test case per target, failed by its problems, errored
/// when a side could not be run.
pub fn junit(r: &DiffReport, strict: bool) -> String {
    let mut cases = String::new();
    let (mut failures, mut errors) = (0, 0);
    for t in &r.targets {
        let _ = write!(
            cases,
            "    <testcase classname=\"coldstart.diff\" name=\"{}\"",
            xml(&t.name)
        );
        let problems = t.problems(strict);
        if t.status == DiffStatus::Error {
            errors += 1;
            let _ = writeln!(
                cases,
                ">\n      <error message=\"{}\"/>\n    </testcase>",
                xml(&t.verdict_line())
            );
        } else if problems.is_empty() {
            let _ = writeln!(
                cases,
                ">\n      <system-out>{}</system-out>\n    </testcase>",
                xml(&t.verdict_line())
            );
        } else {
            failures += 1;
            let body: Vec<String> = problems.iter().map(|p| p.message.clone()).collect();
            let _ = writeln!(
                cases,
                ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>",
                xml(&problems[0].message),
                xml(&body.join("\n"))
            );
        }
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"coldstart diff\" tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\">\n  <testsuite name=\"coldstart diff\" tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\">\n{cases}  </testsuite>\n</testsuites>\n",
        n = r.targets.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use answers::diff::{BaseInfo, Budgets, ForbiddenChange, Rss, SCHEMA, SideError, TargetDiff};
    use phases::compare::{Comparison, Verdict};
    use phases::summary::RunSummary;
    use std::path::PathBuf;

    fn cmp(ratio: f64, lo: f64, hi: f64, verdict: Verdict) -> Comparison {
        Comparison {
            ratio,
            ci: phases::stats::Interval {
                lo,
                hi,
                level: 0.995,
            },
            verdict,
            threshold: 0.05,
            paired: true,
            n_a: 12,
            n_b: 12,
            method: phases::compare::Method::HodgesLehmann,
            unsettled: None,
        }
    }

    fn target(c: Option<Comparison>, imports: Option<ImportDiff>) -> TargetDiff {
        TargetDiff {
            name: "w".into(),
            status: DiffStatus::Compared,
            error: None,
            budgets: Budgets::default(),
            time: c.map(|c| TimeDiff {
                basis: phases::Measure::Cpu,
                cpu: Some(c),
                wall_ready: None,
                disagree: None,
                ready_ms_b: Some((100.0, 90.0, 110.0)),
                rss: [Rss {
                    peak_bytes: None,
                    at_ready_bytes: None,
                }; 2],
                run_dir: PathBuf::from("/tmp/x"),
                summary: {
                    let recs = crate::bench::fixture::wobbly_records();
                    let (env, config) = crate::bench::fixture::parts(&recs);
                    RunSummary::build(&recs, env, config, false, 1.0).unwrap()
                },
            }),
            imports,
            warnings: Vec::new(),
            prepared: Vec::new(),
        }
    }

    fn report(t: TargetDiff) -> DiffReport {
        DiffReport {
            base: BaseInfo {
                rev: "HEAD".into(),
                commit: "0123456789abcdef".into(),
                how: "given".into(),
                dirty: false,
            },
            targets: vec![t],
        }
    }

    #[test]
    fn package_counts_say_module_for_one_and_modules_for_more() {
        let imports = ImportDiff {
            added_packages: vec![
                PackageCount {
                    package: "torch".into(),
                    modules: 1,
                },
                PackageCount {
                    package: "numpy".into(),
                    modules: 2,
                },
            ],
            removed_packages: vec![PackageCount {
                package: "six".into(),
                modules: 1,
            }],
            ..ImportDiff::default()
        };
        let r = report(target(None, Some(imports)));
        let out = text(&r, Path::new("/p"), false);
        assert!(
            out.contains("third-party added: torch (1 module), numpy (2 modules)\n"),
            "{out}"
        );
        assert!(
            out.contains("third-party removed: six (1 module)\n"),
            "{out}"
        );
    }

    #[test]
    fn slower_fails_only_when_the_whole_interval_exceeds_the_budget() {
        let over = report(target(Some(cmp(1.12, 1.08, 1.16, Verdict::Slower)), None));
        assert_eq!(exit_code(&over, false), 1);
        let within = report(target(Some(cmp(1.06, 1.03, 1.09, Verdict::Slower)), None));
        assert_eq!(exit_code(&within, false), 0);
        let same = report(target(
            Some(cmp(1.0, 0.98, 1.02, Verdict::Equivalent)),
            None,
        ));
        assert_eq!(exit_code(&same, false), 0);
        let open = report(target(
            Some(cmp(1.03, 0.9, 1.2, Verdict::Inconclusive)),
            None,
        ));
        assert_eq!(exit_code(&open, false), 0);
        assert_eq!(exit_code(&open, true), 1);
    }

    #[test]
    fn a_new_forbidden_module_and_a_module_budget_fail() {
        let imports = ImportDiff {
            modules_b: Some(120),
            forbidden_new: vec![ForbiddenChange {
                module: "torch".into(),
                chain: vec!["w".into(), "w.model".into(), "torch".into()],
                origin: Some(CallSite {
                    file: "/p/w/__init__.py".into(),
                    line: 3,
                    func: "<module>".into(),
                }),
                cumulative_us: Some(1000),
            }],
            ..ImportDiff::default()
        };
        let mut t = target(
            Some(cmp(1.0, 0.98, 1.02, Verdict::Equivalent)),
            Some(imports),
        );
        t.budgets.max_modules = Some(100);
        let r = report(t);
        let kinds: Vec<&str> = r.targets[0]
            .problems(false)
            .iter()
            .map(|p| p.kind)
            .collect();
        assert_eq!(kinds, ["forbidden", "max_modules"]);
        assert_eq!(exit_code(&r, false), 1);
        let gh = github(&r, Path::new("/p"), false);
        assert!(gh.contains("::error file=w/__init__.py,line=3"), "{gh}");
        assert!(gh.contains("::notice"), "{gh}");
        assert!(junit(&r, false).contains("failures=\"1\""));
        let j: serde_json::Value = serde_json::from_str(&json(&r, false)).unwrap();
        assert_eq!(j["schema"], SCHEMA);
        assert_eq!(j["exit_code"], 1);
        assert_eq!(j["targets"][0]["problems"][0]["kind"], "forbidden");
    }

    #[test]
    fn annotations_without_a_line_keep_githubs_syntax() {
        // A slowdown with no new package, a module budget with no culprit
        // line, an inconclusive verdict under --strict, a side that could
        // not run: each is an `::error` with no file and line.
        let mut slow = target(Some(cmp(1.12, 1.08, 1.16, Verdict::Slower)), None);
        slow.budgets.max_modules = Some(1);
        slow.imports = Some(ImportDiff {
            modules_b: Some(120),
            ..ImportDiff::default()
        });
        let open = target(Some(cmp(1.03, 0.9, 1.2, Verdict::Inconclusive)), None);
        let mut broken = target(None, None);
        broken.status = DiffStatus::Error;
        broken.error = Some(SideError {
            side: "B",
            message: "no ready line".into(),
        });
        let mut r = report(slow);
        r.targets.push(open);
        r.targets.push(broken);
        let gh = github(&r, Path::new("/p"), true);
        let errors = gh.lines().filter(|l| l.starts_with("::error")).count();
        assert_eq!(errors, 4, "{gh}");
        for line in gh.lines() {
            assert!(
                ["::error title=", "::warning title=", "::notice title="]
                    .iter()
                    .any(|k| line.starts_with(k)),
                "a property list opens with a space: {line}"
            );
        }
    }

    #[test]
    fn an_absolute_budget_is_judged_on_the_lower_bound() {
        let mut t = target(Some(cmp(1.0, 0.98, 1.02, Verdict::Equivalent)), None);
        t.budgets.max_ready_ms = Some(95.0);
        assert!(
            t.problems(false).is_empty(),
            "lower bound 90 ms is under 95"
        );
        t.budgets.max_ready_ms = Some(85.0);
        assert_eq!(t.problems(false)[0].kind, "max_ready_ms");
    }

    #[test]
    fn a_side_that_could_not_run_exits_2_and_says_which() {
        let mut t = target(None, None);
        t.status = DiffStatus::Error;
        t.error = Some(SideError {
            side: "A",
            message: "no ready line".into(),
        });
        let r = report(t);
        assert_eq!(exit_code(&r, false), 2);
        assert!(text(&r, Path::new("/"), false).contains("the base (A) could not be run"));
        assert!(markdown(&r, Path::new("/"), false).contains("could not compare"));
    }
}
