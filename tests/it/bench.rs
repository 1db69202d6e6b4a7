//! `cargo xtask bench` and `cargo xtask compare` end to end, over the tiny
//! stand-in worker in tests/fixtures/bench/. They assert what the tool
//! concludes (a verdict, a count, a valid file), never a machine-dependent
//! time. The Ctrl-C test waits by watching trials.jsonl grow, not by
//! sleeping a fixed time.

use std::path::Path;
use std::process::Stdio;

use serde_json::Value;

use crate::support::{self, lines_in, signal_and_wait, trials, wait_for_trials};

/// The stand-in's argv: the real interpreter (no shim), `-S` to start fast.
fn standin_argv(extra: &[&str]) -> Vec<String> {
    let mut v = vec![
        support::python().display().to_string(),
        "-S".to_owned(),
        support::standin("bench").display().to_string(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// The same argv as one quoted command line, for `--vs`.
fn quoted(argv: &[String]) -> String {
    argv.iter()
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Quick statistics: fewer resamples keep the tests fast.
const QUICK: &[&str] = &["--resamples", "2000"];

pub(crate) fn bench(out: &Path, flags: &[&str], argv: &[String]) -> std::process::Output {
    let mut cmd = support::xtask();
    cmd.arg("bench")
        .arg("--out")
        .arg(out)
        .args(QUICK)
        .args(flags)
        .arg("--")
        .args(argv);
    support::printed(cmd.output().expect("running cargo xtask bench"))
}

pub(crate) fn summary(out: &Path) -> Value {
    let text = std::fs::read_to_string(out.join("summary.json")).expect("summary.json");
    serde_json::from_str(&text).expect("summary.json is JSON")
}

#[test]
fn bench_detects_a_fixed_startup_delay() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let slow = quoted(&standin_argv(&["--delay-ms", "60"]));
    let o = bench(
        &out,
        &["--warmup", "1", "--trials", "8", "--vs", &slow],
        &standin_argv(&[]),
    );
    assert_eq!(o.status.code(), Some(0));
    let s = summary(&out);
    let ratio = &s["phases"]["ready"]["ratio"];
    assert_eq!(ratio["verdict"], "slower", "{ratio}");
    assert!(ratio["ci"]["lo"].as_f64().unwrap() > 1.0, "{ratio}");
    assert_eq!(ratio["paired"], true);
    assert_eq!(ratio["n_a"], 8);
    assert_eq!(s["phases"]["ready"]["a"]["n"], 8);
    assert_eq!(s["trials"]["run"], 18);
    assert_eq!(s["trials"]["warmup"], 2);
    assert_eq!(s["trials"]["failed"], 0);
    assert_eq!(s["configuration"]["interleaved"], true);
    let targets = s["environment"]["targets"].as_array().unwrap();
    assert_eq!(targets[0]["python"]["shim"], false);
    assert!(
        targets[0]["env_removed"]
            .as_array()
            .unwrap()
            .contains(&Value::from("PYTHONPROFILEIMPORTTIME"))
    );
    // Every trial on disk, warm-ups marked, A and B alternating.
    let recs = trials(&out);
    assert_eq!(recs.len(), 18);
    assert_eq!(
        recs.iter()
            .filter(|r| r.kind == timeline::TrialKind::Warmup)
            .count(),
        2
    );
    assert!(recs.iter().all(|r| r.phases.pipe_latency_ns.is_some()));
    // hyperfine-compatible export: one entry per phase and variant.
    let h: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("hyperfine.json")).unwrap())
            .unwrap();
    let commands: Vec<&str> = h["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["command"].as_str().unwrap())
        .collect();
    assert_eq!(commands[..2], ["ready (A)", "ready (B)"]);
    assert_eq!(h["results"][0]["times"].as_array().unwrap().len(), 8);
    let svg = std::fs::read_to_string(out.join("phases.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    crate::support::assert_well_formed_svg(&svg);
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.contains("| ready | "), "{md}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("slower"), "{stdout}");
}

#[test]
fn output_writes_the_runs_renderings_where_a_job_wants_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let md = dir.path().join("ci/summary.md");
    let json = dir.path().join("bench.json");
    let o = bench(
        &out,
        &[
            "--warmup",
            "0",
            "--trials",
            "3",
            "--output",
            &format!("markdown={}", md.display()),
            "--output",
            &format!("json={}", json.display()),
        ],
        &standin_argv(&[]),
    );
    assert_eq!(o.status.code(), Some(0));
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    assert_eq!(read(&md), read(&out.join("summary.md")));
    assert_eq!(read(&json), read(&out.join("summary.json")));
}

/// `--output perfetto=` and `chrome-json=`: the run on one timeline, as
/// Perfetto's protobuf (decoded against its schema) and Chrome's JSON
/// (checked by the format's rules): coldstart's track and one per worker,
/// each worker's start-up, ready and shutdown, and five flows a trial
/// (the ready line, the health request and its reply, the shutdown and
/// its acknowledgement).
#[test]
fn output_writes_the_run_as_one_trace_with_each_workers_phases_and_messages() {
    use prost::Message as _;
    let dir = tempfile::tempdir().unwrap();
    let (pb, json) = (
        dir.path().join("bench.pftrace"),
        dir.path().join("bench.json"),
    );
    let o = bench(
        &dir.path().join("run"),
        &[
            "--warmup",
            "1",
            "--trials",
            "3",
            "--output",
            &format!("perfetto={}", pb.display()),
            "--output",
            &format!("chrome-json={}", json.display()),
        ],
        &standin_argv(&[]),
    );
    assert_eq!(o.status.code(), Some(0));
    let text = std::fs::read_to_string(&json).unwrap();
    let counts = ::trace::chrome::validate(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        counts.processes, 5,
        "coldstart and four workers: {counts:?}"
    );
    assert_eq!(counts.flows, 20, "five messages a trial: {counts:?}");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let names = |n: &str| {
        doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"] == n)
            .count()
    };
    assert_eq!(names("start-up"), 4);
    assert_eq!(names("health"), 4);
    assert_eq!(names("trial 1 of command"), 1, "{text}");
    let trace = ::trace::perfetto::PbTrace::decode(std::fs::read(&pb).unwrap().as_slice()).unwrap();
    let processes = trace
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref())
        .filter(|t| t.process.is_some())
        .count();
    assert_eq!(processes, 5);
}

#[test]
fn bench_a_against_itself_claims_no_change() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // A fixed 20 ms of start-up work on both sides keeps the relative
    // spread down on a loaded machine; 30 rounds keep the interval narrow.
    let argv = standin_argv(&["--delay-ms", "20"]);
    let o = bench(
        &out,
        &["--warmup", "1", "--trials", "30", "--vs", &quoted(&argv)],
        &argv,
    );
    assert_eq!(o.status.code(), Some(0));
    let s = summary(&out);
    let ratio = &s["phases"]["ready"]["ratio"];
    // Equivalent (the interval inside the 2% band) or inconclusive (the
    // run could not tell), never a change.
    assert!(
        ratio["verdict"] == "equivalent" || ratio["verdict"] == "inconclusive",
        "{ratio}"
    );
    assert_eq!(s["ab"]["basis"][0], "ready", "{}", s["ab"]);
}

#[test]
fn bench_records_and_counts_a_protocol_failure() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let counter = dir.path().join("starts");
    let counter = counter.display().to_string();
    // The third start (the second measured trial) writes a broken ready line.
    let o = bench(
        &out,
        &["--warmup", "1", "--trials", "3"],
        &standin_argv(&["--break-on", "3", &counter]),
    );
    assert_eq!(o.status.code(), Some(1), "failures make the exit code 1");
    let recs = trials(&out);
    assert_eq!(recs.len(), 4);
    let bad = &recs[2];
    match &bad.outcome {
        timeline::Outcome::Failed { stage, message } => {
            assert_eq!(*stage, timeline::Stage::Startup);
            assert!(message.contains("ready"), "{message}");
        }
        other => panic!("trial 2 should have failed, got {other:?}"),
    }
    assert!(bad.phases.ready_ns.is_none());
    assert!(
        recs.iter()
            .enumerate()
            .all(|(i, r)| i == 2 || r.outcome.is_correct())
    );
    let s = summary(&out);
    assert_eq!(s["trials"]["failed"], 1);
    assert_eq!(s["trials"]["failed_by_stage"]["start-up"], 1);
    assert_eq!(s["trials"]["failure_rate"], 0.25);
    assert_eq!(s["phases"]["ready"]["a"]["n"], 2);
    let warnings = s["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w["kind"] == "failures"),
        "{warnings:?}"
    );
}

