//! `cargo xtask dupnames`: one name per public type in each crate under
//! `crates/` (`cargo xtask test` runs it in its lint step, with
//! `modcycles`, fmt and clippy).
//!
//! A crate's public types are its `pub struct`, `pub enum`, `pub trait`,
//! `pub type` and `pub union` items in any of its modules (`pub(crate)`
//! ones are not public). Two of one name are a duplicate, even in different
//! modules: a reader, and a `use` of both, cannot tell them apart by name.
//! So is a name the crate declares and also re-exports from another crate
//! with `pub use` (a path not from `crate`, `self`, `super` or one of the
//! crate's own modules; its `as` name when renamed). Comments and each
//! `#[cfg(test)]` item are skipped; two declarations in one file are
//! `#[cfg]` alternatives of one type; [`PER_MODULE`] lists the names a
//! crate repeats per module on purpose. Every folder with a `Cargo.toml`
//! and a `src/` under `crates/` is a crate.
//!
//! Exit codes: 0 no duplicate, 1 a duplicate (each printed as
//! `crate: Name: file:line and file:line`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::modcycles::{expand, find_crates, is_ident, rust_files, strip_comments, word_starts};
use super::project_root;

/// The task's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workspace whose `crates/` are searched [default: this workspace].
    root: Option<PathBuf>,
}

/// Prints every duplicate; exit 1 when there is one.
pub fn run(args: Args) -> Result<ExitCode> {
    let root = args.root.unwrap_or_else(project_root);
    Ok(super::steps::exit_of(check(&root)?))
}

/// Prints every duplicate name of the crates under `root/crates` and, when
/// there is one, what to do; `Ok(false)` when there is one.
pub fn check(root: &Path) -> Result<bool> {
    let found = workspace_duplicates(root)?;
    Ok(super::steps::report_findings(
        &found,
        "public type name(s) used twice in one crate: one concept, one name; rename one of each pair (and ARCHITECTURE.md's Names table)",
    ))
}

/// Names a crate may declare in several modules: `crates/coldstart` has
/// one module per subcommand, each with its clap flags (`Args`) and the
/// values of its `--format` (`Format`), always written with their module
/// (`bench::Args`, `check::Format`), as xtask's tasks do.
const PER_MODULE: &[(&str, &[&str])] = &[("crates/coldstart", &["Args", "Format"])];

/// A public type's name and where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Item {
    name: String,
    /// The file, from the workspace root.
    file: String,
    /// `file:line`.
    at: String,
    /// The path it is re-exported from, for a `pub use` of another crate.
    from: Option<String>,
}

/// Every duplicate of every crate under `root/crates`, as
/// `crate-folder: Name: file:line and file:line`, in a stable order.
pub fn workspace_duplicates(root: &Path) -> Result<Vec<String>> {
    let mut crates = Vec::new();
    find_crates(&root.join("crates"), &mut crates)?;
    crates.sort();
    let mut out = Vec::new();
    for dir in crates {
        let name = dir.strip_prefix(root).unwrap_or(&dir).display().to_string();
        let mut paths = Vec::new();
        rust_files(&dir.join("src"), &mut paths)?;
        paths.sort();
        let (mut items, mut modules) = (Vec::new(), BTreeSet::new());
        for p in paths {
            let bytes =
                std::fs::read(&p).with_context(|| format!("cannot read {}", p.display()))?;
            let file = p.strip_prefix(root).unwrap_or(&p).display().to_string();
            let text = without_test_items(&strip_comments(&String::from_utf8_lossy(&bytes)));
            modules.extend(module_names(&text));
            items.extend(public_types(&text, &file));
        }
        // `pub use record::Outcome` re-exports the crate's own module's type.
        items.retain(|it| {
            it.from
                .as_deref()
                .is_none_or(|f| !modules.contains(f.split("::").next().unwrap_or_default()))
        });
        let per_module: &[&str] = PER_MODULE
            .iter()
            .find(|(c, _)| *c == name)
            .map_or(&[], |(_, names)| names);
        items.retain(|it| !per_module.contains(&it.name.as_str()));
        out.extend(
            duplicates(&items)
                .into_iter()
                .map(|d| format!("{name}: {d}")),
        );
    }
    Ok(out)
}

/// The text without its `#[cfg(test)]` items (to the first `;` outside
/// braces, or the brace closing the item's first `{`), their newlines
/// kept so lines keep their numbers.
fn without_test_items(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let (mut depth, mut end) = (0usize, item.len());
        for (i, c) in item.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth <= 1 => {
                    end = i + 1;
                    break;
                }
                '}' => depth -= 1,
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        out.extend(item[..end].chars().filter(|&c| c == '\n'));
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The modules declared (`mod NAME`) in one file's `text`.
fn module_names(text: &str) -> Vec<String> {
    let words: Vec<&str> = text
        .split(|c: char| !is_ident(c))
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .filter(|w| w[0] == "mod")
        .map(|w| w[1].to_owned())
        .collect()
}

/// The public types declared and the names re-exported from other crates
/// in one file's `text` (comments stripped).
fn public_types(text: &str, file: &str) -> Vec<Item> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        for w in words.windows(3) {
            if w[0] == "pub" && ["struct", "enum", "trait", "type", "union"].contains(&w[1]) {
                let name: String = w[2].chars().take_while(|&c| is_ident(c)).collect();
                if !name.is_empty() {
                    out.push(Item {
                        name,
                        file: file.to_owned(),
                        at: format!("{file}:{}", i + 1),
                        from: None,
                    });
                }
            }
        }
    }
    let mut from = 0;
    while let Some(i) = text[from..].find("pub") {
        let at = from + i;
        from = at + 3;
        let after = text[from..].trim_start();
        let Some(rest) = after.strip_prefix("use") else {
            continue;
        };
        if !word_starts(text, at) || !rest.starts_with(char::is_whitespace) {
            continue;
        }
        let Some(end) = rest.find(';') else { continue };
        let line = text[..at].matches('\n').count() + 1;
        // `A as B` -> `A=B`, so that expanding (which drops whitespace)
        // keeps the name a rename gives.
        let tree = rest[..end].split_whitespace().collect::<Vec<_>>().join(" ");
        for path in expand(&tree.replace(" as ", "=")) {
            let path = path.trim_start_matches("::");
            let first = path.split("::").next().unwrap_or_default();
            if ["crate", "self", "super"].contains(&first) {
                continue;
            }
            let (source, name) = match path.split_once('=') {
                Some((source, name)) => (source, name),
                None => (path, path.rsplit("::").next().unwrap_or_default()),
            };
            if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                out.push(Item {
                    name: name.to_owned(),
                    file: file.to_owned(),
                    at: format!("{file}:{line}"),
                    from: Some(source.to_owned()),
                });
            }
        }
    }
    out
}

