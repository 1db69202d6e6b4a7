//! `coldstart lazy` end to end on `tests/fixtures/lazy` (a worker with three
//! costly start-up imports, stand-ins that busy-wait), copied to a
//! temporary folder and run as a user would, from the project's folder.

use std::path::{Path, PathBuf};

use crate::support::{self, copy_dir, fixtures, python, uv, uv_project};

/// A copy of the fixture project with its `coldstart.toml`: the stand-ins
/// on `PYTHONPATH`, the `load` and `format` requests as its model path.
fn project() -> (tempfile::TempDir, PathBuf) {
    project_with(python())
}

/// [`project`] with its worker run by `python`.
fn project_with(python: &Path) -> (tempfile::TempDir, PathBuf) {
    fixture_project(
        "project",
        "lz",
        python,
        &["-m", "lzworker"],
        true,
        r#"verify = [{ op = "load", model = "ner" }, { op = "format", text = "hi" }]"#,
    )
}

/// A copy of `tests/fixtures/lazy/NAME` in a temporary folder, with a
/// `coldstart.toml` of one target `target` that runs `python ARGS` (with
/// the stand-ins on `PYTHONPATH` when `stand_ins`) and the `extra` TOML
/// line (its model path).
fn fixture_project(
    name: &str,
    target: &str,
    python: &Path,
    args: &[&str],
    stand_ins: bool,
    extra: &str,
) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join(name);
    copy_dir(&fixtures().join("lazy").join(name), &root);
    let command: Vec<String> = std::iter::once(python.display().to_string())
        .chain(args.iter().map(|a| a.to_string()))
        .map(|a| format!("{a:?}"))
        .collect();
    let env = if stand_ins {
        format!(
            "env = {{ PYTHONPATH = {:?} }}\n",
            fixtures().join("lazy/stand-ins").display().to_string()
        )
    } else {
        String::new()
    };
    std::fs::write(
        root.join("coldstart.toml"),
        format!(
            "[[target]]\nname = {target:?}\ncommand = [{}]\n{env}{extra}\n",
            command.join(", ")
        ),
    )
    .unwrap();
    (dir, root)
}

/// `coldstart lazy` in `root`: 2 processes priced, tinydep (5 ms at
/// import, more with the recorder on) left below `--min-ms 60`.
fn lazy(root: &Path, extra: &[&str]) -> (Option<i32>, String, String) {
    lazy_at(root, "60", extra)
}

/// [`lazy`] with `--min-ms MIN_MS`.
fn lazy_at(root: &Path, min_ms: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let out = crate::support::coldstart(root)
        .args([
            "lazy",
            "--processes",
            "2",
            "--min-ms",
            min_ms,
            "--max-rounds",
            "40",
        ])
        .args(extra)
        .env_remove("PYTHONPATH")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    eprintln!("exit {:?}\n{stdout}\n{stderr}", out.status.code());
    (out.status.code(), stdout, stderr)
}

/// `coldstart lazy --format json` in `root` at `--min-ms MIN_MS`, which
/// must exit 0: the report, and its text for failure messages.
fn lazy_json(root: &Path, min_ms: &str) -> (serde_json::Value, String) {
    let (code, stdout, stderr) = lazy_at(root, min_ms, &["--format", "json"]);
    assert_eq!(code, Some(0), "{stderr}");
    (serde_json::from_str(&stdout).unwrap(), stdout)
}

/// The row's other cut of `kind`, with its own verification, if listed.
fn alternative<'a>(row: &'a serde_json::Value, kind: &str) -> Option<&'a serde_json::Value> {
    row["alternatives"]
        .as_array()?
        .iter()
        .find(|a| a["cut"]["kind"] == kind)
}

/// The report's row of `module`, if it was priced.
fn row<'a>(report: &'a serde_json::Value, module: &str) -> Option<&'a serde_json::Value> {
    report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["module"] == module)
}