#[test]
fn a_worker_that_never_completes_a_trial_is_given_up_after_three() {
    // The stand-in refuses its argument and exits before its ready line:
    // every trial would fail, each after up to the ready timeout. The run
    // stops at the third failure and says why, instead of running all 11.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = bench(
        &out,
        &["--warmup", "1", "--trials", "10"],
        &standin_argv(&["--no-such-flag"]),
    );
    assert_eq!(o.status.code(), Some(1), "failures make the exit code 1");
    let recs = trials(&out);
    assert_eq!(recs.len(), 3, "{recs:#?}");
    assert!(recs.iter().all(|r| !r.outcome.is_correct()));
    let s = summary(&out);
    assert_eq!(s["trials"]["gave_up"], "A", "{}", s["trials"]);
    assert_eq!(s["trials"]["failed_by_stage"]["start-up"], 3);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    // Why the run stopped, and the first failure in the worker's own words.
    let text = format!("{stdout}{stderr}");
    support::redactions().bind(|| insta::assert_snapshot!("bench_given_up", text));
}

#[test]
fn an_interleaved_run_gives_up_on_the_side_that_never_completes() {
    // A works, B never starts: the comparison cannot be made, so the run
    // stops at B's third failure and the sequential answer says why.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let broken = quoted(&standin_argv(&["--no-such-flag"]));
    let o = bench(
        &out,
        &["--warmup", "1", "--max-seconds", "60", "--vs", &broken],
        &standin_argv(&[]),
    );
    assert_eq!(o.status.code(), Some(1));
    let recs = trials(&out);
    let of = |v: timeline::Variant| recs.iter().filter(|r| r.variant == v).count();
    assert_eq!(of(timeline::Variant::B), 3, "{recs:#?}");
    assert!((2..=4).contains(&of(timeline::Variant::A)), "{recs:#?}");
    let s = summary(&out);
    assert_eq!(s["trials"]["gave_up"], "B", "{}", s["trials"]);
    assert_eq!(
        s["ab"]["sequential"]["stopped"]["reason"], "gave_up",
        "{}",
        s["ab"]
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("stopped: gave up after") && stdout.contains("B never completed a trial"),
        "{stdout}"
    );
}

