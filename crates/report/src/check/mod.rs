//! The import-boundary check's report for people: the text of a check
//! ([`render`]), the whole importtime tree as text ([`tree_text`]), what
//! the check costs ([`render_cost`]) and the CI formats ([`ci`]).
//!
//! The data it renders (`TargetReport`, `Status`, the JSON schema and the
//! exit code's rule) is `answers::check`'s; the harness fills it in. Paths
//! are shown relative to the folder given to the renderer.

pub mod ci;

use std::collections::BTreeMap;
use std::path::Path;

use answers::check::{
    CheckCost, RECORDER_BUDGET, Status, TargetReport, budget_verdict, cost_floor,
    recorder_above_floor, recorder_cost, recorder_floor,
};
use importguard::importtime::ImportLog;

use crate::plural;
use importguard::verdict::{MergedViolation, Violation};

// The unit tests below build reports and hold the renderers to the model's rules.
#[cfg(test)]
use answers::check::exit_code;

/// The whole importtime tree of a log, as text.
pub fn tree_text(log: &ImportLog) -> String {
    let mut out = Vec::new();
    let view = crate::importtime::View::new(log, None, None);
    // Writing to a Vec cannot fail.
    let _ = crate::importtime::tree_text(log, &view, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn ms(us: i64) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

/// A path relative to the current directory when it is below it.
/// ` (as the parent package of NAME)` when the chain's `i`-th module was
/// imported as a parent package of the name its importer asked for.
pub(crate) fn as_parent(v: &Violation, i: usize) -> String {
    v.chain_parent_of
        .get(i)
        .and_then(Option::as_ref)
        .map_or_else(String::new, |r| format!(" (as the parent package of {r})"))
}

fn show_path(file: &str, cwd: &Path) -> String {
    ci::relative(file, cwd)
}

/// How many of the worker's packages the start-up by package lists.
const PACKAGES: usize = 8;

/// The readable report of one target, paths shown relative to `cwd`.
pub fn render(r: &TargetReport, cwd: &Path, out: &mut String) {
    use std::fmt::Write;
    headline(r, out);
    answered(r, out);
    process_errors(r, out);
    for v in &r.violations {
        violation(v, cwd, out);
    }
    notes(r, cwd, out);
    packages(r, out);
    slowest(r, out);
    import_tree(r, out);
    let _ = writeln!(out);
}

/// The verdict line and the forbidden modules.
fn headline(r: &TargetReport, out: &mut String) {
    use std::fmt::Write;
    let verdict = match r.status {
        Status::Pass => "PASS",
        Status::Fail => "FAIL",
        Status::Error => "ERROR",
    };
    let ready = r
        .ready_ms_median
        .map_or_else(String::new, |m| format!(", ready in {m:.1} ms (median)"));
    let ready = match &r.limits {
        Some(l) => format!("{ready}, under {l}"),
        None => ready,
    };
    let what = if r.log.is_some() {
        "recorded log".to_owned()
    } else {
        format!(
            "{} process{}",
            r.processes.len(),
            plural(r.processes.len(), "es")
        )
    };
    let nviol = if r.violations.is_empty() {
        String::new()
    } else {
        format!(
            ", {} violation{}",
            r.violations.len(),
            plural(r.violations.len(), "s")
        )
    };
    let _ = writeln!(
        out,
        "{verdict}  {} ({}): {what}{ready}{nviol}",
        r.name, r.origin
    );
    let _ = writeln!(out, "      forbidden: {}", r.forbidden.join(", "));
}

/// Each process whose answer came from below a launcher: which one
/// answered and what stood between.
fn answered(r: &TargetReport, out: &mut String) {
    use std::fmt::Write;
    for p in &r.processes {
        if let Some(a) = &p.verdict.answered {
            let _ = writeln!(out, "      process {}: {a}", p.index);
        }
    }
}

/// Each process that could not be checked, with its error.
fn process_errors(r: &TargetReport, out: &mut String) {
    use std::fmt::Write;
    for p in &r.processes {
        if let Some(err) = &p.error {
            let pid = p.pid.map_or_else(String::new, |p| format!(" (pid {p})"));
            let _ = writeln!(out, "\n  process {}{pid} could not be checked:", p.index);
            for line in err.lines() {
                let _ = writeln!(out, "    {line}");
            }
        }
    }
}

/// One violation: the module, its chain, where it came from, when and
/// how it was seen, and what it cost.
fn violation(v: &MergedViolation, cwd: &Path, out: &mut String) {
    use std::fmt::Write;
    let x = &v.first;
    let detail = x
        .detail
        .as_ref()
        .map_or_else(String::new, |d| format!(" ({d})"));
    let _ = writeln!(
        out,
        "\n  {} {}{detail}, in {}/{} process{}",
        x.module,
        x.status,
        v.processes,
        v.of,
        plural(v.of, "es")
    );
    chain(x, cwd, out);
    origin(x, cwd, out);
    circumstances(x, cwd, out);
    cost(v, out);
}

/// The chain of a violation, then the line behind each link, where the
/// recorder saw it (not the interpreter's own frozen code, such as runpy
/// for `-m`).
fn chain(x: &Violation, cwd: &Path, out: &mut String) {
    use std::fmt::Write;
    let _ = writeln!(out, "    chain: {}", x.chain.join(" -> "));
    let width = x.chain.iter().map(String::len).max().unwrap_or(0);
    for (i, (m, f)) in x.chain.iter().zip(&x.chain_lines).enumerate() {
        if let Some(f) = f
            .as_ref()
            .filter(|f| !f.file.starts_with('<') || f.file == "<string>")
        {
            let _ = writeln!(
                out,
                "      {m:width$}  imported at {}:{}{}",
                show_path(&f.file, cwd),
                f.line,
                as_parent(x, i)
            );
        }
    }
}

/// The line a violation came from, and the importer that asked for it
/// when that is another line.
fn origin(x: &Violation, cwd: &Path, out: &mut String) {
    use std::fmt::Write;
    match &x.origin {
        Some(o) => {
            let _ = writeln!(
                out,
                "    from:  {}:{} (in {})",
                show_path(&o.file, cwd),
                o.line,
                o.func
            );
        }
        None => {
            let _ = writeln!(out, "    from:  unknown (no recorder evidence)");
        }
    }
    if let Some(i) = x
        .importer
        .as_ref()
        .filter(|i| Some(*i) != x.origin.as_ref())
    {
        let _ = writeln!(out, "    asked by: {}:{}", show_path(&i.file, cwd), i.line);
    }
}

/// When and where a violation happened: its phase, the process when not
/// the worker, the audit hook when only it saw it, and a lazy module's
/// two lines.
fn circumstances(x: &Violation, cwd: &Path, out: &mut String) {
    use std::fmt::Write;
    let phase = x
        .stage
        .as_ref()
        .map_or_else(|| "unknown".to_owned(), ToString::to_string);
    let _ = writeln!(out, "    phase: {phase}");
    if let Some(proc_) = x.process.as_ref().filter(|p| !p.is_worker()) {
        // The line that started it, shown like every other line here.
        let mut shown = proc_.clone();
        if let Some(at) = shown.started_at.as_mut() {
            at.file = show_path(&at.file, cwd);
        }
        let _ = writeln!(out, "    process: {shown}");
    }
    if x.channel == Some(importguard::recorder::Channel::Audit) {
        // A lazily loaded module's body runs on first use, not through
        // an import: only the hook's `exec` event sees it.
        let why = if x.lazy.is_some() {
            "its body ran on first use, through a lazy loader, not through an import"
        } else {
            "the import bypassed the finder on sys.meta_path"
        };
        let _ = writeln!(out, "    seen by: the audit hook only ({why})");
    }
    if let Some(l) = &x.lazy {
        let at = |f: &Option<importguard::recorder::CallSite>| {
            f.as_ref().map_or_else(
                || "unknown".to_owned(),
                |f| format!("{}:{}", show_path(&f.file, cwd), f.line),
            )
        };
        let _ = writeln!(
            out,
            "    lazy:  declared at {}, made real at {}",
            at(&l.declared),
            at(&l.made_real_at)
        );
    }
}

/// What a violation cost, and the first modules it brought in beneath it.
fn cost(v: &MergedViolation, out: &mut String) {
    use std::fmt::Write;
    let x = &v.first;
    let cost = v.median_cumulative_us.or(x.cumulative_us).map_or_else(
        || "unknown (no importtime line)".to_owned(),
        |c| format!("{} cumulative", ms(c)),
    );
    let _ = writeln!(out, "    cost:  {cost}");
    if !x.beneath.is_empty() {
        let shown: Vec<&str> = x.beneath.iter().take(5).map(String::as_str).collect();
        let more = x.beneath.len().saturating_sub(shown.len());
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        let _ = writeln!(out, "    then:  {}{more}", shown.join(", "));
    }
}

/// What every process says beyond violations, deduplicated and sorted.
fn notes(r: &TargetReport, cwd: &Path, out: &mut String) {
    use std::fmt::Write;
    let mut extra: BTreeMap<String, ()> = BTreeMap::new();
    for p in &r.processes {
        for n in &p.verdict.notes {
            extra.insert(format!("note: {n}"), ());
        }
        for a in &p.verdict.allowed {
            extra.insert(format!("allowed: {} ({})", a.module, a.reason), ());
        }
        for l in &p.verdict.lazy {
            extra.insert(format!("lazy, never executed: {l}"), ());
        }
        for l in &p.verdict.probed {
            extra.insert(format!("probed for, not imported: {l}"), ());
        }
        if p.child_interpreters > 0 {
            extra.insert(
                format!(
                    "note: {} child interpreter(s) (fork, subprocess, multiprocessing, exec) ran the recorder too; their imports are judged like the worker's",
                    p.child_interpreters
                ),
                (),
            );
        }
        if let Some(c) = &p.chained_sitecustomize {
            extra.insert(
                format!(
                    "ran the environment's sitecustomize after the recorder: {}",
                    show_path(c, cwd)
                ),
                (),
            );
        }
    }
    if !extra.is_empty() {
        let _ = writeln!(out);
        for e in extra.keys() {
            let _ = writeln!(out, "  {e}");
        }
    }
}

/// The start-up by package, then the recorder's own bootstrap apart.
fn packages(r: &TargetReport, out: &mut String) {
    use std::fmt::Write;
    if r.packages.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n  start-up by package (self time summed over its modules):"
    );
    // Under the recorder, `sitecustomize` is its bootstrap (and the
    // environment's own sitecustomize it runs): the instrument's cost,
    // not the worker's start-up, shown apart after the worker's own.
    let recorded = r
        .processes
        .iter()
        .any(|p| p.recorder == importguard::verdict::RecorderState::Ran);
    let instrument =
        |p: &&importguard::importtime::PackageTotal| recorded && p.package == "sitecustomize";
    for p in r.packages.iter().filter(|p| !instrument(p)).take(PACKAGES) {
        let _ = writeln!(
            out,
            "    {:>10}  {} ({} module{})",
            ms(p.self_us),
            p.package,
            p.modules,
            plural(p.modules as usize, "s")
        );
    }
    if let Some(p) = r.instrument.as_ref().filter(|_| recorded) {
        let _ = writeln!(
            out,
            "\n  the recorder's own bootstrap (sitecustomize): {}, the instrument's cost, not the worker's",
            ms(p.self_us)
        );
    }
}

/// The slowest first-party modules, and the slowest imports when the
/// report has its tree.
fn slowest(r: &TargetReport, out: &mut String) {
    use std::fmt::Write;
    if !r.first_party.is_empty() {
        let _ = writeln!(out, "\n  slowest first-party modules (self time):");
        for s in &r.first_party {
            let _ = writeln!(out, "    {:>10}  {}", ms(s.self_us), s.module);
        }
    }
    if r.tree.is_some() && !r.slowest.is_empty() {
        let _ = writeln!(out, "\n  slowest imports (cumulative):");
        for s in &r.slowest {
            let _ = writeln!(
                out,
                "    {:>10}  {}",
                ms(s.cumulative_us),
                s.chain.join(" -> ")
            );
        }
    }
}

/// The import tree, when the report has it.
fn import_tree(r: &TargetReport, out: &mut String) {
    use std::fmt::Write;
    if let Some(tree) = &r.tree {
        let _ = writeln!(out, "\n  import tree:");
        for line in tree.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
}

/// `ratio R (95% CI LO .. HI), cost +P%`: one paired ready-time figure of
/// `check-cost`.
fn ratio_and_cost(r: &phases::compare::Comparison) -> String {
    format!(
        "ratio {:.3} (95% CI {:.3} .. {:.3}), cost {:+.1}%",
        r.ratio,
        r.ci.lo,
        r.ci.hi,
        (r.ratio - 1.0) * 100.0
    )
}

/// The cost of the check as text: medians, ranges and ratios.
pub fn render_cost(c: &CheckCost, out: &mut String) {
    use std::fmt::Write;
    let range = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (phases::stats::median(v).unwrap_or(f64::NAN), lo, hi)
    };
    let (cm, clo, chi) = range(&c.check_ms);
    let (pm, plo, phi) = range(&c.plain_ms);
    let (im, ilo, ihi) = range(&c.instrumented_ms);
    let _ = writeln!(
        out,
        "check benchmark: target {} ({}), {} rounds interleaved after 1 warm-up, {} processes per check, {} health round trip(s)",
        c.target, c.command, c.rounds, c.processes, c.health
    );
    let _ = writeln!(
        out,
        "  whole check ({} concurrent instrumented workers, verdicts): median {cm:7.1} ms  (min {clo:.1}, max {chi:.1})",
        c.processes
    );
    let _ = writeln!(
        out,
        "  one plain lifecycle (spawn, ready, health, shutdown):        median {pm:7.1} ms  (min {plo:.1}, max {phi:.1})"
    );
    let _ = writeln!(
        out,
        "  one instrumented lifecycle (importtime, recorder, verdict):  median {im:7.1} ms  (min {ilo:.1}, max {ihi:.1})"
    );
    let _ = writeln!(
        out,
        "  ratio check / plain lifecycle: {:.2}x; instrumented / plain: {:.2}x",
        cm / pm,
        im / pm
    );
    if let Some(r) = recorder_cost(c) {
        let ready = |v: &[f64]| phases::stats::median(v).unwrap_or(f64::NAN);
        let _ = writeln!(
            out,
            "  the recorder and its audit hook alone (no importtime): ready median {:.2} ms against plain {:.2} ms; {}: {} the {:.0}% budget",
            ready(&c.recorded_ready_ms),
            ready(&c.plain_ready_ms),
            ratio_and_cost(&r),
            budget_verdict(&r),
            RECORDER_BUDGET * 100.0
        );
        if let (Some(f), Some(above)) = (recorder_floor(c), recorder_above_floor(c)) {
            let _ = writeln!(
                out,
                "  its floor, the null recorder (the same two channels, no work behind them): ready median {:.2} ms; {}",
                ready(&c.null_ready_ms),
                ratio_and_cost(&f),
            );
            let _ = writeln!(
                out,
                "  the recorder's own work, over that floor: {}",
                ratio_and_cost(&above),
            );
        }
        if let Some(shim) = &c.shim {
            let _ = writeln!(
                out,
                "  note: {shim}; both series pay for it, which makes every ratio here smaller than the worker's own"
            );
        }
    }
    let cpu = phases::stats::median(&c.plain_cpu_ms).unwrap_or(f64::NAN);
    let floor = cost_floor(pm, cpu, c.processes, c.cores);
    let _ = writeln!(
        out,
        "  CPU floor: max(one lifecycle {pm:.1} ms, {} x {cpu:.1} ms CPU / {} cores) = {floor:.1} ms; check / floor: {:.2}x",
        c.processes,
        c.cores,
        cm / floor
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use importguard::verdict;

    #[test]
    fn the_recorders_cost_is_judged_against_its_budget_by_its_whole_interval() {
        let cost = |plain: &[f64], recorded: &[f64]| CheckCost {
            target: "t".into(),
            command: "python3 w.py".into(),
            rounds: plain.len(),
            processes: 3,
            health: 1,
            check_ms: vec![100.0; plain.len()],
            plain_ms: vec![50.0; plain.len()],
            plain_cpu_ms: vec![40.0; plain.len()],
            cores: 2,
            instrumented_ms: vec![60.0; plain.len()],
            plain_ready_ms: plain.to_vec(),
            recorded_ready_ms: recorded.to_vec(),
            null_ready_ms: Vec::new(),
            shim: None,
        };
        let plain: Vec<f64> = (0..20).map(|i| 30.0 + f64::from(i % 5) * 0.1).collect();
        let near = |k: f64| -> Vec<f64> {
            plain
                .iter()
                .enumerate()
                .map(|(i, p)| p * (k + if i % 2 == 0 { 0.002 } else { -0.002 }))
                .collect()
        };
        let within = recorder_cost(&cost(&plain, &near(1.03))).unwrap();
        assert!((within.ratio - 1.03).abs() < 0.003, "{within:?}");
        assert_eq!(budget_verdict(&within), "within");
        let over = recorder_cost(&cost(&plain, &near(1.08))).unwrap();
        assert_eq!(budget_verdict(&over), "over");
        let wide: Vec<f64> = plain
            .iter()
            .enumerate()
            .map(|(i, p)| p * if i % 2 == 0 { 1.10 } else { 1.0 })
            .collect();
        assert_eq!(
            budget_verdict(&recorder_cost(&cost(&plain, &wide)).unwrap()),
            "not settled against"
        );
        assert!(recorder_cost(&cost(&plain[..1], &plain[..1])).is_none());
        let mut text = String::new();
        render_cost(&cost(&plain, &near(1.03)), &mut text);
        assert!(text.contains("cost +3.0%: within the 5% budget"), "{text}");
        assert!(!text.contains("null recorder"), "no floor measured: {text}");
        // With the null recorder's series: its ratio over plain, and the
        // recorder's over it, each paired by round.
        let mut with_floor = cost(&plain, &near(1.03));
        with_floor.null_ready_ms = near(1.01);
        let floor = recorder_floor(&with_floor).unwrap();
        assert!((floor.ratio - 1.01).abs() < 0.003, "{floor:?}");
        let above = recorder_above_floor(&with_floor).unwrap();
        assert!((above.ratio - 1.03 / 1.01).abs() < 0.003, "{above:?}");
        let mut text = String::new();
        render_cost(&with_floor, &mut text);
        assert!(
            text.contains("its floor, the null recorder") && text.contains("cost +1.0%"),
            "{text}"
        );
        assert!(
            text.contains("the recorder's own work, over that floor: ratio 1.020"),
            "{text}"
        );
    }

    #[test]
    fn the_floor_is_one_lifecycle_or_the_cpu_work_spread_over_the_cores() {
        assert_eq!(cost_floor(100.0, 80.0, 3, 2), 120.0);
        assert_eq!(cost_floor(100.0, 40.0, 3, 2), 100.0);
        assert_eq!(cost_floor(100.0, 80.0, 3, 0), 240.0);
    }

    /// A report of target `app` (`python3`, torch forbidden) with `status`
    /// and nothing else; each test sets what it renders.
    fn target(status: Status) -> TargetReport {
        TargetReport {
            name: "app".into(),
            origin: "command line".to_owned(),
            command: vec!["python3".into()],
            log: None,
            forbidden: vec!["torch".into()],
            allowed: vec![],
            block: false,
            status,
            ready_ms_median: None,
            violations: vec![],
            packages: vec![],
            instrument: None,
            first_party: vec![],
            slowest: vec![],
            processes: vec![],
            limits: None,
            tree: None,
            suggestions: Vec::new(),
        }
    }

    #[test]
    fn a_target_under_limits_says_so_in_its_headline() {
        let mut r = target(Status::Pass);
        r.ready_ms_median = Some(12.34);
        r.limits = Some(timeline::Limits {
            cpus: Some(1.0),
            memory_bytes: Some(1 << 30),
        });
        let mut text = String::new();
        render(&r, Path::new("/src"), &mut text);
        assert!(
            text.starts_with("PASS  app (command line): 0 processes, ready in 12.3 ms (median), under cpus 1, memory 1 GiB\n"),
            "{text}"
        );
    }

    #[test]
    fn a_worker_that_could_not_be_checked_wins_over_a_violation() {
        assert_eq!(exit_code(&[target(Status::Pass)]), 0);
        assert_eq!(exit_code(&[target(Status::Pass), target(Status::Fail)]), 1);
        assert_eq!(exit_code(&[target(Status::Fail), target(Status::Error)]), 2);
    }

    /// Under the recorder, the `sitecustomize` row of the package list is
    /// the recorder's own bootstrap and is said to be; a worker judged
    /// without it (`--log`) keeps the plain row.
    #[test]
    fn the_recorders_sitecustomize_is_named_as_such_in_the_package_list() {
        let process = |recorder| answers::check::ProcessReport {
            index: 1,
            pid: Some(7),
            ready_ms: Some(40.0),
            exit: None,
            error: None,
            failed_at_end: false,
            stderr_tail: None,
            recorder,
            chained_sitecustomize: None,
            child_interpreters: 0,
            importtime_entries: 2,
            verdict: verdict::ProcessVerdict {
                violations: vec![],
                allowed: vec![],
                lazy: vec![],
                probed: vec![],
                recorder,
                importtime: true,
                notes: vec![],
                processes: vec![],
                answered: None,
                missing: None,
            },
            log: None,
        };
        let package = |name: &str, self_us| importguard::importtime::PackageTotal {
            package: name.into(),
            modules: 1,
            self_us,
            cumulative_us: self_us,
        };
        let report = |recorder| TargetReport {
            ready_ms_median: Some(40.0),
            packages: vec![package("encodings", 2100), package("sitecustomize", 3400)],
            instrument: Some(package("sitecustomize", 3400)),
            processes: vec![process(recorder)],
            limits: None,
            ..target(Status::Pass)
        };
        let text = |recorder| {
            let mut out = String::new();
            render(&report(recorder), Path::new("/src"), &mut out);
            out
        };
        let recorded = text(verdict::RecorderState::Ran);
        assert!(!recorded.contains("ms  sitecustomize"), "{recorded}");
        assert!(
            recorded.contains(
                "\n  the recorder's own bootstrap (sitecustomize): 3.4 ms, the instrument's cost, not the worker's\n"
            ),
            "{recorded}"
        );
        assert!(
            recorded.contains("2.1 ms  encodings (1 module)\n"),
            "{recorded}"
        );
        let plain = text(verdict::RecorderState::NotUsed);
        assert!(
            plain.contains("3.4 ms  sitecustomize (1 module)\n"),
            "{plain}"
        );
    }

    #[test]
    fn the_readable_report_prints_the_chain_with_arrows_and_paths_from_here() {
        let at = |file: &str, line| importguard::recorder::CallSite {
            file: file.into(),
            line,
            func: "<module>".into(),
        };
        let v = verdict::Violation {
            origin: Some(at("/src/app/model.py", 3)),
            stage: Some(timeline::Stage::Request {
                op: "health".into(),
                index: 1,
            }),
            t_ns: Some(5),
            cumulative_us: Some(1500),
            beneath: vec!["torch._C".into()],
            recorded: true,
            ..verdict::Violation::loaded(
                "torch",
                "torch",
                vec!["app".into(), "app.model".into(), "torch".into()],
                vec![
                    None,
                    Some(at("/src/app/__init__.py", 1)),
                    Some(at("/src/app/model.py", 3)),
                ],
            )
        };
        let mut r = TargetReport {
            ready_ms_median: Some(12.34),
            violations: verdict::merge(&[]),
            ..target(Status::Fail)
        };
        r.violations.push(MergedViolation {
            first: v,
            processes: 2,
            of: 3,
            median_cumulative_us: Some(1500),
        });
        let mut out = String::new();
        render(&r, Path::new("/src"), &mut out);
        assert_eq!(
            out,
            "FAIL  app (command line): 0 processes, ready in 12.3 ms (median), 1 violation\n      \
             forbidden: torch\n\n  torch loaded, in 2/3 processes\n    chain: app -> app.model -> torch\n      \
             app.model  imported at app/__init__.py:1\n      torch      imported at app/model.py:3\n    \
             from:  app/model.py:3 (in <module>)\n    phase: health request #1\n    cost:  1.5 ms cumulative\n    \
             then:  torch._C\n\n"
        );
    }
}