/// The pairs of one crate's `items` that share a name: two declared, or one
/// declared and one re-exported from another crate.
fn duplicates(items: &[Item]) -> Vec<String> {
    let mut by_name: BTreeMap<&str, (Vec<&Item>, Vec<&Item>)> = BTreeMap::new();
    for it in items {
        let entry = by_name.entry(&it.name).or_default();
        if it.from.is_some() {
            entry.1.push(it);
        } else {
            entry.0.push(it);
        }
    }
    let mut out = Vec::new();
    for (name, (declared, reexported)) in by_name {
        let Some(first) = declared.first() else {
            continue;
        };
        // One file declares a name twice only for `#[cfg]` alternatives of
        // one type (a platform's and the others').
        for other in declared[1..].iter().filter(|o| o.file != first.file) {
            out.push(format!("{name}: {} and {}", first.at, other.at));
        }
        for r in reexported {
            let source = r.from.as_deref().unwrap_or_default();
            out.push(format!(
                "{name}: {} and {} (re-exports {source})",
                first.at, r.at
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace in a tempdir holding `files` (path, text) under `crates/`.
    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join("crates").join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn two_public_types_of_one_name_in_one_crate_are_named_with_their_places() {
        let dir = tree(&[
            ("one/Cargo.toml", ""),
            ("one/src/lib.rs", "pub mod a;\npub mod b;\n"),
            (
                "one/src/a.rs",
                "/// A.\n#[derive(Debug)]\npub struct Load {}\n",
            ),
            (
                "one/src/b/mod.rs",
                "/* two\nlines */\npub enum Load<T> { A(T) }\n",
            ),
        ]);
        assert_eq!(
            workspace_duplicates(dir.path()).unwrap(),
            ["crates/one: Load: crates/one/src/a.rs:3 and crates/one/src/b/mod.rs:3"]
        );
        assert!(!check(dir.path()).unwrap());
    }

    #[test]
    fn a_reexport_of_another_crates_type_under_a_declared_name_is_a_duplicate() {
        let dir = tree(&[
            ("h/Cargo.toml", ""),
            (
                "h/src/lib.rs",
                "pub mod life;\n#[cfg(test)]\nmod standin;\npub use spawn::{\n    Stop,\n    Transport as Wire,\n};\n",
            ),
            ("h/src/life.rs", "pub enum Stop { A }\npub trait Wire {}\n"),
        ]);
        assert_eq!(
            workspace_duplicates(dir.path()).unwrap(),
            [
                "crates/h: Stop: crates/h/src/life.rs:1 and crates/h/src/lib.rs:4 (re-exports spawn::Stop)",
                "crates/h: Wire: crates/h/src/life.rs:2 and crates/h/src/lib.rs:4 (re-exports spawn::Transport)",
            ]
        );
    }

    #[test]
    fn one_name_per_crate_private_types_own_reexports_and_tests_pass() {
        let dir = tree(&[
            ("a/Cargo.toml", ""),
            (
                "a/src/lib.rs",
                "pub mod x;\npub use crate::x::Frame;\npub use x::Frame as F;\npub use other::Thing;\n// pub struct Frame;\n",
            ),
            (
                "a/src/x.rs",
                "pub struct Frame;\npub struct F;\npub(crate) struct Thing;\n#[cfg(test)]\nmod tests { fn f() {} pub struct Frame; }\n",
            ),
            (
                "a/src/cpu.rs",
                "#[cfg(unix)]\nmod imp { pub struct Set; }\n#[cfg(not(unix))]\nmod imp { pub struct Set; }\n",
            ),
            ("coldstart/Cargo.toml", ""),
            (
                "coldstart/src/bench.rs",
                "pub struct Args;\npub enum Format {}\n",
            ),
            (
                "coldstart/src/check.rs",
                "pub struct Args;\npub enum Format {}\n",
            ),
            // Another crate may use the same name: crates are read apart.
            ("b/Cargo.toml", ""),
            ("b/src/lib.rs", "pub struct Frame;\n"),
        ]);
        assert!(workspace_duplicates(dir.path()).unwrap().is_empty());
        assert!(check(dir.path()).unwrap());
    }

    #[test]
    fn this_workspace_has_one_name_per_public_type_in_each_crate() {
        let found = workspace_duplicates(&project_root()).unwrap();
        assert!(found.is_empty(), "duplicate names: {found:?}");
    }
}
