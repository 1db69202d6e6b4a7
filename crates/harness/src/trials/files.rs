//! A run's folder: made fresh ([`out_dir`]), its summary files written
//! whole or not at all, and a saved run read back ([`load_run`]).

use std::path::{Path, PathBuf};

use phases::jsonl;
use phases::serve::RequestRecord;
use phases::summary::RunSummary;
use timeline::TrialRecord;

use crate::env;
use crate::error::{Error, Result, invalid};

/// A summary file of the run's folder that could not be written: it is
/// absent (never cut short), the rest of the run is whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingFile {
    /// Its name in the folder (`summary.json`, ...).
    pub name: &'static str,
    /// Why: the error of the write, as the system gave it.
    pub error: String,
}

/// Writes the summary files, each whole or not at all: to a temporary
/// file in the folder, flushed to disk, then renamed over its name. A
/// file that could not be written (a full disk, a file-size limit) is
/// removed, a stale one from an earlier run at the same place included,
/// and returned as missing; the others are still written.
pub(super) fn write_outputs(
    dir: &Path,
    summary: &RunSummary,
    records: &[TrialRecord],
    requests: &[RequestRecord],
) -> Result<Vec<MissingFile>> {
    let files = [
        ("summary.json", report::bench::json(summary)),
        ("summary.md", report::bench::markdown::render(summary)),
        (
            "hyperfine.json",
            report::bench::hyperfine::render(summary, records),
        ),
        (
            "phases.svg",
            report::bench::svg::render(summary, records, requests),
        ),
    ];
    let mut missing = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        if let Err(e) = write_whole(&path, text.as_bytes()) {
            let _ = std::fs::remove_file(&path);
            missing.push(MissingFile {
                name,
                error: e.to_string(),
            });
        }
    }
    Ok(missing)
}

/// `bytes` at `path`, whole or not at all (a temporary file beside it,
/// synced, renamed; removed on failure), with the mode `std::fs::write`
/// gives (0666 less the umask).
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".coldstart-")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    // Through the file itself: the error is the system's, without the
    // temporary name.
    tmp.as_file_mut().write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A saved run, read back from the folder [`run`](super::run) wrote.
#[derive(Debug)]
pub struct SavedRun {
    /// `summary.json`.
    pub summary: RunSummary,
    /// `trials.jsonl`.
    pub records: Vec<TrialRecord>,
    /// What the caller should be told about the files (a last line cut short).
    pub warnings: Vec<String>,
}

/// The run folders directly in `dir` (each with a `summary.json`), the
/// latest first by name (`bench-out/YYYYMMDD-HHMMSS`).
fn runs_in(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut runs: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("summary.json").is_file())
        .collect();
    runs.sort_unstable_by(|a, b| b.cmp(a));
    runs
}

/// A saved run (a folder `run` wrote): its summary and its records.
pub fn load_run(dir: &Path) -> Result<SavedRun> {
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        let runs = runs_in(dir);
        match runs.first() {
            // `--out`'s default is a folder of runs, one per start.
            Some(latest) => Error::Invalid(format!(
                "{} holds runs, not one run: give one of its {} folders, the latest being {}",
                dir.display(),
                runs.len(),
                latest.display()
            )),
            None => Error::Invalid(format!(
                "could not read {} ({e}); give a folder written by `coldstart bench`",
                path.display()
            )),
        }
    })?;
    let summary: RunSummary = serde_json::from_str(&text).map_err(|cause| Error::Json {
        context: format!("{} is not a bench summary", path.display()),
        cause,
    })?;
    let path = dir.join("trials.jsonl");
    let read = jsonl::read(&path).map_err(crate::error::jsonl)?;
    let warnings = read
        .cut_short_line
        .map(|n| {
            format!(
                "{} line {n} is cut short (the run was killed while writing it); it is skipped",
                path.display()
            )
        })
        .into_iter()
        .collect();
    Ok(SavedRun {
        summary,
        records: read.records,
        warnings,
    })
}

/// The output folder: `out`, or a fresh `bench-out/<UTC stamp>/` under
/// `root`; refused when it already holds a run.
pub fn out_dir(root: &Path, out: Option<&Path>, started_ms: u64) -> Result<PathBuf> {
    let dir = match out {
        Some(d) => d.to_path_buf(),
        None => {
            let base = root.join("bench-out").join(env::folder_stamp(started_ms));
            let mut dir = base.clone();
            let mut i = 2;
            while dir.exists() {
                dir = PathBuf::from(format!("{}-{i}", base.display()));
                i += 1;
            }
            dir
        }
    };
    if dir.join("trials.jsonl").exists() {
        invalid!(
            "{} already holds a run (trials.jsonl); pick another --out or remove it",
            dir.display()
        );
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("create", &dir, e))?;
    Ok(dir)
}
