//! `hyperfine.json`: the shape of hyperfine's JSON export, so scripts
//! written for hyperfine (`plot_whisker.py`, `plot_histogram.py`, ...) read
//! a bench run.
//!
//! One result per phase (and per variant with `--vs`): `command` names the
//! phase (`ready`, `health`, `shutdown-ack`, `exit`, `total`,
//! `pipe-latency`; with `--vs`, `ready (A)`, `ready (B)`, ... and a
//! `parameters` object). Times are seconds. `times` are the same samples as
//! `summary.json`'s statistics (measured, correct trials; every round trip
//! for `health`), and `memory_usage_byte` and `exit_codes` hold, for each
//! sample, its trial's peak RSS and exit code, so the arrays line up.
//! `stddev` is `null` when there is one sample; `user` and `system` are the
//! mean CPU seconds per sample's trial, from `wait4`.

use serde::Serialize;

use phases::Phase;
use phases::summary::{RunSummary, variants};
use timeline::{TrialKind, TrialRecord};

/// The whole file.
#[derive(Debug, Serialize)]
pub struct Export {
    /// One result per phase, and per variant with `--vs`.
    pub results: Vec<HyperfineResult>,
}

/// One `results[]` entry.
#[derive(Debug, Serialize)]
pub struct HyperfineResult {
    /// The phase's name (`ready`, `health`, ...), with ` (A)` or ` (B)` appended under `--vs`.
    pub command: String,
    /// Mean of the samples, seconds.
    pub mean: f64,
    /// Sample standard deviation, seconds; `null` with one sample.
    pub stddev: Option<f64>,
    /// Median of the samples, seconds.
    pub median: f64,
    /// Mean user CPU time per sample's trial, summed over its workers, seconds (`wait4`).
    pub user: f64,
    /// Mean system CPU time per sample's trial, summed over its workers, seconds (`wait4`).
    pub system: f64,
    /// Smallest sample, seconds.
    pub min: f64,
    /// Largest sample, seconds.
    pub max: f64,
    /// Every sample, seconds (measured, correct trials; every round trip for `health`).
    pub times: Vec<f64>,
    /// For each sample, its trial's peak RSS in bytes (the largest worker's `ru_maxrss` from `wait4`; 0 when unknown).
    pub memory_usage_byte: Vec<u64>,
    /// For each sample, its trial's exit code as a shell reports it (128 + signal; -1 when unknown).
    pub exit_codes: Vec<i32>,
    /// With `--vs`, the `phase` and `variant` this result is of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Builds the export from a run's summary and its records.
pub fn export(summary: &RunSummary, records: &[TrialRecord]) -> Export {
    let vs = variants(records);
    let mut results = Vec::new();
    for ps in &summary.phases {
        let phase = ps.phase();
        for &v in &vs {
            let Some(s) = ps.variant(v) else { continue };
            let s = &s.stats;
            let used: Vec<&TrialRecord> = records
                .iter()
                .filter(|r| {
                    r.kind == TrialKind::Measured && r.variant == v && r.outcome.is_correct()
                })
                .collect();
            let mut times = Vec::new();
            let mut mem = Vec::new();
            let mut codes = Vec::new();
            let (mut user, mut sys) = (0.0, 0.0);
            for r in &used {
                let (u, sy) = r.cpu_ns().unwrap_or((0, 0));
                for ns in phase.samples_ns(r) {
                    times.push(ns / 1e9);
                    mem.push(r.max_rss_bytes().unwrap_or(0));
                    codes.push(r.shell_exit_code().unwrap_or(-1));
                    user += u as f64 / 1e9;
                    sys += sy as f64 / 1e9;
                }
            }
            let n = times.len().max(1) as f64;
            let (command, parameters) = if vs.len() > 1 {
                let mut p = serde_json::Map::new();
                p.insert("phase".into(), phase.name().into());
                p.insert("variant".into(), v.as_str().into());
                (format!("{} ({v})", phase.name()), Some(p))
            } else {
                (phase.name().to_owned(), None)
            };
            let secs = |ms: f64| ms / 1e3;
            results.push(HyperfineResult {
                command,
                mean: secs(s.mean),
                stddev: s.sd.map(secs),
                median: secs(s.median),
                user: user / n,
                system: sys / n,
                min: secs(s.min),
                max: secs(s.max),
                times,
                memory_usage_byte: mem,
                exit_codes: codes,
                parameters,
            });
        }
    }
    Export { results }
}

/// The export as pretty JSON text.
pub fn render(summary: &RunSummary, records: &[TrialRecord]) -> String {
    let mut s = serde_json::to_string_pretty(&export(summary, records))
        .expect("plain data always serialises");
    s.push('\n');
    s
}

/// Which phases the export names for a run of stdio workers, in order
/// (for documentation and tests); a run of tcp workers adds
/// `connect-first-reply` after them.
pub fn command_names() -> Vec<&'static str> {
    Phase::ALL
        .iter()
        .filter(|&&p| p != Phase::ConnectFirstReply)
        .map(|p| p.name())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::fixture;
    use timeline::Variant;

    #[test]
    fn one_result_per_phase_in_hyperfine_shape() {
        let recs = fixture::records(false);
        let s = fixture::summary(&recs);
        let v: serde_json::Value = serde_json::from_str(&render(&s, &recs)).unwrap();
        let results = v["results"].as_array().unwrap();
        let names: Vec<&str> = results
            .iter()
            .map(|r| r["command"].as_str().unwrap())
            .collect();
        assert_eq!(names, command_names());
        let ready = &results[0];
        for key in [
            "command",
            "mean",
            "stddev",
            "median",
            "user",
            "system",
            "min",
            "max",
            "times",
            "memory_usage_byte",
            "exit_codes",
        ] {
            assert!(ready.get(key).is_some(), "missing {key}");
        }
        // 6 correct measured trials; the warm-up and the failed one are out.
        assert_eq!(ready["times"].as_array().unwrap().len(), 6);
        assert!((ready["median"].as_f64().unwrap() - 0.06075).abs() < 1e-12);
        assert!((ready["min"].as_f64().unwrap() - 0.059).abs() < 1e-12);
        assert_eq!(ready["memory_usage_byte"][0], 12u64 << 20);
        assert_eq!(ready["exit_codes"][0], 0);
        assert!((ready["user"].as_f64().unwrap() - 0.03).abs() < 1e-12);
        assert!(ready.get("parameters").is_none());
    }

    #[test]
    fn ab_runs_name_the_variant_and_single_samples_have_null_stddev() {
        let recs: Vec<_> = fixture::records(true)
            .into_iter()
            .filter(|r| r.round == 0 || r.variant == Variant::A)
            .collect();
        let s = fixture::summary(&recs);
        let e = export(&s, &recs);
        let b = e.results.iter().find(|r| r.command == "ready (B)").unwrap();
        assert_eq!(b.times.len(), 1);
        assert_eq!(b.stddev, None);
        let text = serde_json::to_string(b).unwrap();
        assert!(text.contains(r#""stddev":null"#), "{text}");
        assert!(
            text.contains(r#""parameters":{"phase":"ready","variant":"B"}"#),
            "{text}"
        );
    }
}
