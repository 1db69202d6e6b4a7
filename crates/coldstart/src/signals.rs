//! The command line's Ctrl-C: the harness's interrupt token, with each
//! press shown on stderr (the library only tells what a press did).

use std::process::ExitCode;

use harness::{Interrupt, OnPress};

/// A token pressed by SIGINT, SIGTERM and SIGHUP ([`Interrupt::ctrl_c`]),
/// each press said on stderr on a line of its own.
pub fn interrupt(on_press: OnPress) -> Result<Interrupt, harness::interrupt::InstallError> {
    Interrupt::ctrl_c(on_press, |press| eprintln!("\n{press}"))
}

/// The exit code of a run cut short by a signal, the usual way: 128 plus
/// the signal's number (130 SIGINT, 143 SIGTERM, 129 SIGHUP).
pub fn interrupted_code(interrupt: &Interrupt) -> ExitCode {
    let n = interrupt
        .signal()
        .unwrap_or(harness::Signal::Interrupt)
        .number();
    ExitCode::from(128 + n as u8)
}

/// The name of the signal that cut a run short (SIGINT when a press came
/// from elsewhere).
pub fn signal_name(interrupt: &Interrupt) -> &'static str {
    interrupt
        .signal()
        .unwrap_or(harness::Signal::Interrupt)
        .name()
}

/// Says on stderr that the run was cut short, `interrupted by SIGNAL:
/// WHAT` (`what`: what the output covers, what was kept), and gives the
/// exit code of [`interrupted_code`].
pub fn interrupted(interrupt: &Interrupt, what: &str) -> ExitCode {
    eprintln!("interrupted by {}{what}", signal_name(interrupt));
    interrupted_code(interrupt)
}