#[test]
fn each_costly_import_is_priced_cut_verified_on_the_model_path_and_its_saving_measured() {
    let (dir, root) = project();
    let before = std::fs::read_to_string(root.join("lzworker/app.py")).unwrap();
    let (r, stdout) = lazy_json(&root, "60");
    assert_eq!(r["schema"], "coldstart.lazy/1");
    let row = |m: &str| row(&r, m);
    assert!(row("tinydep").is_none(), "below the threshold: {stdout}");

    // Used only inside the `format` handler: moved there, verified (the
    // `format` and `load` requests still answer), and start-up faster.
    let fmt = row("slowfmt").expect("slowfmt priced");
    assert_eq!(fmt["importer"], "lzworker.app");
    assert_eq!(fmt["file"], "lzworker/app.py");
    assert_eq!(fmt["line"], 8);
    assert_eq!(fmt["cut"]["kind"], "move into functions");
    assert_eq!(fmt["verdict"], "safe", "{stdout}");
    assert_eq!(fmt["saving"]["verdict"], "faster");
    assert!(fmt["saving"]["ci"]["hi"].as_f64().unwrap() < 1.0);
    assert!(fmt["median_ms"].as_f64().unwrap() >= 60.0);
    // Its 20 MiB table, read around its import by the RSS bootstrap.
    let mib = fmt["rss_mib"].as_f64().unwrap();
    assert!((15.0..30.0).contains(&mib), "{mib}");

    // Its module registers the plugin `load` needs: dropping it passes
    // ready and health, but the `load` request's reply is an error.
    let plug = row("lzworker.plugins").expect("plugins priced");
    assert_eq!(plug["verdict"], "unsafe", "{stdout}");
    let why = plug["why"].as_str().unwrap();
    assert!(
        why.contains("verify request 1 (`load`)")
            && why.contains("no plugin registered for model 'ner'"),
        "{why}"
    );
    assert!(plug["saving"].is_null());

    // Nothing written; the safe cut's diff applies to the project.
    assert_eq!(
        std::fs::read_to_string(root.join("lzworker/app.py")).unwrap(),
        before
    );
    let patch = dir.path().join("p.diff");
    std::fs::write(&patch, fmt["cut"]["diff"].as_str().unwrap()).unwrap();
    let applied = std::process::Command::new("git")
        .args(["apply", "--check", "-p1"])
        .arg(&patch)
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(applied.status.success(), "{applied:?}");
}

#[test]
fn a_worker_started_through_uv_run_is_priced_from_the_python_below_uv() {
    // The project with its own .venv, its worker started as `uv run
    // --no-sync --offline python -m lzworker`: uv forks it and stays its
    // parent, and the pricing reads the Python below it.
    let uv = uv();
    let (dir, root) = fixture_project(
        "project",
        "lz",
        &uv,
        &["run", "--no-sync", "--offline", "python", "-m", "lzworker"],
        false,
        "",
    );
    // The target's environment: the stand-ins, and uv's cache in the
    // temporary folder (never the user's).
    let config = root.join("coldstart.toml");
    let mut toml = std::fs::read_to_string(&config).unwrap();
    toml.push_str(&format!(
        "env = {{ PYTHONPATH = {:?}, UV_CACHE_DIR = {:?} }}\n",
        fixtures().join("lazy/stand-ins").display().to_string(),
        dir.path().join("uv-cache").display().to_string(),
    ));
    std::fs::write(&config, toml).unwrap();
    uv_project(&root, "lz");
    let (code, stdout, stderr) = lazy_at(&root, "60", &["--format", "json", "--max-seconds", "10"]);
    assert_eq!(code, Some(0), "{stderr}");
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let fmt = row(&r, "slowfmt").unwrap_or_else(|| panic!("slowfmt priced: {stdout}"));
    assert_eq!(fmt["file"], "lzworker/app.py", "{stdout}");
    assert_eq!(fmt["line"], 8, "{stdout}");
    assert!(fmt["median_ms"].as_f64().unwrap() >= 60.0, "{stdout}");
    assert_eq!(fmt["cut"]["kind"], "move into functions", "{stdout}");
}

