//! `Sampler` against real CPython processes.

use crate::support::Py;
use pystacks::{Sampler, SamplerOptions, SamplingEnd, import_share, top_frames};

#[test]
fn the_function_a_script_spends_its_time_in_is_the_widest_frame() {
    let mut py = Py::start("spins_in_named_function.py", &[]);
    py.expect_line("ready");
    let before = timeline::monotonic_ns();
    // `pause` asked for, but this process is our child: never paused, so
    // no read can collect its exit status before our own wait does.
    let options = SamplerOptions {
        pause: true,
        ..SamplerOptions::at_rate(200)
    };
    let sampler = Sampler::start(py.pid(), options).expect("start");
    py.send("go");
    let profile = sampler.wait();
    let after = timeline::monotonic_ns();
    assert_eq!(py.finish(), Some(0), "our wait saw our child's exit");

    assert_eq!(profile.stop_reason, SamplingEnd::Exited);
    assert!(profile.sample_count() >= 20, "{profile:#?}");
    assert!(
        profile
            .samples
            .iter()
            .all(|s| (before..=after).contains(&s.t_ns)),
        "samples are stamped on CLOCK_MONOTONIC within the run"
    );
    assert!(profile.samples.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
    let stacks = profile.collapsed();
    let top = top_frames(&stacks, 3);
    assert!(
        top[0]
            .frame
            .starts_with("burn_cpu_in_named_function (spins_in_named_function.py:"),
        "{top:#?}"
    );
    assert!(
        top[0].self_samples * 10 >= profile.sample_count() * 8,
        "{top:#?}"
    );
    // `--function`: the frame carries the function's first line.
    let def_line = crate::support::line_of(
        "spins_in_named_function.py",
        "def burn_cpu_in_named_function",
    );
    assert!(
        top[0].frame.ends_with(&format!(":{def_line})")),
        "{}",
        top[0].frame
    );
    // Rooted in the process label, as `py-spy record --subprocesses`.
    assert!(
        stacks
            .iter()
            .all(|s| s.frames[0].starts_with(&format!("process {}:\"", py_pid(&profile))))
    );

    let cost = profile.cost;
    assert!(cost.wall_ns() > 0 && cost.read_ns > 0 && cost.read_ns < cost.wall_ns());
    assert_eq!(profile.processes.len(), 1);
    assert!(profile.processes[0].python_version.is_some());
}

fn py_pid(profile: &pystacks::Profile) -> u32 {
    profile.processes[0].pid
}

#[test]
fn an_import_heavy_start_up_is_mostly_inside_imports() {
    let mut py = Py::start("import_heavy.py", &[]);
    py.expect_line("ready");
    let sampler = Sampler::start(py.pid(), SamplerOptions::at_rate(200)).expect("start");
    py.send("go");
    let profile = sampler.wait();
    assert_eq!(py.finish(), Some(0));

    let share = import_share(&profile.collapsed(), 5);
    assert!(share.samples >= 20, "{share:#?}");
    assert!(share.share_inside() > 0.8, "{share:#?}");
    let weights = profile
        .collapsed()
        .into_iter()
        .max_by_key(|s| s.samples)
        .expect("a stack");
    assert!(
        weights
            .frames
            .iter()
            .any(|f| f.starts_with("_find_and_load (<frozen importlib._bootstrap>")),
        "{weights:?}"
    );
    assert!(
        weights
            .frames
            .last()
            .expect("leaf")
            .starts_with("_build_table (standin_heavy_pkg/weights.py:"),
        "{weights:?}"
    );
}

#[test]
fn samples_are_on_pythons_monotonic_clock() {
    let mut py = Py::start("spins_in_named_function.py", &[]);
    py.expect_line("ready");
    let sampler = Sampler::start(py.pid(), SamplerOptions::at_rate(200)).expect("start");
    py.send("go");
    let line = py.next_line();
    let burning_ns: u64 = line
        .strip_prefix("burning ")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("not a burning line: {line}"));
    let profile = sampler.wait();
    assert_eq!(py.finish(), Some(0));

    let burn_stacks: Vec<usize> = profile
        .stacks
        .iter()
        .enumerate()
        .filter(|(_, frames)| {
            frames
                .iter()
                .any(|f| f.starts_with("burn_cpu_in_named_function "))
        })
        .map(|(i, _)| i)
        .collect();
    let burn: Vec<u64> = profile
        .samples
        .iter()
        .filter(|s| burn_stacks.contains(&(s.stack as usize)))
        .map(|s| s.t_ns)
        .collect();
    assert!(
        burn.len() >= 20,
        "{} samples in the burning function",
        burn.len()
    );
    // A sample's stamp is taken just before its process is paused, so it
    // may precede the moment it shows by the time a pause takes to land.
    let slack = 5_000_000;
    assert!(
        burn.iter().all(|&t| t + slack >= burning_ns),
        "a sample of the function before Python entered it"
    );
    // Split at Python's stamp: the burning samples are after it.
    let after: u64 = profile
        .collapsed_where(|s| s.t_ns + slack >= burning_ns)
        .iter()
        .filter(|s| {
            s.frames
                .iter()
                .any(|f| f.starts_with("burn_cpu_in_named_function "))
        })
        .map(|s| s.samples)
        .sum();
    assert_eq!(after, burn.len() as u64);
}

