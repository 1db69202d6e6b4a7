//! `--bench N` of the check: what the whole check costs beside the
//! worker's own lifecycle. N interleaved rounds, after one warm-up of each:
//! the whole check of a target, one plain lifecycle of its worker (spawn,
//! ready, health, shutdown; no importtime, no recorder) and one instrumented
//! lifecycle (importtime, recorder, verdict); the two lifecycles swap
//! places every round, so neither always follows the check.
//!
//! The report also gives the check's physical floor on this machine: N
//! concurrent workers cannot finish before one lifecycle does, nor before
//! the cores have run N times one worker's CPU time (user + sys from
//! `wait4`): floor = max(plain wall, N x plain CPU / cores). The ratio of
//! the check to that floor is its overhead beyond physics.

use std::time::Instant;

use report::boundary::{CheckCost, Status};

use super::{CheckOptions, check_process, check_target, policy_of};
use crate::error::{Error, Result, invalid};
use crate::lifecycle::Lifecycle;
use crate::target::Target;

/// Runs `rounds` interleaved rounds and returns every figure, in ms.
pub fn bench(t: &Target, opts: CheckOptions, rounds: usize) -> Result<CheckCost> {
    if rounds == 0 {
        invalid!("--bench needs at least 1 round");
    }
    let policy = policy_of(t)?;
    let lifecycle = Lifecycle::of(t);
    let cmd = t.spawn_command();
    // Wall ms and the worker's own CPU ms (user + sys, from wait4).
    let plain = || -> Result<(f64, f64)> {
        let start = Instant::now();
        let finished = lifecycle
            .run(&cmd)
            .map_err(|e| Error::worker("the worker's lifecycle failed", e))?;
        let cpu = finished
            .rusage
            .map_or(f64::NAN, |u| (u.user + u.sys).as_secs_f64() * 1e3);
        Ok((start.elapsed().as_secs_f64() * 1e3, cpu))
    };
    let record_plain = |cost: &mut CheckCost| -> Result<()> {
        let (wall, cpu) = plain()?;
        cost.plain_ms.push(wall);
        cost.plain_cpu_ms.push(cpu);
        Ok(())
    };
    let instrumented = || -> Result<f64> {
        let start = Instant::now();
        let p = check_process(t, &lifecycle, &policy, false, 1)?;
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
        instrumented_ms: Vec::new(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    // One warm-up of each (page cache, bytecode), kept out of the figures.
    plain()?;
    check_target(t, opts)?;
    for round in 0..rounds {
        let first_plain = round % 2 == 0;
        if first_plain {
            record_plain(&mut cost)?;
        } else {
            cost.instrumented_ms.push(instrumented()?);
        }
        let start = Instant::now();
        let r = check_target(t, opts)?;
        cost.check_ms.push(start.elapsed().as_secs_f64() * 1e3);
        if r.status == Status::Error {
            invalid!("the check could not be completed; run it without --bench to see why");
        }
        if first_plain {
            cost.instrumented_ms.push(instrumented()?);
        } else {
            record_plain(&mut cost)?;
        }
    }
    Ok(cost)
}
