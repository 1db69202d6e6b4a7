//! The terminal table printed after a run, and the comparison table of
//! `coldstart compare`. Plain text, aligned columns, no colour.

use phases::compare::Comparison;
use phases::phase::{PhaseSummary, SeriesSummary};
use phases::summary::RunSummary;
use timeline::Variant;

use super::{
    answer_lines, fmt_level, fmt_mib, fmt_ms, fmt_pct, fmt_ratio, fmt_verdict, placement_line,
};

/// The outliers column's label; its cells are never wider, whatever the
/// number of outliers (every one of them is in the JSON summary).
const OUTLIERS: &str = "outliers, first trials";

/// The outliers cell: their count, then as many of the first trial numbers
/// as fit in the column's label, `...` when some are left out.
fn outliers_cell(trials: &[usize]) -> String {
    let width = OUTLIERS.chars().count();
    let mut cell = trials.len().to_string();
    if trials.is_empty() {
        return cell;
    }
    cell.push(':');
    for (i, t) in trials.iter().enumerate() {
        let id = format!(" #{t}");
        let more = if i + 1 < trials.len() { " ..." } else { "" };
        if cell.len() + id.len() + more.len() > width {
            cell.push_str(" ...");
            break;
        }
        cell.push_str(&id);
    }
    cell
}

/// Header and cells of the statistics table, one row per phase and variant.
pub fn stats_rows(phases: &[PhaseSummary], labels: [&str; 2]) -> (Vec<String>, Vec<Vec<String>>) {
    let header = [
        "phase",
        "n",
        "median",
        "95% CI of median",
        "mean",
        "sd",
        "min",
        "p90",
        "max",
        "MAD",
        "CV",
        OUTLIERS,
    ]
    .map(String::from)
    .to_vec();
    let two = phases.iter().any(|p| p.b.is_some());
    let mut rows = Vec::new();
    for p in phases {
        for (v, label) in [(Variant::A, labels[0]), (Variant::B, labels[1])] {
            if v == Variant::B && !two {
                continue;
            }
            let name = if two {
                format!("{} ({label})", p.phase())
            } else {
                p.phase().to_string()
            };
            rows.push(match p.variant(v) {
                Some(s) => stats_cells(name, s),
                None => {
                    let mut r = vec![name, "0".into()];
                    r.extend(std::iter::repeat_n("-".to_owned(), header.len() - 2));
                    r
                }
            });
        }
    }
    (header, rows)
}

fn stats_cells(name: String, s: &SeriesSummary) -> Vec<String> {
    let st = &s.stats;
    vec![
        name,
        st.n.to_string(),
        fmt_ms(st.median),
        format!("[{}, {}]", fmt_ms(st.median_ci.lo), fmt_ms(st.median_ci.hi)),
        fmt_ms(st.mean),
        st.sd.map_or("-".into(), fmt_ms),
        fmt_ms(st.min),
        fmt_ms(st.p90),
        fmt_ms(st.max),
        fmt_ms(st.mad),
        st.cv.map_or("-".into(), fmt_pct),
        outliers_cell(&s.outlier_trials),
    ]
}

/// Header and cells of the ratio table: each phase that has a ratio (wall
/// time), then CPU time when given. The header names the interval level:
/// `level`, or else the widest level among the rows.
pub fn ratio_rows(
    phases: &[PhaseSummary],
    cpu: Option<&Comparison>,
    level: Option<f64>,
) -> (Vec<String>, Vec<Vec<String>>) {
    let rows_of: Vec<(String, &Comparison)> = phases
        .iter()
        .filter_map(|p| Some((p.phase().to_string(), p.ratio.as_ref()?)))
        .chain(cpu.map(|c| ("cpu (user+sys)".to_owned(), c)))
        .collect();
    let level =
        level.unwrap_or_else(|| rows_of.iter().map(|(_, c)| c.ci.level).fold(0.0, f64::max));
    let header = [
        "phase".to_owned(),
        format!("ratio B/A [{} CI]", fmt_level(level)),
        "verdict".to_owned(),
        "pairs".to_owned(),
    ]
    .to_vec();
    let rows = rows_of
        .into_iter()
        .map(|(name, c)| {
            vec![
                name,
                fmt_ratio(c),
                fmt_verdict(c),
                if c.paired {
                    c.n_a.to_string()
                } else {
                    format!("{} vs {} (unpaired)", c.n_a, c.n_b)
                },
            ]
        })
        .collect();
    (header, rows)
}

/// Aligns a table: the first column left, the others right.
pub fn aligned(header: &[String], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, &w))| {
                if i == 0 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        parts.join("  ").trim_end().to_owned()
    };
    let mut out = line(header);
    out.push('\n');
    for r in rows {
        out.push_str(&line(r));
        out.push('\n');
    }
    out
}