/// Lines in a file, 0 when it does not exist yet.
#[test]
fn bench_ctrl_c_keeps_finished_trials_and_summarises_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut child = std::process::Command::new(support::xtask_bin())
        .current_dir(support::root())
        .arg("bench")
        .arg("--out")
        .arg(&out)
        .args(QUICK)
        .args(["--warmup", "0", "--trials", "1000", "--"])
        .args(standin_argv(&[]))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting cargo xtask bench");
    wait_for_trials(&mut child, &out.join("trials.jsonl"), 3);
    let (code, stdout, stderr) = signal_and_wait(&mut child, libc::SIGINT);
    assert_eq!(code, Some(130), "{stdout}{stderr}");
    let recs = trials(&out);
    assert!(recs.len() >= 3 && recs.len() < 1000, "{}", recs.len());
    assert!(recs.iter().all(|r| r.outcome.is_correct()));
    let s = summary(&out);
    assert_eq!(s["trials"]["interrupted"], true);
    assert_eq!(s["trials"]["run"], recs.len());
    assert_eq!(s["phases"]["ready"]["a"]["n"], recs.len());
    assert_eq!(s["warnings"][0]["kind"], "interrupted");
    assert!(out.join("hyperfine.json").exists() && out.join("phases.svg").exists());
}

