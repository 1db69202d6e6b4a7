//! `summary.md`: the run for people who read it in a pull request.

use phases::phase::PhaseSummary;
use phases::run::{MachineLoad, TargetInfo};
use phases::summary::RunSummary;

use phases::compare::Comparison;

use super::terminal::{ratio_rows, stats_rows};
use super::{answer_lines, fmt_level, fmt_mib, fmt_ms, fmt_pct, placement_line};

fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let esc = |c: &String| c.replace('|', "\\|");
    let mut out = format!(
        "| {} |\n",
        header.iter().map(esc).collect::<Vec<_>>().join(" | ")
    );
    out.push_str(&format!(
        "|{}\n",
        header
            .iter()
            .enumerate()
            .map(|(i, _)| if i == 0 { " --- |" } else { " ---: |" })
            .collect::<String>()
    ));
    for r in rows {
        out.push_str(&format!(
            "| {} |\n",
            r.iter().map(esc).collect::<Vec<_>>().join(" | ")
        ));
    }
    out
}

fn load(l: &MachineLoad) -> String {
    let avg = l.loadavg.map_or("n/a".to_owned(), |a| {
        format!("{:.2} {:.2} {:.2}", a[0], a[1], a[2])
    });
    let psi = l.pressure.map_or("n/a".to_owned(), |p| {
        format!("some avg10 {:.2}% avg60 {:.2}%", p.some_avg10, p.some_avg60)
    });
    format!("load {avg}; cpu pressure {psi}")
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or("n/a".to_owned(), |v| v.to_string())
}

/// The phase tables of a run or a comparison (statistics, then ratios,
/// with CPU time's when given, the header at `level` when given).
pub fn phase_tables(
    phases: &[PhaseSummary],
    cpu: Option<&Comparison>,
    level: Option<f64>,
) -> String {
    let (h, rows) = stats_rows(phases, ["A", "B"]);
    let mut out = table(&h, &rows);
    let (h, rows) = ratio_rows(phases, cpu, level);
    if !rows.is_empty() {
        out.push('\n');
        out.push_str(&table(&h, &rows));
    }
    out
}

/// `summary.md`: the run, then its serve phase and memory view sections
/// when it has them.
pub fn render(s: &RunSummary) -> String {
    let mut o = String::new();
    run_heading(s, &mut o);
    phases_section(s, &mut o);
    resources_section(s, &mut o);
    failures_section(s, &mut o);
    probes_section(s, &mut o);
    warnings_section(s, &mut o);
    environment_section(s, &mut o);
    o.push_str(&serve_sections(s));
    o
}

/// The title, what the run did, and each target's command.
fn run_heading(s: &RunSummary, o: &mut String) {
    let env = &s.environment;
    let cfg = &s.configuration;
    let t = &s.trials;
    let names: Vec<&str> = env.targets.iter().map(|t| t.name.as_str()).collect();
    o.push_str(&format!("# coldstart bench: {}\n\n", names.join(" vs ")));
    o.push_str(&format!(
        "Started {} and ran {:.1} s: {} trials ({} warm-up, {} measured), {} failed ({}){}. \
         {} health round trip(s) per worker, {} worker(s) at once{}.\n\n",
        env.started_at,
        env.duration_s,
        t.run,
        t.warmup,
        t.measured,
        t.failed,
        fmt_pct(t.failure_rate),
        if t.interrupted {
            ", interrupted by Ctrl-C"
        } else {
            ""
        },
        cfg.health,
        cfg.concurrency,
        if cfg.interleaved {
            ", A and B interleaved"
        } else {
            ""
        },
    ));
    for target in &env.targets {
        o.push_str(&format!(
            "- {} `{}`: `{}`",
            target.variant, target.name, target.display
        ));
        if !target.env.is_empty() {
            let kv: Vec<String> = target.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            o.push_str(&format!(" with `{}`", kv.join(" ")));
        }
        o.push('\n');
    }
}

/// `## Phases`: the phase tables, then how to read the ratios and the
/// answers of an A/B run.
fn phases_section(s: &RunSummary, o: &mut String) {
    let cfg = &s.configuration;
    o.push_str("\n## Phases\n\n");
    o.push_str(
        "Statistics over the measured, correct trials (warm-ups and failed trials are kept in \
         `trials.jsonl`, not here). Outliers are labelled by trial number, never removed.\n\n",
    );
    let ab = s.ab.as_ref();
    o.push_str(&phase_tables(
        &s.phases,
        ab.and_then(|a| a.cpu.as_ref()),
        ab.map(|a| a.level),
    ));
    if let Some(ab) = ab {
        o.push_str(&format!(
            "\nRatios B/A pair each round's A with its B: the {}, {}. A verdict: \
             `slower` or `faster` when the whole interval lies outside 1 +- {}, \
             `equivalent` when it lies inside, `inconclusive` otherwise (with the smallest \
             change the run could have detected).\n\n",
            ab.method.words(),
            fmt_level(ab.level),
            fmt_pct(cfg.noise_threshold)
        ));
        for line in answer_lines(s) {
            o.push_str(&format!("- {line}\n"));
        }
    } else if s.phases.iter().any(|p| p.ratio.is_some()) {
        o.push_str(&format!(
            "\nRatios are B/A over rounds paired A with B; a verdict needs the whole interval \
             outside 1 +- {}.\n",
            fmt_pct(cfg.noise_threshold)
        ));
    }
}