#[test]
fn fix_writes_only_the_safe_cut_and_prices_the_project_again() {
    let (_dir, root) = project();
    let (code, stdout, stderr) = lazy(&root, &["--fix"]);
    assert_eq!(code, Some(0), "{stderr}");
    let table = stdout.split("after the fix").next().unwrap();
    assert!(
        table
            .lines()
            .any(|l| l.contains("slowfmt") && l.contains(" safe ")),
        "{stdout}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.contains("lzworker.plugins") && l.contains(" unsafe ")),
        "{stdout}"
    );
    assert!(stdout.contains("wrote "), "{stdout}");
    let app = std::fs::read_to_string(root.join("lzworker/app.py")).unwrap();
    assert!(app.contains("    import slowfmt\n"), "{app}");
    assert!(
        app.contains("from lzworker import plugins"),
        "the unsafe cut is not written: {app}"
    );
    // Priced again after the fix: slowfmt is no longer a start-up import.
    let after = stdout
        .split("after the fix")
        .nth(1)
        .expect("an after section");
    assert!(!after.contains("slowfmt"), "{after}");
    assert!(after.contains("lzworker.plugins"), "{after}");
}

#[test]
fn on_python_3_15_a_pep_810_lazy_import_is_a_second_candidate_verified_on_its_own() {
    let Some(py315) = test_interpreters::required(15, "coldstart lazy on Python 3.15") else {
        return;
    };
    let (_dir, root) = project_with(&py315);
    let (r, stdout) = lazy_json(&root, "60");
    let fmt = row(&r, "slowfmt").expect("slowfmt priced");
    // The move every Python takes comes first; `lazy` is the second
    // candidate, verified on its own copy.
    assert_eq!(fmt["cut"]["kind"], "move into functions", "{stdout}");
    assert_eq!(fmt["verdict"], "safe", "{stdout}");
    let lazy = alternative(fmt, "lazy import").unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(lazy["verified"], true, "{stdout}");
    assert!(
        lazy["cut"]["diff"]
            .as_str()
            .unwrap()
            .contains("+lazy import slowfmt"),
        "{stdout}"
    );
    let plug = row(&r, "lzworker.plugins").expect("plugins priced");
    assert_eq!(plug["verdict"], "unsafe", "{stdout}");
}

#[test]
fn the_real_transformers_is_priced_as_one_import_and_its_cut_verified() {
    let py = crate::support::venv_python();
    let (_dir, root) = fixture_project(
        "tfproject",
        "tf",
        &py,
        &["-m", "tfsvc"],
        false,
        r#"verify = [{ op = "version" }]"#,
    );
    let out = crate::support::coldstart(&root)
        .args([
            "lazy",
            "--processes",
            "1",
            "--min-ms",
            "60",
            "--max-seconds",
            "10",
        ])
        .args(["--format", "json"])
        .env_remove("PYTHONPATH")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0));
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let tf = row(&r, "transformers").expect("transformers priced");
    assert_eq!(tf["importer"], "tfsvc.app");
    assert_eq!(tf["file"], "tfsvc/app.py");
    assert_eq!(tf["line"], 8);
    assert!(tf["median_ms"].as_f64().unwrap() >= 60.0, "{tf:#}");
    assert!(tf["rss_mib"].as_f64().unwrap() > 1.0, "{tf:#}");
    assert_eq!(tf["cut"]["kind"], "move into functions", "{tf:#}");
    // Verified (the `version` request still answers); whether the saving
    // settles within the short budget depends on the machine.
    assert!(
        tf["verdict"] == "safe" || tf["verdict"] == "no_win",
        "{tf:#}"
    );
    assert!(tf["saving"].is_object(), "{tf:#}");
}

