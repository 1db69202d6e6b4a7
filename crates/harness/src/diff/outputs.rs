//! Build outputs: what the base's fresh checkout lacks because git ignores
//! it (a maturin, PyO3, Cython or C extension built in place), and the
//! target's `setup`, which builds it.
//!
//! Before anything is measured:
//! - with a `setup` command, it runs in each tree (`COLDSTART_SIDE=base`
//!   or `head` in its environment, in the tree's counterpart of the
//!   target's `cwd`); its result is cached by the tree's hash (git's tree
//!   id of the commit, or of the working tree with its untracked files): a
//!   working tree whose hash and outputs are unchanged since the last
//!   successful run is not built again, and the base's new ignored files
//!   are kept in the cache and copied into the next checkout of the same
//!   tree;
//! - without one, every extension module the working tree has and git
//!   ignores, which the base's checkout lacks, is carried into it when no
//!   build input differs between the two trees (the build's inputs are the
//!   same, so the working tree's build is the base's too): no tracked file
//!   changed other than Python sources and prose, and no untracked file
//!   that can be a build's input ([`is_build_input`]: a source of a
//!   compiled language or a build's description) was added. An untracked
//!   file that cannot be one (a report the job wrote, `diff.xml`) and
//!   coldstart's own files (`coldstart.toml`, `.coldstart/`, `bench-out/`)
//!   are left out, and the note says so. When build
//!   inputs differ it is not carried: a base that then fails to start is
//!   told to set `setup` ([`advice`]), with the files that decided it.
//!
//! When side B is a commit too (a bisect step), its checkout is prepared
//! as the base's is: its `setup` run there (`COLDSTART_SIDE=head`, cached
//! by its tree), or the working tree's build outputs carried into it by
//! the same rule, judged against B's own commit, and the environments
//! linked. The working tree is the only place a build output exists.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::git::git_ok as git;
use timeline::Variant;

use crate::error::{Error, Result};
use crate::target::Target;

/// How long a `setup` command may take.
const SETUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1800);

/// What was done to the trees, and what could not be.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prepared {
    /// Lines for the report: each file carried, each setup run or reused.
    pub notes: Vec<String>,
    /// Ignored extension modules of the working tree the base lacks and
    /// did not get (build inputs differ and there is no `setup`).
    pub missing: Vec<PathBuf>,
    /// The build inputs that differ: what kept them from being carried.
    pub changed: Vec<String>,
}

/// The files that differ between the base's commit and the working tree,
/// as the carry of build outputs judges them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Tracked files changed other than Python sources and prose, and
    /// untracked files that can be a build's input: any of them keeps the
    /// working tree's build out of the base.
    pub inputs: Vec<String>,
    /// Untracked files that cannot be a build's input (a report written by
    /// the job, coldstart's own `bench-out/`): left out of the judgement,
    /// and named in the note.
    pub left_out: Vec<String>,
}

/// coldstart's own files: its config, its snapshots, the bench's default
/// output folder. Never a build's input, tracked or not.
fn is_coldstart_own(path: &str) -> bool {
    // The config's name (`settings::CONFIG_FILE`, a crate above this one).
    let config = "coldstart.toml";
    path == config
        || path.ends_with(&format!("/{config}"))
        || [".coldstart/", "bench-out/"]
            .iter()
            .any(|d| path.starts_with(d) || path.contains(&format!("/{d}")))
}

/// Names of files that describe a build, whatever their extension.
const BUILD_FILES: &[&str] = &[
    "Makefile",
    "makefile",
    "GNUmakefile",
    "CMakeLists.txt",
    "CMakePresets.json",
    "meson.build",
    "meson_options.txt",
    "meson.options",
    "BUILD",
    "BUILD.bazel",
    "WORKSPACE",
    "SConstruct",
    "SConscript",
    "configure",
    "setup.py",
    "build.py",
    "hatch_build.py",
];

