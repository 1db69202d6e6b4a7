//! The serve phase and the memory view of a bench run, for people:
//! Markdown sections (also printed on the terminal) and SVG panels added
//! under `phases.svg`'s strip plots.
//!
//! The serve panel plots every request: x its scheduled send time from the
//! start of the phase, y its latency (from that scheduled time), so a queue
//! that grows all run is a rising line and a steady service a flat band.
//! The memory panel puts, at each moment, Python-traced memory inside the
//! process's RSS, so the untraced rest is visible at a glance.

use std::fmt::Write as _;

use phases::memory::{MemoryView, mib};
use phases::ms;
use phases::serve::{RequestOutcome, RequestRecord, ServeStats};
use phases::stats::Interval;
use timeline::Variant;

use super::canvas::{LEFT, PLOT_W, colour, cross, esc};
use super::{fmt_ms, fmt_pct};

fn ci(v: f64, i: &Interval) -> String {
    format!("{} [{}, {}]", fmt_ms(v), fmt_ms(i.lo), fmt_ms(i.hi))
}

/// The `## Serve phase` and `## Memory` sections; empty without either.
pub fn markdown(serve: &[ServeStats], memory: &[MemoryView]) -> String {
    let mut o = String::new();
    if !serve.is_empty() {
        serve_section(serve, &mut o);
    }
    for m in memory {
        memory_section(m, &mut o);
    }
    o
}

/// `## Serve phase`: what it ran, its table, and its warnings.
fn serve_section(serve: &[ServeStats], o: &mut String) {
    let _ = writeln!(o, "## Serve phase\n");
    let _ = writeln!(
        o,
        "A fresh worker after the timed trials, requests sent after its ready line. Latency runs from each request's scheduled send time, so queue wait is counted; statistics over correct replies, with 95% bootstrap CIs.\n"
    );
    serve_table(serve, o);
    let warnings: Vec<String> = serve
        .iter()
        .flat_map(|s| {
            s.warnings()
                .into_iter()
                .map(move |w| format!("{}: {w}", s.variant))
        })
        .collect();
    if !warnings.is_empty() {
        let _ = writeln!(o);
        for w in warnings {
            let _ = writeln!(o, "- warning: {w}");
        }
    }
    let _ = writeln!(o);
}

/// The serve phase's table: a column per variant, a row per figure.
fn serve_table(serve: &[ServeStats], o: &mut String) {
    let head: Vec<String> = serve.iter().map(|s| s.variant.to_string()).collect();
    let _ = writeln!(o, "| | {} |", head.join(" | "));
    let _ = writeln!(o, "|---|{}", "---|".repeat(serve.len()));
    let row = |o: &mut String, name: &str, f: &dyn Fn(&ServeStats) -> String| {
        let cells: Vec<String> = serve.iter().map(f).collect();
        let _ = writeln!(o, "| {name} | {} |", cells.join(" | "));
    };
    row(o, "load", &|s| s.load.describe());
    row(o, "request", &|s| format!("`{}`", s.request));
    row(o, "replies", &|s| {
        format!(
            "{} correct of {} sent ({} scheduled)",
            s.ok, s.sent, s.scheduled
        )
    });
    row(o, "rejections", &|s| {
        format!(
            "{} ({}): {} error replies, {} timeouts, {} lost",
            s.rejections,
            fmt_pct(s.rejection_rate),
            s.error_replies,
            s.timeouts,
            s.lost
        )
    });
    row(o, "wrong replies", &|s| s.wrong_replies.to_string());
    row(o, "completed throughput", &|s| match s.offered_per_s {
        Some(r) => format!("{:.1}/s (offered {r}/s)", s.throughput_per_s),
        None => format!("{:.1}/s", s.throughput_per_s),
    });
    let lat = |f: fn(&phases::serve::LatencyStats) -> String| {
        move |s: &ServeStats| s.latency_ms.as_ref().map_or("-".to_owned(), f)
    };
    row(o, "latency median", &lat(|l| ci(l.median, &l.median_ci)));
    row(o, "latency p90", &lat(|l| ci(l.p90, &l.p90_ci)));
    row(o, "latency p99", &lat(|l| ci(l.p99, &l.p99_ci)));
    row(o, "latency max", &lat(|l| fmt_ms(l.max)));
    row(o, "first / last third median", &|s| {
        s.trend.map_or("-".to_owned(), |t| {
            format!(
                "{} / {}",
                fmt_ms(t.first_third_median_ms),
                fmt_ms(t.last_third_median_ms)
            )
        })
    });
    row(o, "max in flight", &|s| s.max_in_flight.to_string());
    row(o, "harness send lag (median / max)", &|s| {
        s.send_lag.map_or("-".to_owned(), |l| {
            format!("{} / {}", fmt_ms(l.median_ms), fmt_ms(l.max_ms))
        })
    });
}