#[test]
fn compare_of_saved_runs_gives_the_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let fast = dir.path().join("fast");
    let slow = dir.path().join("slow");
    let flags = ["--warmup", "0", "--trials", "6"];
    assert!(bench(&fast, &flags, &standin_argv(&[])).status.success());
    assert!(
        // A slowdown no load masks in 6 unpaired trials: at load 10 on the
        // 2 cores the fast side's ready ranged 40 to 132 ms, and 60 ms
        // more was called inconclusive.
        bench(&slow, &flags, &standin_argv(&["--delay-ms", "400"]))
            .status
            .success()
    );
    let run = |a: &Path, b: &Path, json: &[&str], threshold: &str| {
        support::xtask()
            .arg("compare")
            .arg(a)
            .arg(b)
            .args(json)
            .args(["--resamples", "2000", "--fail-if-slower"])
            .args(["--noise-threshold", threshold])
            .output()
            .unwrap()
    };
    let compare = |a: &Path, b: &Path| {
        let o = run(a, b, &["--format", "json"], "2%");
        let v: Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
        (o.status.code(), v)
    };
    // `--json` is the old spelling of `--format json`, and a share is
    // `2%` or `0.02` as in bench: the same answer, byte for byte.
    let old = run(&fast, &slow, &["--json"], "0.02");
    let new = run(&fast, &slow, &["--format", "json"], "2%");
    assert_eq!(old.stdout, new.stdout);
    assert_eq!(old.status.code(), new.status.code());
    let (code, v) = compare(&fast, &slow);
    assert_eq!(v["schema"], "coldstart.compare/1");
    assert_eq!(v["unpaired"], true);
    assert_eq!(v["phases"]["ready"]["ratio"]["verdict"], "slower", "{v}");
    assert_eq!(v["phases"]["ready"]["ratio"]["paired"], false);
    assert_eq!(code, Some(1), "--fail-if-slower");
    let (code, v) = compare(&fast, &fast);
    let ratio = &v["phases"]["ready"]["ratio"];
    assert_eq!(ratio["ratio"], 1.0);
    assert!(
        ratio["verdict"] == "equivalent" || ratio["verdict"] == "inconclusive",
        "{ratio}"
    );
    assert_eq!(code, Some(0));
}

#[test]
fn bench_concurrency_times_a_pool_of_workers() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = bench(
        &out,
        &[
            "--warmup",
            "0",
            "--trials",
            "2",
            "--concurrency",
            "3",
            "--health",
            "2",
        ],
        &standin_argv(&[]),
    );
    assert_eq!(o.status.code(), Some(0));
    let recs = trials(&out);
    assert_eq!(recs.len(), 2);
    for r in &recs {
        assert_eq!(r.workers.len(), 3);
        assert_eq!(r.phases.health_ns.len(), 6, "2 round trips x 3 workers");
        let first_spawn = r.workers.iter().map(|w| w.marks.spawned_ns).min().unwrap();
        let last_ready = r
            .workers
            .iter()
            .map(|w| w.marks.ready_read_ns.unwrap())
            .max()
            .unwrap();
        assert_eq!(r.phases.ready_ns, Some(last_ready - first_spawn));
        let pids: std::collections::HashSet<_> = r.workers.iter().map(|w| w.pid).collect();
        assert_eq!(pids.len(), 3, "three distinct workers");
    }
    let s = summary(&out);
    assert_eq!(s["configuration"]["concurrency"], 3);
    assert_eq!(s["phases"]["health"]["a"]["n"], 12);
}

#[test]
fn bench_precision_stops_between_the_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = bench(
        &out,
        &[
            "--warmup",
            "0",
            "--precision",
            "50%",
            "--min-trials",
            "3",
            "--max-trials",
            "6",
        ],
        &standin_argv(&[]),
    );
    assert_eq!(o.status.code(), Some(0));
    let s = summary(&out);
    assert_eq!(s["configuration"]["precision"], 0.5);
    assert_eq!(s["configuration"]["trials"], Value::Null);
    let ready = &s["phases"]["ready"]["a"];
    let n = ready["n"].as_u64().unwrap();
    assert!((3..=6).contains(&n), "{n}");
    let half = (ready["median_ci"]["hi"].as_f64().unwrap()
        - ready["median_ci"]["lo"].as_f64().unwrap())
        / 2.0;
    let reached = half / ready["median"].as_f64().unwrap() <= 0.5;
    let warned = s["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["kind"] == "too_few_trials");
    // Either it stopped early because it was precise enough, or it ran to
    // --max-trials and says the precision was not reached.
    assert!(
        (n < 6 && reached) || (n == 6 && (reached || warned)),
        "n {n}, half-width {half}, {s}"
    );
}

