//! One side of a bench run, ready to spawn: a target, validated (no
//! importtime), with its command, lifecycle and environment record, as the
//! timed trials, the serve phase and the memory view all take it.
//!
//! What it does not own: running the side (`trials`, `serve`, `memory`).

use phases::run::TargetInfo;
use timeline::Variant;

use crate::env;
use crate::error::{Result, invalid};
use crate::lifecycle::Lifecycle;
use crate::target::Target;

/// Environment variables removed from every worker: no importtime during
/// timed trials.
pub const REMOVED_ENV: &[&str] = &["PYTHONPROFILEIMPORTTIME"];

/// One side of a bench run (A or B), ready to spawn: its target, the
/// command every trial runs, its lifecycle and its environment record.
/// The timed trials, the serve phase and the memory view all take it.
#[derive(Debug)]
pub struct Side {
    /// A or B.
    pub variant: Variant,
    /// Its target.
    pub target: Target,
    /// The command every trial runs.
    pub cmd: spawn::Command,
    /// What the environment record says of it.
    pub info: TargetInfo,
    /// Workers per trial.
    pub concurrency: usize,
    /// Timeouts, health round trips and shutdown policy.
    pub lifecycle: Lifecycle,
}

/// Refuses a target that turns importtime on: it slows every import.
pub fn refuse_importtime(t: &Target) -> Result<()> {
    let args = &t.command;
    let flagged = args
        .windows(2)
        .any(|w| w[0] == "-X" && w[1].starts_with("importtime"))
        || args.iter().any(|a| a.starts_with("-Ximporttime"));
    if flagged || t.env.contains_key("PYTHONPROFILEIMPORTTIME") {
        invalid!(
            "target `{}` turns on importtime; bench times workers without it (it slows every import): remove -X importtime / PYTHONPROFILEIMPORTTIME, and use `coldstart importtime` to read import costs",
            t.name
        );
    }
    Ok(())
}

impl Side {
    /// Prepares a target as side `variant` of a run.
    pub fn new(
        variant: Variant,
        target: Target,
        health: Option<usize>,
        concurrency: usize,
    ) -> Result<Side> {
        refuse_importtime(&target)?;
        let mut cmd = target.spawn_command();
        cmd.stderr_tail_bytes(16 * 1024);
        for k in REMOVED_ENV {
            cmd.instrument_without(
                format!("{k} unset (timed workers run without importtime)"),
                k,
            );
        }
        let limits = target
            .limits
            .is_set()
            .then(|| limits_of(&target))
            .transpose()?;
        let python = env::looks_like_python(&target.command[0])
            .then(|| env::python_info(&target.command[0], &target.env, &target.cwd));
        let info = TargetInfo {
            variant,
            name: target.name.clone(),
            origin: target.origin.as_str().to_owned(),
            command: target.command.clone(),
            display: target.display_command(),
            env: target.env.clone(),
            env_removed: REMOVED_ENV.iter().map(|s| s.to_string()).collect(),
            cwd: target.cwd.display().to_string(),
            python,
            limits,
        };
        let mut lifecycle = Lifecycle::of(&target);
        if let Some(h) = health {
            lifecycle.health = h;
        }
        Ok(Side {
            variant,
            concurrency,
            cmd,
            info,
            lifecycle,
            target,
        })
    }
}

/// A limited target's limits, once this machine has shown it can set them
/// (one cgroup made and removed), before any trial runs.
fn limits_of(target: &Target) -> Result<phases::run::RunLimits> {
    let version =
        spawn::cgroup::probe(&target.limits).map_err(|cause| crate::error::Error::Limits {
            target: target.name.clone(),
            limits: target.limits,
            cause,
        })?;
    Ok(phases::run::RunLimits {
        limits: target.limits,
        cgroup: version.name().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn importtime_is_refused() {
        let root = Path::new("/");
        let t =
            |cmd: &[&str]| Target::ad_hoc(root, cmd.iter().map(|s| s.to_string()).collect(), "t");
        assert!(refuse_importtime(&t(&["python3", "-X", "importtime", "-m", "w"])).is_err());
        assert!(refuse_importtime(&t(&["python3", "-Ximporttime"])).is_err());
        assert!(refuse_importtime(&t(&["python3", "-X", "dev", "-m", "w"])).is_ok());
        let mut with_env = t(&["python3"]);
        with_env
            .env
            .insert("PYTHONPROFILEIMPORTTIME".into(), "1".into());
        let err = refuse_importtime(&with_env).unwrap_err().to_string();
        assert!(err.contains("coldstart importtime"), "{err}");
    }
}
