//! What the whole check costs beside the
//! worker's own lifecycle. N interleaved rounds, after one warm-up of each:
//! the whole check of a target, one plain lifecycle of its worker (spawn,
//! ready, health, shutdown; no importtime, no recorder), one lifecycle with
//! the import recorder and its audit hook alone (no importtime: what the
//! recorder costs the worker's start, its ready time paired with the plain
//! lifecycle's in the same round), one with the null recorder (the same
//! two channels with nothing behind them, `null_recorder.py`: the floor
//! under the recorder's figure, which no recorder that sees imports both
//! ways goes below) and one instrumented lifecycle (importtime, recorder,
//! verdict). The plain, recorder-only and null lifecycles run back to back
//! at the start of every round, in each of their six orders in turn; the
//! check and the instrumented lifecycle swap places every round, so
//! neither always follows the other.
//!
//! The report also gives the check's physical floor on this machine: N
//! concurrent workers cannot finish before one lifecycle does, nor before
//! the cores have run N times one worker's CPU time (user + sys from
//! `wait4`): floor = max(plain wall, N x plain CPU / cores). The ratio of
//! the check to that floor is its overhead beyond physics.

use std::time::Instant;

use answers::check::{CheckCost, Status};

use importguard::recorder::Recorder;
use importguard::recorder::bootstrap::Bootstrap;

use super::{CheckOptions, check_process, check_target, inherited_pythonpath, policy_of};
use crate::error::{Error, Result, invalid};
use crate::lifecycle::Lifecycle;
use crate::target::Target;

/// Runs `rounds` interleaved rounds and returns every figure, in ms
/// (`cargo xtask check-cost`).
pub fn cost(t: &Target, opts: CheckOptions, rounds: usize) -> Result<CheckCost> {
    if rounds == 0 {
        invalid!("the check's cost needs at least 1 round (--rounds)");
    }
    let policy = policy_of(t)?;
    let lifecycle = Lifecycle::of(t);
    let pythonpath = inherited_pythonpath(t);
    let lifecycle_of = |v: Variant| one_lifecycle(t, &lifecycle, &policy, pythonpath.as_deref(), v);
    // The plain lifecycle, the recorder-only one and the null recorder's,
    // back to back, in the order given.
    let record_three = |cost: &mut CheckCost, order: [Variant; 3]| -> Result<()> {
        for v in order {
            let (wall, ready, cpu) = lifecycle_of(v)?;
            match v {
                Variant::Plain => {
                    cost.plain_ms.push(wall);
                    cost.plain_ready_ms.push(ready);
                    cost.plain_cpu_ms.push(cpu);
                }
                Variant::Recorded => cost.recorded_ready_ms.push(ready),
                Variant::Null => cost.null_ready_ms.push(ready),
            }
        }
        Ok(())
    };
    let instrumented = || -> Result<f64> {
        let start = Instant::now();
        let p = check_process(t, &lifecycle, &policy, false, 1, None)?;
        if let Some(e) = p.error {
            invalid!("the worker could not be checked: {e}");
        }
        Ok(start.elapsed().as_secs_f64() * 1e3)
    };
    let mut cost = CheckCost {
        target: t.name.clone(),
        command: t.display_command(),
        rounds,
        processes: t.processes,
        health: t.health,
        check_ms: Vec::new(),
        plain_ms: Vec::new(),
        plain_cpu_ms: Vec::new(),
        plain_ready_ms: Vec::new(),
        recorded_ready_ms: Vec::new(),
        null_ready_ms: Vec::new(),
        instrumented_ms: Vec::new(),
        shim: shim_note(t),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    // One warm-up of each (page cache, bytecode, the recorder's cached
    // code), kept out of the figures.
    for v in ORDERS[0] {
        lifecycle_of(v)?;
    }
    check_target(t, opts)?;
    for round in 0..rounds {
        // Every round starts with the three; then the check and the
        // instrumented lifecycle, in alternating order. What precedes the
        // three (the last round's check or its instrumented lifecycle)
        // alternates every round and their order every second round, so
        // each order follows each of them equally often: the first
        // lifecycle after three concurrent workers may start slower, and
        // that must not fall on one side of the comparison.
        record_three(&mut cost, ORDERS[(round / 2) % ORDERS.len()])?;
        let check_first = round % 2 == 0;
        if !check_first {
            cost.instrumented_ms.push(instrumented()?);
        }
        let start = Instant::now();
        let r = check_target(t, opts)?;
        cost.check_ms.push(start.elapsed().as_secs_f64() * 1e3);
        if r.status == Status::Error {
            invalid!("the check could not be completed; run `coldstart check` on it to see why");
        }
        if check_first {
            cost.instrumented_ms.push(instrumented()?);
        }
    }
    Ok(cost)
}

/// The null recorder's body (after the shared prelude): both channels of
/// the import recorder, nothing behind them.
const NULL_RECORDER: &str = include_str!("null_recorder.py");

/// The three lifecycles whose ready times are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// No recorder.
    Plain,
    /// The import recorder and its audit hook.
    Recorded,
    /// The null recorder: the same channels, no work behind them.
    Null,
}

