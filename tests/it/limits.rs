//! Trials under container limits (`bench --cpus`, `--memory`, a target's
//! `cpus` and `memory`): each worker in a cgroup of its own, on the
//! stand-in worker of tests/fixtures/bench/. What is asserted holds on a
//! loaded machine: a CPU quota is a ceiling, so a CPU-bound start-up under
//! half a CPU takes about twice as long whatever else runs (the band is
//! wide); a worker over its memory limit is OOM-killed whatever the load.
//! Where this machine gives no writable cgroup, each case says NOT RUN, and
//! fails under `cargo xtask test` (which runs where cgroups are given).

use crate::support;

/// Half a CPU: what the cases ask the machine for.
pub(crate) const HALF_CPU: timeline::Limits = timeline::Limits {
    cpus: Some(0.5),
    memory_bytes: None,
};

/// Whether this machine lets the suite make cgroups, through the rule of
/// `test_interpreters::or_not_run`: under `cargo xtask test` (run as root on
/// a cgroup v2 host, as CI is) a refusal fails `case`; elsewhere one NOT RUN
/// line.
pub(crate) fn cgroups_here(case: &str) -> bool {
    let probed = spawn::cgroup::probe(&HALF_CPU);
    let why = probed.as_ref().err().map(ToString::to_string);
    test_interpreters::or_not_run(probed.ok(), case, || why.unwrap_or_default()).is_some()
}

fn standin(extra: &str) -> String {
    let script = support::standin("bench");
    format!(
        "[\"{}\", \"-S\", \"{}\"{extra}]",
        support::python().display(),
        script.display()
    )
}

/// Waits (at most ten seconds) until every one of a harness's cgroup
/// `folders` is gone after `event`.
pub(crate) fn assert_gone(folders: &[std::path::PathBuf], event: &str) {
    support::wait_until(
        &format!("the cgroup folders gone after {event}: {folders:?}"),
        std::time::Duration::from_secs(10),
        || folders.iter().all(|f| !f.exists()),
    );
}

fn no_cgroup_left(pid: u32) {
    let left: Vec<_> = spawn::cgroup::harness_folders(pid)
        .into_iter()
        .filter(|f| f.exists())
        .collect();
    assert!(left.is_empty(), "cgroup folders left behind: {left:?}");
}