/// `## Memory` of one variant: its readings, the top allocation sites at
/// ready, and its problems.
fn memory_section(m: &MemoryView, o: &mut String) {
    let _ = writeln!(o, "## Memory ({})\n", m.variant);
    let _ = writeln!(
        o,
        "A separate untimed worker with tracemalloc on from {}; each row read by the worker at one moment.\n",
        if m.tracing_from_start {
            "interpreter start"
        } else {
            "its sitecustomize"
        }
    );
    memory_table(m, o);
    let _ = writeln!(o, "\npeak RSS (wait4): {}\n", opt_mib(m.peak_rss_bytes));
    let _ = writeln!(o, "Reading: {}\n", m.reading);
    if !m.top_at_ready.is_empty() {
        let _ = writeln!(o, "Top allocation sites alive at ready:\n");
        let _ = writeln!(o, "| size | blocks | file:line |");
        let _ = writeln!(o, "|---|---|---|");
        for s in &m.top_at_ready {
            let _ = writeln!(
                o,
                "| {} | {} | `{}:{}` |",
                kib(s.size_bytes),
                s.count,
                s.file,
                s.line
            );
        }
        let _ = writeln!(o);
    }
    for p in &m.problems {
        let _ = writeln!(o, "- warning: {p}");
    }
    if !m.problems.is_empty() {
        let _ = writeln!(o);
    }
}

/// The memory readings' table: a row per moment, and one more where
/// listing the sites itself cost memory.
fn memory_table(m: &MemoryView, o: &mut String) {
    let _ = writeln!(
        o,
        "| moment | traced current | traced peak (since the row above) | RSS | untraced (RSS - traced - tracer) | tracemalloc's own | RSS high-water |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|");
    for p in &m.points {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} |",
            p.at.brief(),
            mib(p.traced_current_bytes),
            mib(p.traced_peak_bytes),
            opt_mib(p.rss_bytes),
            opt_mib(p.untraced_bytes()),
            mib(p.tracemalloc_overhead_bytes),
            opt_mib(p.hwm_bytes)
        );
        if let (Some(t), Some(r)) = (p.traced_after_reading_bytes, p.rss_after_reading_bytes)
            && (Some(r) != p.rss_bytes || t != p.traced_current_bytes)
        {
            let _ = writeln!(
                o,
                "| {} after listing the sites (the reading's own cost) | {} | - | {} | - | - | - |",
                p.at.brief(),
                mib(t),
                mib(r)
            );
        }
    }
}

/// A size in MiB, or `-` when it was not read.
fn opt_mib(bytes: Option<u64>) -> String {
    bytes.map_or("-".to_owned(), mib)
}