/// The six orders of the three, taken in turn.
const ORDERS: [[Variant; 3]; 6] = {
    use Variant::{Null, Plain, Recorded};
    [
        [Plain, Recorded, Null],
        [Recorded, Null, Plain],
        [Null, Plain, Recorded],
        [Plain, Null, Recorded],
        [Null, Recorded, Plain],
        [Recorded, Plain, Null],
    ]
};

/// One lifecycle without importtime, with the recorder's environment, the
/// null recorder's, or neither: wall ms, spawn-to-ready ms, the worker's
/// own CPU ms (user + sys, from wait4). Every one prepares the recorder's
/// folder, so only the environment differs.
fn one_lifecycle(
    t: &Target,
    lifecycle: &Lifecycle,
    policy: &importguard::verdict::Policy,
    pythonpath: Option<&std::ffi::OsStr>,
    variant: Variant,
) -> Result<(f64, f64, f64)> {
    let recorded = variant == Variant::Recorded;
    let recorder_policy = importguard::recorder::RecorderPolicy {
        root: Some(t.root.clone()),
        ..policy.recorder_policy(false)
    };
    let setup = Recorder::prepare_in(
        crate::scratch::private_dir(crate::scratch::RECORDER, "a costed worker's records")?,
        &recorder_policy,
        pythonpath,
    )
    .map_err(|cause| Error::Recorder {
        context: "could not prepare the import recorder",
        cause,
    })?;
    let mut cmd = t.spawn_command();
    cmd.env_remove("PYTHONPROFILEIMPORTTIME");
    // Kept until the lifecycle is over: its folder holds the bootstrap.
    let mut null = None;
    match variant {
        Variant::Plain => {}
        Variant::Recorded => {
            cmd.instrument(
                "coldstart's import recorder",
                setup.env().iter().map(|(k, v)| (k, v)),
            );
        }
        Variant::Null => {
            let dir = crate::scratch::private_dir(crate::scratch::RECORDER, "the null recorder")?;
            let boot =
                Bootstrap::prepare_in(dir, NULL_RECORDER).map_err(|cause| Error::Recorder {
                    context: "could not write the null recorder",
                    cause,
                })?;
            cmd.instrument(
                "coldstart's null recorder (the recorder's channels, no work)",
                [("PYTHONPATH", boot.pythonpath(pythonpath))],
            );
            null = Some(boot);
        }
    }
    let start = Instant::now();
    let (ready, finished) = lifecycle.run(&cmd).map_err(|e| {
        let what = if recorded {
            "the worker's lifecycle with the recorder failed"
        } else {
            "the worker's lifecycle failed"
        };
        Error::lifecycle(what, e)
    })?;
    let wall = start.elapsed().as_secs_f64() * 1e3;
    drop(null);
    if recorded {
        // A figure for the recorder only where it ran, hook and all.
        let rec = setup.read().map_err(|cause| Error::Recorder {
            context: "could not read the recorder's records",
            cause,
        })?;
        if !rec.ran() || rec.start.as_ref().and_then(|s| s.audit) != Some(true) {
            invalid!(
                "the import recorder (with its audit hook) did not run in the worker, so its cost cannot be measured; run `coldstart check` on it to see why"
            );
        }
    }
    let cpu = finished
        .rusage
        .map_or(f64::NAN, |u| (u.user + u.sys).as_secs_f64() * 1e3);
    Ok((wall, ready, cpu))
}

/// Why the target's `command[0]` is a shim and what to run instead, if it
/// is one (asked of the interpreter itself, as the bench's environment
/// record does).
fn shim_note(t: &Target) -> Option<String> {
    let program = t.command.first()?;
    let info = crate::env::python_info(program, &t.env, &t.cwd);
    if !info.shim {
        return None;
    }
    let why = info
        .note
        .unwrap_or_else(|| format!("`{program}` is a shim"));
    Some(match info.executable {
        Some(exe) => {
            format!("`{program}` is a shim ({why}): run {exe} directly to measure the worker alone")
        }
        None => format!("`{program}` is a shim ({why})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The null recorder puts its finder first on sys.meta_path (answering
    /// nothing, so imports still work), takes its folder off sys.path and
    /// chains to the environment's own sitecustomize, as the recorder does.
    #[test]
    fn the_null_recorder_opens_both_channels_and_leaves_the_worker_as_it_was() {
        let boot = Bootstrap::prepare("coldstart-null-test-", NULL_RECORDER).unwrap();
        let theirs = tempfile::tempdir().unwrap();
        std::fs::write(
            theirs.path().join("sitecustomize.py"),
            "import sys\nsys.chained = True\n",
        )
        .unwrap();
        let script = "import sys, colorsys\n\
                      print(type(sys.meta_path[0]).__name__)\n\
                      print(getattr(sys, 'chained', False))\n\
                      print(sys.argv[1] in sys.path)\n\
                      print(colorsys.__name__)";
        let out = std::process::Command::new(test_interpreters::default_python())
            .args(["-c", script])
            .arg(boot.site())
            .env(
                "PYTHONPATH",
                boot.pythonpath(Some(theirs.path().as_os_str())),
            )
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "NullFinder\nTrue\nFalse\ncolorsys\n"
        );
    }
}
