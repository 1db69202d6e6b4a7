use super::*;
use std::time::Instant;

#[test]
fn a_process_that_never_becomes_python_is_an_error_after_the_attach_timeout() {
    let mut cat = std::process::Command::new("cat")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("cat runs");
    let options = SamplerOptions {
        attach_timeout: Duration::from_millis(200),
        ..SamplerOptions::default()
    };
    let t0 = Instant::now();
    let err = Sampler::start(cat.id(), options).expect_err("cat is not Python");
    let waited = t0.elapsed();
    let _ = cat.kill();
    let _ = cat.wait();
    assert!(
        matches!(
            err,
            Error::NotPython {
                searched_children: true,
                ..
            }
        ),
        "{err}"
    );
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    assert!(
        err.to_string().contains("none of its subprocesses"),
        "{err}"
    );
}

#[test]
fn a_gone_process_or_a_zero_rate_is_an_error_at_once() {
    let err = Sampler::start(u32::MAX - 1, SamplerOptions::default()).expect_err("gone");
    assert!(matches!(err, Error::ProcessGone { .. }), "{err}");
    let err = Sampler::start(std::process::id(), SamplerOptions::at_rate(0)).expect_err("0");
    assert!(matches!(err, Error::ZeroRate), "{err}");
}

#[test]
fn the_profile_aggregates_in_order_of_first_appearance() {
    let profile = Profile {
        rate_hz: 100,
        samples: [(10, 0), (20, 1), (30, 0), (40, 0)]
            .into_iter()
            .map(|(t_ns, stack)| Sample {
                t_ns,
                pid: 1,
                thread: 1,
                stack,
                active: true,
                weight_ns: 10_000_000,
            })
            .collect(),
        stacks: vec![vec!["a".into(), "b".into()], vec!["a".into()]],
        ticks: 4,
        late_ticks: 0,
        errors: 0,
        error_examples: vec![],
        processes: vec![],
        threads: vec![],
        cost: SamplerCost::default(),
        stop_reason: SamplingEnd::Stopped,
        adapted_rate_hz: None,
        kernel_cpu_ns: None,
    };
    let all = profile.collapsed();
    assert_eq!(crate::collapsed_text(&all), "a;b 3\na 1\n");
    let before = profile.collapsed_before(30);
    assert_eq!(crate::collapsed_text(&before), "a;b 1\na 1\n");
    assert_eq!(profile.sample_count(), 4);
}

/// A worker on CPU for 5 s read at a rate lowered to 5 Hz (25 samples
/// of 200 ms each) and its idle thread kept with `--idle`: 5000 ms of
/// CPU, not 25 samples at the asked 100 Hz (250 ms), nor 50 samples.
#[test]
fn cpu_time_weighs_each_sample_by_its_interval_and_counts_no_idle_one() {
    let sample = |t_ns: u64, active: bool| Sample {
        t_ns,
        pid: 1,
        thread: 1,
        stack: u32::from(!active),
        active,
        weight_ns: 200_000_000,
    };
    let samples = (0..25u64)
        .flat_map(|i| {
            [
                sample(i * 200_000_000, true),
                sample(i * 200_000_000, false),
            ]
        })
        .collect();
    let profile = Profile {
        rate_hz: 100,
        samples,
        stacks: vec![vec!["busy".into()], vec!["waits".into()]],
        ticks: 25,
        late_ticks: 0,
        errors: 0,
        error_examples: vec![],
        processes: vec![],
        threads: vec![],
        cost: SamplerCost {
            started_ns: 0,
            stopped_ns: 5_000_000_000,
            ..SamplerCost::default()
        },
        stop_reason: SamplingEnd::Deadline,
        adapted_rate_hz: Some(5.0),
        kernel_cpu_ns: None,
    };
    let time = profile.time_where(|_| true);
    assert_eq!((time.samples, time.on_cpu), (50, 25));
    assert_eq!(time.cpu_ns, 5_000_000_000);
    assert!((profile.rounds_per_second() - 5.0).abs() < 1e-9);
    assert_eq!(profile.time_where(|s| !s.active).cpu_ns, 0);
}

#[test]
fn a_tracked_process_that_execs_while_pending_keeps_its_new_command_line() {
    use std::io::{BufRead, Write};
    // A shell that becomes `cat` once it reads a line; cat then echoes.
    let (mut child, mut out) = crate::testing::shell("read x; exec cat", &[]);
    let pid = child.id();
    let mut line = String::new();
    let mut run = Run::new(
        pid,
        SamplerOptions::default(),
        StopHandle::default(),
        Arc::default(),
    );
    run.track(pid, None);
    assert_eq!(
        run.tracked[&pid].command,
        r"sh -c echo up\nread x; exec cat"
    );
    run.attach_pending();
    // The shell execs cat; cat's echo proves the exec is done.
    let mut stdin = child.stdin.take().expect("its stdin");
    stdin.write_all(b"go\necho\n").expect("written");
    line.clear();
    out.read_line(&mut line).expect("cat's echo");
    assert_eq!(line, "echo\n");
    run.attach_pending();
    let command = run.tracked[&pid].command.clone();
    drop(stdin);
    let _ = child.wait();
    assert_eq!(command, "cat", "still pending (not Python): read again");
}

#[test]
fn a_descendant_that_appears_just_before_the_stop_is_listed() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    // A Python parent that starts a child (`sleep`, not Python) when told,
    // prints its pid and waits; the sampler is stopped right after, well
    // within one scan period of the child's start.
    let script = "import subprocess, sys\n\
                  print('up', flush=True)\n\
                  sys.stdin.readline()\n\
                  p = subprocess.Popen(['sleep', '60'])\n\
                  print(p.pid, flush=True)\n\
                  sys.stdin.readline()\n\
                  p.kill()\n\
                  p.wait()\n";
    let mut root = Command::new(test_interpreters::default_python())
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python runs");
    let mut stdin = root.stdin.take().expect("its stdin");
    let mut out = BufReader::new(root.stdout.take().expect("its stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("up");
    assert_eq!(line, "up\n");
    let sampler = Sampler::start(root.id(), SamplerOptions::default()).expect("attached");
    stdin.write_all(b"go\n").expect("written");
    line.clear();
    out.read_line(&mut line).expect("the child's pid");
    let child: u32 = line.trim().parse().expect("a pid");
    let profile = sampler.stop();
    let _ = stdin.write_all(b"done\n");
    drop(stdin);
    let _ = root.wait();
    let listed = profile.processes.iter().find(|p| p.pid == child);
    let listed = listed.unwrap_or_else(|| panic!("{child} not in {:?}", profile.processes));
    assert_eq!(listed.parent, Some(root.id()));
    assert!(listed.not_sampled.is_some(), "{listed:?}");
}
