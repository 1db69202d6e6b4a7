//! `phases.svg`: one strip plot per phase, every trial a point, for people
//! who would rather look than read.
//!
//! Each phase has its own panel and its own linear time axis (a ready time
//! of a second and a pipe latency of 50 us do not share a scale). Within a
//! panel, A (blue) and, with `--vs`, B (orange) each have a lane: every
//! measured correct trial is a dot (jittered vertically by its trial
//! number, deterministically), the median is a vertical line, the 95% CI of
//! the median a shaded band, and labelled outliers are ringed in red.
//! Warm-ups are hollow grey circles and failed trials grey crosses: shown,
//! never part of the statistics. Hand-written SVG, no scripts, no fonts
//! beyond `sans-serif`.

use std::fmt::Write as _;

use phases::ms;
use phases::phase::{PhaseSummary, SeriesSummary};
use phases::serve::RequestRecord;
use phases::summary::{RunSummary, variants};
use timeline::{TrialKind, TrialRecord, Variant};

use super::canvas::{LEFT, PLOT_W, WIDTH, colour, cross, esc};
use super::fmt_ms;

const LANE: f64 = 34.0;
const PANEL_PAD: f64 = 44.0;
const TOP: f64 = 56.0;

/// Ticks at 1, 2 or 5 times a power of ten covering `[lo, hi]`.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(f64::EPSILON);
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    (0..)
        .map(|i| first + i as f64 * step)
        .take_while(|t| *t <= hi + step * 1e-9)
        .collect()
}

/// A deterministic vertical offset in `[-1, 1]` for trial `i`.
fn jitter(i: usize) -> f64 {
    let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    (h % 1001) as f64 / 500.0 - 1.0
}

/// The picture of a run: every trial of every phase, and below them the
/// serve and memory panels when the run has them (`requests` are the serve
/// phase's records).
pub fn render(s: &RunSummary, records: &[TrialRecord], requests: &[RequestRecord]) -> String {
    let vs = variants(records);
    let lanes = vs.len() as f64;
    let panel_h = PANEL_PAD + lanes * LANE;
    let height = TOP + panel_h * s.phases.len() as f64 + 30.0;
    let (panels, added) = super::serve::svg_panels(&s.serve, requests, &s.memory, height);
    let total = if added > 0.0 {
        height + added + 10.0
    } else {
        height
    };
    let mut o = String::new();
    page_head(s, total, &mut o);
    for (pi, ps) in s.phases.iter().enumerate() {
        let y0 = TOP + pi as f64 * panel_h;
        phase_panel(ps, records, &vs, y0, &mut o);
    }
    o.push_str(&panels);
    o.push_str("</svg>\n");
    o
}

/// The `<svg>` root `total` high, its background, title and legend.
fn page_head(s: &RunSummary, total: f64, o: &mut String) {
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{total}" viewBox="0 0 {WIDTH} {total}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let names: Vec<String> = s
        .environment
        .targets
        .iter()
        .map(|t| format!("{}: {}", t.variant, esc(&t.name)))
        .collect();
    let _ = writeln!(
        o,
        r#"<text x="12" y="22" font-size="15" font-weight="bold">coldstart bench: {}</text>"#,
        names.join(" vs ")
    );
    let _ = writeln!(
        o,
        r##"<text x="12" y="40" fill="#555">every measured correct trial is a dot; line: median; band: 95% CI of the median; red ring: outlier (kept); grey: warm-up (o) and failed (x) trials</text>"##
    );
}

/// A phase's time axis: `lo` to `hi` ms across the plot.
struct Axis {
    /// The smallest time shown, ms.
    lo: f64,
    /// The largest, ms.
    hi: f64,
}

impl Axis {
    /// The axis covering every point drawn and every band of a phase,
    /// padded; `None` when the phase has no samples.
    fn of(ps: &PhaseSummary, records: &[TrialRecord], vs: &[Variant]) -> Option<Axis> {
        let mut all: Vec<f64> = records
            .iter()
            .flat_map(|r| ps.phase().samples_ns(r))
            .map(ms)
            .collect();
        for v in vs {
            if let Some(st) = ps.variant(*v) {
                all.extend([st.stats.median_ci.lo, st.stats.median_ci.hi]);
            }
        }
        if all.is_empty() {
            return None;
        }
        let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let pad = ((hi - lo) * 0.05).max(hi.abs() * 0.01).max(1e-6);
        Some(Axis {
            lo: lo - pad,
            hi: hi + pad,
        })
    }

    /// The x of a time, ms.
    fn x(&self, v: f64) -> f64 {
        LEFT + (v - self.lo) / (self.hi - self.lo) * PLOT_W
    }
}

/// One phase's panel from `y0` down: its name, its axis, and a lane per
/// variant (or `no samples`).
fn phase_panel(
    ps: &PhaseSummary,
    records: &[TrialRecord],
    vs: &[Variant],
    y0: f64,
    o: &mut String,
) {
    let lanes = vs.len() as f64;
    let _ = writeln!(
        o,
        r#"<text x="12" y="{:.1}" font-weight="bold">{}</text>"#,
        y0 + 16.0 + lanes * LANE / 2.0,
        ps.phase().name()
    );
    let Some(axis) = Axis::of(ps, records, vs) else {
        let _ = writeln!(
            o,
            r##"<text x="{LEFT}" y="{:.1}" fill="#888">no samples</text>"##,
            y0 + 20.0
        );
        return;
    };
    axis_line(&axis, y0, y0 + 8.0 + lanes * LANE, o);
    for (li, &v) in vs.iter().enumerate() {
        let cy = y0 + 8.0 + LANE * (li as f64 + 0.5);
        if let Some(st) = ps.variant(v) {
            median_band(&axis, st, v, cy, o);
        }
        if vs.len() > 1 {
            let _ = writeln!(
                o,
                r#"<text x="{:.1}" y="{:.1}" fill="{}" text-anchor="end">{v}</text>"#,
                LEFT - 6.0,
                cy + 4.0,
                colour(v)
            );
        }
        trial_marks(&axis, ps, records, v, cy, o);
    }
}

