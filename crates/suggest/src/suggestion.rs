//! What is suggested for one violation: the cuts found, best first, the
//! ones verification rejected and why, and how it reads for people.

use std::fmt;

use serde::Serialize;

use crate::cut::{Cut, CutKind, FunctionSite, Uncuttable};

/// Why a verified cut was not offered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RejectReason {
    /// The check on the patched copy still sees the forbidden module.
    ViolationRemains {
        /// The chain it saw.
        chain: Vec<String>,
    },
    /// A worker on the patched copy did not complete its handshake.
    HandshakeFailed {
        /// What happened, as the caller said.
        detail: String,
    },
    /// The handshake held, but the target's model path failed on the
    /// patched copy.
    ModelPathFailed {
        /// The step that failed, as the caller said.
        step: String,
        /// Its output: the failing reply, or the command's output.
        output: String,
    },
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RejectReason::ViolationRemains { chain } => {
                write!(f, "the violation remains: {}", chain.join(" -> "))
            }
            RejectReason::HandshakeFailed { detail } => {
                write!(f, "the worker failed its handshake: {detail}")
            }
            RejectReason::ModelPathFailed { step, output } => {
                write!(f, "the model path failed at {step}: {output}")
            }
        }
    }
}

/// A cut that verification rejected.
#[derive(Debug, Clone, Serialize)]
pub struct Rejection {
    /// The cut's file.
    pub file: String,
    /// Its line.
    pub line: u32,
    /// Its kind.
    pub kind: CutKind,
    /// Its summary.
    pub summary: String,
    /// Why it was rejected.
    #[serde(flatten)]
    pub reason: RejectReason,
}

/// Whether the offered cut was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Verification {
    /// Not verified (yet): `cut` is the best candidate as computed.
    NotRun,
    /// The check on a patched copy passed: `cut` is safe to offer.
    Verified,
    /// Every cut tried was rejected: none is offered (`cut` is `None`).
    Rejected,
    /// No link can be cut: nothing to offer.
    NoCandidate,
}

/// What to change for one violation.
#[derive(Debug, Clone, Serialize)]
pub struct Suggestion {
    /// The forbidden module.
    pub module: String,
    /// The forbidden prefix it matched (from the violation).
    pub pattern: String,
    /// The chain, from the top-level import down to the module.
    pub chain: Vec<String>,
    /// The version of the interpreter that read the files.
    pub python: String,
    /// The cut offered: the smallest, closest to the worker's own code, and
    /// verified when `verification` says so.
    pub cut: Option<Cut>,
    /// Whether `cut` was verified.
    pub verification: Verification,
    /// The other cuts, best first.
    pub candidates: Vec<Cut>,
    /// Links that cannot be cut, and why.
    pub not_cuttable: Vec<Uncuttable>,
    /// Cuts that verification rejected, and why.
    pub rejections: Vec<Rejection>,
    /// What of the target's model path the verification also held the
    /// cut to (its requests after ready, its own command), in words, when
    /// the caller checked one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_path: Option<String>,
}

impl Suggestion {
    /// Every cut still on offer, best first (`cut`, then `candidates`).
    pub fn cuts(&self) -> impl Iterator<Item = &Cut> {
        self.cut.iter().chain(&self.candidates)
    }
}

impl fmt::Display for Suggestion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.verification {
            Verification::Verified => "verified on a patched copy",
            Verification::NotRun => "not verified",
            Verification::Rejected => "every cut tried was rejected",
            Verification::NoCandidate => "no link can be cut",
        };
        writeln!(
            f,
            "suggestion for {} ({}; read by Python {}):",
            self.module, state, self.python
        )?;
        match &self.cut {
            Some(c) => {
                writeln!(f, "  cut {}:{} ({}): {}", c.file, c.line, c.kind, c.summary)?;
                match self.verification {
                    Verification::Verified => {
                        writeln!(
                            f,
                            "  verified: with it applied, the check on a patched copy saw no `{}` at start-up",
                            self.module
                        )?;
                        if let Some(mp) = &self.model_path {
                            writeln!(f, "  and the model path held on that copy: {mp}")?;
                        }
                    }
                    _ => writeln!(
                        f,
                        "  NOT verified: whether `{}` stays out of start-up with it is unknown until the check is re-run with it applied",
                        self.module
                    )?,
                }
                for n in &c.notes {
                    writeln!(f, "  note: {n}")?;
                }
                for l in c.diff.lines() {
                    writeln!(f, "    {l}")?;
                }
            }
            None => writeln!(f, "  no cut is offered")?,
        }
        if !self.candidates.is_empty() {
            // Nobody saw what these do to the forbidden module: say so.
            writeln!(
                f,
                "  other candidates, NOT verified (whether {} stays out of start-up after one is unknown: \
                 verifying it needs the check re-run with it applied, e.g. `git apply` its diff and run `coldstart check`):",
                self.module
            )?;
            for c in &self.candidates {
                writeln!(
                    f,
                    "    {}:{} ({}, {} lines): {}",
                    c.file, c.line, c.kind, c.lines_changed, c.summary
                )?;
            }
        }
        if !self.not_cuttable.is_empty() {
            writeln!(f, "  not cuttable:")?;
            for u in &self.not_cuttable {
                match (&u.file, u.line) {
                    (Some(file), Some(line)) => write!(f, "    {file}:{line}")?,
                    _ => write!(f, "    (link {})", u.link)?,
                }
                writeln!(f, " (imports {}): {}", u.module, u.reason)?;
            }
        }
        if !self.rejections.is_empty() {
            writeln!(f, "  rejected after verification:")?;
            for r in &self.rejections {
                let reason = r.reason.to_string().replace('\n', "\n      ");
                writeln!(f, "    {}:{} ({}): {reason}", r.file, r.line, r.kind)?;
            }
        }
        Ok(())
    }
}