#[test]
fn a_cut_into_a_function_that_runs_at_start_up_is_rejected_by_the_evidence() {
    let (_dir, root) = fixture_project("warmproject", "w", python(), &["-m", "wworker"], true, "");
    let (code, stdout, stderr) = lazy(&root, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let row = stdout
        .lines()
        .find(|l| l.contains("slowfmt") && l.contains("wworker/app.py:9"))
        .unwrap_or_else(|| panic!("slowfmt priced: {stdout}"));
    assert!(
        row.contains("move into functions") && row.contains(" unsafe "),
        "{row}"
    );
    assert!(
        stdout.contains(
            "start-up still imports it on the patched copy (the recorder's evidence): wworker.app -> slowfmt"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("verified patch"), "{stdout}");
}

/// A costly first-party module imported while another costly one is being
/// imported (`outer` imports `inner` at its top) is priced in a row of its
/// own, and its row says why it has no cut of its own: the evidence counts
/// it beneath `outer`, whose cut defers it too.
#[test]
fn a_costly_import_inside_another_says_the_outer_cut_defers_it() {
    let (_dir, root) = project();
    let busy = |ms: u32| {
        format!(
            "import time\n\n_t = time.perf_counter()\nwhile time.perf_counter() - _t < {}:\n    pass\n",
            f64::from(ms) / 1e3
        )
    };
    std::fs::write(
        root.join("lzworker/outer.py"),
        format!("\"\"\"A costly module that imports another.\"\"\"\n\nfrom lzworker import inner  # noqa: F401\n{}", busy(80)),
    )
    .unwrap();
    std::fs::write(root.join("lzworker/inner.py"), busy(80)).unwrap();
    let app = root.join("lzworker/app.py");
    let text = std::fs::read_to_string(&app).unwrap();
    std::fs::write(
        &app,
        text.replacen(
            "from lzworker import registry\n",
            "from lzworker import registry\nfrom lzworker import outer  # noqa: F401\n",
            1,
        ),
    )
    .unwrap();
    let (r, stdout) = lazy_json(&root, "60");
    let inner = row(&r, "lzworker.inner").unwrap_or_else(|| panic!("inner priced: {stdout}"));
    assert_eq!(inner["importer"], "lzworker.outer", "{inner:#}");
    assert_eq!(inner["verdict"], "no_cut", "{inner:#}");
    assert!(
        inner["why"]
            .as_str()
            .unwrap()
            .starts_with("imported while `lzworker.outer` is imported"),
        "{inner:#}"
    );
    assert!(row(&r, "lzworker.outer").is_some(), "{stdout}");
}

/// Ctrl-C in the middle of `lazy --fix` (while a cut's saving is measured):
/// the trial under way finishes, the run stops with 130 and reports the
/// rows tried so far (the next one priced but not tried), writes nothing,
/// and leaves no copy of the project in the temporary folder.
#[test]
fn ctrl_c_stops_after_the_current_trial_writes_nothing_and_leaves_no_copy() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let (_dir, root) = project();
    let app = root.join("lzworker/app.py");
    let before = std::fs::read_to_string(&app).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let child = crate::support::coldstart(&root)
        .args(["lazy", "--processes", "2", "--min-ms", "60", "--fix"])
        .env_remove("PYTHONPATH")
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _reaper = crate::support::KillOnDrop(child.id() as i32);
    let names = || -> Vec<String> {
        std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    // The saving's measurement has begun once its folder exists.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut child = child;
    while !names().iter().any(|n| n.starts_with("coldstart-lazy-")) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("lazy ended ({status}) before it measured a saving");
        }
        assert!(Instant::now() < deadline, "no measurement within 2 minutes");
        // Watching a folder: a short pause between looks, not a fixed wait.
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(130), "{stdout}\n{stderr}");
    support::redactions().bind(|| insta::assert_snapshot!("lazy_interrupted_stderr", stderr));
    // The row it was on is reported; the next one is priced, not tried.
    assert!(stdout.contains("slowfmt "), "{stdout}");
    assert!(
        stdout.contains("lzworker.plugins (no cut): interrupted before its cut was tried"),
        "{stdout}"
    );
    assert!(
        stdout.contains("interrupted: the rows after the last one tried"),
        "{stdout}"
    );
    assert!(!stdout.contains("\nwrote "), "{stdout}");
    assert_eq!(std::fs::read_to_string(&app).unwrap(), before);
    // Only the recorder's shared bootstrap folder (kept on purpose) stays.
    let left: Vec<String> = names()
        .into_iter()
        .filter(|n| !n.starts_with("coldstart-bootstrap-"))
        .collect();
    assert!(left.is_empty(), "left in the temporary folder: {left:?}");
}

