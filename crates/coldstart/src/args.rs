//! The argument groups several subcommands share, each declared once and
//! flattened (`#[command(flatten)]`) into every subcommand that takes it:
//! which target to run ([`TargetArgs`]), how intervals and verdicts are
//! computed ([`StatsArgs`]), text or JSON output ([`TextOrJsonArgs`]), and
//! the start-up history's store ([`HistoryArgs`], [`RecordFlagArgs`]),
//! and the timeouts that replace a target's ([`TimeoutArgs`], put over the
//! config by [`settings::Overrides`]).
//! One spelling and one parser per flag: a share is `0.02` or `2%`
//! everywhere ([`parse_share`]), a duration a positive number of seconds
//! ([`parse_secs`]), a count at least 1 ([`at_least_one`]).

use std::time::Duration;

use harness::Target;
use phases::stats::Resampling;
use settings::{Overrides, Project};

/// `--target NAME` and the worker command after `--`: which worker a task
/// runs.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TargetArgs {
    /// A target of the config, by name [default: every target where the
    /// command takes several, else the config's only one; the built-in
    /// reference worker in the coldstart workspace without a config].
    #[arg(long, value_name = "NAME")]
    pub target: Option<String>,
    /// The worker command, instead of a configured target.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

impl TargetArgs {
    /// The targets these flags select in `project` (see [`Project::targets`]).
    pub fn targets(&self, project: &Project) -> Result<Vec<Target>, settings::Error> {
        project.targets(self.target.as_deref(), &self.command)
    }

    /// The one target these flags select in `project` (see
    /// [`Project::one_target`]).
    pub fn one_target(&self, project: &Project) -> Result<Target, settings::Error> {
        project.one_target(self.target.as_deref(), &self.command)
    }

    /// The targets these flags select, with `overrides` put over each.
    pub fn resolve(
        &self,
        project: &Project,
        overrides: &Overrides,
    ) -> Result<Vec<Target>, settings::Error> {
        let targets = self.targets(project)?;
        Ok(targets.into_iter().map(|t| overrides.apply(t)).collect())
    }

    /// The one target these flags select, with `overrides` put over it.
    pub fn resolve_one(
        &self,
        project: &Project,
        overrides: &Overrides,
    ) -> Result<Target, settings::Error> {
        Ok(overrides.apply(self.one_target(project)?))
    }
}

/// `--ready-timeout` and `--request-timeout`: how long a worker may take,
/// instead of its target's `ready_timeout` and `request_timeout`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TimeoutArgs {
    /// Seconds to wait for the ready line [default: the target's].
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub ready_timeout: Option<Duration>,
    /// Seconds to wait for each reply [default: the target's].
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub request_timeout: Option<Duration>,
}

impl TimeoutArgs {
    /// What these flags replace in a target.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            ready_timeout: self.ready_timeout,
            request_timeout: self.request_timeout,
            ..Overrides::default()
        }
    }
}

/// `--history PATH|URL`: where the start-up history is, instead of the
/// config's `history` (or `.coldstart/history.db` at the project root).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct HistoryArgs {
    /// The history store: a SQLite file, or a `postgres://` URL [default:
    /// the config's `history`, else `.coldstart/history.db` at the project
    /// root].
    #[arg(long, value_name = "PATH|URL")]
    pub history: Option<String>,
}

impl HistoryArgs {
    /// The store these flags name in `project`.
    pub fn location(&self, project: &Project) -> history::Location {
        project.history(self.history.as_deref())
    }
}

/// `--record` and `--history`: also store what a command measured for the
/// current commit in the start-up history.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RecordFlagArgs {
    /// Also store what was measured in the start-up history, each run as
    /// its commit's (no extra trials; a run already stored for its commit
    /// and environment is kept).
    #[arg(long)]
    pub record: bool,
    /// Where.
    #[command(flatten)]
    pub store: HistoryArgs,
}

/// `targets` of `project`, each with the budgets a comparison holds it to
/// (the config's, with `max_slowdown` instead of each target's when
/// given): what diff and bisect compare.
pub fn plan<'a>(
    project: &Project,
    targets: Vec<Target>,
    max_slowdown: Option<f64>,
    names_at: &'a dyn Fn(&std::path::Path) -> Vec<String>,
) -> harness::diff::DiffTargets<'a> {
    let targets = targets
        .into_iter()
        .map(|t| {
            let mut budgets = project
                .config
                .as_ref()
                .and_then(|c| c.budgets.get(&t.name).copied())
                .unwrap_or_default();
            if let Some(m) = max_slowdown {
                budgets.max_slowdown = m;
            }
            (t, budgets)
        })
        .collect();
    harness::diff::DiffTargets {
        targets,
        config: project.config.as_ref().map(|c| c.path.clone()),
        names_at,
    }
}

