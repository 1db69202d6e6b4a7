//! `bench --pool` end to end over the serve stand-in
//! (tests/fixtures/serve/standin.py, `--startup-ms` its deliberately slow
//! start, `--service-ms` its service time): the requests that arrive while
//! a killed worker is replaced wait for it, and a signal mid-run leaves no
//! worker. Every bound follows from the stand-in's sleeps (a start-up and a
//! service never shorter than asked), with margins a loaded machine cannot
//! cross.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use phases::pool::{PoolRequest, Window};
use serde_json::Value;

use crate::bench::summary;
use crate::support::{
    self, KillOnDrop, assert_group_gone, lines_in, running_with, signal_and_wait,
};

/// The stand-in's argv with the real interpreter, `marker` as an `-X`
/// option (ignored by Python, seen in every worker's command line).
fn argv(marker: &str, extra: &[&str]) -> Vec<String> {
    let mut v = vec![
        support::python().display().to_string(),
        "-X".to_owned(),
        marker.to_owned(),
        support::standin("serve").display().to_string(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// The workers whose argv holds `marker` (not the harness, whose own
/// argv names the worker's command, nor its guard): (pid, argv).
fn workers(marker: &str) -> Vec<(u32, String)> {
    let python = support::python().display().to_string();
    running_with(marker)
        .into_iter()
        .filter(|(_, argv)| argv.starts_with(&python))
        .collect()
}

fn ms(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is not a number"))
}

#[test]
fn a_slow_starting_replacement_shows_in_the_latency_of_the_requests_that_wait_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // Two workers at 20 ms a request serve 100/s; 75/s are offered. The
    // kill at 0.4 s leaves one (50/s) for the replacement's start-up of at
    // least 400 ms: the queue grows by at least 25/s all that while, so a
    // request arriving in the window's middle waits for 5 before it, 100
    // ms or more; before the kill, nothing queues.
    let marker = support::marker("pool", "slow-replacement");
    let o = crate::bench::bench(
        &out,
        &[
            "--warmup",
            "0",
            "--trials",
            "1",
            "--pool",
            "2",
            "--rate",
            "75",
            "--duration",
            "1.5",
            "--replace-at",
            "0.4",
        ],
        &argv(&marker, &["--service-ms", "20", "--startup-ms", "400"]),
    );
    assert_eq!(o.status.code(), Some(0));
    let s = summary(&out);
    let pool = &s["pool"][0];
    assert_eq!(pool["workers"], 2);
    assert_eq!(pool["scheduled"], 112);
    let (ok, rejections) = (
        pool["ok"].as_u64().unwrap(),
        pool["rejections"].as_u64().unwrap(),
    );
    assert_eq!(ok + rejections, 112, "{pool:#}");
    assert!(
        rejections <= 1,
        "only the request in flight at the kill is lost: {pool:#}"
    );
    let windows = pool["windows"].as_array().unwrap();
    let names: Vec<&str> = windows
        .iter()
        .map(|w| w["window"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["before", "cold_start", "after"]);
    let before = ms(&windows[0]["latency_ms"]["median"]);
    let during = ms(&windows[1]["latency_ms"]["median"]);
    assert!(
        during >= 2.0 * before && during >= before + 50.0,
        "replacement window median {during} ms against {before} ms before the kill"
    );
    assert!(
        ms(&windows[1]["queue_wait_ms"]["median"]) >= 40.0,
        "{:#}",
        windows[1]
    );
    let replacement = &pool["members"][2];
    assert_eq!(replacement["role"], "replacement");
    assert!(ms(&replacement["ready_ms"]) >= 400.0, "{replacement}");
    let cost = &pool["cold_start"];
    assert!(ms(&cost["window_ms"]) >= 400.0, "{cost}");
    assert!(ms(&cost["extra_p99_ms"]) > 0.0, "{cost}");
    // The records: one line per request, each in the window its arrival
    // falls in, read back with the one JSONL reader.
    let read = phases::jsonl::read::<PoolRequest>(&out.join("pool-requests.jsonl")).unwrap();
    assert_eq!(read.records.len(), 112);
    let in_window = |w| read.records.iter().filter(|r| r.window == w).count();
    assert_eq!(
        in_window(Window::ColdStart) as u64,
        windows[1]["arrived"].as_u64().unwrap()
    );
    // The people's view says it too.
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.contains("## Pool: one cold start's cost"), "{md}");
    // The kill is asked for at 0.4 s; a loaded machine wakes the dispatcher
    // late, and the report says the moment it landed (beside the plan).
    let at = cost["triggered_at_s"].as_f64().unwrap();
    assert!((0.4..1.0).contains(&at), "{cost}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains(&format!("One cold start at {at:.2} s")),
        "{stdout}"
    );
    assert!(workers(&marker).is_empty(), "{}", support::ps());
}

/// Starts `coldstart bench --pool 3` on a long load and waits until the
/// pool serves (the workers' served file has 30 lines: every worker was
/// ready, the dispatcher runs); the three workers' pids.
fn pool_running(dir: &Path, marker: &str) -> (std::process::Child, KillOnDrop, Vec<u32>) {
    let served = dir.join("served");
    let mut cmd = crate::support::coldstart(dir);
    cmd.args([
        "bench",
        "--warmup",
        "0",
        "--trials",
        "1",
        "--resamples",
        "200",
    ])
    .args([
        "--pool",
        "3",
        "--rate",
        "100",
        "--duration",
        "60",
        "--replace-at",
        "30",
    ])
    .arg("--out")
    .arg(dir.join("run"))
    .arg("--")
    .args(argv(
        marker,
        &[
            "--service-ms",
            "5",
            "--served-file",
            &served.display().to_string(),
        ],
    ))
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut harness = cmd.spawn().expect("coldstart runs");
    let reaper = KillOnDrop(harness.id() as i32);
    let up = support::wait_while_running(
        &mut harness,
        "a pool of 3 serving",
        Duration::from_secs(60),
        || {
            let up = workers(marker);
            (up.len() == 3 && lines_in(&served) >= 30).then_some(up)
        },
    );
    (harness, reaper, up.into_iter().map(|(p, _)| p).collect())
}

#[test]
fn ctrl_c_during_a_pool_run_shuts_every_worker_down_and_keeps_the_figures() {
    let dir = tempfile::tempdir().unwrap();
    let marker = support::marker("pool", "sigint");
    let (mut harness, _reaper, pids) = pool_running(dir.path(), &marker);
    let (code, _, err) = signal_and_wait(&mut harness, libc::SIGINT);
    assert_eq!(code, Some(130), "{err}");
    for pid in pids {
        assert_group_gone(pid);
    }
    assert!(workers(&marker).is_empty(), "{}", support::ps());
    let pool = &summary(&dir.path().join("run"))["pool"][0];
    assert!(
        pool["ended_early"]
            .as_str()
            .unwrap()
            .starts_with("interrupted"),
        "{pool:#}"
    );
    for m in pool["members"].as_array().unwrap() {
        assert_eq!(m["end"], "shut down", "{m}");
    }
}

#[test]
fn sigterm_during_a_pool_run_kills_every_worker_and_the_run_still_ends() {
    let dir = tempfile::tempdir().unwrap();
    let marker = support::marker("pool", "sigterm");
    let (mut harness, _reaper, pids) = pool_running(dir.path(), &marker);
    let (code, _, err) = signal_and_wait(&mut harness, libc::SIGTERM);
    assert_eq!(code, Some(143), "{err}");
    for pid in pids {
        assert_group_gone(pid);
    }
    assert!(workers(&marker).is_empty(), "{}", support::ps());
}
