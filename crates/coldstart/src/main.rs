//! `coldstart`: the installed command. Its project is found from the
//! current folder upward (`--config FILE` to name one).

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    coldstart::finish(coldstart::cli::Cli::parse().run())
}
