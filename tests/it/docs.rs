//! The README and the user guide hold together: every relative link in
//! `README.md`, `CONTRIBUTING.md`, `ARCHITECTURE.md` and `docs/*.md`
//! resolves (the file exists; an anchor is a heading's or an `id`'s), and
//! no sample output in them carries one machine's absolute paths (a home
//! folder, the temporary folder, the workspace's own place), and every
//! code path in ARCHITECTURE.md names an item in the source.

use std::path::{Path, PathBuf};

use crate::support::root;

/// The Markdown files of the README and the guide (the docs checks
/// here, the console examples of `doc_examples`).
pub(crate) fn pages() -> Vec<PathBuf> {
    let mut v = vec![
        root().join("README.md"),
        root().join("CONTRIBUTING.md"),
        root().join("ARCHITECTURE.md"),
    ];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    v.extend(docs);
    v
}

/// The targets of `[text](target)` links outside code blocks.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(j) = after.find(')') else { break };
            out.push(after[..j].to_owned());
            rest = &after[j..];
        }
    }
    out
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, punctuation
/// dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| slug(l.trim_start_matches('#')))
        .collect();
    let mut rest = text;
    while let Some(i) = rest.find("id=\"") {
        let after = &rest[i + 4..];
        let Some(j) = after.find('"') else { break };
        out.push(after[..j].to_owned());
        rest = &after[j..];
    }
    out
}

#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    let mut seen = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            seen += 1;
            let (file, anchor) = link.split_once('#').unwrap_or((link.as_str(), ""));
            let target: PathBuf = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            if !target.exists() {
                broken.push(format!(
                    "{}: {link} (no {})",
                    page.display(),
                    target.display()
                ));
                continue;
            }
            if !anchor.is_empty() && target.is_file() {
                let t = std::fs::read_to_string(&target).unwrap();
                if !anchors(&t).iter().any(|a| a == anchor) {
                    broken.push(format!("{}: {link} (no anchor `{anchor}`)", page.display()));
                }
            }
        }
    }
    assert!(seen > 30, "links were read: {seen}");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Absolute paths that belong to one machine.
const MACHINE_PATHS: &[&str] = &[
    "/root/",
    "/home/",
    "/Users/",
    "/tmp/",
    "/work/",
    "/var/folders/",
];

