//! `cargo xtask modcycles`: no module cycle inside any crate of the
//! workspace (`cargo xtask test` runs it in its lint step, with
//! `dupnames`, fmt and clippy).
//!
//! A module is a file `NAME.rs` or a folder `NAME/` (with `mod.rs` or
//! `NAME.rs` beside it); `lib.rs`, `main.rs` and `mod.rs` belong to their
//! folder's module. A path written in a file of module A that names module B
//! (`crate::x::y`, `super::y`, `self::y`, in `use` items or inline, braces
//! expanded) is an edge between the two children of their closest common
//! ancestor that hold A and B. Sibling modules that reach each other through
//! such edges form a cycle. Comments and the code from the first
//! `#[cfg(test)]` on are skipped. Every folder with a `Cargo.toml` and a
//! `src/` is a crate (`target/` and hidden folders are not searched).
//!
//! Exit codes: 0 no cycle, 1 a cycle (each printed as `crate: a <-> b`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::project_root;

/// The task's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The folder searched for crates [default: the workspace root].
    root: Option<PathBuf>,
}

/// Prints every cycle; exit 1 when there is one.
pub fn run(args: Args) -> Result<ExitCode> {
    let root = args.root.unwrap_or_else(project_root);
    Ok(super::steps::exit_of(check(&root)?))
}

/// Prints every cycle of the crates under `root` and, when there is one,
/// what to do; `Ok(false)` when there is one.
pub fn check(root: &Path) -> Result<bool> {
    let cycles = workspace_cycles(root)?;
    Ok(super::steps::report_findings(
        &cycles,
        "module cycle(s): a module must not import a module that imports it back; move what both need below them",
    ))
}

/// A module's path inside its crate: `["check", "bench"]` for
/// `src/check/bench.rs`; the crate root is empty.
type ModPath = Vec<String>;

/// Every cycle of every crate under `root`, as `crate-folder: a <-> b`,
/// crates and cycles in a stable order.
pub fn workspace_cycles(root: &Path) -> Result<Vec<String>> {
    let mut crates = Vec::new();
    find_crates(root, &mut crates)?;
    crates.sort();
    let mut out = Vec::new();
    for dir in crates {
        let name = dir.strip_prefix(root).unwrap_or(&dir);
        let name = if name.as_os_str().is_empty() {
            ".".to_owned()
        } else {
            name.display().to_string()
        };
        for c in crate_cycles(&dir.join("src"))? {
            out.push(format!("{name}: {c}"));
        }
    }
    Ok(out)
}

/// Every folder under `dir` (itself included) with a `Cargo.toml` and a
/// `src/`, `target/` and hidden folders skipped.
pub(super) fn find_crates(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    if dir.join("Cargo.toml").is_file() && dir.join("src").is_dir() {
        out.push(dir.to_path_buf());
    }
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name == "target" || name.starts_with('.') {
            continue;
        }
        if entry.file_type()?.is_dir() {
            find_crates(&entry.path(), out)?;
        }
    }
    Ok(())
}

/// Every `.rs` file under `dir`.
pub(super) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The module of the file `path` under the crate's `src`.
fn module_path(src: &Path, path: &Path) -> ModPath {
    let rel = path.strip_prefix(src).unwrap_or(path).with_extension("");
    let mut parts: ModPath = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|p| p == "lib" || p == "main" || p == "mod")
    {
        parts.pop();
    }
    parts
}

/// The cycles between sibling modules of the crate whose sources are in
/// `src`, as `parent::a <-> parent::b`.
pub fn crate_cycles(src: &Path) -> Result<Vec<String>> {
    let mut paths = Vec::new();
    rust_files(src, &mut paths)?;
    paths.sort();
    let mut files = Vec::new();
    for p in paths {
        let bytes = std::fs::read(&p).with_context(|| format!("cannot read {}", p.display()))?;
        files.push((
            module_path(src, &p),
            String::from_utf8_lossy(&bytes).into_owned(),
        ));
    }
    Ok(cycles_of(&files))
}

/// [`crate_cycles`] over `(module, source text)` pairs.
fn cycles_of(files: &[(ModPath, String)]) -> Vec<String> {
    let mut modules: BTreeSet<ModPath> = BTreeSet::new();
    for (m, _) in files {
        // Every ancestor is a module too.
        for i in 0..=m.len() {
            modules.insert(m[..i].to_vec());
        }
    }
    // parent -> child -> children it names
    let mut edges: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (here, text) in files {
        let text = strip(text);
        for written in written_paths(&text) {
            let Some(target) = resolve(here, &written, &modules) else {
                continue;
            };
            if &target == here {
                continue;
            }
            let k = here.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if k >= here.len() || k >= target.len() {
                continue; // an ancestor or a descendant: not a sibling edge
            }
            edges
                .entry(here[..k].to_vec())
                .or_default()
                .entry(here[k].clone())
                .or_default()
                .insert(target[k].clone());
        }
    }
    let mut found = Vec::new();
    for (parent, graph) in &edges {
        let prefix = parent.join("::");
        for comp in strongly_connected(graph) {
            if comp.len() > 1 {
                let mut names: Vec<String> = comp
                    .iter()
                    .map(|c| {
                        if prefix.is_empty() {
                            c.clone()
                        } else {
                            format!("{prefix}::{c}")
                        }
                    })
                    .collect();
                names.sort();
                found.push(names.join(" <-> "));
            }
        }
    }
    found
}