/// A function an import moves into, in words, with the blocks of it when
/// the import goes there.
fn function_words(f: &FunctionSite) -> String {
    let at = format!("`{}` (line {})", f.name, f.line);
    if f.blocks.is_empty() {
        return at;
    }
    let blocks: Vec<String> = f
        .blocks
        .iter()
        .map(|b| match &b.block {
            Some(words) => format!("{words} of {at}"),
            None => format!("{at} before line {}", b.line),
        })
        .collect();
    blocks.join(" and ")
}

fn quoted(names: &[String]) -> String {
    let q: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match q.len() {
        0 => String::new(),
        1 => q[0].clone(),
        n => format!("{} and {}", q[..n - 1].join(", "), q[n - 1]),
    }
}

pub(crate) fn summary(c: &Cut) -> String {
    let at = format!("{}:{}", c.file, c.line);
    let names = quoted(&c.names);
    let mut s = match c.kind {
        CutKind::LazyImport => format!("make `{}` ({at}) a `lazy` import (PEP 810)", c.statement),
        CutKind::DropImport => format!("drop `{}` ({at}): nothing reads {names}", c.statement),
        CutKind::TypeChecking => format!(
            "{names} {} only read in annotations: import {} under `if TYPE_CHECKING:` ({at})",
            if c.names.len() == 1 { "is" } else { "are" },
            if c.names.len() == 1 { "it" } else { "them" },
        ),
        CutKind::MoveIntoBlocks | CutKind::MoveIntoFunctions | CutKind::ModuleGetattr => {
            let mut s = String::new();
            if !c.functions.is_empty() {
                let fns: Vec<String> = c.functions.iter().map(function_words).collect();
                let fns = match fns.len() {
                    1 => fns[0].clone(),
                    n => format!("{} and {}", fns[..n - 1].join(", "), fns[n - 1]),
                };
                // A module `__getattr__` cut can move into blocks too.
                s = if c.functions.iter().any(|f| !f.blocks.is_empty()) {
                    let sites: usize = c.functions.iter().map(|f| f.blocks.len().max(1)).sum();
                    format!(
                        "move `{}` ({at}) into {fns}: the narrowest {} that read{} {names}, so a call that takes another path never imports it",
                        c.statement,
                        if sites == 1 { "block" } else { "blocks" },
                        if sites == 1 { "s" } else { "" },
                    )
                } else {
                    format!(
                        "move `{}` ({at}) into {fns}, the only {} that read{} {names}",
                        c.statement,
                        if c.functions.len() == 1 {
                            "function"
                        } else {
                            "functions"
                        },
                        if c.functions.len() == 1 { "s" } else { "" },
                    )
                };
            }
            if c.getattr {
                let what = if c.file.ends_with("__init__.py") {
                    "the re-export"
                } else {
                    "the import"
                };
                let head = if s.is_empty() {
                    format!("turn {what} `{}` ({at}) into", c.statement)
                } else {
                    s.push_str(", and add");
                    String::new()
                };
                s.push_str(&head);
                s.push_str(&format!(
                    " a PEP 562 module `__getattr__` that imports {names} on first access (`__dir__` keeps listing {})",
                    if c.names.len() == 1 { "it" } else { "them" }
                ));
                if !c.users.is_empty() {
                    let users: Vec<String> = c
                        .users
                        .iter()
                        .map(|u| format!("{}:{}", u.file, u.line))
                        .collect();
                    s.push_str(&format!("; read through it by {}", users.join(", ")));
                }
            }
            if c.type_checking {
                s.push_str("; the annotations' names come from an `if TYPE_CHECKING:` import");
            }
            s
        }
    };
    if c.future_annotations {
        s.push_str(", with `from __future__ import annotations` so annotations are not evaluated at run time");
    }
    // What the edit does to this line; whether the forbidden module then
    // stays out of start-up is for verification to say (another route may
    // import it).
    s.push_str(&format!(
        "; then this line no longer imports `{}` at start-up",
        c.module
    ));
    s
}
