//! The command line's Ctrl-C: the harness's interrupt token, with each
//! press shown on stderr (the library only tells what a press did).

use harness::{Interrupt, OnPress};

/// A token pressed by SIGINT, SIGTERM and SIGHUP ([`Interrupt::ctrl_c`]),
/// each press said on stderr on a line of its own.
pub(crate) fn interrupt(on_press: OnPress) -> Result<Interrupt, harness::interrupt::InstallError> {
    Interrupt::ctrl_c(on_press, |press| eprintln!("\n{press}"))
}
