//! A target's processes folded into one list of violations.

use serde::Serialize;

use super::model::{ProcessVerdict, Violation};

/// A target's violation across its processes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MergedViolation {
    /// The violation as seen in the first process that had it.
    #[serde(flatten)]
    pub first: Violation,
    /// In how many processes it occurred.
    pub processes: usize,
    /// Out of how many judged.
    pub of: usize,
    /// Median cumulative time over the processes that timed it.
    pub median_cumulative_us: Option<i64>,
}

/// Folds the verdicts of one target's processes: one entry per module and
/// status, in the order first seen.
pub fn merge(verdicts: &[ProcessVerdict]) -> Vec<MergedViolation> {
    let mut out: Vec<(MergedViolation, Vec<i64>)> = Vec::new();
    // One entry per module, status and kind of process (the worker, a
    // forked child, a child interpreter).
    let key = |x: &Violation| {
        (
            x.module.clone(),
            x.status,
            x.process.as_ref().map(|p| p.relation),
        )
    };
    for v in verdicts {
        let mut counted: Vec<usize> = Vec::new();
        for x in &v.violations {
            let costs = x.cumulative_us.into_iter();
            match out.iter().position(|(m, _)| key(&m.first) == key(x)) {
                Some(i) => {
                    let (m, c) = &mut out[i];
                    // Two pool workers of one verdict count once.
                    if !counted.contains(&i) {
                        m.processes += 1;
                        counted.push(i);
                    }
                    c.extend(costs);
                }
                None => {
                    counted.push(out.len());
                    out.push((
                        MergedViolation {
                            first: x.clone(),
                            processes: 1,
                            of: verdicts.len(),
                            median_cumulative_us: None,
                        },
                        costs.collect(),
                    ));
                }
            }
        }
    }
    out.into_iter()
        .map(|(mut m, costs)| {
            m.median_cumulative_us = median(&costs);
            m
        })
        .collect()
}

/// The median of microsecond costs, to the nearest microsecond (the
/// statistics crate's one median).
fn median(costs: &[i64]) -> Option<i64> {
    let costs: Vec<f64> = costs.iter().map(|&c| c as f64).collect();
    phases::stats::median(&costs).map(|m| m.round() as i64)
}
