//! The serve phase and the memory view of `cargo xtask bench`, end to end
//! over the stand-in worker in tests/fixtures/serve/. Every assertion is a
//! bound the stand-in's own behaviour guarantees (a service time that
//! sleeps at least its length, a fixed error pattern, a known number of
//! bytes kept), with margins a loaded machine cannot cross.

use std::path::Path;

use phases::serve::RequestRecord;
use serde_json::Value;

use crate::bench::summary;
use crate::support;

const MIB: f64 = 1024.0 * 1024.0;

/// The stand-in's argv with the real interpreter (no shim). `site` stays
/// on: the memory view's bootstrap is a `sitecustomize`.
fn argv(extra: &[&str]) -> Vec<String> {
    let mut v = vec![
        support::python().display().to_string(),
        support::standin("serve").display().to_string(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// One timed trial (the serve phase and memory view come after it).
fn bench(out: &Path, flags: &[&str], argv: &[String]) -> std::process::Output {
    let one_trial = ["--warmup", "0", "--trials", "1"];
    let all: Vec<&str> = one_trial.iter().chain(flags).copied().collect();
    crate::bench::bench(out, &all, argv)
}

/// The serve statistics of variant A.
fn serve_of(out: &Path) -> Value {
    summary(out)["serve"][0].clone()
}

fn f(v: &Value, path: &[&str]) -> f64 {
    let mut at = v;
    for k in path {
        at = &at[*k];
    }
    at.as_f64()
        .unwrap_or_else(|| panic!("{} is not a number in {v:#}", path.join(".")))
}

fn requests(out: &Path) -> Vec<RequestRecord> {
    let text = std::fs::read_to_string(out.join("requests.jsonl")).expect("requests.jsonl");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad record {l}: {e}")))
        .collect()
}

#[test]
fn serve_open_loop_above_capacity_counts_the_queue_and_a_closed_loop_does_not() {
    let dir = tempfile::tempdir().unwrap();
    // 10 ms of service: at most 100/s. Offered: 200/s for 0.6 s.
    let open = dir.path().join("open");
    let o = bench(
        &open,
        &["--rate", "200", "--duration", "0.6"],
        &argv(&["--service-ms", "10"]),
    );
    assert!(o.status.success());
    let s = serve_of(&open);
    assert_eq!(s["scheduled"], 120);
    assert_eq!(s["ok"], 120);
    // Request i is due at 5i ms and cannot be done before 10(i + 1) ms
    // after the one 80 places earlier, so the last third waits at least
    // 400 ms more than the first: the queue wait is in the latency.
    let first = f(&s, &["trend", "first_third_median_ms"]);
    let last = f(&s, &["trend", "last_third_median_ms"]);
    assert!(last >= first + 300.0, "first {first} ms, last {last} ms");
    assert!(f(&s, &["throughput_per_s"]) <= 100.0 + 1e-9);
    assert!(s["max_in_flight"].as_u64().unwrap() > 10, "{s:#}");
    // Every request is on disk, latency counted from its scheduled time.
    let recs = requests(&open);
    assert_eq!(recs.len(), 120);
    for r in &recs {
        let lat = r.latency_ns.unwrap();
        assert_eq!(lat, r.received_at_ns.unwrap() - r.scheduled_at_ns);
        assert!(r.sent_at_ns.unwrap() >= r.scheduled_at_ns);
        assert!(lat >= 10_000_000, "{r:?}");
    }
    let md = std::fs::read_to_string(open.join("summary.md")).unwrap();
    assert!(md.contains("## Serve phase"), "{md}");
    assert!(md.contains("latency grew all run"), "{md}");
    let svg = std::fs::read_to_string(open.join("phases.svg")).unwrap();
    assert!(svg.contains("serve latency") && svg.trim_end().ends_with("</svg>"));
    crate::support::assert_well_formed_svg(&svg);

    // The same worker, one request in flight: no queue, no growth.
    let closed = dir.path().join("closed");
    let o = bench(
        &closed,
        &["--requests", "30"],
        &argv(&["--service-ms", "10"]),
    );
    assert!(o.status.success());
    let s = serve_of(&closed);
    assert_eq!(s["ok"], 30);
    assert_eq!(s["max_in_flight"], 1);
    let first = f(&s, &["trend", "first_third_median_ms"]);
    let last = f(&s, &["trend", "last_third_median_ms"]);
    assert!(first >= 10.0 && last >= 10.0);
    assert!(last < first + 100.0, "first {first} ms, last {last} ms");
}

/// `--output chrome-json=` with a serve phase: each request is a slice
/// on coldstart's track from its write to the read of its reply, with a
/// flow into the serving worker's track and one back from its reply.
#[test]
fn serve_requests_are_on_the_bench_trace_with_a_flow_each_way() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let o = bench(
        &dir.path().join("run"),
        &[
            "--requests",
            "5",
            "--output",
            &format!("chrome-json={}", json.display()),
        ],
        &argv(&[]),
    );
    assert!(o.status.success());
    let events = support::chrome_events(&json);
    let x = |name: &str| -> Vec<&serde_json::Value> {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"] == name)
            .collect()
    };
    let phase = x("serve phase of command: 5 requests");
    assert_eq!(phase.len(), 1, "the serve phase on coldstart's track");
    let own = &phase[0]["pid"];
    for i in 0..5 {
        let mine = x(&format!("request {i}"));
        assert_eq!(mine.len(), 1, "request {i}");
        assert_eq!(&mine[0]["pid"], own);
        let theirs = x(&format!(
            "request {i}, answered within coldstart's round trip"
        ));
        assert_eq!(theirs.len(), 1);
        assert_ne!(&theirs[0]["pid"], own, "on the worker's track");
        assert_eq!(theirs[0]["ts"], mine[0]["ts"], "from its write");
    }
    let counts = ::trace::chrome::validate(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // The trial's five messages; the serve worker's ready line, shutdown
    // and acknowledgement; two for each request.
    assert_eq!(counts.flows, 5 + 3 + 2 * 5, "{counts:?}");
}

#[test]
fn serve_below_capacity_completes_the_offered_rate() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // 2 ms of service (up to 500/s) offered 25/s for 2 s: 50 requests.
    let o = bench(
        &out,
        &["--rate", "25", "--duration", "2"],
        &argv(&["--service-ms", "2"]),
    );
    assert!(o.status.success());
    let s = serve_of(&out);
    assert_eq!(s["ok"], 50);
    assert_eq!(s["rejections"], 0);
    assert_eq!(f(&s, &["offered_per_s"]), 25.0);
    // ok / max(2 s, last reply): exactly 25/s unless the last reply came
    // later than the offered 2 s; a stall of 0.8 s still stays above 17.5.
    let thr = f(&s, &["throughput_per_s"]);
    assert!((17.5..=25.0 + 1e-9).contains(&thr), "throughput {thr}/s");
    let lat = &s["latency_ms"];
    for k in ["median", "p90", "p99"] {
        let v = f(lat, &[k]);
        let (lo, hi) = (
            f(lat, &[&format!("{k}_ci"), "lo"]),
            f(lat, &[&format!("{k}_ci"), "hi"]),
        );
        assert!(lo <= v && v <= hi && v >= 2.0, "{k} {v} [{lo}, {hi}]");
    }
    assert!(f(lat, &["max"]) >= f(lat, &["p99"]));
}

#[test]
fn serve_counts_every_tenth_request_refused_as_a_ten_percent_rejection_rate() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = bench(
        &out,
        &[
            "--requests",
            "50",
            "--request",
            r#"{"op": "infer", "text": "hi"}"#,
        ],
        &argv(&["--error-every", "10"]),
    );
    assert!(o.status.success());
    let s = serve_of(&out);
    assert_eq!(s["sent"], 50);
    assert_eq!(s["ok"], 45);
    assert_eq!(s["error_replies"], 5);
    assert_eq!(s["rejections"], 5);
    assert_eq!(s["wrong_replies"], 0);
    assert_eq!(f(&s, &["rejection_rate"]), 0.1);
    assert_eq!(
        s["request"],
        serde_json::json!({"op": "infer", "text": "hi"})
    );
    let refused: Vec<usize> = requests(&out)
        .iter()
        .filter(|r| r.outcome.is_rejection())
        .map(|r| r.index)
        .collect();
    assert_eq!(refused, [9, 19, 29, 39, 49]);
}

fn memory_of(out: &Path) -> Value {
    summary(out)["memory"][0].clone()
}

fn at(view: &Value, moment: &str) -> Value {
    view["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["at"] == moment)
        .unwrap_or_else(|| panic!("no {moment} point in {view:#}"))
        .clone()
}

#[test]
fn memory_view_traces_what_start_up_keeps_and_tells_native_memory_apart() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, extra: &[&str], flags: &[&str]| {
        let out = dir.path().join(name);
        let mut all = vec!["--memory-view"];
        all.extend(flags);
        let o = bench(&out, &all, &argv(extra));
        assert!(o.status.success());
        memory_of(&out)
    };
    let base = run("base", &[], &[]);
    let kept = run(
        "kept",
        &["--retain-bytes", "33554432"],
        &["--requests", "5"],
    );
    let native = run("native", &["--native-bytes", "67108864"], &[]);

    for v in [&base, &kept, &native] {
        assert_eq!(v["tracing_from_start"], true, "{v:#}");
        assert_eq!(v["problems"], serde_json::json!([]), "{v:#}");
        at(v, "exit");
    }
    // 32 MiB kept from start-up: traced memory at ready holds it, and the
    // largest allocation site is the stand-in's own line.
    let traced = |v: &Value| f(&at(v, "ready"), &["traced_current_bytes"]);
    let grew = traced(&kept) - traced(&base);
    assert!(
        (31.5 * MIB..34.0 * MIB).contains(&grew),
        "traced grew by {} MiB",
        grew / MIB
    );
    let top = &kept["top_at_ready"][0];
    assert!(
        top["file"].as_str().unwrap().ends_with("standin.py"),
        "{top}"
    );
    assert!(f(top, &["size_bytes"]) >= 32.0 * MIB);
    at(&kept, "after_serve");
    assert!(
        kept["reading"]
            .as_str()
            .unwrap()
            .contains("over the serve phase")
    );

    // 64 MiB of touched anonymous mmap: resident, not traced.
    let ready = at(&native, "ready");
    let untraced = f(&ready, &["rss_bytes"])
        - f(&ready, &["traced_current_bytes"])
        - f(&ready, &["tracemalloc_overhead_bytes"]);
    assert!(untraced >= 64.0 * MIB, "untraced {} MiB", untraced / MIB);
    assert!(traced(&native) < traced(&base) + 4.0 * MIB);
    assert!(f(&native, &["peak_rss_bytes"]) >= 64.0 * MIB);
    let reading = native["reading"].as_str().unwrap();
    assert!(
        reading.contains("native or allocator-held memory"),
        "{reading}"
    );

    let md = std::fs::read_to_string(dir.path().join("native").join("summary.md")).unwrap();
    assert!(
        md.contains("## Memory (A)") && md.contains("Top allocation sites"),
        "{md}"
    );
}

#[test]
fn memory_view_says_when_its_bootstrap_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // -S: no site, so no sitecustomize, so no tracemalloc readings.
    let mut a = argv(&[]);
    a.insert(1, "-S".to_owned());
    let o = bench(&out, &["--memory-view"], &a);
    assert_eq!(o.status.code(), Some(1));
    let s = summary(&out);
    let failures = s["serve_failures"].to_string();
    assert!(
        failures.contains("memory bootstrap did not run"),
        "{failures}"
    );
}

