//! The progress the commands show while they measure: a bar over trials
//! on a terminal, a bar over commits for `history record`, and nothing
//! (or a line per event) where stderr is not a terminal.
//!
//! It owns how progress looks; what is measured, and when a trial or a
//! commit is done, belong to `harness`, which calls these through its
//! `Progress` and `RecordProgress` traits.

use std::io::IsTerminal as _;

use harness::history::{RecordProgress, Recorded};
use harness::trials::{self, Progress};
use history::RunOutcome;
use timeline::{TrialKind, TrialRecord, Variant};

/// The progress bar on a terminal, nothing elsewhere.
pub(crate) struct Bar(pub(crate) indicatif::ProgressBar);

impl Progress for Bar {
    fn start(&mut self, most: u64) {
        if std::io::stderr().is_terminal() {
            self.0 = indicatif::ProgressBar::new(most);
            self.0.set_style(
                indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} trials  {msg}")
                    .expect("a valid template"),
            );
            self.0.set_message("warming up");
        }
    }

    fn trial(&mut self, records: &[TrialRecord], variants: &[Variant]) {
        self.0.inc(1);
        if records
            .last()
            .is_some_and(|r| r.kind == TrialKind::Measured)
        {
            self.0.set_message(trials::live_message(records, variants));
        }
    }

    fn finish(&mut self) {
        self.0.finish_and_clear();
    }

    fn announce(&mut self, event: &trials::Event) {
        eprintln!("{event}");
    }
}

/// The bar over every commit of every target (on a terminal; a line per
/// commit elsewhere), its message the commit's trials.
pub(crate) struct CommitBar(pub(crate) indicatif::ProgressBar);

impl CommitBar {
    pub(crate) fn new(len: u64) -> CommitBar {
        if !std::io::stderr().is_terminal() {
            return CommitBar(indicatif::ProgressBar::hidden());
        }
        let bar = indicatif::ProgressBar::new(len);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:30} commit {pos}/{len}  {msg}  ({elapsed} so far, {eta} left)",
            )
            .expect("a valid template"),
        );
        CommitBar(bar)
    }

    fn say(&self, line: String) {
        if self.0.is_hidden() {
            eprintln!("{line}");
        } else {
            self.0.println(line);
        }
    }
}

impl RecordProgress for CommitBar {
    fn commit(&mut self, k: usize, n: usize, commit: &str, target: &str) {
        self.0.set_message(format!(
            "{} {target} ({k} of {n})",
            &commit[..12.min(commit.len())]
        ));
    }

    fn recorded(&mut self, commit: &str, target: &str, what: &Recorded) {
        self.0.inc(1);
        let what = match what {
            Recorded::Skipped => "already stored, skipped".to_owned(),
            Recorded::Absent => "not at this commit, nothing stored".to_owned(),
            Recorded::Stored(RunOutcome::Measured) => "stored".to_owned(),
            Recorded::Stored(RunOutcome::Failed { message }) => {
                format!("stored as failed: {message}")
            }
        };
        self.say(format!(
            "{} {target}: {what}",
            &commit[..12.min(commit.len())]
        ));
    }

    fn trials(&mut self) -> &mut dyn Progress {
        self
    }
}

impl Progress for CommitBar {
    fn start(&mut self, _most: u64) {}

    fn trial(&mut self, records: &[TrialRecord], variants: &[Variant]) {
        let measured = records
            .iter()
            .filter(|r| r.kind == TrialKind::Measured)
            .count();
        if measured > 0 {
            self.0.set_message(format!(
                "trial {measured}: {}",
                trials::live_message(records, variants)
            ));
        }
    }

    fn finish(&mut self) {}

    fn announce(&mut self, event: &trials::Event) {
        self.say(event.to_string());
    }
}
