//! A pool run (`bench --pool`) for people: the `## Pool` section of
//! `summary.md`, also printed on the terminal after the table: per side,
//! the cold start's cost in one sentence, the windows' table (before the
//! kill, during the replacement, after) and the workers.

use std::fmt::Write as _;

use phases::pool::{ColdStartCost, PoolStats, Role, WindowStats};
use phases::serve::LatencyStats;

use super::fmt_ms;

/// `## Pool`, one part per side; empty without a pool run.
pub fn markdown(pool: &[PoolStats]) -> String {
    let mut o = String::new();
    if pool.is_empty() {
        return o;
    }
    let _ = writeln!(o, "## Pool: one cold start's cost\n");
    let _ = writeln!(
        o,
        "Fresh workers after the timed trials, behind a dispatcher that hands each request to a free worker. Requests are split by arrival: before the cold start, during it (the kill or the queue passing the depth, to the new worker's ready line), after. Latency runs from each scheduled arrival (queue wait = dispatch - arrival, counted in it); statistics over correct replies, with 95% bootstrap CIs.\n"
    );
    for p in pool {
        side(p, &mut o);
    }
    o
}

fn side(p: &PoolStats, o: &mut String) {
    let s = &p.setup;
    let mut kill = s.replace_at_s.map_or(String::new(), |at| {
        format!(", one killed at {at} s and replaced")
    });
    if let Some(d) = s.scale_at_depth {
        kill.push_str(&format!(", one added when more than {d} requests queue"));
    }
    let _ = writeln!(
        o,
        "### {}: {} worker{}{kill}; {}\n",
        s.variant,
        s.workers,
        if s.workers == 1 { "" } else { "s" },
        s.load.describe()
    );
    let mut limits = Vec::new();
    if let Some(c) = s.queue_cap {
        limits.push(format!("queue cap {c}"));
    }
    if let Some(w) = s.max_wait_ms {
        limits.push(format!("max wait {w} ms"));
    }
    if !limits.is_empty() {
        let _ = writeln!(o, "Limits: {}.\n", limits.join(", "));
    }
    if let Some(c) = &p.cold_start {
        let _ = writeln!(o, "{}\n", cost_sentence(c, s.replace_at_s));
    }
    let _ = writeln!(
        o,
        "| window | arrived | ok | rejections | latency p50 | latency p99 | queue wait p50 | queue wait p99 | service p50 |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|");
    for w in &p.windows {
        window_row(w, o);
    }
    let notes: Vec<String> = p
        .windows
        .iter()
        .filter_map(|w| {
            w.thin
                .as_ref()
                .map(|t| format!("{}: {t}", w.window.as_str()))
        })
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(o);
        for n in notes {
            let _ = writeln!(o, "- thin: {n}");
        }
    }
    let _ = writeln!(o, "\n| worker | role | pid | ready | answered | end |");
    let _ = writeln!(o, "|---|---|---|---|---|---|");
    for m in &p.members {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} |",
            m.slot,
            m.role.as_str(),
            m.pid.map_or("-".to_owned(), |p| p.to_string()),
            m.ready_ms.map_or("never".to_owned(), fmt_ms),
            m.answered,
            m.end.replace('|', "\\|").replace('\n', " ")
        );
    }
    let warnings = p.warnings();
    if !warnings.is_empty() {
        let _ = writeln!(o);
        for w in warnings {
            let _ = writeln!(o, "- warning: {}: {w}", s.variant);
        }
    }
    let _ = writeln!(o);
}

/// A trigger later than planned by at least this much is said to be late
/// (a loaded machine wakes the dispatcher late; the windows follow the
/// trigger as it happened, not as it was planned).
const LATE_S: f64 = 0.005;

/// The cold start's cost in one sentence; `planned` is when the kill was
/// asked for (`--replace-at`), said beside the trigger when it landed late.
pub fn cost_sentence(c: &ColdStartCost, planned: Option<f64>) -> String {
    let opt = |v: Option<f64>| v.map_or("-".to_owned(), fmt_ms);
    let signed = |v: Option<f64>| match v {
        Some(d) if d >= 0.0 => format!("+{}", fmt_ms(d)),
        Some(d) => format!("-{}", fmt_ms(-d)),
        None => "-".to_owned(),
    };
    let (who, trigger) = match c.role {
        Role::Added => ("the added worker", "the queue passing the depth"),
        _ => ("the replacement", "the kill"),
    };
    let ready = match (c.ready_ms, c.window_ms) {
        (Some(r), Some(w)) => format!(
            "{who} took {} from spawn to ready ({} from {trigger})",
            fmt_ms(r),
            fmt_ms(w)
        ),
        _ => format!("{who} never became ready"),
    };
    let late = match planned {
        Some(p) if c.role != Role::Added && c.triggered_at_s - p >= LATE_S => format!(
            " (planned for {p:.2} s, the kill landed {} late)",
            fmt_ms((c.triggered_at_s - p) * 1000.0)
        ),
        _ => String::new(),
    };
    format!(
        "One cold start at {:.2} s{late}: {ready}; p99 latency {} before, {} during the cold start ({}); the whole run's p99 {} ({} over the before window).",
        c.triggered_at_s,
        opt(c.p99_before_ms),
        opt(c.p99_cold_start_ms),
        signed(c.extra_p99_ms),
        opt(c.p99_run_ms),
        signed(c.run_extra_p99_ms),
    )
}

