//! The installed `coldstart` command's own command line: the subcommands
//! every front door has ([`Command`]) plus what only an installed command
//! needs (`completions`). `cargo xtask dist` renders its man page from
//! [`Cli`].

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser, Subcommand};

use crate::Command;

/// What `coldstart --help` says after the command list: the three jobs a
/// newcomer has, in the order they meet them, each with its CI use.
const JOBS: &str = "\
The three jobs, each with its one line in CI:
  check  no worker imports torch, transformers or stanza at start-up:
         coldstart check --format github   (annotates the line that started each chain)
  diff   what a pull request changed in start-up imports and time:
         coldstart diff origin/main --format github
  bench  start-up and shutdown over repeated fresh trials, medians with intervals:
         coldstart bench --out bench && cat bench/summary.md >> \"$GITHUB_STEP_SUMMARY\"

The config is the nearest coldstart.toml or pyproject.toml with [tool.coldstart], from
the current folder up (coldstart.toml first in a folder); `coldstart init` writes a starter.";

/// `coldstart [--config FILE] <command>`.
#[derive(Debug, Parser)]
#[command(
    name = "coldstart",
    about = "coldstart: keep Python worker start-up fast and honest",
    after_help = JOBS,
    version = crate::VERSION
)]
pub struct Cli {
    /// The config file (a coldstart.toml, or a pyproject.toml with
    /// [tool.coldstart]); default: the nearest one from the current folder up.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Top,
}

/// The installed command's subcommands.
// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Top {
    /// A subcommand every front door has.
    #[command(flatten)]
    Task(Command),
    /// Print a shell completion script: `source <(coldstart completions bash)`,
    /// or save it where the shell loads completions from.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
}

impl Cli {
    /// Runs the parsed command line: completions here, every task in the
    /// project found from `--config` or the current folder.
    pub fn run(self) -> Result<ExitCode> {
        match self.command {
            Top::Completions { shell } => {
                // Into a buffer first: clap_complete panics on a failed
                // write, and `coldstart completions zsh | head` closes the pipe.
                let mut script = Vec::new();
                clap_complete::generate(shell, &mut Cli::command(), "coldstart", &mut script);
                std::io::stdout()
                    .write_all(&script)
                    .context("could not write the completion script to stdout")?;
                Ok(ExitCode::SUCCESS)
            }
            Top::Task(task) => {
                let project = settings::Project::discover(self.config.as_deref())?;
                crate::run(task, &project)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent_and_help_leads_with_check_diff_bench() {
        Cli::command().debug_assert();
        let help = Cli::command().render_long_help().to_string();
        let jobs = help.find("The three jobs").expect("the jobs paragraph");
        let at = |word: &str| help[jobs..].find(word).map(|i| i + jobs);
        let (check, diff, bench) = (at("  check"), at("  diff"), at("  bench"));
        assert!(check < diff && diff < bench, "{help}");
        assert!(help.contains("completions"), "{help}");
    }

    /// `--target` and the trailing command are one declaration: every
    /// subcommand that selects a worker describes them in the same words.
    #[test]
    fn every_subcommand_that_selects_a_target_spells_it_the_same() {
        let cli = Cli::command();
        let mut spellings = Vec::new();
        for name in ["check", "bench", "diff", "snapshot", "lazy", "profile"] {
            let sub = cli.find_subcommand(name).expect(name);
            let arg = |id: &str| {
                let a = sub.get_arguments().find(|a| a.get_id() == id);
                let a = a.unwrap_or_else(|| panic!("{name} has no {id}"));
                (a.get_help().map(ToString::to_string), a.is_last_set())
            };
            spellings.push((name, arg("target"), arg("command")));
        }
        for (name, target, command) in &spellings[1..] {
            assert_eq!(
                (target, command),
                (&spellings[0].1, &spellings[0].2),
                "{name}"
            );
        }
        assert!(spellings[0].2.1, "the command comes after `--`");
    }
}
