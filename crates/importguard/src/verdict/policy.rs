//! Forbidden package prefixes and the allow list.

use serde::{Deserialize, Serialize};

use crate::importtime::query::in_package;
use crate::recorder::{RecorderPolicy, is_module_pattern};

/// A module allowed despite a forbidden prefix, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allowance {
    /// A package prefix (`transformers.utils.versions`).
    pub module: String,
    /// Why it is allowed; shown in every report that meets it.
    pub reason: String,
}

/// A policy that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A name that is not a dotted module name.
    #[error("`{0}` is not a module name or package prefix (letters, digits, `_` and `.` only)")]
    BadPattern(String),
    /// An allowance without a reason.
    #[error("allowed module `{0}` has no reason; say why it is allowed")]
    MissingReason(String),
}

/// What the policy says about one module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Classification<'a> {
    /// Not covered by any forbidden prefix.
    Clean,
    /// Covered by this forbidden prefix.
    Forbidden {
        /// The prefix that matched.
        pattern: &'a str,
    },
    /// Covered by a forbidden prefix but allowed.
    Allowed {
        /// The forbidden prefix that matched.
        pattern: &'a str,
        /// The allowance that exempts it.
        allowance: &'a Allowance,
    },
}

/// Forbidden package prefixes with an allow list. `torch` matches `torch`
/// and `torch.nn`, not `torchvision`; an allowance wins over a prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policy {
    forbidden: Vec<String>,
    allowed: Vec<Allowance>,
}

impl Policy {
    /// Checks every name and that every allowance has a reason.
    pub fn new(forbidden: Vec<String>, allowed: Vec<Allowance>) -> Result<Policy, PolicyError> {
        for p in forbidden.iter().chain(allowed.iter().map(|a| &a.module)) {
            if !is_module_pattern(p) {
                return Err(PolicyError::BadPattern(p.clone()));
            }
        }
        if let Some(a) = allowed.iter().find(|a| a.reason.trim().is_empty()) {
            return Err(PolicyError::MissingReason(a.module.clone()));
        }
        Ok(Policy { forbidden, allowed })
    }

    /// The forbidden prefixes.
    pub fn forbidden(&self) -> &[String] {
        &self.forbidden
    }

    /// The allow list.
    pub fn allowed(&self) -> &[Allowance] {
        &self.allowed
    }

    /// What the policy says about `module`.
    pub fn classify(&self, module: &str) -> Classification<'_> {
        let Some(pattern) = self.forbidden.iter().find(|p| in_package(module, p)) else {
            return Classification::Clean;
        };
        match self.allowed.iter().find(|a| in_package(module, &a.module)) {
            Some(allowance) => Classification::Allowed { pattern, allowance },
            None => Classification::Forbidden { pattern },
        }
    }

    /// Whether `module` is forbidden and not allowed.
    pub fn forbids(&self, module: &str) -> bool {
        matches!(self.classify(module), Classification::Forbidden { .. })
    }

    /// The same policy for the recorder's bootstrap.
    pub fn recorder_policy(&self, block: bool) -> RecorderPolicy {
        RecorderPolicy {
            forbid: self.forbidden.clone(),
            allow: self.allowed.iter().map(|a| a.module.clone()).collect(),
            block,
            root: None,
            own: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy::new(
            vec!["torch".into(), "transformers".into()],
            vec![Allowance {
                module: "transformers.utils.versions".into(),
                reason: "tiny, imports no torch".into(),
            }],
        )
        .unwrap()
    }

    #[track_caller]
    fn check(module: &str, expect: &str) {
        let got = match policy().classify(module) {
            Classification::Clean => "clean".to_owned(),
            Classification::Forbidden { pattern } => format!("forbidden {pattern}"),
            Classification::Allowed { pattern, allowance } => {
                format!("allowed {pattern} by {}", allowance.module)
            }
        };
        assert_eq!(got, expect, "{module}");
    }

    #[test]
    fn prefixes_match_whole_name_parts() {
        check("torch", "forbidden torch");
        check("torch.nn.functional", "forbidden torch");
        check("torchvision", "clean");
        check("torch_geometric", "clean");
        check("mytorch", "clean");
        check("transformers", "forbidden transformers");
        check("transformers.utils", "forbidden transformers");
        check(
            "transformers.utils.versions",
            "allowed transformers by transformers.utils.versions",
        );
        check(
            "transformers.utils.versions.x",
            "allowed transformers by transformers.utils.versions",
        );
        check("transformers.utils.versionsx", "forbidden transformers");
    }

    #[test]
    fn bad_policies_are_refused() {
        assert_eq!(
            Policy::new(vec!["torch,x".into()], vec![]),
            Err(PolicyError::BadPattern("torch,x".into()))
        );
        let no_reason = vec![Allowance {
            module: "a".into(),
            reason: " ".into(),
        }];
        assert_eq!(
            Policy::new(vec!["a".into()], no_reason),
            Err(PolicyError::MissingReason("a".into()))
        );
    }

    #[test]
    fn the_recorder_gets_the_same_names() {
        let r = policy().recorder_policy(true);
        assert_eq!(r.forbid, ["torch", "transformers"]);
        assert_eq!(r.allow, ["transformers.utils.versions"]);
        assert!(r.block);
    }
}