/// The statistics flags: the noise threshold below which a change is not
/// claimed, and the bootstrap's resamples and seed. The defaults are
/// [`Resampling::default`]'s and [`phases::compare::DEFAULT_NOISE_THRESHOLD`].
#[derive(Debug, Clone, clap::Args)]
pub struct StatsArgs {
    /// Changes within this share are not claimed (0.02 or 2%).
    #[arg(long, value_name = "SHARE", value_parser = parse_share,
          default_value_t = phases::compare::DEFAULT_NOISE_THRESHOLD)]
    pub noise_threshold: f64,
    /// Bootstrap resamples for every confidence interval.
    #[arg(long, value_name = "N", default_value_t = Resampling::default().resamples)]
    pub resamples: usize,
    /// Bootstrap seed (ChaCha8): the same records and seed give the same intervals.
    #[arg(long, value_name = "N", default_value_t = Resampling::default().seed)]
    pub seed: u64,
}

impl StatsArgs {
    /// The bootstrap these flags ask for, at the default confidence level.
    pub fn resampling(&self) -> Resampling {
        Resampling {
            resamples: self.resamples,
            seed: self.seed,
            ..Resampling::default()
        }
    }
}

/// How a report that is text or JSON is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TextOrJson {
    /// For people.
    Text,
    /// The machine-readable answer, with its schema id.
    Json,
}

/// `--format text|json`, and `--json`: a hidden alias of `--format json`
/// kept for scripts written before `--format`.
#[derive(Debug, Clone, clap::Args)]
pub struct TextOrJsonArgs {
    /// How the report is printed.
    #[arg(long, value_enum, default_value_t = TextOrJson::Text)]
    pub format: TextOrJson,
    /// The same as `--format json` (kept for old scripts).
    #[arg(long, hide = true, conflicts_with = "format")]
    pub json: bool,
}

impl TextOrJsonArgs {
    /// The format asked for, `--json` read as `--format json`.
    pub fn format(&self) -> TextOrJson {
        if self.json {
            TextOrJson::Json
        } else {
            self.format
        }
    }
}

/// A duration written as a positive number of seconds (`0.5`, `30`).
pub fn parse_secs(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(Duration::from_secs_f64(v)),
        _ => Err(format!(
            "`{s}` is not a positive number of seconds: write 0.5 or 30"
        )),
    }
}

/// A count of at least 1 (`--processes`, `--trials`, `--instrumented`).
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("`{s}` is not a count of at least 1")),
    }
}

/// A share written as `0.02` or `2%`: above 0, below 1.
pub fn parse_share(s: &str) -> Result<f64, String> {
    let (num, scale) = match s.strip_suffix('%') {
        Some(n) => (n, 100.0),
        None => (s, 1.0),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v / scale < 1.0 => Ok(v / scale),
        _ => Err(format!(
            "`{s}` is not a share between 0 and 1: write 0.02 or 2%"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_parse_as_fractions_or_percentages() {
        assert_eq!(parse_share("0.02"), Ok(0.02));
        assert_eq!(parse_share("2%"), Ok(0.02));
        assert!(parse_share("0").is_err());
        assert!(parse_share("150%").is_err());
        assert!(parse_share("fast").is_err());
    }

    #[test]
    fn seconds_and_counts_parse_or_say_what_to_write() {
        assert_eq!(parse_secs("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_secs("30"), Ok(Duration::from_secs(30)));
        for bad in ["0", "-1", "inf", "NaN", "soon"] {
            assert!(
                parse_secs(bad).unwrap_err().contains("write 0.5 or 30"),
                "{bad}"
            );
        }
        assert_eq!(at_least_one("3"), Ok(3));
        assert!(at_least_one("0").is_err());
        assert!(at_least_one("-2").is_err());
    }

    #[test]
    fn json_is_format_json_under_either_spelling() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            output: TextOrJsonArgs,
        }
        let format = |argv: &[&str]| Cli::try_parse_from(argv).map(|c| c.output.format());
        assert_eq!(format(&["x"]).unwrap(), TextOrJson::Text);
        assert_eq!(format(&["x", "--json"]).unwrap(), TextOrJson::Json);
        assert_eq!(
            format(&["x", "--format", "json"]).unwrap(),
            TextOrJson::Json
        );
        assert!(format(&["x", "--json", "--format", "text"]).is_err());
    }

    #[test]
    fn the_statistics_defaults_are_the_resamplings() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            stats: StatsArgs,
        }
        let stats = Cli::parse_from(["x"]).stats;
        let d = Resampling::default();
        let r = stats.resampling();
        assert_eq!(
            (r.resamples, r.seed, r.level),
            (d.resamples, d.seed, d.level)
        );
        assert_eq!(
            stats.noise_threshold,
            phases::compare::DEFAULT_NOISE_THRESHOLD
        );
    }
}
