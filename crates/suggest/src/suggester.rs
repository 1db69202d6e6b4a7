//! The [`Suggester`]: one project and interpreter; it classifies a
//! violation's links, ranks their cuts, verifies them on a copy and applies
//! the one chosen.

use std::path::{Path, PathBuf};

use importguard::verdict::Violation;

use crate::cut::{Cut, Patch, Uncuttable};
use crate::error::SuggestError;
use crate::query::{LinkAnswer, LinkRequest, Request};
use crate::suggestion::{Suggestion, Verification, summary};

/// Suggests, verifies and applies cuts for one project and interpreter.
#[derive(Debug, Clone)]
pub struct Suggester {
    pub(crate) root: PathBuf,
    python: PathBuf,
    cwd: Option<PathBuf>,
    assume_version: Option<[u32; 3]>,
}

impl Suggester {
    /// `root`: the project root (first-party code is the files under it);
    /// `python`: the target's interpreter, which reads the files.
    pub fn new(root: impl AsRef<Path>, python: impl Into<PathBuf>) -> Result<Self, SuggestError> {
        let root = root.as_ref();
        let root = root
            .canonicalize()
            .map_err(|e| SuggestError::io("open the project root", root, e))?;
        Ok(Suggester {
            root,
            python: python.into(),
            cwd: None,
            assume_version: None,
        })
    }

    /// The worker's working directory: relative file names in the
    /// violation's lines are relative to it (default: the project root).
    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Classify as if the interpreter were `version`: for tests of a newer
    /// grammar's rewrite where no such interpreter exists. The edits are
    /// still compiled by the real interpreter, so a rewrite in a grammar it
    /// does not know is dropped.
    #[doc(hidden)]
    pub fn assume_version(mut self, version: [u32; 3]) -> Self {
        self.assume_version = Some(version);
        self
    }

    /// The project root (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The interpreter the cuts are verified with.
    pub fn interpreter(&self) -> &Path {
        &self.python
    }

    /// Every cut of the violation's chain, ranked, not yet verified.
    pub fn suggest(&self, violation: &Violation) -> Result<Suggestion, SuggestError> {
        let links = links_of(violation);
        let answer = crate::query::classify(
            &self.python,
            &Request {
                root: &self.root,
                cwd: self.cwd.as_deref(),
                links: &links,
                assume_version: self.assume_version,
            },
        )?;
        let mut cuts = Vec::new();
        let mut not_cuttable = Vec::new();
        for link in &answer.links {
            let module = violation.chain.get(link.index).cloned().unwrap_or_default();
            // `from torch.nn import Module` is two links on one line (the
            // package, then the submodule): one statement, listed once.
            let seen = |file: &Option<String>, line: Option<u32>| {
                file.is_some()
                    && (cuts
                        .iter()
                        .any(|c: &Cut| Some(&c.file) == file.as_ref() && Some(c.line) == line)
                        || not_cuttable
                            .iter()
                            .any(|u: &Uncuttable| &u.file == file && u.line == line))
            };
            if seen(&link.file, link.line) {
                continue;
            }
            if link.cuts.is_empty() {
                not_cuttable.push(Uncuttable {
                    link: link.index,
                    module,
                    file: link.file.clone(),
                    line: link.line,
                    statement: link.statement.clone(),
                    reason: link
                        .reason
                        .clone()
                        .unwrap_or_else(|| "no cut applies".to_owned()),
                });
                continue;
            }
            for c in &link.cuts {
                cuts.push(self.build_cut(violation, link, c)?);
            }
        }
        cuts.sort_by_key(Cut::sort_key);
        let mut cuts = cuts.into_iter();
        let cut = cuts.next();
        Ok(Suggestion {
            module: violation.module.clone(),
            pattern: violation.pattern.clone(),
            chain: violation.chain.clone(),
            python: answer.python.version,
            verification: if cut.is_some() {
                Verification::NotRun
            } else {
                Verification::NoCandidate
            },
            cut,
            candidates: cuts.collect(),
            not_cuttable,
            rejections: Vec::new(),
            model_path: None,
        })
    }

    fn build_cut(
        &self,
        violation: &Violation,
        link: &LinkAnswer,
        c: &crate::query::CutAnswer,
    ) -> Result<Cut, SuggestError> {
        let (Some(file), Some(line)) = (link.file.clone(), link.line) else {
            return Err(SuggestError::BadEdit {
                path: self.root.clone(),
                detail: "a cut without a file".to_owned(),
            });
        };
        let path = self.root.join(&file);
        let original = std::fs::read(&path).map_err(|e| SuggestError::io("read", &path, e))?;
        let count = crate::edit::split_lines(&original).len();
        if link.line_count != Some(count) {
            return Err(SuggestError::BadEdit {
                path,
                detail: format!(
                    "the classifier read {:?} lines, the file has {count}",
                    link.line_count
                ),
            });
        }
        let edits: Vec<crate::edit::LineEdit> = c
            .edits
            .iter()
            .map(|e| crate::edit::LineEdit {
                start: e.start.saturating_sub(1),
                end: e.end.saturating_sub(1),
                lines: e.lines.clone(),
            })
            .collect();
        let (patched, applied) =
            crate::edit::apply(&original, &edits).map_err(|detail| SuggestError::BadEdit {
                path: path.clone(),
                detail,
            })?;
        let diff = crate::edit::unified_diff(&file, &original, &applied);
        let statement = link.statement.clone().unwrap_or_default();
        let module = violation.chain.get(link.index).cloned().unwrap_or_default();
        let mut notes = c.notes.clone();
        notes.extend(
            link.blocked
                .iter()
                .map(|b| format!("not offered here: {b}")),
        );
        if link.searched {
            notes.push(
                "the recorder did not say which line imported it; the line was found by reading the importer"
                    .to_owned(),
            );
        }
        let mut cut = Cut {
            link: link.index,
            module,
            file,
            line,
            kind: c.kind,
            statement,
            names: c.names.clone(),
            functions: c.functions.clone(),
            type_checking: c.type_checking,
            future_annotations: c.future_annotations,
            getattr: c.getattr,
            users: c.users.clone(),
            notes,
            summary: String::new(),
            lines_changed: crate::edit::lines_changed(&diff),
            diff,
            patch: Patch { original, patched },
        };
        cut.summary = summary(&cut);
        Ok(cut)
    }
}

/// The chain's links as the classifier reads them.
fn links_of(v: &Violation) -> Vec<LinkRequest> {
    v.chain
        .iter()
        .enumerate()
        .map(|(i, module)| {
            let frame = v
                .chain_lines
                .get(i)
                .cloned()
                .flatten()
                .or_else(|| if i == 0 { v.origin.clone() } else { None });
            LinkRequest {
                index: i,
                module: module.clone(),
                file: frame.as_ref().map(|f| f.file.clone()),
                line: frame.as_ref().map(|f| f.line),
                func: frame.map(|f| f.func),
                importer: i.checked_sub(1).map(|p| v.chain[p].clone()),
            }
        })
        .collect()
}