/// `## Resources`: each variant's medians per trial, and the harness's
/// overhead.
fn resources_section(s: &RunSummary, o: &mut String) {
    o.push_str("\n## Resources (medians per trial)\n\n");
    let charged = s.resources.iter().any(|r| r.cgroup_peak_bytes.is_some());
    let mut header = [
        "variant",
        "trials",
        "user CPU",
        "system CPU",
        "peak RSS",
        "RSS at ready",
    ]
    .map(String::from)
    .to_vec();
    if charged {
        header.push("cgroup peak (what the memory limit holds)".into());
    }
    let rows: Vec<Vec<String>> = s
        .resources
        .iter()
        .map(|r| {
            let mut row = vec![
                r.variant.to_string(),
                r.trials.to_string(),
                r.user_ms.map_or("-".into(), fmt_ms),
                r.sys_ms.map_or("-".into(), fmt_ms),
                r.max_rss_bytes.map_or("-".into(), fmt_mib),
                r.rss_at_ready_bytes.map_or("-".into(), fmt_mib),
            ];
            if charged {
                row.push(r.cgroup_peak_bytes.map_or("-".into(), fmt_mib));
            }
            row
        })
        .collect();
    o.push_str(&table(&header, &rows));
    if let Some(r) = s.overhead.ratio {
        o.push_str(&format!(
            "\nHarness overhead: the trial loop took {:.3} s of wall time for {:.3} s of worker \
             lifecycles ({r:.3}x).\n",
            s.overhead.loop_wall_s, s.overhead.lifecycles_s
        ));
    }
}

/// `## Probe settings`: the startup probe (and request timeout) the
/// distributions give, and the probe as a pod spec writes it.
fn probes_section(s: &RunSummary, o: &mut String) {
    let lines = super::probe_lines(s);
    let Some(p) = &s.probes else {
        return;
    };
    o.push_str("\n## Probe settings\n\n");
    for line in &lines {
        o.push_str(&format!("- {line}\n"));
    }
    for sp in &p.startup {
        o.push_str(&format!(
            "\n```yaml\n# {}: start-up under {}\nstartupProbe:\n  periodSeconds: {}\n  failureThreshold: {}\n```\n",
            sp.variant,
            s.environment
                .target(sp.variant)
                .and_then(|t| t.limits.as_ref())
                .map_or("no limits".to_owned(), |l| l.limits.to_string()),
            sp.period_seconds,
            sp.failure_threshold
        ));
    }
}

/// `## Failures`, by stage, when trials failed.
fn failures_section(s: &RunSummary, o: &mut String) {
    let t = &s.trials;
    if t.failed > 0 {
        o.push_str("\n## Failures\n\n");
        for (stage, n) in &t.failed_by_stage {
            o.push_str(&format!("- {n} at `{stage}`\n"));
        }
        o.push_str("\nEach failed trial's message is in `trials.jsonl` (`outcome.message`).\n");
    }
}

/// `## Warnings`, or that there are none.
fn warnings_section(s: &RunSummary, o: &mut String) {
    o.push_str("\n## Warnings\n\n");
    if s.warnings.is_empty() {
        o.push_str("None.\n");
    }
    for w in &s.warnings {
        o.push_str(&format!("- {w}\n"));
    }
}