#[test]
fn serve_checks_every_reply_and_a_wrong_one_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    // A payload not echoed: counted, the phase goes on.
    let out = dir.path().join("echo");
    let o = bench(
        &out,
        &[
            "--requests",
            "20",
            "--request",
            r#"{"op": "infer", "text": "x"}"#,
        ],
        &argv(&["--bad-echo-at", "5"]),
    );
    assert_eq!(o.status.code(), Some(1));
    let s = serve_of(&out);
    assert_eq!(
        (s["ok"].as_u64(), s["wrong_replies"].as_u64()),
        (Some(19), Some(1))
    );
    assert_eq!(s["ended_early"], Value::Null);
    let recs = requests(&out);
    assert_eq!(recs[4].outcome.as_str(), "wrong_reply");

    // A reply for another op: the worker is ended, the phase stops there.
    let out = dir.path().join("op");
    let o = bench(&out, &["--requests", "20"], &argv(&["--wrong-op-at", "8"]));
    assert_eq!(o.status.code(), Some(1));
    let s = serve_of(&out);
    assert_eq!(
        (s["ok"].as_u64(), s["wrong_replies"].as_u64()),
        (Some(7), Some(1))
    );
    assert!(
        s["ended_early"].as_str().unwrap().contains("bogus"),
        "{s:#}"
    );
    let recs = requests(&out);
    assert_eq!(recs.len(), 8);
    assert_eq!(recs[7].outcome.as_str(), "wrong_reply");
}