/// Extensions of the sources of compiled languages and of build
/// configuration.
const BUILD_EXTENSIONS: &[&str] = &[
    "c", "h", "cc", "cpp", "cxx", "c++", "hh", "hpp", "hxx", "inl", "ipp", "m", "mm", "s", "asm",
    "pyx", "pxd", "pxi", "rs", "go", "zig", "f", "f90", "f95", "f03", "f08", "for", "cu", "cuh",
    "toml", "cfg", "ini", "in", "cmake", "lock", "def", "ld", "mk", "bzl", "gn",
];

/// Whether a file (a path relative to the tree) can be an input of a
/// build of compiled extensions: a source of a compiled language (C, C++,
/// Cython, Rust, Fortran, CUDA, ...) or a build's description
/// (`pyproject.toml`, `setup.cfg`, `setup.py`, `Cargo.lock`, `Makefile`,
/// `CMakeLists.txt`, `meson.build`, ...). Python sources, prose and
/// reports (`.xml`, `.json`, `.md`, `.svg`, `.jsonl`, ...) are not.
pub fn is_build_input(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    BUILD_FILES.contains(&name)
        || name
            .rsplit_once('.')
            .is_some_and(|(_, ext)| BUILD_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()))
}

/// Whether a file name is a compiled extension module's.
pub fn is_extension(name: &str) -> bool {
    name.ends_with(".so") || name.ends_with(".pyd") || name.contains(".so.")
}

/// The files git ignores in `tree`, relative (ignored folders collapsed:
/// a `target/` or `.venv/` is one entry, and skipped).
fn ignored_files(tree: &Path) -> Result<Vec<PathBuf>> {
    let text = git(
        tree,
        &[
            "ls-files",
            "-z",
            "--others",
            "--ignored",
            "--exclude-standard",
            "--directory",
        ],
    )?;
    Ok(text
        .split('\0')
        .filter(|e| !e.is_empty() && !e.ends_with('/'))
        .map(PathBuf::from)
        .collect())
}

/// The extension modules git ignores in `tree` (outside virtual
/// environments and installed folders).
pub fn ignored_extensions(tree: &Path) -> Result<Vec<PathBuf>> {
    Ok(ignored_files(tree)?
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| is_extension(&n.to_string_lossy()))
                && !tree
                    .join(p)
                    .ancestors()
                    .take_while(|a| *a != tree)
                    .any(importguard::firstparty::excluded_dir)
        })
        .collect())
}

/// The files that differ between `commit` and the working tree at `top`,
/// judged for the carry of build outputs ([`Changes`]): tracked changes
/// other than Python sources and prose (`.py`, `.pyi`, `.md`, `.rst`; a
/// build's own Python, `setup.py`, counts), and untracked files git does
/// not ignore, split by [`is_build_input`].
pub fn build_input_changes(top: &Path, commit: &str) -> Result<Changes> {
    let listed = |args: &[&str]| -> Result<Vec<String>> {
        Ok(git(top, args)?
            .split('\0')
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect())
    };
    let mut c = Changes::default();
    for n in listed(&["diff", "--name-only", "-z", commit, "--"])? {
        let source = [".py", ".pyi", ".md", ".rst"]
            .iter()
            .any(|x| n.ends_with(x));
        if (!source || is_build_input(&n)) && !is_coldstart_own(&n) {
            c.inputs.push(n);
        }
    }
    for n in listed(&["ls-files", "-z", "--others", "--exclude-standard"])? {
        if is_build_input(&n) && !is_coldstart_own(&n) {
            c.inputs.push(n);
        } else {
            c.left_out.push(n);
        }
    }
    c.inputs.sort();
    c.inputs.dedup();
    c.left_out.sort();
    Ok(c)
}

