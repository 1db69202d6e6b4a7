//! `cargo xtask check` end to end: the reference worker passes,
//! fixture workers (tests/fixtures/boundary/) fail for the right reason,
//! with stand-in torch and transformers packages and, once, the real
//! transformers of the test venv.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support;

fn dir() -> PathBuf {
    support::fixtures().join("boundary")
}

/// A fixture's absolute path.
fn fx(rel: &str) -> String {
    dir().join(rel).display().to_string()
}

fn pythonpath(parts: &[&str]) -> String {
    parts
        .iter()
        .map(|p| dir().join(p).display().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// Runs `cargo xtask check --json ARGS` with PYTHONPATH set (or
/// removed) and returns the exit code and the parsed report.
fn check_json(path: Option<&str>, args: &[&str]) -> (i32, Value) {
    let mut cmd = support::xtask();
    cmd.arg("check")
        .arg("--json")
        .args(["--ready-timeout", "30", "--request-timeout", "15"]);
    cmd.args(args);
    match path {
        Some(p) => cmd.env("PYTHONPATH", p),
        None => cmd.env_remove("PYTHONPATH"),
    };
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let json: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}\n--- stderr ---\n{stderr}"));
    (out.status.code().unwrap_or(-1), json)
}

/// `-- PYTHON ARGS...` with the real interpreter.
fn worker(args: &[&str]) -> Vec<String> {
    let mut v = vec!["--".to_owned(), support::python().display().to_string()];
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

fn run(path: Option<&str>, flags: &[&str], cmd: &[&str]) -> (i32, Value) {
    let w = worker(cmd);
    let mut args: Vec<&str> = flags.to_vec();
    args.extend(w.iter().map(String::as_str));
    check_json(path, &args)
}

fn target(json: &Value) -> &Value {
    &json["targets"][0]
}

fn violation<'a>(json: &'a Value, module: &str) -> &'a Value {
    target(json)["violations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["module"] == module)
        .unwrap_or_else(|| panic!("no violation for {module}: {json:#}"))
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

#[track_caller]
fn origin_is(v: &Value, file: &str, line: u64) {
    let o = &v["origin"];
    let got = o["file"].as_str().unwrap();
    assert!(Path::new(got).ends_with(file), "origin {got} is not {file}");
    assert_eq!(o["line"], line, "{v:#}");
}

#[test]
fn check_reference_worker_passes() {
    let (code, json) = check_json(Some(""), &[]);
    let t = target(&json);
    assert_eq!(code, 0, "{json:#}");
    assert_eq!(json["schema"], "coldstart.check/1");
    assert_eq!(
        (t["name"].as_str(), t["status"].as_str()),
        (Some("refworker"), Some("pass"))
    );
    assert_eq!(
        strings(&t["forbidden"]),
        ["torch", "transformers", "stanza"]
    );
    let procs = t["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 3);
    for p in procs {
        assert_eq!(p["recorder"], "ran", "{p:#}");
        assert!(p["importtime_entries"].as_u64().unwrap() > 10, "{p:#}");
        assert_eq!(p["exit"], "exit code 0");
    }
    assert!(t["ready_ms_median"].as_f64().unwrap() > 0.0);
}

#[test]
fn check_eager_re_export_fails_with_its_chain_and_line() {
    let path = pythonpath(&["workers", "stand-ins"]);
    let (code, json) = run(Some(&path), &["--processes", "2"], &["-m", "eagerworker"]);
    assert_eq!(code, 1, "{json:#}");
    let torch = violation(&json, "torch");
    assert_eq!(
        strings(&torch["chain"]),
        ["eagerworker", "eagerworker.model", "torch"]
    );
    origin_is(torch, "workers/eagerworker/model.py", 3);
    assert_eq!(torch["status"], "loaded");
    assert_eq!(torch["phase"]["phase"], "startup");
    assert_eq!(
        (torch["processes"].as_u64(), torch["of"].as_u64()),
        (Some(2), Some(2))
    );
    assert!(torch["cumulative_us"].as_i64().is_some());
    assert_eq!(strings(&torch["beneath"]), ["torch._C"]);
    // The re-export in the package's __init__.py is named as the link it is.
    let reexport = &torch["chain_lines"][1];
    assert!(
        reexport["file"]
            .as_str()
            .unwrap()
            .ends_with("workers/eagerworker/__init__.py"),
        "{torch:#}"
    );
    assert_eq!(reexport["line"], 5);
    let tf = violation(&json, "transformers");
    origin_is(tf, "workers/eagerworker/model.py", 4);

    // The readable report says the same.
    let out = support::xtask()
        .args(["check", "--processes", "1", "--ready-timeout", "30"])
        .args(worker(&["-m", "eagerworker"]))
        .env("PYTHONPATH", &path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    // Whole, through the one redaction; the ranked lists it folds are
    // checked row by row below.
    support::redactions().bind(|| insta::assert_snapshot!("eager_worker_text", text));
    // Where the start-up time went: by package (torch's stand-in among
    // them), then the project's own modules; the cumulative view only
    // with the tree.
    let by_package = rows_under(
        &text,
        "start-up by package (self time summed over its modules):",
    );
    assert!((1..=8).contains(&by_package.len()), "{text}");
    // Each row: "<ms> ms  <package> (<n> module[s])"; the recorder's own
    // bootstrap, `sitecustomize`, is never among them: it is shown apart,
    // as the instrument's cost.
    for (row, rest) in by_package {
        let (package, count) = rest
            .split_once(" (")
            .unwrap_or_else(|| panic!("{row:?} in {text}"));
        assert_ne!(package, "sitecustomize", "{text}");
        let count = count.strip_suffix(')');
        assert!(
            count.is_some_and(|c| c == "1 module"
                || c.strip_suffix(" modules")
                    .is_some_and(|n| n.parse::<u32>().is_ok_and(|n| n > 1))),
            "{row:?} in {text}"
        );
    }
    // The project's own modules, slowest first: which of them make the
    // top five depends on the machine's timing, so each row is checked to
    // be one of the project's (the worker, its helper, the stand-ins on
    // its path), never a standard-library module.
    let own = rows_under(&text, "slowest first-party modules (self time):");
    assert!((1..=5).contains(&own.len()), "{text}");
    for (row, module) in own {
        let top = module.split('.').next().unwrap();
        assert!(
            ["eagerworker", "protokit", "torch", "transformers"].contains(&top),
            "{row:?} in {text}"
        );
    }
}

/// `--output chrome-json=` and `perfetto=`: the check on one timeline.
/// The eager worker's imports are nested slices on its track, each
/// starting at the recorder's stamp: its `torch` (the stand-in) under
/// `eagerworker.model`, which imported it, in the category `forbidden`,
/// and `torch._C` under `torch`; the worker's phases and coldstart's check
/// of the target are there, and the protocol's messages are flows (five a
/// process). Both files are read back as the trace tests read them.
#[test]
fn check_output_draws_each_processs_phases_and_its_imports_nested_with_the_forbidden_apart() {
    use prost::Message as _;
    let cwd = tempfile::tempdir().unwrap();
    let out = support::coldstart(cwd.path())
        .args(["check", "--processes", "2", "--ready-timeout", "30"])
        .args([
            "--output",
            "chrome-json=t.json",
            "--output",
            "perfetto=t.pb",
        ])
        .args(worker(&["-m", "eagerworker"]))
        .env("PYTHONPATH", pythonpath(&["workers", "stand-ins"]))
        .output()
        .unwrap();
    let out = support::printed(out);
    assert_eq!(out.status.code(), Some(1), "the check fails on torch");
    let events = support::chrome_events(&cwd.path().join("t.json"));
    let (processes, threads) = support::names(&events);
    assert_eq!(
        processes.len(),
        3,
        "coldstart and two workers: {processes:?}"
    );
    for lane in ["checking process 1", "checking process 2"] {
        assert!(threads.values().any(|n| n == lane), "{threads:?}");
    }
    let slices = |pid: &Value, name: &str| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && &e["pid"] == pid && e["name"] == name)
            .cloned()
            .collect()
    };
    let span = |e: &Value| {
        let ts = e["ts"].as_u64().unwrap();
        (ts, ts + e["dur"].as_u64().unwrap())
    };
    let check = events
        .iter()
        .find(|e| e["ph"] == "X" && e["name"] == "check of command")
        .expect("coldstart's check of the target");
    let workers: Vec<Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"] == "start-up")
        .map(|e| e["pid"].clone())
        .collect();
    assert_eq!(workers.len(), 2, "{processes:?}");
    for pid in &workers {
        assert_ne!(pid, &check["pid"]);
        for phase in ["start-up", "ready", "shutting down"] {
            assert_eq!(slices(pid, phase).len(), 1, "{phase} of {pid}");
        }
        let (model, torch, c) = (
            span(&slices(pid, "eagerworker.model")[0]),
            &slices(pid, "torch")[0],
            span(&slices(pid, "torch._C")[0]),
        );
        assert_eq!(torch["cat"], "forbidden", "{torch}");
        assert_eq!(slices(pid, "eagerworker.model")[0]["cat"], "import");
        assert_eq!(slices(pid, "transformers")[0]["cat"], "forbidden");
        let torch = span(torch);
        assert!(
            model.0 <= torch.0 && torch.1 <= model.1,
            "torch {torch:?} within its importer {model:?}"
        );
        assert!(
            torch.0 <= c.0 && c.1 <= torch.1,
            "torch._C {c:?} in {torch:?}"
        );
        let startup = span(&slices(pid, "start-up")[0]);
        assert!(
            startup.0 <= model.0 && model.1 <= startup.1,
            "imported in start-up"
        );
    }
    let counts =
        ::trace::chrome::validate(&std::fs::read_to_string(cwd.path().join("t.json")).unwrap())
            .unwrap();
    assert_eq!(
        counts.flows, 10,
        "ready line, health and reply, shutdown and ack: {counts:?}"
    );
    let (p_names, t_names) = support::perfetto_names(&cwd.path().join("t.pb"));
    assert_eq!(p_names.len(), 3, "{p_names:?}");
    assert!(
        t_names.iter().any(|t| t == "checking process 2"),
        "{t_names:?}"
    );
    let pb = std::fs::read(cwd.path().join("t.pb")).unwrap();
    let trace = ::trace::perfetto::PbTrace::decode(pb.as_slice()).unwrap();
    let forbidden: Vec<&str> = trace
        .packet
        .iter()
        .filter_map(|p| p.track_event.as_ref())
        .filter(|e| e.categories.iter().any(|c| c == "forbidden"))
        .filter_map(|e| e.name.as_deref())
        .collect();
    for name in ["torch", "torch._C", "transformers"] {
        assert!(forbidden.contains(&name), "{name} in {forbidden:?}");
    }
}

/// A trace of a check that runs no worker, or checks twice, is refused
/// before anything runs, saying why.
#[test]
fn check_output_trace_is_refused_with_log_and_with_fix() {
    let cwd = tempfile::tempdir().unwrap();
    let log = dir().join("logs/clean.importtime.log");
    let (code, text) = support::code_and_text(
        support::coldstart(cwd.path())
            .args(["check", "--output", "perfetto=t.pb", "--log"])
            .arg(&log),
    );
    assert_eq!(code, Some(2), "{text}");
    support::redactions().bind(|| insta::assert_snapshot!("check_output_trace_with_log", text));
    let (code, text) = support::code_and_text(
        support::coldstart(cwd.path())
            .args([
                "check",
                "--suggest",
                "--fix",
                "--output",
                "chrome-json=t.json",
            ])
            .args(worker(&["-c", "pass"])),
    );
    assert_eq!(code, Some(2), "{text}");
    support::redactions().bind(|| insta::assert_snapshot!("check_output_trace_with_fix", text));
    assert!(!cwd.path().join("t.json").exists());
}

/// The rows of the report's section under `heading` (up to its blank
/// line), each as the whole row and what follows its "<ms> ms  " figure.
fn rows_under<'a>(text: &'a str, heading: &str) -> Vec<(&'a str, &'a str)> {
    let section = text
        .split(&format!("{heading}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("no {heading:?} in {text}"));
    let rows = section.split("\n\n").next().unwrap().lines();
    rows.map(|row| {
        let (_, rest) = row
            .split_once(" ms  ")
            .unwrap_or_else(|| panic!("{row:?} in {text}"));
        (row, rest)
    })
    .collect()
}

#[test]
fn check_guarded_import_of_a_missing_package_is_attempted() {
    let (code, json) = run(
        Some(&pythonpath(&["workers"])),
        &["--processes", "1"],
        &[&fx("workers/tryworker.py")],
    );
    assert_eq!(code, 1, "{json:#}");
    let torch = violation(&json, "torch");
    assert_eq!(torch["status"], "attempted");
    assert_eq!(torch["detail"], "not installed");
    origin_is(torch, "workers/tryworker.py", 8);
}

#[test]
fn check_import_module_is_caught() {
    let path = pythonpath(&["workers", "stand-ins"]);
    let (code, json) = run(
        Some(&path),
        &["--processes", "1"],
        &[&fx("workers/dynworker.py")],
    );
    assert_eq!(code, 1, "{json:#}");
    let torch = violation(&json, "torch");
    assert_eq!(torch["status"], "loaded");
    assert_eq!(torch["chain_source"], "recorder");
    assert_eq!(torch["in_importtime"], false);
    origin_is(torch, "workers/dynworker.py", 8);
}

#[test]
fn check_import_while_answering_health_is_in_the_health_phase() {
    let path = pythonpath(&["workers", "stand-ins"]);
    let (code, json) = run(
        Some(&path),
        &["--processes", "1"],
        &[&fx("workers/healthworker.py")],
    );
    assert_eq!(code, 1, "{json:#}");
    let torch = violation(&json, "torch");
    assert_eq!(
        torch["phase"],
        serde_json::json!({"phase": "request", "op": "health", "index": 1})
    );
    origin_is(torch, "workers/healthworker.py", 9);
}

#[test]
fn check_crash_before_ready_exits_2_with_the_stderr_tail() {
    let (code, json) = run(
        Some(""),
        &["--processes", "1"],
        &[&fx("workers/crashworker.py")],
    );
    assert_eq!(code, 2, "{json:#}");
    let p = &target(&json)["processes"][0];
    assert_eq!(target(&json)["status"], "error");
    let said = format!(
        "error: {}\nstderr tail:\n{}",
        p["error"].as_str().unwrap(),
        p["stderr_tail"].as_str().unwrap()
    );
    support::redactions().bind(|| insta::assert_snapshot!("check_crash_before_ready", said));
}

#[test]
fn check_module_checks_an_import_alone() {
    let path = pythonpath(&["modules", "stand-ins"]);
    let py = support::python().display().to_string();
    let (code, json) = check_json(
        Some(&path),
        &["--module", "heavypkg", "--python", &py, "--processes", "1"],
    );
    assert_eq!(code, 1, "{json:#}");
    let torch = violation(&json, "torch");
    assert_eq!(
        strings(&torch["chain"]),
        ["heavypkg", "heavypkg.backend", "torch"]
    );
    origin_is(torch, "modules/heavypkg/backend.py", 1);
    assert_eq!(target(&json)["origin"], "--module");

    // Through the command's old name, which scripts may still call: the
    // same check, the same report.
    let out = support::xtask()
        .args([
            "import-boundary",
            "--json",
            "--module",
            "lightpkg",
            "--python",
            &py,
        ])
        .args(["--processes", "1"])
        .env("PYTHONPATH", &path)
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{json:#}");
    assert_eq!(target(&json)["origin"], "--module");
}

#[test]
fn check_log_judges_a_recorded_importtime_log() {
    let log = dir().join("logs/eager.importtime.log");
    let (code, json) = check_json(None, &["--log", log.to_str().unwrap()]);
    assert_eq!(code, 1, "{json:#}");
    let torch = violation(&json, "torch");
    assert_eq!(
        strings(&torch["chain"]),
        ["eagerworker", "eagerworker.model", "torch"]
    );
    assert_eq!(torch["origin"], Value::Null, "no recorder behind a log");
    assert_eq!(target(&json)["processes"][0]["recorder"], "not_used");

    let out = support::xtask()
        .args(["check", "--tree", "--log"])
        .arg(&log)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    // A recorded log judges the same every time, to the microsecond: the
    // whole report with its tree and ranked lists, nothing redacted.
    insta::assert_snapshot!("check_log_tree_eager", text);

    let clean = dir().join("logs/clean.importtime.log");
    assert_eq!(check_json(None, &["--log", clean.to_str().unwrap()]).0, 0);

    let out = support::xtask()
        .args(["check", "--log"])
        .arg(dir().join("logs/not-a-log.txt"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    support::redactions().bind(|| insta::assert_snapshot!("check_log_not_a_log", stderr));
}

#[test]
fn check_block_makes_the_import_fail_with_the_policy_message() {
    let path = pythonpath(&["workers", "stand-ins"]);
    // A guarded import is refused and the worker goes on: blocked, exit 1.
    let (code, json) = run(
        Some(&path),
        &["--processes", "1", "--block"],
        &[&fx("workers/tryworker.py")],
    );
    assert_eq!(code, 1, "{json:#}");
    assert_eq!(violation(&json, "torch")["status"], "blocked");
    // An eager import is refused and the worker dies of it: exit 2, and the
    // stderr tail carries the policy's message.
    let (code, json) = run(
        Some(&path),
        &["--processes", "1", "--block"],
        &["-m", "eagerworker"],
    );
    assert_eq!(code, 2, "{json:#}");
    let tail = target(&json)["processes"][0]["stderr_tail"]
        .as_str()
        .unwrap();
    // The recorder's frames: the bootstrap's own line numbers change with
    // every edit of it, the functions that refused the import do not.
    let mut settings = support::redactions();
    settings.add_filter(r#"("\[TMP\]", line )\d+"#, "${1}[LINE]");
    settings.bind(|| insta::assert_snapshot!("check_blocked_import_tail", tail));
    assert_eq!(violation(&json, "torch")["status"], "blocked");
}

#[test]
fn check_recorder_chains_to_the_existing_sitecustomize() {
    let path = pythonpath(&["workers", "presite"]);
    let (code, json) = run(
        Some(&path),
        &["--processes", "1"],
        &[&fx("workers/chainedworker.py")],
    );
    assert_eq!(code, 0, "{json:#}");
    let p = &target(&json)["processes"][0];
    assert_eq!(p["recorder"], "ran");
    assert!(
        p["chained_sitecustomize"]
            .as_str()
            .unwrap()
            .ends_with("presite/sitecustomize.py"),
        "{p:#}"
    );
}

#[test]
fn check_isolated_worker_is_judged_by_importtime_alone() {
    let (code, json) = run(
        Some(""),
        &["--processes", "1"],
        &["-I", "-X", "importtime", &fx("workers/isolatedworker.py")],
    );
    assert_eq!(code, 1, "{json:#}");
    let p = &target(&json)["processes"][0];
    assert_eq!(p["recorder"], "did_not_run");
    let notes = strings(&p["verdict"]["notes"]).join("\n");
    support::redactions().bind(|| insta::assert_snapshot!("check_isolated_notes", notes));
    let torch = violation(&json, "torch");
    assert_eq!(
        (torch["status"].as_str(), torch["recorded"].as_bool()),
        (Some("loaded"), Some(false))
    );
    assert_eq!(strings(&torch["chain"]), ["torch"]);
}

#[test]
fn check_worker_without_any_evidence_could_not_be_checked() {
    // -I without -X importtime: neither the recorder nor importtime.
    let (code, json) = run(
        Some(""),
        &["--processes", "1"],
        &["-I", &fx("workers/isolatedworker.py")],
    );
    assert_eq!(code, 2, "{json:#}");
    let err = target(&json)["processes"][0]["error"].as_str().unwrap();
    assert!(err.starts_with("no import evidence"), "{err}");
}

#[test]
fn check_real_transformers_fails_through_its_own_modules() {
    let py = support::venv_python();
    let path = pythonpath(&["workers"]);
    let mut args = vec![
        "--".to_owned(),
        py.display().to_string(),
        "-m".into(),
        "tfapp".into(),
    ];
    let mut flags = vec!["--processes", "1"];
    flags.extend(args.iter().map(String::as_str));
    let (code, json) = check_json(Some(&path), &flags);
    assert_eq!(code, 1, "{json:#}");
    let tf = violation(&json, "transformers");
    assert_eq!(
        strings(&tf["chain"]),
        ["tfapp", "tfapp.models", "transformers"]
    );
    origin_is(tf, "workers/tfapp/models.py", 3);
    assert!(
        strings(&tf["beneath"])
            .iter()
            .any(|m| m.starts_with("transformers.")),
        "{tf:#}"
    );
    // torch is not installed: transformers only probes for it.
    let probed = target(&json)["processes"][0]["verdict"]["probed"].clone();
    assert!(strings(&probed).contains(&"torch"), "{probed:#}");

    // A dependency forbidden on its own shows the chain through
    // transformers' own modules.
    args.insert(0, "huggingface_hub".into());
    args.insert(0, "--forbid".into());
    let mut flags = vec!["--processes", "1"];
    flags.extend(args.iter().map(String::as_str));
    let (code, json) = check_json(Some(&path), &flags);
    assert_eq!(code, 1, "{json:#}");
    let hub = violation(&json, "huggingface_hub");
    let chain = strings(&hub["chain"]);
    assert_eq!(
        chain[..3],
        ["tfapp", "tfapp.models", "transformers"],
        "{chain:?}"
    );
    assert!(
        chain.len() > 4
            && chain[3..chain.len() - 1]
                .iter()
                .all(|m| m.starts_with("transformers.")),
        "{chain:?}"
    );
}

/// The reference worker's start-up import tree, first-party modules in full
/// and the standard library collapsed: a new start-up import shows up here
/// in review.
#[test]
fn check_reference_worker_import_tree_snapshot() {
    use std::io::Write;
    use std::process::{Command, Stdio};

    let mut child = Command::new(support::python())
        .args([
            "-m",
            "refworker",
            "--test-echo",
            "--profile",
            "gpu",
            "--force-cpu",
        ])
        .env("PYTHONPATH", support::worker_dir())
        .env("PYTHONPROFILEIMPORTTIME", "1")
        .env("PYTHONHASHSEED", "0")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"op\": \"health\"}\n{\"op\": \"shutdown\"}\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = importguard::importtime::parse(&out.stderr);
    let view = report::importtime::View::new(&log, Some(0), None);
    let opts = report::importtime::SnapshotOptions {
        first_party: vec!["refworker".into()],
        ..Default::default()
    };
    let mut text = Vec::new();
    report::importtime::snapshot(&log, &view, &opts, &mut text).unwrap();
    insta::assert_snapshot!("refworker_import_tree", String::from_utf8(text).unwrap());
}

/// `cargo xtask check-cost --processes 1 --rounds 2 -- PYTHON [FLAGS] well_behaved.py`.
fn check_cost_of(python_flags: &[&str]) -> std::process::Output {
    crate::support::xtask()
        .args(["check-cost", "--processes", "1", "--rounds", "2", "--"])
        .arg(crate::support::python())
        .args(python_flags)
        .arg(crate::support::fixtures().join("workers/well_behaved.py"))
        .output()
        .unwrap()
}

/// `check-cost` through xtask: the recorder's own line, with its ratio,
/// interval and the budget, beside the check's figures.
#[test]
fn check_cost_measures_the_recorder_alone_against_a_plain_lifecycle() {
    let out = check_cost_of(&[]);
    let text = support::succeeded(&out);
    let line = text
        .lines()
        .find(|l| l.contains("the recorder and its audit hook alone (no importtime)"))
        .unwrap_or_else(|| panic!("no recorder line:\n{text}"));
    assert!(
        line.contains("ready median") && line.contains("against plain"),
        "{line}"
    );
    assert!(
        line.contains("95% CI") && line.contains("the 5% budget"),
        "{line}"
    );
    // Its floor: the null recorder, measured in the same rounds.
    assert!(
        text.contains("its floor, the null recorder (the same two channels, no work behind them): ready median"),
        "{text}"
    );
    assert!(
        text.contains("the recorder's own work, over that floor: ratio"),
        "{text}"
    );
    assert!(text.contains("CPU floor"), "{text}");
}

/// A worker the recorder cannot reach (`-I` ignores PYTHONPATH) gets no
/// recorder figure: the benchmark stops with the reason, exit 2.
#[test]
fn check_cost_gives_no_recorder_figure_where_the_recorder_did_not_run() {
    let out = check_cost_of(&["-I"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    support::redactions().bind(|| insta::assert_snapshot!("check_cost_no_recorder", stderr));
}
