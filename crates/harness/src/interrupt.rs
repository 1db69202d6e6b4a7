//! An explicit interrupt token instead of per-task Ctrl-C statics: the
//! caller decides what a press means, the harness asks the token.
//!
//! The first press sets the token: loops stop starting new work and finish
//! what runs (a bench stops after the current trial). A second press kills
//! every live worker group at once ([`spawn::kill_all`]); work in flight
//! then fails, and records made after it are marked interrupted, not
//! failed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How many times the user asked to stop; shared by clones.
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    presses: Arc<AtomicUsize>,
}

/// What a press does beyond setting the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnPress {
    /// The first press asks to finish the current step; the second kills
    /// every worker now.
    FinishThenKill,
    /// Every press kills every worker now (a check: its verdicts are
    /// incomplete anyway).
    KillNow,
}

/// The Ctrl-C handler could not be installed (one is installed already).
#[derive(Debug, thiserror::Error)]
#[error("could not install the Ctrl-C handler: {0}")]
pub struct InstallError(String);

impl Interrupt {
    /// A token nothing presses (tests, embedding).
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// A token pressed by Ctrl-C (SIGINT, SIGTERM, SIGHUP). Once per
    /// process.
    pub fn ctrl_c(on_press: OnPress) -> Result<Interrupt, InstallError> {
        let token = Interrupt::new();
        let handler = token.clone();
        ctrlc::set_handler(move || {
            let n = handler.press();
            match on_press {
                OnPress::FinishThenKill if n == 1 => eprintln!(
                    "\ninterrupted: stopping after the current trial (Ctrl-C again to kill it now)"
                ),
                _ => spawn::kill_all(),
            }
        })
        .map_err(|e| InstallError(e.to_string()))?;
        Ok(token)
    }

    /// Presses the token; returns how many presses there have been.
    pub fn press(&self) -> usize {
        self.presses.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Whether it was pressed at least once.
    pub fn is_set(&self) -> bool {
        self.presses() > 0
    }

    /// How many times it was pressed.
    pub fn presses(&self) -> usize {
        self.presses.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_their_presses() {
        let a = Interrupt::new();
        let b = a.clone();
        assert!(!b.is_set());
        assert_eq!(a.press(), 1);
        assert!(b.is_set());
        assert_eq!(b.press(), 2);
        assert_eq!(a.presses(), 2);
    }
}