fn window_row(w: &WindowStats, o: &mut String) {
    let span = match w.to_s {
        Some(to) => format!("{:.2}-{to:.2} s", w.from_s),
        None => format!("{:.2} s-end", w.from_s),
    };
    let mut kinds = Vec::new();
    for (n, what) in [
        (w.rejected, "rejected"),
        (w.lost, "lost"),
        (w.timeouts, "timeouts"),
        (w.error_replies, "error replies"),
    ] {
        if n > 0 {
            kinds.push(format!("{n} {what}"));
        }
    }
    let rejections = if kinds.is_empty() {
        w.rejections.to_string()
    } else {
        format!("{} ({})", w.rejections, kinds.join(", "))
    };
    let ci = |l: &Option<LatencyStats>, f: fn(&LatencyStats) -> (f64, phases::stats::Interval)| {
        l.as_ref().map_or("-".to_owned(), |l| {
            let (v, i) = f(l);
            format!("{} [{}, {}]", fmt_ms(v), fmt_ms(i.lo), fmt_ms(i.hi))
        })
    };
    let _ = writeln!(
        o,
        "| {} ({span}) | {} | {} | {rejections} | {} | {} | {} | {} | {} |",
        w.window.as_str(),
        w.arrived,
        w.ok,
        ci(&w.latency_ms, |l| (l.median, l.median_ci)),
        ci(&w.latency_ms, |l| (l.p99, l.p99_ci)),
        ci(&w.queue_wait_ms, |l| (l.median, l.median_ci)),
        ci(&w.queue_wait_ms, |l| (l.p99, l.p99_ci)),
        w.service_median_ms.map_or("-".to_owned(), fmt_ms),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use phases::pool::{PoolRequest, PoolSetup, PoolWorker, Window, assign_windows};
    use phases::serve::{OfferedLoad, RequestOutcome};
    use phases::stats::Resampling;
    use timeline::Variant;

    const MS: u64 = 1_000_000;

    fn stats() -> PoolStats {
        let worker = |slot, role, ready_at: u64, killed: Option<u64>| PoolWorker {
            slot,
            role,
            triggered_at_ns: (role != Role::Initial).then_some(1000 * MS),
            pid: Some(40 + slot as u32),
            spawned_at_ns: Some(ready_at.saturating_sub(200 * MS)),
            ready_at_ns: Some(ready_at),
            ready_ms: Some(200.0),
            killed_at_ns: killed,
            answered: 10,
            end: "shut down".into(),
            failed: false,
        };
        let members = vec![
            worker(0, Role::Initial, 0, Some(1000 * MS)),
            worker(1, Role::Initial, 0, None),
            worker(2, Role::Replacement, 1200 * MS, None),
        ];
        let mut rs: Vec<PoolRequest> = (0..30u64)
            .map(|i| {
                let at = i * 100 * MS;
                let mut r = PoolRequest::scheduled(Variant::A, i as usize, at);
                let wait = if (10..12).contains(&i) { 150 } else { 0 };
                r.dispatched_at_ns = Some(at + wait * MS);
                r.request.answered(at + (wait + 3) * MS, RequestOutcome::Ok);
                r
            })
            .collect();
        rs[11].request.outcome = RequestOutcome::Lost {
            reason: "killed".into(),
        };
        assign_windows(&mut rs, &members);
        let setup = PoolSetup {
            variant: Variant::A,
            workers: 2,
            load: OfferedLoad::open(10.0, 3.0),
            request: serde_json::json!({"op": "infer"}),
            replace_at_s: Some(1.0),
            max_wait_ms: Some(500.0),
            queue_cap: None,
            scale_at_depth: None,
        };
        let boot = Resampling {
            resamples: 200,
            ..Resampling::default()
        };
        PoolStats::of(setup, 0, &rs, members, None, &boot).unwrap()
    }

    #[test]
    fn the_section_has_the_cost_the_windows_and_the_workers() {
        let s = stats();
        assert_eq!(s.windows[1].window, Window::ColdStart);
        let md = markdown(&[s]);
        assert!(md.starts_with("## Pool: one cold start's cost"), "{md}");
        assert!(
            md.contains("### A: 2 workers, one killed at 1 s and replaced"),
            "{md}"
        );
        assert!(md.contains("Limits: max wait 500 ms."), "{md}");
        assert!(
            md.contains(
                "the replacement took 200.0 ms from spawn to ready (200.0 ms from the kill)"
            ),
            "{md}"
        );
        assert!(
            md.contains("| cold_start (1.00-1.20 s) | 2 | 1 | 1 (1 lost) |"),
            "{md}"
        );
        assert!(md.contains("| after (1.20 s-end) | 18 | 18 | 0 |"), "{md}");
        assert!(
            md.contains("| 2 | replacement | 42 | 200.0 ms | 10 | shut down |"),
            "{md}"
        );
        assert!(md.contains("- thin: cold_start: 1 correct replies"), "{md}");
        assert!(
            md.contains("One cold start at 1.00 s: the replacement"),
            "{md}"
        );
        assert_eq!(markdown(&[]), "");
    }

    #[test]
    fn a_kill_that_landed_late_is_said_beside_its_plan() {
        let mut s = stats();
        let c = s.cold_start.as_mut().unwrap();
        c.triggered_at_s = 1.02;
        let line = cost_sentence(c, Some(1.0));
        assert!(
            line.starts_with(
                "One cold start at 1.02 s (planned for 1.00 s, the kill landed 20.00 ms late): "
            ),
            "{line}"
        );
        c.triggered_at_s = 1.001;
        assert!(cost_sentence(c, Some(1.0)).starts_with("One cold start at 1.00 s: "));
    }
}