/// A worker that is one script (`python worker.py`): its costly top-level
/// `import slowfmt` is made by the main module, a root of the importtime
/// tree with no first-party parent. The recorder's line in `worker.py`
/// says the project made it; it is priced, cut into the handler that reads
/// it (the serving loop called under `if __name__ == "__main__":` is the
/// script's run, not its import), verified and measured faster. The
/// interpreter's own start-up imports, roots too, are never listed.
#[test]
fn a_scripts_own_top_level_import_is_priced_cut_and_measured() {
    let (_dir, root) = fixture_project(
        "scriptproject",
        "sw",
        python(),
        &["worker.py"],
        true,
        r#"verify = [{ op = "format", text = "hi" }]"#,
    );
    // A low threshold, so the interpreter's own roots (encodings, site,
    // the recorder's sitecustomize) are candidates the evidence must drop.
    let (r, stdout) = lazy_json(&root, "1");
    let fmt = row(&r, "slowfmt").expect("slowfmt priced");
    assert_eq!(fmt["importer"], "__main__");
    assert_eq!(fmt["file"], "worker.py");
    assert_eq!(fmt["line"], 10);
    assert_eq!(fmt["cut"]["kind"], "move into functions");
    assert!(
        fmt["cut"]["diff"]
            .as_str()
            .unwrap()
            .contains("def handle_format(req):\n     \"\"\"The ``format`` request: the text, shouted.\"\"\"\n+    import slowfmt\n"),
        "{stdout}"
    );
    assert_eq!(fmt["verdict"], "safe", "{stdout}");
    assert_eq!(fmt["saving"]["verdict"], "faster");
    for row in r["rows"].as_array().unwrap() {
        let module = row["module"].as_str().unwrap();
        assert!(
            !["encodings", "site", "sitecustomize", "codecs", "io", "abc"]
                .contains(&module.split('.').next().unwrap()),
            "an interpreter start-up import listed as the project's: {row:#}"
        );
        assert_eq!(
            row["file"], "worker.py",
            "only the script's imports: {row:#}"
        );
    }
}