#[test]
fn a_cpu_bound_start_up_takes_about_twice_as_long_under_half_a_cpu() {
    if !cgroups_here("cpu quota") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let burn = standin(", \"--burn-ms\", \"200\"");
    std::fs::write(
        dir.path().join("coldstart.toml"),
        format!(
            "[[target]]\nname = \"bare\"\ncommand = {burn}\n\n\
             [[target]]\nname = \"half\"\ncommand = {burn}\ncpus = 0.5\n"
        ),
    )
    .unwrap();
    let out = dir.path().join("run");
    let out_s = out.display().to_string();
    let run = support::coldstart_run(
        dir.path(),
        &[
            "bench",
            "--target",
            "bare",
            "--vs",
            "half",
            "--trials",
            "4",
            "--warmup",
            "1",
            "--resamples",
            "2000",
            "--out",
            &out_s,
        ],
        &[],
        &[],
    );
    let (stdout, stderr) = (support::stdout(&run), String::from_utf8_lossy(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "{stdout}{stderr}");
    no_cgroup_left(run.pid);
    assert!(
        stdout.contains("measured: A: start-up as a plain parent sees it")
            && stdout.contains(
                "measured: B: start-up as a container sees it: each worker in its own cgroup (cgroup v"
            )
            && stdout.contains("with cpus 0.5"),
        "{stdout}"
    );
    let s = crate::bench::summary(&out);
    let targets = s["environment"]["targets"].as_array().unwrap();
    assert!(targets[0].get("limits").is_none(), "{targets:?}");
    assert_eq!(targets[1]["limits"]["cpus"], 0.5);
    let probes = s["probes"]["startup"].as_array().unwrap();
    assert_eq!(probes.len(), 2, "a startup probe per side: {probes:?}");
    assert!(probes[1]["failure_threshold"].as_u64().unwrap() >= 1);
    // No memory limit, no charged peak: RSS alone is the figure.
    assert!(
        s["resources"][1].get("cgroup_peak_bytes").is_none(),
        "{}",
        s["resources"]
    );
    // A quota of half a CPU is a ceiling: at most 50 ms of each 100 ms
    // run, so every B trial's ready takes at least about twice the CPU
    // time its worker used, however loaded the machine is: at least
    // 2 x (C - 50 ms) for C of CPU (the first period may run whole), 1.5 x
    // C for the stand-in's 200 ms of burn and the interpreter's start. (On a quiet
    // machine the bare side's ready is about its CPU time, so B/A is about
    // 2; a loaded machine slows the bare side too, so B/A itself is a
    // quiet-machine figure: docs/limits.md has it, measured.)
    let records = support::trials(&out);
    let halves: Vec<f64> = records
        .iter()
        .filter(|r| r.variant == timeline::Variant::B && r.kind == timeline::TrialKind::Measured)
        .map(|r| {
            let w = &r.workers[0];
            let cpu = w
                .usage
                .map(|u| u.user_ns + u.sys_ns)
                .expect("wait4's usage") as f64;
            r.phases.ready_ns.expect("a ready time") as f64 / cpu
        })
        .collect();
    assert!(halves.len() >= 3, "{records:?}");
    for ready_per_cpu in &halves {
        assert!(
            (1.4..20.0).contains(ready_per_cpu),
            "ready over CPU time under half a CPU: {halves:?}"
        );
    }
}

#[test]
fn a_worker_over_its_memory_limit_is_reported_oom_killed_with_its_limit() {
    if !cgroups_here("memory limit") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out_s = out.display().to_string();
    let script = support::fixtures().join("bench").join("standin.py");
    let (py, script) = (
        support::python().display().to_string(),
        script.display().to_string(),
    );
    let run = support::coldstart_run(
        dir.path(),
        &[
            "bench",
            "--memory",
            "48M",
            "--trials",
            "1",
            "--warmup",
            "0",
            "--out",
            &out_s,
            "--",
            &py,
            "-S",
            &script,
            "--alloc-mib",
            "200",
        ],
        &[],
        &[],
    );
    let (stdout, stderr) = (support::stdout(&run), String::from_utf8_lossy(&run.stderr));
    assert_eq!(
        run.status.code(),
        Some(1),
        "a failed trial: {stdout}{stderr}"
    );
    no_cgroup_left(run.pid);
    let records = support::trials(&out);
    match &records[0].workers[0].outcome {
        timeline::Outcome::Failed { stage, message } => {
            assert_eq!(*stage, timeline::Stage::Startup);
            // The kill named as the OOM killer's at the limit, with the
            // peaks, the limits and what to do; the cgroup interface is
            // the machine's.
            // The one size the redaction must not hide: the limit set.
            assert!(message.contains("memory limit of 48 MiB ("), "{message}");
            let message = message.replace("(cgroup v1)", "(cgroup v[N])");
            let message = message.replace("(cgroup v2)", "(cgroup v[N])");
            support::redactions().bind(|| insta::assert_snapshot!("limits_oom_message", message));
        }
        other => panic!("the trial should have failed: {other:?}"),
    }
    assert!(stderr.contains("OOM-killed"), "{stderr}");
    assert!(
        records[0].workers[0]
            .cgroup_peak_bytes
            .is_some_and(|b| b <= 49 << 20),
        "the charged peak is held to the limit: {:?}",
        records[0].workers[0]
    );
    let s = crate::bench::summary(&out);
    assert_eq!(
        s["environment"]["targets"][0]["limits"]["memory_bytes"],
        48u64 << 20
    );
}

#[test]
fn limits_that_cannot_be_read_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let run = support::coldstart_run(
        dir.path(),
        &["bench", "--cpus", "half"],
        &["true".into()],
        &[],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    support::redactions().bind(|| insta::assert_snapshot!("cpus_not_a_quota", stderr));
    std::fs::write(
        dir.path().join("coldstart.toml"),
        "[[target]]\nname = \"w\"\ncommand = [\"true\"]\nmemory = \"lots\"\n",
    )
    .unwrap();
    let run = support::coldstart_run(dir.path(), &["bench"], &[], &[]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    support::redactions().bind(|| insta::assert_snapshot!("memory_not_a_size", stderr));
    assert!(!dir.path().join("bench-out").exists());
}
