//! What the command line says of a target over its config: the one place
//! where a flag replaces a configured value.

use std::time::Duration;

use harness::Target;

/// Flag values that replace each selected target's own: every `Some` wins
/// over the config, every `None` keeps what the target says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// The forbidden modules (`--forbid`), instead of the target's policy.
    pub forbidden: Option<Vec<String>>,
    /// How long to wait for the ready line (`--ready-timeout`).
    pub ready_timeout: Option<Duration>,
    /// How long to wait for each reply (`--request-timeout`).
    pub request_timeout: Option<Duration>,
    /// Fresh processes per target (`--processes`).
    pub processes: Option<usize>,
}

impl Overrides {
    /// `target` with these values in place of its own.
    pub fn apply(&self, mut target: Target) -> Target {
        if let Some(f) = &self.forbidden {
            target.forbidden = f.iter().map(|m| m.trim().to_owned()).collect();
        }
        if let Some(d) = self.ready_timeout {
            target.ready_timeout = d;
        }
        if let Some(d) = self.request_timeout {
            target.request_timeout = d;
        }
        if let Some(n) = self.processes {
            target.processes = n;
        }
        target
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_replaces_the_configured_value_and_an_absent_one_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let configured = Target::ad_hoc(dir.path(), vec!["python3".into()], "w");
        let kept = Overrides::default().apply(configured.clone());
        assert_eq!(
            (kept.ready_timeout, kept.processes, &kept.forbidden),
            (
                configured.ready_timeout,
                configured.processes,
                &configured.forbidden
            )
        );
        let o = Overrides {
            forbidden: Some(vec![" torch ".into()]),
            ready_timeout: Some(Duration::from_millis(1500)),
            request_timeout: None,
            processes: Some(1),
        };
        let t = o.apply(configured.clone());
        assert_eq!(t.forbidden, ["torch"]);
        assert_eq!(t.ready_timeout, Duration::from_millis(1500));
        assert_eq!(t.request_timeout, configured.request_timeout);
        assert_eq!(t.processes, 1);
    }
}