/// The real system's shape: the loader's own import is needed at start-up
/// (its task table is read there), so its cut is not safe; `lazy` goes
/// down the chain (loader -> package re-export -> model module -> the
/// stand-in heavy package), finds the cut inside the loader, verifies it
/// with the `load` request and measures it faster; `--fix` writes it and
/// the worker then passes `check` (the stand-in is forbidden).
#[test]
fn when_the_outermost_cut_fails_lazy_cuts_further_down_the_chain_and_fix_passes_check() {
    let (_dir, root) = fixture_project(
        "chainproject",
        "ch",
        python(),
        &["-m", "chworker"],
        true,
        "forbidden = [\"heavyml\"]\nverify = [{ op = \"load\", task = \"utseg\" }]",
    );
    let check = |root: &Path| {
        crate::support::coldstart(root)
            .args(["check", "--format", "json"])
            .env_remove("PYTHONPATH")
            .output()
            .unwrap()
    };
    assert_eq!(
        check(&root).status.code(),
        Some(1),
        "the eager worker fails check"
    );
    let (r, stdout) = lazy_json(&root, "60");
    let loader =
        row(&r, "chworker.loading").unwrap_or_else(|| panic!("the loader is priced: {stdout}"));
    assert_eq!(loader["verdict"], "safe", "{loader:#}");
    let cut = &loader["cut"];
    assert_eq!(
        cut["at"], "chworker/loading.py:4",
        "cut inside the loader: {loader:#}"
    );
    assert_eq!(
        loader["file"], "chworker/app.py",
        "the row is still the loader's import: {loader:#}"
    );
    assert!(
        loader["why"]
            .as_str()
            .unwrap()
            .contains("cut further down its chain"),
        "{loader:#}"
    );
    assert_eq!(loader["saving"]["verdict"], "faster", "{loader:#}");

    let (code, out, err) = lazy(&root, &["--fix"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let loading = std::fs::read_to_string(root.join("chworker/loading.py")).unwrap();
    assert!(
        !loading.starts_with("\"\"\"The model loader: the table of tasks the worker reads at start-up, and\nthe loader of each task's model.\"\"\"\n\nfrom chworker.models.utterance import UtteranceModel"),
        "the loader's import was moved: {loading}"
    );
    let after = check(&root);
    assert_eq!(
        after.status.code(),
        Some(0),
        "the fixed worker passes check: {}",
        String::from_utf8_lossy(&after.stdout)
    );
}

/// `python -m app.worker`: the main module's own top-level imports of the
/// project's modules are priced like any other, each with its importing
/// line in `app/worker.py`.
#[test]
fn a_main_modules_own_imports_are_priced_with_their_lines() {
    let (_dir, root) = fixture_project(
        "mproject",
        "m",
        python(),
        &["-m", "app.worker"],
        false,
        "verify = [{ op = \"slow_a\" }, { op = \"slow_b\" }]",
    );
    let (r, stdout) = lazy_json(&root, "30");
    for (module, line) in [("app.slow_a", 10), ("app.slow_b", 11)] {
        let row = row(&r, module).unwrap_or_else(|| panic!("{module} priced: {stdout}"));
        assert_eq!(row["file"], "app/worker.py", "{row:#}");
        assert_eq!(row["line"], line, "{row:#}");
        assert_eq!(row["verdict"], "safe", "{row:#}");
    }
}

/// A worker whose end is late (it answers shutdown, then takes 3 s to
/// exit, past its 1 s exit timeout) is still priced: its start-up is
/// whole. The report says so, counted, instead of ending with exit 2. Its
/// cuts are verified as it is priced: the patched copy ends late as the
/// original does, which is the worker's doing, not the cut's, so the cuts
/// are not `unsafe` for it (its `slow_a` and `slow_b` requests still
/// answer on the copy).
#[test]
fn a_worker_that_exits_late_is_still_priced_and_the_report_says_so() {
    let (_dir, root) = fixture_project(
        "mproject",
        "m",
        python(),
        &["-m", "app.worker"],
        false,
        "shutdown_timeout = 1.0\ngrace = 0.5\nenv = { COLDSTART_TEST_LATE_EXIT = \"3\" }\nverify = [{ op = \"slow_a\" }, { op = \"slow_b\" }]",
    );
    let (code, stdout, stderr) = lazy_at(&root, "30", &["--format", "json", "--max-seconds", "20"]);
    assert_eq!(code, Some(0), "{stderr}");
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    for module in ["app.slow_a", "app.slow_b"] {
        let row = row(&r, module).unwrap_or_else(|| panic!("{module} priced: {stdout}"));
        assert_ne!(row["verdict"], "unsafe", "{row:#}");
        assert_eq!(row["cut"]["kind"], "move into functions", "{row:#}");
        // The bench times only whole trials, and each of this worker's
        // ends late: the row says its saving was not measured.
        assert!(
            row["saving"].is_object()
                || row["why"]
                    .as_str()
                    .is_some_and(|w| w.contains("its saving was not measured")),
            "{row:#}"
        );
    }
    let warnings = r["warnings"]
        .as_array()
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("failed at their end")),
        "{stdout}"
    );
}

/// The usual worker shape: every request, health included, goes through
/// one `handle(req)`, and `from app import reports` (a stand-in module
/// that busy-waits 150 ms at import) is read only in its `if op ==
/// "report":` branch. Moved to the top of `handle`, the health request
/// imports it and the evidence rejects the cut; moved into that branch,
/// it is safe and start-up is faster. The wider cut is listed, rejected
/// with the evidence's words.
#[test]
fn a_dispatch_functions_import_goes_into_the_branch_that_reads_it() {
    let (_dir, root) = fixture_project(
        "dispatchproject",
        "d",
        python(),
        &["-m", "app.worker"],
        false,
        r#"verify = [{ op = "report", data = [1, 2] }]"#,
    );
    let (r, stdout) = lazy_json(&root, "60");
    let rep = row(&r, "app.reports").unwrap_or_else(|| panic!("app.reports priced: {stdout}"));
    assert_eq!(rep["file"], "app/worker.py", "{rep:#}");
    assert_eq!(rep["line"], 9, "{rep:#}");
    assert_eq!(rep["verdict"], "safe", "{rep:#}");
    assert_eq!(rep["cut"]["kind"], "move into blocks", "{rep:#}");
    assert!(
        rep["cut"]["diff"].as_str().unwrap().contains(
            "     if op == \"report\":\n         data = req.get(\"data\", [])\n+        from app import reports\n"
        ),
        "{rep:#}"
    );
    assert_eq!(rep["saving"]["verdict"], "faster", "{rep:#}");
    let wide = alternative(rep, "move into functions").unwrap_or_else(|| panic!("{rep:#}"));
    assert_eq!(wide["verified"], false, "{rep:#}");
    assert!(
        wide["why"]
            .as_str()
            .unwrap()
            .contains("start-up still imports it on the patched copy"),
        "{rep:#}"
    );
}