#[test]
fn no_sample_output_carries_a_machines_absolute_paths() {
    let mut found = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let mut in_sample = false;
        for (n, line) in text.lines().enumerate() {
            let fence = line.trim_start();
            if fence.starts_with("```") {
                in_sample = !in_sample && fence != "```";
                continue;
            }
            if in_sample && let Some(p) = MACHINE_PATHS.iter().find(|p| line.contains(*p)) {
                found.push(format!("{}:{}: {p} in {line:?}", rel(&page), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "machine paths in sample outputs:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_guide_lists_every_command_and_the_readme_stays_short() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(
        readme.lines().count() <= 200,
        "README.md is {} lines",
        readme.lines().count()
    );
    let first_screen: String = readme.lines().take(50).collect::<Vec<_>>().join("\n");
    assert!(
        first_screen.contains("cargo xtask check") && first_screen.contains("cargo xtask test")
    );
    let index = std::fs::read_to_string(root().join("docs/README.md")).unwrap();
    let help = crate::support::coldstart(root())
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let commands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .unwrap_or_else(|| panic!("{help}"))
        .split("\n\n")
        .next()
        .unwrap()
        .lines()
        // A command's line: two spaces, its name, its description; the
        // wrapped lines of a description are indented further.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 10, "{help}");
    for c in commands {
        assert!(
            index.contains(&format!("`{c}`")),
            "docs/README.md does not list `{c}`"
        );
    }
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

/// The rows of ARCHITECTURE.md's `## Names` table.
fn names_table(architecture: &str) -> String {
    architecture
        .split("\n## Names\n")
        .nth(1)
        .expect("ARCHITECTURE.md has a `## Names` section")
        .split("\n## ")
        .next()
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('|'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The path-like code names (`a::b::C`, `answers::{check, diff}` spread
/// into one path each) in backticks in `text`.
fn code_paths(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (i, quoted) in text.split('`').enumerate() {
        if i % 2 == 0
            || !quoted.contains("::")
            || quoted.contains(['/', ' ', '(']) && !quoted.contains('{')
        {
            continue;
        }
        let (head, tails) = match quoted.split_once("::{") {
            Some((head, rest)) => (
                head,
                rest.trim_end_matches('}')
                    .split(',')
                    .map(str::trim)
                    .collect(),
            ),
            None => ("", vec![quoted]),
        };
        for tail in tails {
            let path = if head.is_empty() {
                tail.to_owned()
            } else {
                format!("{head}::{tail}")
            };
            out.push(path.split("::").map(str::to_owned).collect());
        }
    }
    out
}

/// Whether some `.rs` file under `dir` declares an item called `name`
/// (`struct`, `enum`, `fn`, `trait`, `type`, `mod`, `const`, `static`).
fn declares(dir: &Path, name: &str) -> bool {
    const KINDS: &[&str] = &[
        "struct", "enum", "fn", "trait", "type", "mod", "const", "static",
    ];
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.map(|e| e.unwrap().path()).any(|p| {
        if p.is_dir() {
            return declares(&p, name);
        }
        if p.extension().is_none_or(|x| x != "rs") {
            return false;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        KINDS.iter().any(|kind| {
            let decl = format!("{kind} {name}");
            text.match_indices(&decl).any(|(i, _)| {
                let before = text[..i].chars().next_back();
                let after = text[i + decl.len()..].chars().next();
                before.is_none_or(|c| !c.is_alphanumeric() && c != '_')
                    && after.is_none_or(|c| !c.is_alphanumeric() && c != '_')
            })
        })
    })
}

/// The code paths in `table` that do not resolve: a path whose first
/// segment is a workspace crate must have each later segment declared in
/// that crate's `src/`; any other (`Timeline::stage_at`) in some crate's.
fn unresolved(table: &str) -> Vec<String> {
    let crates = root().join("crates");
    let mut missing = Vec::new();
    for path in code_paths(table) {
        let krate = crates.join(path[0].replace('_', "-")).join("src");
        let (dir, names) = if krate.is_dir() {
            (krate, &path[1..])
        } else {
            (crates.clone(), &path[..])
        };
        if let Some(n) = names.iter().find(|n| !declares(&dir, n)) {
            missing.push(format!("`{}` (no `{n}` in {})", path.join("::"), rel(&dir)));
        }
    }
    missing
}

#[test]
fn every_code_name_in_the_architecture_names_table_exists() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let table = names_table(&text);
    assert!(code_paths(&table).len() > 30, "names were read:\n{table}");
    let missing = unresolved(&table);
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's Names table names code that does not exist:\n{}",
        missing.join("\n")
    );
}

/// The whole map, not only its table: every `a::b` path it cites is code
/// that exists, and it stays short enough to read in ten minutes.
#[test]
fn every_code_path_in_the_architecture_exists_and_the_map_stays_short() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    assert!(code_paths(&text).len() > 50, "paths were read:\n{text}");
    let missing = unresolved(&text);
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names code that does not exist:\n{}",
        missing.join("\n")
    );
    let lines = text.lines().count();
    assert!(
        lines <= 250,
        "ARCHITECTURE.md is {lines} lines: keep it a map (about 250)"
    );
}

#[test]
fn a_made_up_name_in_the_names_table_is_caught() {
    let table = "| `phases::stats::Resampling` | real | `phases::stats` |\n\
                 | `phases::stats::Bootstrap` | gone | `answers::{check, nosuch}` |\n\
                 | `Timeline::moment_of` | gone | `timeline` |";
    assert_eq!(
        unresolved(table),
        [
            "`phases::stats::Bootstrap` (no `Bootstrap` in crates/phases/src)",
            "`answers::nosuch` (no `nosuch` in crates/answers/src)",
            "`Timeline::moment_of` (no `moment_of` in crates)",
        ]
    );
}