/// The time axis at `axis_y`, with its ticks and their grid lines up to
/// the panel's top `y0`.
fn axis_line(axis: &Axis, y0: f64, axis_y: f64, o: &mut String) {
    let _ = writeln!(
        o,
        r##"<line x1="{LEFT}" y1="{axis_y:.1}" x2="{:.1}" y2="{axis_y:.1}" stroke="#333"/>"##,
        LEFT + PLOT_W
    );
    for t in ticks(axis.lo, axis.hi) {
        let tx = axis.x(t);
        let _ = writeln!(
            o,
            r##"<line x1="{tx:.1}" y1="{:.1}" x2="{tx:.1}" y2="{:.1}" stroke="#eee"/><line x1="{tx:.1}" y1="{axis_y:.1}" x2="{tx:.1}" y2="{:.1}" stroke="#333"/><text x="{tx:.1}" y="{:.1}" text-anchor="middle" fill="#333" font-size="10">{}</text>"##,
            y0 + 4.0,
            axis_y,
            axis_y + 4.0,
            axis_y + 15.0,
            fmt_ms(t)
        );
    }
}

/// A variant's 95% CI of the median as a band, and its median as a line,
/// in the lane centred at `cy`.
fn median_band(axis: &Axis, st: &SeriesSummary, v: Variant, cy: f64, o: &mut String) {
    let c = colour(v);
    let ci = st.stats.median_ci;
    let _ = writeln!(
        o,
        r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{c}" fill-opacity="0.18"><title>{v} 95% CI of the median: {} to {}</title></rect>"#,
        axis.x(ci.lo),
        cy - LANE / 2.0 + 2.0,
        (axis.x(ci.hi) - axis.x(ci.lo)).max(1.0),
        LANE - 4.0,
        fmt_ms(ci.lo),
        fmt_ms(ci.hi)
    );
    let mx = axis.x(st.stats.median);
    let _ = writeln!(
        o,
        r#"<line x1="{mx:.1}" y1="{:.1}" x2="{mx:.1}" y2="{:.1}" stroke="{c}" stroke-width="2"><title>{v} median {}</title></line>"#,
        cy - LANE / 2.0 + 2.0,
        cy + LANE / 2.0 - 2.0,
        fmt_ms(st.stats.median)
    );
}

/// Every sample of a variant's trials in the lane centred at `cy`: a
/// cross when failed, a hollow circle when a warm-up, else a dot, ringed
/// when an outlier.
fn trial_marks(
    axis: &Axis,
    ps: &PhaseSummary,
    records: &[TrialRecord],
    v: Variant,
    cy: f64,
    o: &mut String,
) {
    let c = colour(v);
    let outliers: Vec<usize> = ps
        .variant(v)
        .map(|s| s.outlier_trials.clone())
        .unwrap_or_default();
    for r in records.iter().filter(|r| r.variant == v) {
        for (k, val) in ps.phase().samples_ns(r).into_iter().map(ms).enumerate() {
            let px = axis.x(val);
            let py = cy + jitter(r.trial * 31 + k) * (LANE / 2.0 - 6.0);
            let tip = format!("trial {} ({v}): {}", r.trial, fmt_ms(val));
            if !r.outcome.is_correct() {
                let _ = writeln!(
                    o,
                    r##"<path d="{}" stroke="#888" stroke-width="1.5"><title>{tip}, failed</title></path>"##,
                    cross(px, py)
                );
            } else if r.kind == TrialKind::Warmup {
                let _ = writeln!(
                    o,
                    r##"<circle cx="{px:.1}" cy="{py:.1}" r="3" fill="none" stroke="#888"><title>{tip}, warm-up</title></circle>"##
                );
            } else {
                let _ = writeln!(
                    o,
                    r#"<circle cx="{px:.1}" cy="{py:.1}" r="3" fill="{c}" fill-opacity="0.75"><title>{tip}</title></circle>"#
                );
                if outliers.contains(&r.trial) {
                    let _ = writeln!(
                        o,
                        r#"<circle cx="{px:.1}" cy="{py:.1}" r="6.5" fill="none" stroke="red" stroke-width="1.5"><title>{tip}, outlier</title></circle>"#
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::fixture;

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0.0, 10.0), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(55.0, 92.0), [60.0, 70.0, 80.0, 90.0]);
    }

    #[test]
    fn every_trial_is_drawn_and_outliers_are_ringed() {
        let recs = fixture::records(true);
        let s = fixture::summary(&recs);
        let svg = render(&s, &recs, &[]);
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        // ready: 6 A + 6 B measured dots, 1 warm-up ring, 1 failed cross.
        let ready = svg.split("font-weight=\"bold\">health<").next().unwrap();
        assert_eq!(ready.matches("fill-opacity=\"0.75\"").count(), 12);
        assert_eq!(ready.matches(", warm-up</title>").count(), 1);
        assert_eq!(ready.matches(", failed</title>").count(), 1);
        // 90 ms among ~60 ms: an outlier in A's ready lane (and B's 45 ms).
        assert!(ready.contains(", outlier</title>"), "{ready}");
        assert_eq!(svg.matches("<svg").count(), 1);
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        crate::assert_well_formed_svg(&svg);
    }
}