/// `## Environment`: the tool, the machine and its load, each target's
/// interpreter, and the bootstrap's settings.
fn environment_section(s: &RunSummary, o: &mut String) {
    let env = &s.environment;
    let cfg = &s.configuration;
    o.push_str("\n## Environment\n\n");
    let tool = &env.tool;
    o.push_str(&format!(
        "- {} {} at git {}{}\n",
        tool.name,
        tool.version,
        opt(&tool.git_revision),
        if tool.git_dirty == Some(true) {
            " (uncommitted changes)"
        } else {
            ""
        }
    ));
    o.push_str(&format!(
        "- CPU: {} x {}; kernel {}\n",
        env.cpu_count,
        opt(&env.cpu_model),
        opt(&env.kernel)
    ));
    o.push_str(&format!("- at start: {}\n", load(&env.at_start)));
    o.push_str(&format!("- at end: {}\n", load(&env.at_end)));
    if let Some(p) = &s.placement {
        o.push_str(&format!("- placement: {}\n", placement_line(p)));
    }
    for line in super::measured_lines(s) {
        o.push_str(&format!("- measured: {line}\n"));
    }

    if let Some(f) = env.cpu_stall_fraction() {
        o.push_str(&format!("- CPU stalls during the run: {}\n", fmt_pct(f)));
    }
    for target in &env.targets {
        target_environment(target, o);
    }
    o.push_str(&format!(
        "- bootstrap: {} resamples, seed {}, {:.0}% percentile intervals\n",
        cfg.bootstrap.resamples,
        cfg.bootstrap.seed,
        cfg.bootstrap.level * 100.0
    ));
}

/// A target's interpreter, and what was removed from its environment.
fn target_environment(target: &TargetInfo, o: &mut String) {
    if let Some(py) = &target.python {
        o.push_str(&format!(
            "- Python ({}): `{}` -> {} ({} {}{}){}\n",
            target.variant,
            py.requested,
            opt(&py.executable),
            opt(&py.implementation),
            opt(&py.version),
            match py.free_threaded {
                Some(true) => ", free-threaded",
                Some(false) => ", with GIL",
                None => "",
            },
            if py.shim {
                format!(
                    "; **`{}` is a shim** ({})",
                    py.requested,
                    py.note.as_deref().unwrap_or("not the interpreter")
                )
            } else {
                String::new()
            }
        ));
    }
    if !target.env_removed.is_empty() {
        o.push_str(&format!(
            "- removed from the environment ({}): {}\n",
            target.variant,
            target.env_removed.join(", ")
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::fixture;

    #[test]
    fn summary_md_has_every_section() {
        let recs = fixture::records(true);
        let s = fixture::summary(&recs);
        let md = render(&s);
        for part in [
            "# coldstart bench: slowworker vs fastworker",
            "## Phases",
            "| ready (A) | 6 |",
            "| ready | 0.500 [",
            "faster",
            "## Resources",
            "## Failures",
            "- 1 at `health request`",
            "## Warnings",
            "**`python3` is a shim**",
            "PYTHONPROFILEIMPORTTIME",
            "git 0123456789abcdef",
        ] {
            assert!(md.contains(part), "{part:?} missing in\n{md}");
        }
    }
}

/// The serve phase, pool and memory view sections of a run (also printed after
/// the terminal table), and what could not be run; empty when the run has
/// none.
pub fn serve_sections(s: &RunSummary) -> String {
    let mut md = super::serve::markdown(&s.serve, &s.memory);
    md.push_str(&super::pool::markdown(&s.pool));
    if !s.serve_failures.is_empty() {
        md.push_str("## Serve phase and memory view failures\n\n");
        for f in &s.serve_failures {
            md.push_str(&format!("- {f}\n"));
        }
        md.push('\n');
    }
    md
}

#[cfg(test)]
mod snapshots {
    use crate::bench::fixture;

    /// The whole `summary.md` and terminal table of a small fixed run
    /// (seeded bootstrap: the intervals are reproducible).
    #[test]
    fn summary_md_and_table_of_a_fixed_run() {
        let recs = fixture::records(true);
        let s = fixture::summary(&recs);
        insta::assert_snapshot!("summary_md", super::render(&s));
        insta::assert_snapshot!("terminal", crate::bench::terminal::render(&s));
    }

    /// The ratio section of a run that followed the default stopping rule
    /// and ran out of time undecided, pinned to one CPU.
    #[test]
    fn ratios_of_a_sequential_run_that_ran_out_of_time() {
        use phases::sequential::{StopReason, StopRule, Stopped};
        let recs = fixture::wobbly_records();
        let (env, config) = fixture::parts(&recs);
        let stopped = Stopped {
            reason: StopReason::TimeBudget,
            rounds: 12,
            elapsed_s: 60.2,
        };
        let mut s = phases::summary::RunSummary::build_sequential(
            &recs,
            env,
            config,
            false,
            60.0,
            &StopRule::default(),
            stopped,
        )
        .unwrap();
        s.placement = Some(timeline::Placement {
            available: vec![0, 1],
            workers: vec![1],
            harness: Some(vec![0]),
            note: None,
        });
        let text = crate::bench::terminal::render(&s);
        let ratios = text
            .split("\n\n")
            .filter(|p| {
                p.contains("ratio B/A") || p.contains("stopped:") || p.contains("placement:")
            })
            .collect::<Vec<_>>()
            .join("\n\n");
        insta::assert_snapshot!("sequential_terminal", ratios);
    }
}