/// Tarjan's strongly connected components of a small graph.
fn strongly_connected(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on.insert(v);
        if let Some(next) = s.graph.get(v) {
            for w in next {
                let w = w.as_str();
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if s.on.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            s.out.push(comp);
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The text without `//` and `/* */` comments, cut at the first
/// `#[cfg(test)]`.
fn strip(text: &str) -> String {
    let mut out = strip_comments(text);
    if let Some(cut) = out.find("#[cfg(test)]") {
        out.truncate(cut);
    }
    out
}

/// The text without `//` and `/* */` comments (the newlines of a block
/// comment kept, so lines keep their numbers).
pub(super) fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let line = rest.find("//");
        let block = rest.find("/*");
        let first = match (line, block) {
            (Some(l), Some(b)) => Some((l.min(b), l < b)),
            (Some(l), None) => Some((l, true)),
            (None, Some(b)) => Some((b, false)),
            (None, None) => None,
        };
        let Some((at, is_line)) = first else {
            out.push_str(rest);
            break;
        };
        out.push_str(&rest[..at]);
        rest = if is_line {
            rest[at..].find('\n').map_or("", |e| &rest[at + e..])
        } else {
            let end = rest[at + 2..]
                .find("*/")
                .map_or(rest.len(), |e| at + 2 + e + 2);
            out.extend(rest[at..end].chars().filter(|&c| c == '\n'));
            &rest[end..]
        };
    }
    out
}

/// A character of an identifier.
pub(super) fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Does a word start at byte `at` (nothing of an identifier just before)?
pub(super) fn word_starts(text: &str, at: usize) -> bool {
    !text[..at].chars().next_back().is_some_and(is_ident)
}

/// The paths written in `text`: each `use` item's trees expanded, and every
/// `crate::`, `super::` or `self::` path written inline.
fn written_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    // `use TREE;`
    let mut from = 0;
    while let Some(i) = text[from..].find("use") {
        let at = from + i;
        from = at + 3;
        let after = &text[from..];
        if !word_starts(text, at) || !after.starts_with(|c: char| c.is_whitespace()) {
            continue;
        }
        if let Some(end) = after.find(';') {
            out.extend(expand(&without_renames(&after[..end])));
        }
    }
    // Inline `crate::a::b`, `super::a`, `self::a`.
    for head in ["crate", "super", "self"] {
        let mut from = 0;
        while let Some(i) = text[from..].find(head) {
            let at = from + i;
            from = at + head.len();
            if !word_starts(text, at) {
                continue;
            }
            let mut end = from;
            let mut segments = 0;
            while let Some(seg) = text[end..].strip_prefix("::") {
                let len = seg.find(|c: char| !is_ident(c)).unwrap_or(seg.len());
                if len == 0 || seg.starts_with(|c: char| c.is_ascii_digit()) {
                    break;
                }
                end += 2 + len;
                segments += 1;
            }
            if segments > 0 {
                out.push(text[at..end].to_owned());
            }
        }
    }
    out
}

/// A use tree without its `as NAME` renames (the path is what is imported).
fn without_renames(tree: &str) -> String {
    let mut out = String::with_capacity(tree.len());
    let mut skip_next = false;
    for w in tree.split_inclusive(|c: char| !is_ident(c)) {
        let word = w.trim_end_matches(|c: char| !is_ident(c));
        if skip_next && !word.is_empty() {
            skip_next = false;
            out.push_str(&w[word.len()..]);
            continue;
        }
        if word == "as" && out.ends_with(char::is_whitespace) {
            skip_next = true;
            continue;
        }
        out.push_str(w);
    }
    out
}

