//! The project a command runs in: its root, its config if any, what runs
//! when no target is named, and which targets a task runs.

use std::path::{Path, PathBuf};

use harness::Target;

use crate::{CONFIG_FILE, Config, Error, config};

/// Where the command runs: the project, its config if any, and what runs
/// when no target is named.
#[derive(Debug, Clone)]
pub struct Project {
    /// The project root: the config file's folder, or the workspace root.
    pub root: PathBuf,
    /// The config that was found or given.
    pub config: Option<Config>,
    /// What runs without a config and without `-- CMD`.
    pub default: Option<Target>,
    /// The current folder, where `-- CMD` runs.
    pub cwd: PathBuf,
}

fn current_dir() -> Result<PathBuf, Error> {
    std::env::current_dir().map_err(Error::Cwd)
}

impl Project {
    /// The project of a user standing in the current folder: `--config
    /// FILE`, else the nearest config upward; no built-in default.
    pub fn discover(config_file: Option<&Path>) -> Result<Project, Error> {
        let cwd = current_dir()?;
        let config = match config_file {
            Some(f) => Some(config::load(&cwd.join(f))?),
            None => config::discover(&cwd)?,
        };
        Ok(Project {
            root: config
                .as_ref()
                .map_or_else(|| cwd.clone(), |c| c.root.clone()),
            config,
            default: None,
            cwd,
        })
    }

    /// The coldstart workspace at `root`, as `cargo xtask` runs it: its
    /// `coldstart.toml` if it has one, else the reference worker.
    pub fn workspace(root: &Path) -> Result<Project, Error> {
        let path = root.join(CONFIG_FILE);
        let config = if path.is_file() {
            Some(config::load(&path)?)
        } else {
            None
        };
        Ok(Project {
            root: root.to_path_buf(),
            config,
            default: Some(Target::reference_worker(root)),
            cwd: current_dir()?,
        })
    }

    /// The targets a task runs: `-- CMD...` wins (run in the current
    /// folder), then `--target NAME` from the config, then every target of
    /// the config, then the built-in default.
    pub fn targets(&self, target: Option<&str>, command: &[String]) -> Result<Vec<Target>, Error> {
        if !command.is_empty() {
            if target.is_some() {
                return Err(Error::TargetAndCommand);
            }
            let mut t = Target::ad_hoc(&self.cwd, command.to_vec(), "command");
            t.import_roots = crate::layout::import_roots(&self.cwd)
                .into_iter()
                .map(|r| r.dir)
                .collect();
            return Ok(vec![t]);
        }
        match (target, &self.config, &self.default) {
            (Some(name), Some(c), _) => c
                .targets
                .iter()
                .find(|t| t.name == name)
                .map(|t| vec![t.clone()])
                .ok_or_else(|| Error::NoSuchTarget {
                    name: name.to_owned(),
                    path: c.path.clone(),
                    names: c.targets.iter().map(|t| t.name.clone()).collect(),
                }),
            (None, Some(c), _) => Ok(c.targets.clone()),
            (Some(name), None, Some(d)) if d.name == name => Ok(vec![d.clone()]),
            (Some(name), None, Some(d)) => Err(Error::NotTheDefault {
                name: name.to_owned(),
                root: self.root.clone(),
                default: d.name.clone(),
            }),
            (None, None, Some(d)) => Ok(vec![d.clone()]),
            (_, None, None) => Err(Error::NoConfig {
                cwd: self.cwd.clone(),
            }),
        }
    }

    /// Where the start-up history is: `--history` (a path from the
    /// current folder, or a `postgres://` URL), else the config's
    /// `history`, else [`history::DEFAULT_PATH`] at the project root.
    pub fn history(&self, flag: Option<&str>) -> history::Location {
        if let Some(f) = flag {
            return history::Location::parse(f, &self.cwd);
        }
        self.config
            .as_ref()
            .and_then(|c| c.history.clone())
            .unwrap_or_else(|| history::Location::parse(history::DEFAULT_PATH, &self.root))
    }

