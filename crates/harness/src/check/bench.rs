//! `--bench N` of the check: what the whole check costs beside the
//! worker's own lifecycle. N interleaved rounds, after one warm-up of each:
//! the whole check of a target, one plain lifecycle of its worker (spawn,
//! ready, health, shutdown; no importtime, no recorder) and one instrumented
//! lifecycle (importtime, recorder, verdict); the two lifecycles swap
//! places every round, so neither always follows the check.

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
    let plain = || -> Result<f64> {
        let start = Instant::now();
        lifecycle
            .run(&cmd)
            .map_err(|e| Error::worker("the worker's lifecycle failed", e))?;
        Ok(start.elapsed().as_secs_f64() * 1e3)
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
        instrumented_ms: Vec::new(),
    };
    // One warm-up of each (page cache, bytecode), kept out of the figures.
    plain()?;
    check_target(t, opts)?;
    for round in 0..rounds {
        let first_plain = round % 2 == 0;
        if first_plain {
            cost.plain_ms.push(plain()?);
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
            cost.plain_ms.push(plain()?);
        }
    }
    Ok(cost)
}