/// `a::{b, c::{d, e}}` -> `[a::b, a::c::d, a::c::e]`.
pub(super) fn expand(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let (Some(open), true) = (tree.find('{'), tree.ends_with('}')) else {
        return vec![tree];
    };
    let head = &tree[..open];
    let body = &tree[open + 1..tree.len() - 1];
    let mut items = Vec::new();
    let (mut depth, mut cur) = (0usize, String::new());
    for ch in body.chars() {
        match ch {
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        cur.push(ch);
    }
    items.push(cur);
    items
        .iter()
        .filter(|it| !it.is_empty())
        .flat_map(|it| expand(it).into_iter().map(|e| format!("{head}{e}")))
        .collect()
}

/// The module a written path names: the longest known module prefix, for
/// paths from `crate`, `super` or `self`.
fn resolve(here: &[String], path: &str, modules: &BTreeSet<ModPath>) -> Option<ModPath> {
    let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let (mut base, rest): (ModPath, &[&str]) = match segs.first() {
        Some(&"crate") => (Vec::new(), &segs[1..]),
        Some(&"super" | &"self") => {
            let mut base = here.to_vec();
            let mut i = 0;
            while let Some(&s) = segs.get(i).filter(|s| **s == "super" || **s == "self") {
                if s == "super" {
                    base.pop();
                }
                i += 1;
            }
            (base, &segs[i..])
        }
        _ => return None,
    };
    let mut best = modules.contains(&base).then(|| base.clone());
    for s in rest {
        base.push((*s).to_owned());
        if modules.contains(&base) {
            best = Some(base.clone());
        } else {
            break;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(path: &str) -> ModPath {
        path.split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn files(list: &[(&str, &str)]) -> Vec<(ModPath, String)> {
        list.iter().map(|(p, t)| (m(p), (*t).to_owned())).collect()
    }

    #[test]
    fn two_siblings_that_use_each_other_are_a_cycle() {
        let f = files(&[
            ("", "mod a; mod b;"),
            ("a", "use crate::b::thing;"),
            ("b", "pub fn thing() { super::a::other() }"),
        ]);
        assert_eq!(cycles_of(&f), ["a <-> b"]);
    }

    #[test]
    fn a_one_way_dependency_and_parent_child_paths_are_not() {
        let f = files(&[
            ("", "mod a; mod b; use self::a::x;"),
            ("a", "use crate::b::thing; use super::super_thing;"),
            ("b", "use crate::{self as root}; fn f() { crate::g() }"),
        ]);
        assert!(cycles_of(&f).is_empty(), "{:?}", cycles_of(&f));
    }

    #[test]
    fn cycles_are_found_between_nested_siblings_and_named_by_parent() {
        let f = files(&[
            ("", "mod bench;"),
            ("bench", "mod serve; mod svg;"),
            ("bench/serve", "use super::svg::{Draw, other::{x, y}};"),
            ("bench/svg", "use crate::bench::serve;"),
            // A file deeper in `svg` counts for `svg`.
            ("bench/svg/axis", "fn f() {}"),
        ]);
        assert_eq!(cycles_of(&f), ["bench::serve <-> bench::svg"]);
    }

    #[test]
    fn three_modules_in_a_ring_are_one_cycle() {
        let f = files(&[
            ("a", "use crate::b;"),
            ("b", "use crate::c;"),
            ("c", "use crate::a as first;"),
        ]);
        assert_eq!(cycles_of(&f), ["a <-> b <-> c"]);
    }

    #[test]
    fn comments_and_test_code_are_skipped() {
        let f = files(&[
            ("a", "use crate::b; // see crate::b"),
            (
                "b",
                "/* crate::a::x */ fn f() {}\n#[cfg(test)]\nmod tests { use crate::a; }",
            ),
        ]);
        assert!(cycles_of(&f).is_empty(), "{:?}", cycles_of(&f));
    }

    #[test]
    fn words_ending_in_the_keywords_are_not_paths() {
        let f = files(&[
            ("a", "use crate::b;"),
            ("b", "fn f() { myself::a::x(); my_crate::a::y(); }"),
        ]);
        assert!(cycles_of(&f).is_empty(), "{:?}", cycles_of(&f));
    }

    #[test]
    fn braces_expand_and_renames_are_dropped() {
        assert_eq!(
            expand(&without_renames("crate::a::{b as c, d::{e, f}, self as g}")),
            [
                "crate::a::b",
                "crate::a::d::e",
                "crate::a::d::f",
                "crate::a::self"
            ]
        );
        assert_eq!(without_renames("crate::x as y"), "crate::x ");
    }

    #[test]
    fn lib_main_and_mod_belong_to_their_folder() {
        let src = Path::new("/s/src");
        assert_eq!(module_path(src, Path::new("/s/src/lib.rs")), m(""));
        assert_eq!(module_path(src, Path::new("/s/src/a/mod.rs")), m("a"));
        assert_eq!(module_path(src, Path::new("/s/src/a/b.rs")), m("a/b"));
    }

    #[test]
    fn the_workspace_is_walked_for_crates_with_a_src_folder() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("crates/one/src");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(dir.path().join("crates/one/Cargo.toml"), "").unwrap();
        std::fs::write(src.join("lib.rs"), "mod a; mod b;").unwrap();
        std::fs::write(src.join("a.rs"), "use crate::b::x;").unwrap();
        std::fs::write(src.join("b.rs"), "use crate::a::y;").unwrap();
        // Not searched: build output.
        let hidden = dir.path().join("target/two/src");
        std::fs::create_dir_all(&hidden).unwrap();
        std::fs::write(dir.path().join("target/two/Cargo.toml"), "").unwrap();
        std::fs::write(hidden.join("a.rs"), "use crate::b;").unwrap();
        std::fs::write(hidden.join("b.rs"), "use crate::a;").unwrap();
        assert_eq!(
            workspace_cycles(dir.path()).unwrap(),
            ["crates/one: a <-> b"]
        );
    }

    #[test]
    fn this_workspace_has_no_module_cycle() {
        let cycles = workspace_cycles(&project_root()).unwrap();
        assert!(cycles.is_empty(), "module cycles: {cycles:?}");
    }
}