/// The table printed at the end of `coldstart bench`.
pub fn render(s: &RunSummary) -> String {
    let mut out = String::new();
    let t = &s.trials;
    let a = s.environment.target(Variant::A);
    let b = s.environment.target(Variant::B);
    match (a, b) {
        (Some(a), Some(b)) => out.push_str(&format!("A: {}\nB: {}\n", a.display, b.display)),
        (Some(a), None) => out.push_str(&format!("{}\n", a.display)),
        _ => {}
    }
    out.push_str(&format!(
        "{} trials ({} warm-up, {} measured), {} failed ({}){}\n\n",
        t.run,
        t.warmup,
        t.measured,
        t.failed,
        fmt_pct(t.failure_rate),
        if t.interrupted { ", interrupted" } else { "" }
    ));
    let (h, rows) = stats_rows(&s.phases, ["A", "B"]);
    out.push_str(&aligned(&h, &rows));
    let ab = s.ab.as_ref();
    let (h, rows) = ratio_rows(
        &s.phases,
        ab.and_then(|a| a.cpu.as_ref()),
        ab.map(|a| a.level),
    );
    if !rows.is_empty() {
        out.push('\n');
        out.push_str(&aligned(&h, &rows));
        if let Some(ab) = ab {
            out.push_str(&format!("(ratios: {})\n\n", ab.method.words()));
        }
    } else if ab.is_some() {
        // No round had both sides correct: the answer lines say so, and
        // why the run stopped.
        out.push('\n');
    }
    for line in answer_lines(s) {
        out.push_str(&line);
        out.push('\n');
    }
    for r in &s.resources {
        let f = |v: Option<f64>, g: fn(f64) -> String| v.map_or("-".to_owned(), g);
        // Under a memory limit, what the limit is held against: RSS also
        // counts shared-library pages charged to whoever cached them first.
        let charged = r.cgroup_peak_bytes.map_or(String::new(), |b| {
            format!(", cgroup peak {} (what the memory limit holds)", fmt_mib(b))
        });
        out.push_str(&format!(
            "\n{}: cpu user {} sys {}, peak RSS {}, RSS at ready {}{charged} (medians)",
            r.variant,
            f(r.user_ms, fmt_ms),
            f(r.sys_ms, fmt_ms),
            f(r.max_rss_bytes, fmt_mib),
            f(r.rss_at_ready_bytes, fmt_mib),
        ));
    }
    out.push('\n');
    if let Some(p) = &s.placement {
        out.push_str(&format!("placement: {}\n", placement_line(p)));
    }
    for line in super::measured_lines(s) {
        out.push_str(&format!("measured: {line}\n"));
    }
    for line in super::probe_lines(s) {
        out.push_str(&format!("{line}\n"));
    }
    if let Some(r) = s.overhead.ratio {
        out.push_str(&format!(
            "harness: {:.2} s of wall time for {:.2} s of worker lifecycles ({:.3}x)\n",
            s.overhead.loop_wall_s, s.overhead.lifecycles_s, r
        ));
    }
    if !s.warnings.is_empty() {
        out.push('\n');
        for w in &s.warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
    }
    out
}

/// The table printed by `coldstart compare`.
pub fn render_comparison(a: &str, b: &str, phases: &[PhaseSummary]) -> String {
    let mut out = format!("A: {a}\nB: {b}\n\n");
    let (h, rows) = stats_rows(phases, ["A", "B"]);
    out.push_str(&aligned(&h, &rows));
    out.push('\n');
    let (h, rows) = ratio_rows(phases, None, None);
    out.push_str(&aligned(&h, &rows));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::fixture;

    #[test]
    fn table_lists_every_phase_and_the_verdicts() {
        let recs = fixture::records(true);
        let s = fixture::summary(&recs);
        let text = render(&s);
        for name in [
            "ready (A)",
            "ready (B)",
            "pipe-latency (B)",
            "shutdown-ack (A)",
        ] {
            assert!(text.contains(name), "{name} missing in\n{text}");
        }
        assert!(text.contains("faster"), "{text}");
        assert!(text.contains("equivalent"), "{text}");
        assert!(text.contains("cpu (user+sys)"), "{text}");
        assert!(
            text.contains("the answer rests on ready (wall time)"),
            "{text}"
        );
        assert!(text.contains("1 failed"), "{text}");
        assert!(text.contains("warning: "), "{text}");
        assert!(text.contains("45.0 us"), "{text}");
    }

    #[test]
    fn many_outliers_are_counted_and_the_first_few_listed_within_the_header() {
        let recs = fixture::records(true);
        let plain = render(&fixture::summary(&recs));
        let mut s = fixture::summary(&recs);
        let series = s.phases[0].a.as_mut().unwrap();
        series.outlier_trials = (1..=300).collect();
        let text = render(&s);
        let table = |t: &str| -> Vec<String> {
            t.lines()
                .skip_while(|l| !l.starts_with("phase "))
                .take_while(|l| !l.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let (rows, plain_rows) = (table(&text), table(&plain));
        // The header is the one of a run without those outliers, and no
        // row is wider than it.
        assert_eq!(rows[0], plain_rows[0], "{text}");
        let width = rows[0].chars().count();
        for r in &rows {
            assert!(r.chars().count() <= width, "{r}\n{text}");
        }
        assert!(text.contains("300: #1 #2 #3 #4 ..."), "{text}");
        assert_eq!(outliers_cell(&[]), "0");
        assert_eq!(outliers_cell(&[4, 9]), "2: #4 #9");
        assert_eq!(
            outliers_cell(&[1000, 1001, 1002, 1003, 1004]),
            "5: #1000 #1001 ..."
        );
    }

    #[test]
    fn columns_line_up() {
        let h = vec!["phase".to_owned(), "n".to_owned()];
        let rows = vec![vec!["ready".to_owned(), "10".to_owned()]];
        assert_eq!(aligned(&h, &rows), "phase   n\nready  10\n");
    }
}
