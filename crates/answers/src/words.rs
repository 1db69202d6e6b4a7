//! The words an answer's own sentences use: durations, sizes, shares,
//! ratios with their intervals, verdicts. The renderers in `report` use
//! the same words, so a figure reads the same in a problem's message, the
//! terminal and a pull-request comment.

/// A duration given in milliseconds, printed with a unit that suits it:
/// `85.3 us`, `12.34 ms`, `1.234 s`.
pub fn fmt_ms(ms: f64) -> String {
    if !ms.is_finite() {
        return format!("{ms}");
    }
    let a = ms.abs();
    if a < 1.0 {
        format!("{:.1} us", ms * 1e3)
    } else if a < 100.0 {
        format!("{ms:.2} ms")
    } else if a < 1000.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.3} s", ms / 1e3)
    }
}

/// Bytes as MiB with one decimal.
pub fn fmt_mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
}

/// A fraction as a percentage with one decimal.
pub fn fmt_pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// A ratio with its interval: `1.98 [1.90, 2.05]`.
pub fn fmt_ratio(c: &phases::compare::Comparison) -> String {
    format!("{:.3} [{:.3}, {:.3}]", c.ratio, c.ci.lo, c.ci.hi)
}

/// A confidence level as a person writes it: `95%`, `99.5%`.
pub fn fmt_level(level: f64) -> String {
    let pct = level * 100.0;
    if (pct - pct.round()).abs() < 1e-9 {
        format!("{pct:.0}%")
    } else {
        format!("{}%", (pct * 100.0).round() / 100.0)
    }
}

/// What a comparison's rounds are called: `rounds` when paired, `trials
/// per side` when not.
fn unit(c: &phases::compare::Comparison) -> &'static str {
    if c.paired {
        "rounds"
    } else {
        "trials per side"
    }
}

/// The verdict cell of a ratio table: the verdict, and for an
/// inconclusive one the smallest change it could have detected (or how
/// many pairs an interval needs).
pub fn fmt_verdict(c: &phases::compare::Comparison) -> String {
    if c.verdict != phases::compare::Verdict::Inconclusive {
        return c.verdict.words().to_owned();
    }
    match (c.unsettled.and_then(|u| u.needed), c.detectable()) {
        (Some(needed), _) => format!("inconclusive, needs {needed} {}", unit(c)),
        (None, Some(d)) => format!("inconclusive, could detect {}", fmt_pct(d)),
        (None, None) => "inconclusive".to_owned(),
    }
}

/// One sentence on a comparison a run's answer rests on: what it says
/// against the noise band, and for an inconclusive one what the run could
/// have detected and about what would settle it.
pub fn verdict_sentence(measure: phases::Measure, c: &phases::compare::Comparison) -> String {
    use phases::compare::Verdict;
    let band = fmt_pct(c.threshold);
    let head = format!(
        "{}: {}: B/A {} at {}",
        measure.describe(),
        c.verdict,
        fmt_ratio(c),
        fmt_level(c.ci.level)
    );
    match c.verdict {
        Verdict::Slower => format!("{head}, wholly above 1 + {band}"),
        Verdict::Faster => format!("{head}, wholly below 1 - {band}"),
        Verdict::Equivalent => {
            format!("{head}, wholly inside 1 +- {band}: no change beyond {band}")
        }
        Verdict::Inconclusive => {
            let n = c.n_a.min(c.n_b);
            let u = c.unsettled.unwrap_or(phases::compare::Unsettled {
                detectable: None,
                more: None,
                needed: None,
                level: None,
            });
            if let Some(needed) = u.needed {
                return format!(
                    "{head}: {n} {} are too few for a {} interval; at least {needed} are needed",
                    unit(c),
                    fmt_level(u.level.unwrap_or(c.ci.level))
                );
            }
            let mut out = format!("{head} reaches outside 1 +- {band} without leaving it");
            if let Some(d) = c.detectable() {
                out.push_str(&format!(
                    "; this run could have detected a change of {} or more",
                    fmt_pct(d)
                ));
            }
            match u.more {
                Some(m) if m > 100_000 => out.push_str(&format!(
                    "; settling it would take over 100000 more {}",
                    unit(c)
                )),
                Some(m) => out.push_str(&format!("; about {m} more {} would settle it", unit(c))),
                None if c.detectable().is_some() => out.push_str(
                    "; the estimate sits on the band's edge, so more rounds may not settle it",
                ),
                None => {}
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_read_as_people_write_them() {
        assert_eq!(fmt_level(0.95), "95%");
        assert_eq!(fmt_level(0.995), "99.5%");
        assert_eq!(fmt_level(0.9999), "99.99%");
    }

    #[test]
    fn units_suit_the_size() {
        assert_eq!(fmt_ms(0.0853), "85.3 us");
        assert_eq!(fmt_ms(12.345), "12.35 ms");
        assert_eq!(fmt_ms(612.34), "612.3 ms");
        assert_eq!(fmt_ms(6150.0), "6.150 s");
        assert_eq!(fmt_mib((12u64 << 20) as f64), "12.0 MiB");
        assert_eq!(fmt_pct(0.1234), "12.3%");
    }
}