fn kib(bytes: u64) -> String {
    if bytes >= 1024 * 1024 {
        mib(bytes)
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}

const PLOT_H: f64 = 180.0;
const BAR_H: f64 = 16.0;

/// SVG elements (no `<svg>` root) for the serve and memory panels, drawn
/// from `y0` down; returns them and the height they take.
pub fn svg_panels(
    serve: &[ServeStats],
    records: &[RequestRecord],
    memory: &[MemoryView],
    y0: f64,
) -> (String, f64) {
    let mut o = String::new();
    let mut y = y0;
    if !serve.is_empty() && !records.is_empty() {
        y = serve_panel(serve, records, y, &mut o);
    }
    let points: usize = memory.iter().map(|m| m.points.len()).sum();
    if points > 0 {
        y = memory_panel(memory, y, &mut o);
    }
    (o, y - y0)
}

/// A panel's bold title and its grey legend beside it, at `y`.
fn panel_title(o: &mut String, y: f64, title: &str, legend: &str) {
    let _ = writeln!(
        o,
        r##"<text x="12" y="{:.1}" font-weight="bold">{title}</text><text x="{LEFT}" y="{:.1}" fill="#555">{legend}</text>"##,
        y + 16.0,
        y + 16.0
    );
}

/// The serve latency panel's box and scales.
struct LatencyPlot {
    /// The top of the plot.
    top: f64,
    /// Its bottom, where the x axis is.
    bottom: f64,
    /// The last send time, s.
    xmax: f64,
    /// The top of the latency scale, ms.
    ymax: f64,
}

impl LatencyPlot {
    /// The x of a send time, s.
    fn px(&self, x: f64) -> f64 {
        LEFT + x / self.xmax * PLOT_W
    }

    /// The y of a latency, ms.
    fn py(&self, v: f64) -> f64 {
        self.bottom - v / self.ymax * PLOT_H
    }
}

/// One request as the serve panel plots it.
struct RequestPoint {
    /// The side that sent it.
    variant: Variant,
    /// Its scheduled send time from its side's first, s.
    x: f64,
    /// Its latency, ms, when it had one.
    latency: Option<f64>,
    /// It got a correct reply.
    ok: bool,
}

/// Each request as a point: its send time from its side's first request,
/// its latency, and whether it was answered correctly.
fn request_points(records: &[RequestRecord]) -> Vec<RequestPoint> {
    let start = |v: Variant| {
        records
            .iter()
            .filter(|r| r.variant == v)
            .map(|r| r.scheduled_at_ns)
            .min()
            .unwrap_or(0)
    };
    records
        .iter()
        .map(|r| RequestPoint {
            variant: r.variant,
            x: ms(r.scheduled_at_ns.saturating_sub(start(r.variant)) as f64) / 1e3,
            latency: r.latency_ns.map(|ns| ms(ns as f64)),
            ok: r.outcome == RequestOutcome::Ok,
        })
        .collect()
}

/// The serve latency panel from `y` down: axes, every request, each
/// side's median; returns the `y` below it.
fn serve_panel(serve: &[ServeStats], records: &[RequestRecord], y: f64, o: &mut String) -> f64 {
    let pts = request_points(records);
    let top = y + 28.0;
    let plot = LatencyPlot {
        top,
        bottom: top + PLOT_H,
        xmax: pts.iter().map(|p| p.x).fold(0.0, f64::max).max(1e-3),
        ymax: pts
            .iter()
            .filter_map(|p| p.latency)
            .fold(0.0, f64::max)
            .max(1e-3)
            * 1.05,
    };
    panel_title(
        o,
        y,
        "serve latency",
        "x: scheduled send (s from the start); y: latency from it; red x: rejected or wrong (drawn at the top)",
    );
    latency_axes(&plot, o);
    for p in &pts {
        match (p.latency, p.ok) {
            (Some(l), true) => {
                let _ = writeln!(
                    o,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="2" fill="{}" fill-opacity="0.6"/>"#,
                    plot.px(p.x),
                    plot.py(l),
                    colour(p.variant)
                );
            }
            _ => {
                let _ = writeln!(
                    o,
                    r##"<path d="{}" stroke="#d62728"/>"##,
                    cross(plot.px(p.x), plot.top + 4.0)
                );
            }
        }
    }
    for s in serve {
        if let Some(l) = &s.latency_ms {
            let _ = writeln!(
                o,
                r#"<line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{}" stroke-dasharray="4 3"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="10" fill="{}">{} median {}</text>"#,
                plot.py(l.median),
                LEFT + PLOT_W,
                plot.py(l.median),
                colour(s.variant),
                LEFT + PLOT_W,
                plot.py(l.median) - 3.0,
                colour(s.variant),
                s.variant,
                fmt_ms(l.median)
            );
        }
    }
    plot.bottom + 30.0
}

/// The latency panel's two axes and their labels at the ends and middle.
fn latency_axes(plot: &LatencyPlot, o: &mut String) {
    let (top, bottom) = (plot.top, plot.bottom);
    let _ = writeln!(
        o,
        r##"<line x1="{LEFT}" y1="{bottom:.1}" x2="{:.1}" y2="{bottom:.1}" stroke="#333"/><line x1="{LEFT}" y1="{top:.1}" x2="{LEFT}" y2="{bottom:.1}" stroke="#333"/>"##,
        LEFT + PLOT_W
    );
    for (frac, anchor) in [(0.0, "start"), (0.5, "middle"), (1.0, "end")] {
        let _ = writeln!(
            o,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="{anchor}" font-size="10" fill="#333">{:.2} s</text><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="10" fill="#333">{}</text>"##,
            plot.px(plot.xmax * frac),
            bottom + 14.0,
            plot.xmax * frac,
            LEFT - 4.0,
            plot.py(plot.ymax / 1.05 * frac) + 3.0,
            fmt_ms(plot.ymax / 1.05 * frac)
        );
    }
}

/// The memory panel from `y` down: a bar per reading of each variant,
/// its peak, and its reading in words; returns the `y` below it.
fn memory_panel(memory: &[MemoryView], mut y: f64, o: &mut String) -> f64 {
    let max = memory
        .iter()
        .flat_map(|m| m.points.iter())
        .map(|p| p.rss_bytes.unwrap_or(0).max(p.traced_current_bytes))
        .chain(memory.iter().filter_map(|m| m.peak_rss_bytes))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    panel_title(
        o,
        y,
        "memory",
        "grey: RSS; dark: Python-traced memory within it; tick: peak RSS (wait4). Untimed run with tracemalloc.",
    );
    y += 28.0;
    // Bars take 70% of the width, leaving room for their labels.
    let bx = |b: f64| b / max * PLOT_W * 0.7;
    for m in memory {
        for p in &m.points {
            let rss = p.rss_bytes.unwrap_or(0) as f64;
            let _ = writeln!(
                o,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{} {}</text><rect x="{LEFT}" y="{y:.1}" width="{:.1}" height="{BAR_H}" fill="#ccc"/><rect x="{LEFT}" y="{y:.1}" width="{:.1}" height="{BAR_H}" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="10" fill="#333">traced {} of RSS {}</text>"##,
                LEFT - 6.0,
                y + 12.0,
                m.variant,
                esc(&p.at.brief()),
                bx(rss),
                bx(p.traced_current_bytes as f64),
                colour(m.variant),
                LEFT + bx(rss
                    .max(p.traced_current_bytes as f64)
                    .max(m.peak_rss_bytes.unwrap_or(0) as f64))
                    + 6.0,
                y + 12.0,
                mib(p.traced_current_bytes),
                opt_mib(p.rss_bytes)
            );
            y += BAR_H + 6.0;
        }
        if let Some(peak) = m.peak_rss_bytes {
            let x = LEFT + bx(peak as f64);
            let top = y - (BAR_H + 6.0) * m.points.len() as f64;
            let _ = writeln!(
                o,
                r##"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{:.1}" stroke="#333" stroke-dasharray="2 2"/>"##,
                y - 6.0
            );
        }
        for line in wrap(&m.reading, 130) {
            let _ = writeln!(
                o,
                r##"<text x="{LEFT}" y="{:.1}" font-size="11" fill="#333">{}</text>"##,
                y + 10.0,
                esc(&line)
            );
            y += 14.0;
        }
        y += 10.0;
    }
    y
}

/// Words of `text` in lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use phases::memory::MemoryPoint;
    use phases::serve::OfferedLoad;
    use phases::stats::Resampling;
    use timeline::Stage;

    fn stats_and_records() -> (Vec<ServeStats>, Vec<RequestRecord>) {
        let load = OfferedLoad::open(10.0, 1.0);
        let records: Vec<_> = (0..10u64)
            .map(|i| {
                let at = i * 100_000_000;
                let mut r = RequestRecord::scheduled(Variant::A, i as usize, at);
                r.sent_at_ns = Some(at);
                let outcome = if i == 9 {
                    RequestOutcome::ErrorReply {
                        error: "busy".into(),
                    }
                } else {
                    RequestOutcome::Ok
                };
                r.answered(at + 2_000_000, outcome);
                r
            })
            .collect();
        let boot = Resampling {
            resamples: 200,
            ..Resampling::default()
        };
        let s = ServeStats::of(
            Variant::A,
            load,
            serde_json::json!({"op": "infer"}),
            &records,
            None,
            &boot,
        )
        .unwrap();
        (vec![s], records)
    }

    fn view() -> MemoryView {
        let p = |at, traced, rss| MemoryPoint {
            at,
            t_ns: 0,
            traced_current_bytes: traced,
            traced_peak_bytes: traced,
            tracemalloc_overhead_bytes: 1 << 20,
            rss_bytes: Some(rss),
            hwm_bytes: Some(rss),
            traced_after_reading_bytes: None,
            rss_after_reading_bytes: None,
        };
        let points = vec![
            p(Stage::Ready, 2 << 20, 30 << 20),
            p(Stage::Exit, 2 << 20, 31 << 20),
        ];
        MemoryView {
            variant: Variant::A,
            tracing_from_start: true,
            reading: phases::memory::reading(&points),
            points,
            peak_rss_bytes: Some(32 << 20),
            top_at_ready: vec![phases::memory::AllocationSite {
                file: "w.py".into(),
                line: 3,
                size_bytes: 4096,
                count: 2,
            }],
            problems: Vec::new(),
        }
    }

    #[test]
    fn markdown_has_both_sections() {
        let (s, _) = stats_and_records();
        let md = markdown(&s, &[view()]);
        assert!(md.contains("## Serve phase"), "{md}");
        assert!(
            md.contains("| rejections | 1 (10.0%): 1 error replies, 0 timeouts, 0 lost |"),
            "{md}"
        );
        assert!(
            md.contains("| completed throughput | 9.0/s (offered 10/s) |"),
            "{md}"
        );
        assert!(
            md.contains("| ready | 2.0 MiB | 2.0 MiB | 30.0 MiB | 27.0 MiB | 1.0 MiB | 30.0 MiB |"),
            "{md}"
        );
        assert!(md.contains("| 4.0 KiB | 2 | `w.py:3` |"), "{md}");
        assert!(md.contains("Reading: RSS 30.0 MiB at ready"), "{md}");
        assert_eq!(markdown(&[], &[]), "");
    }

    #[test]
    fn panels_take_room_below_the_phases_only_when_there_is_something_to_show() {
        let (s, r) = stats_and_records();
        let (out, added) = svg_panels(&s, &r, &[view()], 200.0);
        assert!(added > PLOT_H, "{added}");
        assert_eq!(out.matches("<circle").count(), 9);
        assert_eq!(out.matches("#d62728").count(), 1);
        crate::assert_well_formed_svg(&format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\">{out}</svg>"
        ));
        assert_eq!(svg_panels(&[], &[], &[], 200.0), (String::new(), 0.0));
    }
}
