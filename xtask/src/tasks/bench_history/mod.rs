//! `cargo xtask bench-history`: the start-up history measured end to end
//! on a generated repository of 40 commits with known changes, and the
//! same series handed to two other change detectors.
//!
//! The repository is `test_history`'s: a worker burning a fixed CPU at
//! start-up, then a +40% step, a drift of about +3% a commit over ten
//! commits, a forbidden import arriving (a stand-in torch), and the first
//! step reversed, each at a known commit.
//! Every commit is recorded (`history record`, its trials), shown
//! (`history show`: change points re-measured), and bisected over the
//! first step; the per-commit median CPU times (the series `history show`
//! searches) then go to asv's step detector and
//! Apache Otava (pinned, in a venv of their own, `detectors.py`). The
//! table says, for each, which known changes were found at their commit,
//! which were missed, what was reported in the flat stretches, and the
//! trials each spent.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::Value;

use super::bench_parser::load;
use super::project_root;

const ASV: &str = "asv==0.6.6";
const OTAVA: &str = "apache-otava==0.8.0";
const DETECTORS: &str = include_str!("detectors.py");

use test_history::{COMMITS, DRIFT, FORBIDDEN, STEP_DOWN, STEP_UP};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Measured trials per commit.
    #[arg(long, default_value_t = 5)]
    pub trials: usize,
    /// Python that runs the workers and makes the detectors' venv.
    #[arg(long, default_value = "python3")]
    pub python: String,
    /// Generate the repository here and keep it with the results (default:
    /// a temporary directory).
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let tmp = tempfile::tempdir()?;
    let dir = args
        .keep
        .clone()
        .unwrap_or_else(|| tmp.path().to_path_buf());
    let coldstart = build_coldstart()?;
    let python = real_python(&args.python)?;
    let repo = dir.join("svc");
    let commits = generate(&repo, &python)?;
    let history = dir.join("history.db");
    let h = history.to_str().context("the folder's path is not UTF-8")?;
    let trials = args.trials.to_string();
    println!(
        "==> {COMMITS} commits generated in {}; machine load {}",
        repo.display(),
        load()
    );
    let cs = |a: &[&str]| Command::new(&coldstart).args(a).current_dir(&repo).output();
    let t = Instant::now();
    for range in [commits[0].clone(), format!("{}..HEAD", commits[0])] {
        let out = cs(&[
            "history",
            "record",
            &range,
            "--trials",
            &trials,
            "--history",
            h,
        ])?;
        if !out.status.success() {
            bail!(
                "history record failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let record_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let confirm = dir.join("confirm");
    let out = cs(&[
        "history",
        "show",
        "--format",
        "json",
        "--history",
        h,
        "--out",
        confirm.to_str().context("not UTF-8")?,
    ])?;
    let show_s = t.elapsed().as_secs_f64();
    let show: Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("history show: {}", String::from_utf8_lossy(&out.stderr)))?;
    // Bisect twice: halving the range alone, then guided by the history.
    let mut bisects = Vec::new();
    for store in [vec!["--no-history"], vec!["--history", h]] {
        let t = Instant::now();
        let mut a = vec!["bisect", &commits[0], &commits[15], "--format", "json"];
        a.extend(store);
        let out = cs(&a)?;
        let b: Value = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("bisect: {}", String::from_utf8_lossy(&out.stderr)))?;
        bisects.push((b, t.elapsed().as_secs_f64()));
    }
    let target = &show["targets"][0];
    let series: Vec<f64> = target["points"]
        .as_array()
        .context("history show gave no points")?
        .iter()
        .map(|p| p["cpu_ms"].as_f64().unwrap_or(f64::NAN))
        .collect();
    let others = detectors(&args.python, &series)?;
    println!(
        "==> per-commit median CPU time (ms), the series every detector is given: {}",
        fmt_series(&series)
    );
    let index = |c: &Value| commits.iter().position(|x| *x == c["commit"]);
    let changes: Vec<usize> = array(&target["changes"]).iter().filter_map(index).collect();
    let candidates: Vec<usize> = array(&target["candidates"])
        .iter()
        .filter_map(index)
        .collect();
    let drifts: Vec<(usize, usize)> = array(&target["drifts"])
        .iter()
        .filter_map(|d| Some((index(&d["from"])?, index(&d["to"])?)))
        .collect();
    let remeasured = rounds(target);
    let recorded = COMMITS * (args.trials + 1);
    println!(
        "\n| detector | steps found at their commit (of 3) | drift | in the flat stretches | trials |"
    );
    println!("|---|---|---|---|---|");
    row(
        "coldstart history show (confirmed changes)",
        &changes,
        &drifts,
        &format!("{recorded} recorded + {remeasured} re-measuring"),
    );
    println!("| (its candidates, not confirmed) | {candidates:?} | | | |");
    for (name, found) in [("asv step_detect", &others.0), ("Apache Otava", &others.1)] {
        row(name, found, &[], &format!("{recorded} recorded"));
    }
    for ((b, secs), how) in bisects
        .iter()
        .zip(["halving alone", "guided by the history"])
    {
        print_bisect(b, &commits, how, *secs);
    }
    println!(
        "wall time: record {record_s:.0} s ({:.1} s a commit), show {show_s:.0} s; load after {}",
        record_s / COMMITS as f64,
        load()
    );
    Ok(ExitCode::SUCCESS)
}