#[test]
fn vs_without_a_count_runs_until_the_comparison_is_decided() {
    // A 60 ms slower start-up is decided `slower` long before the budget;
    // the run says why it stopped and how many rounds it took.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let slow = quoted(&standin_argv(&["--delay-ms", "60"]));
    let o = bench(
        &out,
        &["--warmup", "1", "--max-seconds", "60", "--vs", &slow],
        &standin_argv(&[]),
    );
    assert_eq!(o.status.code(), Some(0));
    let s = summary(&out);
    assert_eq!(
        s["phases"]["ready"]["ratio"]["verdict"], "slower",
        "{}",
        s["phases"]
    );
    let stopped = &s["ab"]["sequential"]["stopped"];
    assert_eq!(stopped["reason"], "decided", "{stopped}");
    let rounds = stopped["rounds"].as_u64().unwrap();
    assert!((12..=400).contains(&rounds), "{stopped}");
    assert_eq!(s["configuration"]["trials"], Value::Null);
    assert!(String::from_utf8_lossy(&o.stdout).contains("stopped: decided after"));
}

/// A disk that fills at the end of a run, made without root: the bench runs
/// under a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored so a write past
/// it fails with EFBIG as a full disk fails with ENOSPC) that the trial log
/// fits in and `summary.json` and `phases.svg` do not.
#[test]
fn a_full_disk_at_the_end_prints_the_results_and_leaves_each_file_whole_or_absent() {
    use std::os::unix::process::CommandExt as _;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut cmd = crate::support::coldstart(dir.path());
    cmd.arg("bench")
        .arg("--out")
        .arg(&out)
        .args(QUICK)
        .args(["--warmup", "0", "--trials", "2", "--"])
        .args(standin_argv(&[]))
        .stdin(Stdio::null());
    const LIMIT: libc::rlim_t = 5000;
    // SAFETY: two async-signal-safe calls in the child before exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: LIMIT,
                rlim_max: LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(2), "{stdout}{stderr}");
    // The results come first, whatever could not be written.
    assert!(
        stdout.contains("2 trials (0 warm-up, 2 measured)"),
        "{stdout}"
    );
    assert!(stdout.contains("ready"), "{stdout}");
    assert!(
        stderr.contains("could not write")
            && stderr.contains("summary.json: File too large (os error 27)\n"),
        "{stderr}"
    );
    let missing_line = stderr
        .lines()
        .find(|l| l.starts_with("missing from "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(missing_line.contains("summary.json"), "{missing_line}");
    assert!(lines_in(&out.join("trials.jsonl")) == 2);
    // Each file is whole or absent, and the absent ones are named.
    let mut names = Vec::new();
    for e in std::fs::read_dir(&out).unwrap() {
        let e = e.unwrap();
        names.push(e.file_name().to_string_lossy().into_owned());
    }
    for name in ["summary.json", "summary.md", "hyperfine.json", "phases.svg"] {
        let path = out.join(name);
        if missing_line.contains(name) {
            assert!(!path.exists(), "{name} is named missing but is there");
        } else {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_ne!(
                mode & 0o044,
                0,
                "{name}: as readable as a file fs::write makes"
            );
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.len() < LIMIT as usize, "{name}");
            if name.ends_with(".json") {
                serde_json::from_str::<serde_json::Value>(&text).unwrap();
            }
        }
    }
    assert!(!out.join("summary.json").exists());
    names.retain(|n| n.starts_with('.'));
    assert!(names.is_empty(), "temporary files left: {names:?}");
}
