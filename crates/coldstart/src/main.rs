//! `coldstart`: the installed command. Its project is found from the
//! current folder upward (`--config FILE` to name one).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(
    name = "coldstart",
    about = "coldstart: keep Python worker start-up fast and honest",
    version = coldstart::VERSION
)]
struct Cli {
    /// The config file (a coldstart.toml, or a pyproject.toml with
    /// [tool.coldstart]); default: the nearest one from the current folder up.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: coldstart::Command,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    coldstart::finish(
        settings::Project::discover(cli.config.as_deref())
            .map_err(anyhow::Error::from)
            .and_then(|project| coldstart::run(cli.command, &project)),
    )
}