/// The bisect's line: its culprit against the known step, its cost.
fn print_bisect(bisect: &Value, commits: &[String], how: &str, secs: f64) {
    let culprit = bisect["culprit"]["commit"].as_str().unwrap_or("none");
    let steps = array(&bisect["steps"]);
    let bisect_rounds: u64 = steps.iter().filter_map(|s| s["rounds"].as_u64()).sum();
    println!(
        "bisect {}..{} ({how}): culprit {} (the step is commit {STEP_UP}: {}), {} steps, {bisect_rounds} rounds a side in all, {secs:.0} s",
        short(&commits[0]),
        short(&commits[15]),
        commits
            .iter()
            .position(|c| c == culprit)
            .map_or("none".to_owned(), |i| format!("commit {i}")),
        if culprit == commits[STEP_UP] {
            "right"
        } else {
            "WRONG"
        },
        steps.len()
    );
}

fn array(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

fn short(c: &str) -> &str {
    &c[..c.len().min(10)]
}

fn fmt_series(s: &[f64]) -> String {
    s.iter()
        .map(|v| format!("{v:.0}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One detector's row: the known steps found at their commit, the drift,
/// what it reported in the flat stretches.
fn row(name: &str, found: &[usize], drifts: &[(usize, usize)], trials: &str) {
    let known = [STEP_UP, FORBIDDEN, STEP_DOWN];
    let (hit, missed): (Vec<usize>, Vec<usize>) = known.iter().partition(|k| found.contains(k));
    let in_drift: Vec<usize> = found
        .iter()
        .copied()
        .filter(|i| DRIFT.contains(i))
        .collect();
    let flat: Vec<usize> = found
        .iter()
        .copied()
        .filter(|i| !known.contains(i) && !DRIFT.contains(i))
        .collect();
    let drift = match drifts.first() {
        Some((a, b)) => format!(
            "a drift from {a} to {b} (true: from {} to {})",
            DRIFT.start() - 1,
            DRIFT.end()
        ),
        None if in_drift.is_empty() => "missed".to_owned(),
        None => format!("split into steps at {in_drift:?}"),
    };
    println!(
        "| {name} | {} {hit:?}{} | {drift} | {} | {trials} |",
        hit.len(),
        if missed.is_empty() {
            String::new()
        } else {
            format!(", missed {missed:?}")
        },
        if flat.is_empty() {
            "none".to_owned()
        } else {
            format!("{flat:?}")
        },
    );
}

/// The rounds each side of every re-measurement ran (both sides counted).
fn rounds(target: &Value) -> usize {
    let mut all = array(&target["changes"]);
    all.extend(array(&target["candidates"]));
    all.extend(array(&target["drifts"]));
    all.iter()
        .filter_map(|c| {
            let cmp = &c["confirmation"]["comparison"];
            Some((cmp["n_a"].as_u64()? + cmp["n_b"].as_u64()?) as usize)
        })
        .sum()
}

/// asv's and Otava's change points on `series`.
fn detectors(python: &str, series: &[f64]) -> anyhow::Result<(Vec<usize>, Vec<usize>)> {
    let py = super::venv::tool_python(
        python,
        "bench-history-detectors",
        &[ASV, OTAVA],
        "import asv.step_detect, otava.analysis",
    )?;
    let mut child = Command::new(py)
        .args(["-c", DETECTORS])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let input = serde_json::json!({ "series": series }).to_string();
    std::io::Write::write_all(&mut child.stdin.take().context("stdin")?, input.as_bytes())?;
    let out = child.wait_with_output()?;
    let v: Value = serde_json::from_slice(&out.stdout).context("the detectors' answer")?;
    let list = |k: &str| -> Vec<usize> {
        array(&v[k])
            .iter()
            .filter_map(|i| i.as_u64().map(|i| i as usize))
            .collect()
    };
    Ok((list("asv"), list("otava")))
}

/// The workspace's coldstart, built now.
fn build_coldstart() -> anyhow::Result<PathBuf> {
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--quiet", "-p", "coldstart", "--bin", "coldstart"])
        .current_dir(project_root())
        .status()?;
    if !status.success() {
        bail!("cargo build -p coldstart failed");
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| project_root().join("target"), PathBuf::from);
    Ok(target.join("debug/coldstart"))
}

/// The interpreter behind `python` (a pyenv shim resolved).
fn real_python(python: &str) -> anyhow::Result<String> {
    let out = Command::new(python)
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .with_context(|| format!("running {python}"))?;
    Ok(String::from_utf8(out.stdout)?.trim().to_owned())
}

/// The repository with its 40 commits, oldest first.
fn generate(root: &Path, python: &str) -> anyhow::Result<Vec<String>> {
    let protokit = project_root().join("tests/fixtures/boundary/workers/protokit.py");
    let source = std::fs::read_to_string(&protokit)
        .with_context(|| format!("reading {}", protokit.display()))?;
    test_history::generate(root, python, &source, &|i| format!("commit {i}"))
        .context("generating the repository")
}