/// File names for a message: those inside an untracked folder grouped as
/// `folder/ (N files)`, at most `most` entries, then `...`.
fn shown(names: &[String], most: usize) -> String {
    let mut groups: Vec<(String, usize)> = Vec::new();
    for n in names {
        let key = match n.split_once('/') {
            Some((top, _)) => format!("{top}/"),
            None => n.clone(),
        };
        match groups.last_mut() {
            Some((k, count)) if *k == key => *count += 1,
            _ => groups.push((key, 1)),
        }
    }
    let mut out: Vec<String> = groups
        .iter()
        .take(most)
        .map(|(k, count)| match count {
            1 if !k.ends_with('/') => k.clone(),
            1 => format!("{k} (1 file)"),
            n => format!("{k} ({n} files)"),
        })
        .collect();
    if groups.len() > most {
        out.push("...".to_owned());
    }
    out.join(", ")
}

/// The tree id of the working tree at `top` with its untracked files
/// (through a private index, so the user's own is untouched).
fn working_tree_id(top: &Path) -> Result<String> {
    let dir = tempfile::tempdir().map_err(|e| Error::io("create", &std::env::temp_dir(), e))?;
    let index = dir.path().join("index");
    let run = |args: &[&str]| -> Result<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(top)
            .args(args)
            .env("GIT_INDEX_FILE", &index)
            .output()
            .map_err(|e| Error::Invalid(format!("could not run git ({e})")))?;
        if !out.status.success() {
            return Err(Error::Invalid(format!(
                "git {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    run(&["read-tree", "HEAD"])?;
    run(&["add", "-A", "."])?;
    run(&["write-tree"])
}

/// FNV-1a, 64 bits: the cache key of a tree and a setup command.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The cache folder of `setup` results: `coldstart/setup` in the user's
/// cache folder (on Linux `$XDG_CACHE_HOME` when it is an absolute path,
/// else `~/.cache`: an empty or relative one is ignored, as the XDG rules
/// say, so nothing lands in the folder diff runs in), else under the
/// temporary folder.
fn cache_root() -> PathBuf {
    dirs::cache_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("coldstart")
        .join("setup")
}

/// Runs the target's `setup` in one tree.
fn run_setup(t: &Target, side: &str) -> Result<()> {
    let mut cmd = Command::new(&t.setup[0]);
    cmd.args(&t.setup[1..])
        .current_dir(&t.cwd)
        .envs(&t.env)
        .env("COLDSTART_SIDE", side);
    let out = spawn::run_helper(cmd, SETUP_TIMEOUT).map_err(|e| {
        Error::Invalid(format!(
            "could not run the target's setup {} in {}: {e}",
            crate::target::display_argv(&t.setup),
            t.cwd.display()
        ))
    })?;
    if !out.status.success() {
        return Err(Error::Invalid(format!(
            "the target's setup {} failed in the {side} tree ({}) with {}; fix it or the `setup` key, then run diff again\n{}{}",
            crate::target::display_argv(&t.setup),
            t.cwd.display(),
            out.status,
            out.stdout,
            out.stderr
        )));
    }
    Ok(())
}

fn copy_file(from: &Path, to: &Path) -> Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io("create", parent, e))?;
    }
    std::fs::copy(from, to).map_err(|e| Error::io("copy", from, e))?;
    Ok(())
}

/// The target's `setup` in the working tree (`head`, at `top`), skipped
/// when its hash and its ignored files are as the last successful run
/// left them; its note.
fn setup_head(head: &Target, top: &Path) -> Result<String> {
    let argv = head.setup.join("\0");
    let cache = cache_root();
    let shown = crate::target::display_argv(&head.setup);
    let head_id = working_tree_id(top)?;
    let head_key = format!(
        "{:016x}",
        fnv1a64(format!("head\0{head_id}\0{argv}\0{}", top.display()).as_bytes())
    );
    let marker = cache.join(format!("{head_key}.head"));
    let outputs_now = ignored_files(top)?;
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(listed(&outputs_now).as_str()) {
        return Ok(format!(
            "setup {shown}: the working tree is unchanged since its last run (tree {}), not run again",
            &head_id[..head_id.len().min(12)]
        ));
    }
    run_setup(head, "head")?;
    std::fs::create_dir_all(&cache).map_err(|e| Error::io("create", &cache, e))?;
    let after = ignored_files(top)?;
    std::fs::write(&marker, listed(&after)).map_err(|e| Error::io("write", &marker, e))?;
    Ok(format!("setup {shown}: run in the working tree"))
}

/// The target's `setup` in the base's checkout (`base`, at `tree`, of
/// `commit`): its new ignored files are kept, keyed by its tree and the
/// command as the working tree's target gives it (`setup`: the base's own
/// names paths in a checkout that changes each run), and taken from there
/// the next time; its note.
fn setup_base(
    base: &Target,
    setup: &[String],
    top: &Path,
    tree: &Path,
    commit: &str,
    side: &str,
) -> Result<String> {
    let argv = setup.join("\0");
    let cache = cache_root();
    let shown = crate::target::display_argv(setup);
    let base_id = git(top, &["rev-parse", &format!("{commit}^{{tree}}")])?
        .trim()
        .to_owned();
    let base_key = format!(
        "{:016x}",
        fnv1a64(format!("{side}\0{base_id}\0{argv}").as_bytes())
    );
    let kept = cache.join(&base_key);
    let list = kept.join("files.txt");
    if let Ok(text) = std::fs::read_to_string(&list) {
        for rel in text.lines().filter(|l| !l.is_empty()) {
            copy_file(&kept.join("files").join(rel), &tree.join(rel))?;
        }
        return Ok(format!(
            "setup {shown}: the {side}'s outputs taken from the cache (tree {})",
            &base_id[..base_id.len().min(12)]
        ));
    }
    let before = ignored_files(tree)?;
    run_setup(base, side)?;
    let new: Vec<PathBuf> = ignored_files(tree)?
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    let _ = std::fs::remove_dir_all(&kept);
    for rel in &new {
        copy_file(&tree.join(rel), &kept.join("files").join(rel))?;
    }
    std::fs::write(&list, listed(&new)).map_err(|e| Error::io("write", &list, e))?;
    Ok(format!("setup {shown}: run in the {side}'s checkout"))
}

/// Relative paths, a line each: a cache's list.
fn listed(v: &[PathBuf]) -> String {
    v.iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The words for a side's checkout in notes and advice.
pub fn checkout_words(side: Variant) -> &'static str {
    match side {
        Variant::A => "the base's checkout",
        _ => "the head's checkout",
    }
}

/// Prepares both trees of one target ([`super::Trees`]): the `setup`
/// (when the target has one: the head's first, then the base's), else
/// the ignored extension modules carried from the working tree into each
/// checkout where that is safe and the project's virtual environments
/// linked into it ([`super::environment`]). A side that is the working
/// tree itself (`commits[1]` is `None`) gets its own setup and nothing
/// carried. Every error is an [`Error::Side`] that names the side it is
/// of. What was done, per side (A, B).
pub fn prepare(base: &Target, head: &Target, trees: &super::Trees) -> Result<[Prepared; 2]> {
    let of = |side: Variant| {
        move |cause: Error| Error::Side {
            side,
            name: head.name.clone(),
            cause: Box::new(cause),
        }
    };
    let top = trees.top.as_path();
    let mut out = [Prepared::default(), Prepared::default()];
    let Some(base_commit) = &trees.commits[0] else {
        return Ok(out);
    };
    if !head.setup.is_empty() {
        out[1].notes.push(
            match &trees.commits[1] {
                None => setup_head(head, top),
                Some(c) => setup_base(head, &head.setup, top, &trees.paths[1], c, "head"),
            }
            .map_err(of(Variant::B))?,
        );
        out[0].notes.push(
            setup_base(base, &head.setup, top, &trees.paths[0], base_commit, "base")
                .map_err(of(Variant::A))?,
        );
        return Ok(out);
    }
    for (i, side) in [(0, Variant::A), (1, Variant::B)] {
        let (Some(commit), tree) = (&trees.commits[i], trees.paths[i].as_path()) else {
            continue;
        };
        let words = checkout_words(side);
        let mut prepared = carry(top, tree, commit, words).map_err(of(side))?;
        let envs = super::environment::lacking(top, tree, &head.cwd);
        let linked = super::environment::link(top, tree, &envs, words).map_err(of(side))?;
        prepared.notes.extend(linked);
        out[i] = prepared;
    }
    Ok(out)
}

/// The ignored extension modules of the working tree at `top` that the
/// checkout of `commit` at `tree` lacks, carried into it when no build
/// input differs ([`build_input_changes`]).
fn carry(top: &Path, tree: &Path, commit: &str, words: &str) -> Result<Prepared> {
    let mut p = Prepared::default();
    let lacking: Vec<PathBuf> = ignored_extensions(top)?
        .into_iter()
        .filter(|rel| !tree.join(rel).exists())
        .collect();
    if lacking.is_empty() {
        return Ok(p);
    }
    let changes = build_input_changes(top, commit)?;
    if !changes.inputs.is_empty() {
        p.changed = changes.inputs;
        p.missing = lacking;
        return Ok(p);
    }
    let left_out = if changes.left_out.is_empty() {
        String::new()
    } else {
        format!(
            " (untracked files that are no build's input left out: {})",
            shown(&changes.left_out, 5)
        )
    };
    for rel in &lacking {
        copy_file(&top.join(rel), &tree.join(rel))?;
        p.notes.push(format!(
            "{} carried into {words}: a build output git ignores, and no build input differs between the trees{left_out}",
            rel.display()
        ));
    }
    Ok(p)
}

/// What to add to a checkout's start-up failure (side A's or, when it is
/// a commit, B's) when extension modules could not be carried into it.
pub fn advice(p: &Prepared, side: Variant) -> Option<String> {
    if p.missing.is_empty() {
        return None;
    }
    let names: Vec<String> = p.missing.iter().map(|m| m.display().to_string()).collect();
    Some(format!(
        "{} lacks {} (built in the working tree, ignored by git), and it was not carried over because files that can be a build's input differ between the trees ({}); set the target's `setup` to the command that builds it (run in each tree with COLDSTART_SIDE=base|head, e.g. setup = [\"maturin\", \"develop\"])",
        checkout_words(side),
        names.join(", "),
        shown(&p.changed, 5)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extension_names_are_told_from_sources() {
        for yes in [
            "core.cpython-311-x86_64-linux-gnu.so",
            "_speedups.abi3.so",
            "native.pyd",
            "libfoo.so.1",
        ] {
            assert!(is_extension(yes), "{yes}");
        }
        for no in ["core.py", "soap.txt", "module.sox"] {
            assert!(!is_extension(no), "{no}");
        }
    }

    #[test]
    fn build_inputs_are_told_from_reports() {
        for yes in [
            "src/svc/_speed.c",
            "src/lib.rs",
            "pyproject.toml",
            "setup.cfg",
            "setup.py",
            "native/CMakeLists.txt",
            "Cargo.lock",
            "ext/fast.pyx",
            "MANIFEST.in",
        ] {
            assert!(is_build_input(yes), "{yes}");
        }
        for no in [
            "diff.xml",
            "bench-out/20261205T071100Z/summary.json",
            "bench-out/20261205T071100Z/trials.jsonl",
            "bench-out/20261205T071100Z/phases.svg",
            "summary.md",
            "src/svc/worker.py",
        ] {
            assert!(!is_build_input(no), "{no}");
        }
    }

    #[test]
    fn files_in_a_folder_are_shown_as_the_folder() {
        let names: Vec<String> = [
            "bench-out/a/summary.json",
            "bench-out/a/trials.jsonl",
            "diff.xml",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(shown(&names, 5), "bench-out/ (2 files), diff.xml");
        assert_eq!(shown(&names, 1), "bench-out/ (2 files), ...");
    }

    #[test]
    fn the_cache_key_is_stable() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_ne!(fnv1a64(b"a"), fnv1a64(b"b"));
    }
}