    /// The one target a task takes (bench, profile): as [`Project::targets`],
    /// refusing a config with several unless one is named.
    pub fn one_target(&self, target: Option<&str>, command: &[String]) -> Result<Target, Error> {
        let mut targets = self.targets(target, command)?;
        if targets.len() > 1 {
            return Err(Error::Several {
                names: targets.into_iter().map(|t| t.name).collect(),
            });
        }
        Ok(targets.remove(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(config: Option<&str>, default: bool) -> (tempfile::TempDir, Project) {
        let dir = tempfile::tempdir().unwrap();
        let config = config.map(|text| {
            let path = dir.path().join(CONFIG_FILE);
            std::fs::write(&path, text).unwrap();
            config::load(&path).unwrap()
        });
        let p = Project {
            root: dir.path().to_path_buf(),
            config,
            default: default.then(|| Target::reference_worker(dir.path())),
            cwd: dir.path().to_path_buf(),
        };
        (dir, p)
    }

    const TWO: &str = "[[target]]\nname='a'\ncommand=['x']\n[[target]]\nname='b'\ncommand=['y']\n";

    #[test]
    fn a_command_wins_and_a_name_picks_one_target() {
        let (_d, p) = project(Some(TWO), true);
        let cmd = ["python3".to_owned(), "-m".to_owned(), "w".to_owned()];
        assert_eq!(p.targets(None, &cmd).unwrap()[0].command, cmd);
        assert!(matches!(
            p.targets(Some("a"), &cmd),
            Err(Error::TargetAndCommand)
        ));
        let names = |ts: Vec<Target>| ts.into_iter().map(|t| t.name).collect::<Vec<_>>();
        assert_eq!(names(p.targets(None, &[]).unwrap()), ["a", "b"]);
        assert_eq!(names(p.targets(Some("b"), &[]).unwrap()), ["b"]);
        let err = p.targets(Some("c"), &[]).unwrap_err().to_string();
        assert!(
            err.contains("no target `c`") && err.ends_with("it has: a, b"),
            "{err}"
        );
        let err = p.one_target(None, &[]).unwrap_err().to_string();
        assert!(err.contains("2 targets (a, b)"), "{err}");
    }

    #[test]
    fn without_a_config_the_default_runs_or_the_starter_is_shown() {
        let (_d, p) = project(None, true);
        let default = p.default.as_ref().unwrap().name.clone();
        assert_eq!(p.one_target(None, &[]).unwrap().name, default);
        assert_eq!(p.one_target(Some(&default), &[]).unwrap().name, default);
        let err = p.targets(Some("other"), &[]).unwrap_err().to_string();
        assert!(
            err.contains(&format!("built-in `{default}`, not `other`")),
            "{err}"
        );
        let (_d, p) = project(None, false);
        let err = p.targets(None, &[]).unwrap_err().to_string();
        assert!(
            err.contains("no coldstart config found") && err.contains("[[target]]"),
            "{err}"
        );
    }

    #[test]
    fn the_history_is_the_flag_else_the_config_else_the_default_file() {
        let (d, p) = project(Some(TWO), false);
        let default = history::Location::Sqlite(d.path().join(".coldstart/history.db"));
        assert_eq!(p.history(None), default);
        let url = "postgres://ci:hunter2@db/h";
        let text = format!("history = 'hist/runs.db'\n{TWO}");
        let (d, p) = project(Some(&text), false);
        assert_eq!(
            p.history(None),
            history::Location::Sqlite(d.path().join("hist/runs.db"))
        );
        let flagged = p.history(Some(url));
        assert!(matches!(flagged, history::Location::Postgres(_)));
        assert_eq!(flagged.to_string(), "postgres://ci:***@db/h");
        let text = format!("history = '{url}'\n{TWO}");
        let (_d, p) = project(Some(&text), false);
        let c = p.config.as_ref().unwrap();
        assert!(!format!("{c:?}").contains("hunter2"), "{c:?}");
        assert_eq!(p.history(None).to_string(), "postgres://ci:***@db/h");
    }
}