#[test]
fn a_stop_handle_ends_sampling_from_another_thread_and_leaves_the_process_running() {
    let mut py = Py::start("spins_in_named_function.py", &["4000000000"]);
    py.expect_line("ready");
    let sampler = Sampler::start(py.pid(), SamplerOptions::at_rate(100)).expect("start");
    let handle = sampler.stop_handle();
    py.send("go");
    assert!(py.next_line().starts_with("burning "));
    std::thread::spawn(move || handle.stop())
        .join()
        .expect("stopper");
    let profile = sampler.wait();
    assert_eq!(profile.stop_reason, SamplingEnd::Stopped);
    let (state, tracer) = crate::support::state_and_tracer(py.pid());
    assert_eq!(tracer, 0, "still traced after the sampler stopped");
    assert!(state == 'R' || state == 'S', "state {state}");
}

#[test]
fn a_deadline_ends_sampling() {
    let mut py = Py::start("spins_in_named_function.py", &["400000000"]);
    py.expect_line("ready");
    let options = SamplerOptions {
        deadline: Some(std::time::Duration::from_millis(300)),
        ..SamplerOptions::at_rate(100)
    };
    let sampler = Sampler::start(py.pid(), options).expect("start");
    py.send("go");
    let profile = sampler.wait();
    assert_eq!(profile.stop_reason, SamplingEnd::Deadline);
    assert!(profile.cost.wall_ns() >= 300_000_000);
    assert!(profile.ticks >= 1);
    drop(py);
}

#[test]
fn a_python_child_started_after_the_sampler_is_sampled_under_its_parent() {
    let mut py = Py::start("parent_waits_on_child.py", &["busy"]);
    py.expect_line("ready");
    // Paused reads: the child (not a child of this process) is
    // ptrace-stopped for each read, the parent (a child of this process)
    // never is.
    let options = SamplerOptions {
        pause: true,
        ..SamplerOptions::at_rate(200)
    };
    let sampler = Sampler::start(py.pid(), options).expect("start");
    py.send("go");
    let profile = sampler.wait();
    // The child exits with 7 and its parent with its child's status: the
    // child's exit reached its parent despite the tracing.
    assert_eq!(
        py.finish(),
        Some(7),
        "the parent's wait saw its child's exit"
    );
    assert_eq!(profile.stop_reason, SamplingEnd::Exited);

    let parent = py_pid(&profile);
    let child = profile
        .processes
        .iter()
        .find(|p| p.parent == Some(parent))
        .unwrap_or_else(|| panic!("no child in {:#?}", profile.processes));
    assert!(
        child
            .command
            .ends_with("parent_waits_on_child.py child-busy"),
        "{}",
        child.command
    );
    assert!(child.python_version.is_some(), "{child:#?}");
    let top = top_frames(&profile.collapsed(), 1);
    assert!(
        top[0]
            .frame
            .starts_with("burn_in_the_child (parent_waits_on_child.py:"),
        "{top:#?}"
    );
    let burning = profile
        .collapsed()
        .into_iter()
        .find(|s| {
            s.frames
                .last()
                .is_some_and(|f| f.starts_with("burn_in_the_child "))
        })
        .expect("a burning stack");
    assert!(
        burning.frames[0].starts_with(&format!("process {parent}:\"")),
        "{burning:?}"
    );
    assert!(
        burning.frames[1].starts_with(&format!("process {}:\"", child.pid)),
        "{burning:?}"
    );
}

#[test]
fn a_reading_share_cap_slows_the_rate_and_the_live_window_holds_what_was_sampled() {
    let mut py = Py::start("spins_in_named_function.py", &["20000000"]);
    py.expect_line("ready");
    // At 1 kHz, 1% of the time is 10 µs a read: no read is that cheap, so
    // the cap must slow sampling down.
    let options = SamplerOptions {
        max_reading_share: Some(0.01),
        ..SamplerOptions::at_rate(1000)
    };
    let sampler = Sampler::start(py.pid(), options).expect("start");
    py.send("go");
    // Reaped: no read can succeed any more, and a round in progress holds
    // the window until it ends, so the window now holds every sample.
    assert_eq!(py.finish(), Some(0));
    let window = sampler.take_window();
    let profile = sampler.wait();
    let slowest = profile.adapted_rate_hz.expect("the rate was lowered");
    assert!(slowest < 1000.0, "{slowest}");
    let windowed: u64 = window.stacks.iter().map(|s| s.samples).sum();
    assert!(windowed > 0, "{window:#?}");
    assert_eq!(windowed, profile.sample_count(), "{window:#?}");
    assert_eq!(window.stacks, {
        let mut all = profile.collapsed();
        all.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.frames.cmp(&b.frames)));
        all
    });
    assert!(window.ticks > 0);
}