/// The same worker on Python 3.15: the branch's cut is still the row's
/// (safe, measured), and `lazy from app import reports` (PEP 810) is a
/// second candidate, verified on its own patched copy.
#[test]
fn on_python_3_15_a_dispatch_workers_lazy_from_is_a_second_verified_candidate() {
    let Some(py315) = test_interpreters::required(15, "coldstart lazy on Python 3.15") else {
        return;
    };
    let (_dir, root) = fixture_project(
        "dispatchproject",
        "d",
        &py315,
        &["-m", "app.worker"],
        false,
        r#"verify = [{ op = "report", data = [1, 2] }]"#,
    );
    let (r, stdout) = lazy_json(&root, "60");
    let rep = row(&r, "app.reports").unwrap_or_else(|| panic!("app.reports priced: {stdout}"));
    assert_eq!(rep["cut"]["kind"], "move into blocks", "{rep:#}");
    assert_eq!(rep["verdict"], "safe", "{rep:#}");
    let lazy = alternative(rep, "lazy import").unwrap_or_else(|| panic!("{rep:#}"));
    assert_eq!(lazy["verified"], true, "{rep:#}");
    assert!(
        lazy["cut"]["diff"]
            .as_str()
            .unwrap()
            .contains("+lazy from app import reports"),
        "{rep:#}"
    );
}

/// The fixture in a monorepo's shape: `project/` beside `shared/` (the
/// stand-ins, as a shared library folder), the target's `PYTHONPATH`
/// `../shared`, relative to the project.
fn monorepo_project() -> (tempfile::TempDir, PathBuf) {
    let (dir, root) = fixture_project(
        "project",
        "lz",
        python(),
        &["-m", "lzworker"],
        false,
        "env = { PYTHONPATH = \"../shared\" }\nverify = [{ op = \"load\", model = \"ner\" }, { op = \"format\", text = \"hi\" }]",
    );
    copy_dir(
        &fixtures().join("lazy/stand-ins"),
        &dir.path().join("shared"),
    );
    (dir, root)
}

#[test]
fn a_shared_folder_beside_the_project_is_imported_by_its_patched_copies() {
    let (_dir, root) = monorepo_project();
    let (r, stdout) = lazy_json(&root, "60");
    let fmt = row(&r, "slowfmt").expect("slowfmt priced");
    assert_eq!(fmt["verdict"], "safe", "{stdout}");
    let plug = row(&r, "lzworker.plugins").expect("plugins priced");
    let why = plug["why"].as_str().unwrap_or("");
    assert!(why.contains("no plugin registered"), "{why}");
    assert!(!stdout.contains("ModuleNotFoundError"), "{stdout}");
}

#[test]
fn a_project_whose_copies_cannot_run_exits_2_and_calls_no_cut_unsafe() {
    let (dir, root) = fixture_project("project", "lz", python(), &["-m", "lzworker"], true, "");
    // The worker reads its deployment's settings by a path relative to
    // the project's parent: a copy of the project elsewhere has none.
    std::fs::create_dir_all(dir.path().join("deploy")).unwrap();
    std::fs::write(dir.path().join("deploy/settings.txt"), "ner\n").unwrap();
    std::fs::write(
        root.join("lzworker/__main__.py"),
        "\"\"\"``python -m lzworker``, with the deployment's settings.\"\"\"\n\nimport os\nimport sys\n\nwith open(os.path.join(os.path.dirname(__file__), \"..\", \"..\", \"deploy\", \"settings.txt\")) as f:\n    f.read()\n\nfrom lzworker import app\n\nsys.exit(app.main())\n",
    )
    .unwrap();
    let (code, stdout, stderr) = lazy(&root, &[]);
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(
        !stdout.contains("unsafe") && !stdout.contains("safe"),
        "{stdout}"
    );
    assert!(
        stderr.contains("a copy of the project with no cut applied could not run"),
        "{stderr}"
    );
}
