//! An explicit interrupt token instead of per-task Ctrl-C statics: the
//! caller decides what a press means, the harness asks the token.
//!
//! The first press sets the token: loops stop starting new work and finish
//! what runs (a bench stops after the current trial). A second press kills
//! every live worker group at once ([`spawn::kill_all`]); work in flight
//! then fails, and records made after it are marked interrupted, not
//! failed. SIGTERM and SIGHUP press twice at once; the token remembers
//! the last signal, for the caller's message and exit code.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

/// How many times the user asked to stop, and by which signal last; shared
/// by clones.
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    presses: Arc<AtomicUsize>,
    /// The number of the last signal that pressed it, 0 for none.
    signal: Arc<AtomicI32>,
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
    /// Every press stops the task and kills nothing: the task reads a
    /// process it did not start (`record`, `top`), which is left alone,
    /// and what was gathered is kept.
    StopOnly,
}

/// What one press did, as [`Interrupt::ctrl_c`] tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Press {
    /// The task stops and kills nothing (the process read is left running).
    Stopping(Signal),
    /// Every worker is being killed now.
    Killing(Signal),
    /// The first Ctrl-C: the current trial finishes, then the task stops.
    Finishing,
}

impl std::fmt::Display for Press {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Press::Stopping(sig) => write!(
                f,
                "interrupted ({}): stopping; what was sampled is kept and the process is left running",
                sig.name()
            ),
            Press::Killing(sig) => write!(
                f,
                "interrupted ({}): killing every worker now; what was measured is kept",
                sig.name()
            ),
            Press::Finishing => f.write_str(
                "interrupted (SIGINT): stopping after the current trial (Ctrl-C again to kill it now)",
            ),
        }
    }
}

/// The signals that press the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT: Ctrl-C at the terminal.
    Interrupt,
    /// SIGTERM: a process manager, a CI job's cancel, `kill`.
    Terminate,
    /// SIGHUP: the terminal went away.
    Hangup,
}

impl Signal {
    /// The signal's number (SIGINT 2, SIGTERM 15, SIGHUP 1).
    pub fn number(self) -> i32 {
        match self {
            Signal::Interrupt => libc::SIGINT,
            Signal::Terminate => libc::SIGTERM,
            Signal::Hangup => libc::SIGHUP,
        }
    }

    /// Its name: `SIGINT`, `SIGTERM`, `SIGHUP`.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
            Signal::Hangup => "SIGHUP",
        }
    }

    fn from_number(n: i32) -> Option<Signal> {
        [Signal::Interrupt, Signal::Terminate, Signal::Hangup]
            .into_iter()
            .find(|s| s.number() == n)
    }
}

/// The signal handlers could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("could not install the handlers of SIGINT, SIGTERM and SIGHUP: {0}")]
pub struct InstallError(String);

impl Interrupt {
    /// A token nothing presses (tests, embedding).
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// A token pressed by SIGINT (Ctrl-C), SIGTERM and SIGHUP, on a thread
    /// of its own. SIGINT does what `on_press` says; SIGTERM and SIGHUP
    /// (someone wants the process gone, not a step finished) count as two
    /// presses at once: every worker is killed now, and what was measured
    /// is kept. Each press is told to `tell` (on the signal thread) with
    /// what it does, for the caller to show: the library prints nothing.
    pub fn ctrl_c(
        on_press: OnPress,
        tell: impl Fn(Press) + Send + 'static,
    ) -> Result<Interrupt, InstallError> {
        let token = Interrupt::new();
        let handler = token.clone();
        let mut signals =
            signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM, libc::SIGHUP])
                .map_err(|e| InstallError(e.to_string()))?;
        std::thread::Builder::new()
            .name("interrupt".to_owned())
            .spawn(move || {
                for n in signals.forever() {
                    let Some(sig) = Signal::from_number(n) else {
                        continue;
                    };
                    if on_press == OnPress::StopOnly {
                        handler.signal.store(sig.number(), Ordering::SeqCst);
                        handler.press();
                        tell(Press::Stopping(sig));
                    } else if handler.on_signal(sig, on_press) {
                        tell(Press::Killing(sig));
                        spawn::kill_all();
                    } else {
                        tell(Press::Finishing);
                    }
                }
            })
            .map_err(|e| InstallError(e.to_string()))?;
        Ok(token)
    }

    /// Presses the token for one signal; returns whether every worker must
    /// be killed now (the caller does it, and says so).
    fn on_signal(&self, sig: Signal, on_press: OnPress) -> bool {
        self.signal.store(sig.number(), Ordering::SeqCst);
        let mut n = self.press();
        if sig != Signal::Interrupt && n == 1 {
            n = self.press();
        }
        !(on_press == OnPress::FinishThenKill && n == 1)
    }

    /// The last signal that pressed the token, if a signal did.
    pub fn signal(&self) -> Option<Signal> {
        Signal::from_number(self.signal.load(Ordering::SeqCst))
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

    #[test]
    fn a_termination_signal_kills_at_once_and_is_remembered() {
        let t = Interrupt::new();
        assert_eq!(t.signal(), None);
        assert!(t.on_signal(Signal::Hangup, OnPress::FinishThenKill));
        assert_eq!(t.presses(), 2);
        assert_eq!(t.signal(), Some(Signal::Hangup));
        let i = Interrupt::new();
        assert!(!i.on_signal(Signal::Interrupt, OnPress::FinishThenKill));
        assert_eq!(i.presses(), 1);
        assert!(i.on_signal(Signal::Interrupt, OnPress::FinishThenKill));
        assert!(Interrupt::new().on_signal(Signal::Interrupt, OnPress::KillNow));
        assert_eq!(i.signal().map(Signal::number), Some(2));
        assert_eq!(i.presses(), 2);
        assert_eq!(Signal::Terminate.number(), 15);
        assert_eq!(Signal::Hangup.name(), "SIGHUP");
    }
}
