//! Every console example in the README, CONTRIBUTING.md and `docs/*.md` is
//! run, as rustdoc runs the examples of a crate's documentation, so the
//! pages cannot drift from the tool.
//!
//! A block is a fence whose info string starts with `console`: its `$ `
//! lines are commands (a line ending in `\` goes on), the lines after a
//! command are what it prints (stdout and stderr as one stream). Each
//! command runs as a user runs it: through `sh`, in the block's folder (the
//! workspace root or the stand-in below, changed by a `$ cd DIR` line or
//! `cd DIR && ...`), with `coldstart` the binary the suite builds, `cargo
//! xtask` the suite's xtask, `uv` the test venv's, `python3` the
//! interpreter the suite runs, and `GITHUB_STEP_SUMMARY` a file, as a
//! GitHub Actions runner gives a step; the folder is a copy of
//! the workspace made of links, so what a command writes stays out of the
//! checkout, and the copy's place in an output reads as the workspace's.
//! The page's output and the real one both go through
//! [`support::redact`] and must then be equal, line for line, but for a
//! page line `...`, which stands for any lines (none included), and `[..]`
//! within a line, which stands for any text (a clause printed only at
//! times). A block whose output holds counts and rates that vary from run
//! to run says `figures: vary`: every number then reads as `[N]` and a run
//! of blanks as one, on both sides. A command the page shows without
//! output must succeed.
//!
//! A block that shows a command run in the reader's own project runs in a
//! stand-in of it, named in its info string:
//! ```` ```console in: tests/fixtures/docs/project ````: its folder is then
//! the block's first folder, and the stand-in's `README.md` (or the
//! nearest one above it) must name the page, so that what the stand-in
//! stands in for is said where it lives.
//! A block that sets a CPU or memory limit says so, `needs: cgroup`
//! (clauses are separated by `;`: ```` ```console in: DIR; needs: cgroup
//! ````), and runs only where a cgroup is delegated to the user; under
//! `cargo xtask test` a missing one fails, as in the limits tests.
//! A block that cannot run here says why in its info string:
//! ```` ```console no-run: needs the real batchalign3 system ````. As
//! rustdoc compiles a `no_run` example, every `coldstart` command such a
//! block shows is still parsed by the command line's own parser
//! ([`coldstart::cli::Cli`]): a flag or subcommand renamed or removed
//! fails the test there too. A block with any other words after `console`
//! fails the test.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::docs::pages;
use crate::support;

/// One console block of a page.
#[derive(Debug)]
struct Block {
    /// The page, relative to the workspace root.
    page: String,
    /// The line of its opening fence (1-based).
    line: usize,
    /// The indent of its fence (a block in a list item).
    indent: usize,
    /// What its info string says after `console`.
    info: String,
    /// Its lines, fences left out.
    body: Vec<String>,
}

/// What a block's info string says of it.
#[derive(Debug, PartialEq)]
enum Mark {
    /// Nothing, or clauses `in: DIR` and `needs: cgroup` (separated by
    /// `;`): the block is run, from the workspace root or from DIR
    /// (relative to it), a stand-in of the reader's project, where what it
    /// needs is here.
    Run(Setting),
    /// `no-run: REASON`.
    NoRun(String),
    /// Anything else: a mistake in the page.
    Bad(String),
}

/// Where and on what a runnable block runs.
#[derive(Debug, PartialEq, Default)]
struct Setting {
    /// Its first folder, relative to the workspace root.
    dir: PathBuf,
    /// `needs: cgroup`: it sets a CPU or memory limit, so it runs only
    /// where a cgroup is delegated to the user (as the limits tests do:
    /// under `cargo xtask test` a missing one fails).
    cgroup: bool,
    /// `figures: vary`: what it prints holds counts and rates that change
    /// from run to run, so every number is read as `[N]` and a run of
    /// blanks as one, on the page's side and the real one alike.
    figures_vary: bool,
}

impl Block {
    fn mark(&self) -> Mark {
        let info = self.info.trim();
        if let Some(reason) = info.strip_prefix("no-run:").map(str::trim) {
            return match reason {
                "" => self.bad(&format!("```console {info}: a no-run block says why")),
                reason => Mark::NoRun(reason.to_owned()),
            };
        }
        let mut setting = Setting::default();
        for clause in info.split(';').map(str::trim).filter(|c| !c.is_empty()) {
            if let Some(dir) = clause.strip_prefix("in:").map(str::trim) {
                match standin(dir, &self.page) {
                    Ok(dir) => setting.dir = dir,
                    Err(why) => return self.bad(&why),
                }
            } else if clause == "needs: cgroup" {
                setting.cgroup = true;
            } else if clause == "figures: vary" {
                setting.figures_vary = true;
            } else {
                return self.bad(&format!(
                    "```console {info}: `{clause}` is none of `in: DIR`, \
                     `needs: cgroup`, `figures: vary` (separated by `;`) or \
                     `no-run: REASON`"
                ));
            }
        }
        Mark::Run(setting)
    }

    fn bad(&self, why: &str) -> Mark {
        Mark::Bad(format!("{}:{}: {why}", self.page, self.line))
    }
}

/// The stand-in project `dir` (relative to the workspace root) that a block
/// of `page` runs in: a folder of the workspace whose `README.md`, or the
/// nearest one above it below the root, names `page`.
fn standin(dir: &str, page: &str) -> Result<PathBuf, String> {
    let rel = PathBuf::from(dir);
    let plain = rel
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    if dir.is_empty() || !plain || !support::root().join(&rel).is_dir() {
        return Err(format!(
            "`in: {dir}`: not a folder of the workspace, relative to its root"
        ));
    }
    let readme = rel
        .ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .map(|a| support::root().join(a).join("README.md"))
        .find(|r| r.is_file());
    match readme.map(|r| std::fs::read_to_string(r).unwrap()) {
        Some(text) if text.contains(page) => Ok(rel),
        Some(_) => Err(format!(
            "`in: {dir}`: its README.md does not name {page}, whose reader's \
             project it stands in for"
        )),
        None => Err(format!(
            "`in: {dir}`: a stand-in says what it stands for in a README.md"
        )),
    }
}

/// The console blocks of `text` (the page `page`).
fn blocks(page: &str, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    // Inside a fence: the console block being read, or None in another
    // language's block.
    let mut inside: Option<Option<Block>> = None;
    for (n, line) in text.lines().enumerate() {
        // As CommonMark reads a fence: an info string with a backtick
        // makes the line inline code instead.
        let fence = line
            .trim_start()
            .strip_prefix("```")
            .filter(|info| !info.trim_start_matches('`').contains('`'));
        match (&mut inside, fence) {
            (Some(open), Some(_)) => {
                out.extend(open.take());
                inside = None;
            }
            (Some(Some(b)), None) => {
                // A block in a list item: its lines lose the fence's indent.
                let indent = b.indent;
                let cut = line.len() - line.trim_start().len();
                b.body.push(line[cut.min(indent)..].to_owned());
            }
            (Some(None), None) | (None, None) => {}
            (None, Some(info)) => {
                inside = Some(info.strip_prefix("console").map(|rest| Block {
                    page: page.to_owned(),
                    line: n + 1,
                    indent: line.len() - line.trim_start().len(),
                    info: rest.to_owned(),
                    body: Vec::new(),
                }));
            }
        }
    }
    out
}

/// One command of a block and the output the page shows for it.
#[derive(Debug, PartialEq)]
struct Step {
    command: String,
    shown: Vec<String>,
}

/// The commands of a block's lines, each with the lines shown after it.
fn steps(body: &[String]) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::new();
    let mut continued = false;
    for line in body {
        if continued {
            let step = out.last_mut().unwrap();
            step.command.push('\n');
            step.command.push_str(line);
            continued = line.ends_with('\\');
        } else if let Some(command) = line.strip_prefix("$ ") {
            out.push(Step {
                command: command.to_owned(),
                shown: Vec::new(),
            });
            continued = command.ends_with('\\');
        } else if let Some(step) = out.last_mut() {
            step.shown.push(line.clone());
        }
    }
    out
}

/// Whether `real` matches `shown`, a page line `...` standing for any
/// lines.
fn matches(shown: &[&str], real: &[&str]) -> bool {
    match shown.split_first() {
        None => real.is_empty(),
        Some((&"...", rest)) => (0..=real.len()).any(|i| matches(rest, &real[i..])),
        Some((line, rest)) => real
            .split_first()
            .is_some_and(|(r, more)| line_matches(line, r) && matches(rest, more)),
    }
}

/// Whether the real line `real` matches the page's `shown`, where `[..]`
/// stands for any text within the line (none included), as trycmd reads
/// it: for a clause printed only at times.
fn line_matches(shown: &str, real: &str) -> bool {
    let mut parts = shown.split("[..]");
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = real.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// `text` redacted, each line's trailing blanks dropped, ending blank lines
/// dropped; with `figures_vary`, every number read as `[N]` and a run of
/// blanks as one.
fn redacted_lines(text: &str, figures_vary: bool) -> Vec<String> {
    let number = regex::Regex::new(r"\d+(\.\d+)?").unwrap();
    let blanks = regex::Regex::new(r" {2,}").unwrap();
    let mut lines: Vec<String> = support::redact(text)
        .lines()
        .map(|l| match figures_vary {
            true => blanks
                .replace_all(&number.replace_all(l, "[N]"), " ")
                .into_owned(),
            false => l.to_owned(),
        })
        .map(|l| l.trim_end().to_owned())
        .collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// A folder of commands standing in for what a user has on PATH:
/// `coldstart` (the suite's build), `python3` (the suite's interpreter),
/// `uv` (the test venv's) and `cargo`, which runs only `cargo xtask` (the
/// suite's build of it).
fn tools() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let link = |name: &str, to: &Path| std::os::unix::fs::symlink(to, dir.path().join(name));
    link("coldstart", support::coldstart_bin()).unwrap();
    link("python3", support::python()).unwrap();
    link("uv", &support::uv()).unwrap();
    let cargo = dir.path().join("cargo");
    std::fs::write(
        &cargo,
        format!(
            "#!/bin/sh\n\
             [ \"$1\" = xtask ] || {{ echo \"only cargo xtask runs in a doc example\" >&2; exit 127; }}\n\
             shift\nexec {} \"$@\"\n",
            support::xtask_bin().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The workspace at `root` seen from `into`: each entry a link to the
/// real one, but for the folders on the way to `keep` (relative to
/// `root`), made real so that what a command writes there stays in `into`.
fn mirror(root: &Path, into: &Path, keep: &Path) {
    std::fs::create_dir_all(into).unwrap();
    let mut parts = keep.components();
    let next = parts.next().map(|c| c.as_os_str().to_owned());
    for e in std::fs::read_dir(root).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == ".git" || name == "target" {
            continue;
        }
        if Some(&name) == next.as_ref() && e.path().is_dir() {
            mirror(&e.path(), &into.join(&name), parts.as_path());
        } else {
            std::os::unix::fs::symlink(e.path(), into.join(&name)).unwrap();
        }
    }
}

/// What a run of one block from `dir` (relative to the workspace root)
/// found: a mismatch's message, if any.
fn run_block(block: &Block, setting: Setting, tools: &Path) -> Option<String> {
    let mut dir = setting.dir;
    let scratch = tempfile::tempdir().unwrap();
    let workspace = scratch.path().join("ws");
    let mut mirrored = false;
    let steps = steps(&block.body);
    if steps.is_empty() {
        return Some(format!(
            "{}:{}: a console block with no `$ ` command",
            block.page, block.line
        ));
    }
    for step in steps {
        if let Some(to) = step
            .command
            .strip_prefix("cd ")
            .filter(|t| !t.contains(' '))
        {
            dir.push(to);
            continue;
        }
        if !mirrored {
            mirror(support::root(), &workspace, &dir);
            mirrored = true;
        }
        let (code, text) = run(&step.command, &workspace.join(&dir), tools, scratch.path());
        // The copy stands for the workspace: its place is read as the
        // workspace's, which the redaction makes `[ROOT]`.
        let text = text.replace(
            &workspace.display().to_string(),
            &support::root().display().to_string(),
        );
        let real = redacted_lines(&text, setting.figures_vary);
        let shown = redacted_lines(&step.shown.join("\n"), setting.figures_vary);
        let ok = if shown.is_empty() {
            code == Some(0)
        } else {
            matches(&strs(&shown), &strs(&real))
        };
        if !ok {
            let diff = similar::TextDiff::from_lines(
                &format!("{}\n", shown.join("\n")),
                &format!("{}\n", real.join("\n")),
            )
            .unified_diff()
            .header("page (redacted)", "real (redacted)")
            .to_string();
            return Some(format!(
                "{}:{}: `$ {}` (exit {code:?}) does not print what the page shows:\n{diff}",
                block.page, block.line, step.command
            ));
        }
    }
    None
}

/// `command` through `sh` in `dir`, stdout and stderr one stream, with
/// `tools` first on PATH and uv's cache in `scratch`: its exit code and its
/// output.
fn run(command: &str, dir: &Path, tools: &Path, scratch: &Path) -> (Option<i32>, String) {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![tools.to_path_buf()];
    paths.extend(std::env::split_paths(&path));
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("exec 2>&1\n{command}"))
        .current_dir(dir)
        .env("PATH", std::env::join_paths(paths).unwrap())
        .env_remove("PYTHONPATH")
        .env("UV_CACHE_DIR", scratch.join("uv-cache"))
        // The file a GitHub Actions runner gives a step for its summary.
        .env("GITHUB_STEP_SUMMARY", scratch.join("step-summary.md"))
        .stdin(Stdio::null());
    let out = assert_cmd::Command::from_std(cmd)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The `coldstart` invocations of a shell command line, each as its
/// arguments: every segment between `&&`, `||`, `;` and `|` that runs
/// `coldstart` (after variable assignments, or as the command another one
/// runs, `git bisect run coldstart ...`), a `# comment` and a `> FILE`
/// left out.
fn coldstart_invocations(command: &str) -> Vec<Vec<String>> {
    let joined = command.replace("\\\n", " ");
    let Some(split) = shlex::split(&joined) else {
        return vec![vec!["(unbalanced quotes)".to_owned(), joined]];
    };
    // `a; b`: the shell ends a command at a `;` that ends a word.
    let mut words = Vec::new();
    for w in split {
        match w.strip_suffix(';') {
            Some(word) if !word.is_empty() => words.extend([word.to_owned(), ";".to_owned()]),
            _ => words.push(w),
        }
    }
    if let Some(comment) = words.iter().position(|w| w.starts_with('#')) {
        words.truncate(comment);
    }
    let mut out = Vec::new();
    for segment in words.split(|w| ["&&", "||", ";", "|"].contains(&w.as_str())) {
        let Some(at) = segment.iter().position(|w| w == "coldstart") else {
            continue;
        };
        let mut args = Vec::new();
        let mut words = segment[at..].iter();
        while let Some(w) = words.next() {
            match w.as_str() {
                ">" | ">>" | "<" | "2>" => {
                    words.next();
                }
                _ => args.push(w.clone()),
            }
        }
        out.push(args);
    }
    out
}

/// What the command line's parser refuses in a no-run block's `coldstart`
/// commands, one failure each.
fn unparsed(block: &Block) -> Vec<String> {
    use clap::Parser;
    let mut failures = Vec::new();
    for step in steps(&block.body) {
        for args in coldstart_invocations(&step.command) {
            if let Err(e) = coldstart::cli::Cli::try_parse_from(&args) {
                use clap::error::ErrorKind;
                if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                    failures.push(format!(
                        "{}:{}: `{}` (a no-run block's command) does not parse:\n{}",
                        block.page,
                        block.line,
                        args.join(" "),
                        e.render()
                    ));
                }
            }
        }
    }
    failures
}

#[test]
fn every_console_example_runs_or_says_why_not() {
    let tools = tools();
    let (mut ran, mut marked, mut failures) = (Vec::new(), Vec::new(), Vec::new());
    for page in pages() {
        let rel = page
            .strip_prefix(support::root())
            .unwrap()
            .display()
            .to_string();
        let text = std::fs::read_to_string(&page).unwrap();
        for block in blocks(&rel, &text) {
            match block.mark() {
                Mark::Run(setting) => {
                    let here = format!("{rel}:{}", block.line);
                    if setting.cgroup && !crate::limits::cgroups_here(&here) {
                        marked.push(format!("{here}: not run, no cgroup is delegated here"));
                        continue;
                    }
                    ran.push(here);
                    failures.extend(run_block(&block, setting, tools.path()));
                }
                Mark::NoRun(reason) => {
                    marked.push(format!("{rel}:{}: {reason}", block.line));
                    failures.extend(unparsed(&block));
                }
                Mark::Bad(why) => failures.push(why),
            }
        }
    }
    eprintln!(
        "{} console blocks ran: {}\n{} marked no-run:\n  {}",
        ran.len(),
        ran.join(", "),
        marked.len(),
        marked.join("\n  ")
    );
    assert!(ran.len() + marked.len() >= 30, "blocks were read: {ran:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_block_is_read_into_commands_and_their_output() {
    let page = "text\n```console\n$ cd worker\n$ coldstart check \\\n    -- python3 -m w\nPASS\n...\n```\n\
                ```console no-run: needs the real system\n$ batchalign3\n```\n\
                ```console no-run\n$ x\n```\n```toml\n$ not a command\n```\n\
                - an item:\n\n  ```console\n  $ coldstart\n  out\n  ```\n\
                ```` ```console no-run ```` is inline code\n";
    let found = blocks("p.md", page);
    assert_eq!(found.len(), 4, "{found:?}");
    assert_eq!(found[0].line, 2);
    assert_eq!(found[0].mark(), Mark::Run(Setting::default()));
    assert_eq!(
        steps(&found[0].body),
        [
            Step {
                command: "cd worker".into(),
                shown: vec![]
            },
            Step {
                command: "coldstart check \\\n    -- python3 -m w".into(),
                shown: vec!["PASS".into(), "...".into()]
            },
        ]
    );
    assert_eq!(found[1].mark(), Mark::NoRun("needs the real system".into()));
    assert!(matches!(found[2].mark(), Mark::Bad(_)));
    assert_eq!(
        steps(&found[3].body),
        [Step {
            command: "coldstart".into(),
            shown: vec!["out".into()]
        }]
    );
}

#[test]
fn a_no_run_blocks_coldstart_commands_are_parsed_and_a_wrong_flag_fails() {
    let v = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    assert_eq!(
        coldstart_invocations("cd ~/src/ml-service && coldstart init      # or by hand"),
        [v(&["coldstart", "init"])]
    );
    assert_eq!(
        coldstart_invocations("git bisect run coldstart bisect --run v1.4.0 # git drives"),
        [v(&["coldstart", "bisect", "--run", "v1.4.0"])]
    );
    assert_eq!(
        coldstart_invocations(
            "RUST_LOG=info coldstart diff origin/main --format junit > diff.xml; \\\n  cat diff.xml | coldstart x"
        ),
        [
            v(&["coldstart", "diff", "origin/main", "--format", "junit"]),
            v(&["coldstart", "x"])
        ]
    );
    assert!(coldstart_invocations("pip install coldstart-*.whl").is_empty());

    let page = "```console no-run: needs a pid\n\
                $ coldstart dump 30299 --native\n\
                $ cd x && coldstart trace 1 --duration 10 --output perfetto=a.pb\n\
                Process 30299\n```\n\
                ```console no-run: needs a pid\n\
                $ coldstart dump 30299 --natve\n\
                $ coldstart chek\n```\n";
    let found = blocks("page.md", page);
    assert_eq!(unparsed(&found[0]), Vec::<String>::new());
    let failures = unparsed(&found[1]);
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures[0].starts_with(
            "page.md:6: `coldstart dump 30299 --natve` (a no-run block's command) does not parse:"
        ),
        "{failures:?}"
    );
    assert!(failures[0].contains("--natve"), "{failures:?}");
    assert!(failures[1].contains("`coldstart chek`"), "{failures:?}");
}

#[test]
fn an_ellipsis_stands_for_any_lines_and_nothing_else_differs() {
    assert!(matches(&["a", "...", "d"], &["a", "b", "c", "d"]));
    assert!(matches(&["a", "...", "d"], &["a", "d"]));
    assert!(matches(&["a", "..."], &["a"]));
    assert!(!matches(&["a", "...", "d"], &["a", "b", "c"]));
    assert!(!matches(&["a", "b"], &["a", "b", "c"]));
    assert!(!matches(&["a", "b"], &["a", "c"]));
    // `[..]` within a line: any text, none included.
    let line = "sampled 9 rounds (asked 100 Hz[..]), 1 late";
    assert!(line_matches(
        line,
        "sampled 9 rounds (asked 100 Hz), 1 late"
    ));
    assert!(line_matches(
        line,
        "sampled 9 rounds (asked 100 Hz, lowered to 9 Hz at times), 1 late"
    ));
    assert!(!line_matches(
        line,
        "sampled 9 rounds (asked 50 Hz), 1 late"
    ));
    assert!(!line_matches(
        line,
        "sampled 9 rounds (asked 100 Hz), 1 late!"
    ));
    assert!(line_matches("[..]", "anything"));
    assert!(line_matches("a[..]b[..]c", "abc"));
    assert!(!line_matches("ab[..]b", "ab"));
    assert!(matches(&["x [..]", "..."], &["x y", "z"]));
}

#[test]
fn with_figures_that_vary_numbers_and_column_widths_are_folded() {
    let block = Block {
        page: "docs/trace.md".into(),
        line: 1,
        indent: 0,
        info: " figures: vary".into(),
        body: Vec::new(),
    };
    assert_eq!(
        block.mark(),
        Mark::Run(Setting {
            figures_vary: true,
            ..Setting::default()
        })
    );
    let page = "traced 4 processes, 241 slices\nready    15  48.71 ms\n";
    let real = "traced 3 processes, 30 slices\nready  9  1.2 s\n";
    assert_eq!(
        redacted_lines(page, true),
        redacted_lines(real, true),
        "the same words, other figures"
    );
    assert_eq!(
        redacted_lines(page, true),
        ["traced [N] processes, [N] slices", "ready [N] [DURATION]"]
    );
    assert_ne!(redacted_lines(page, false), redacted_lines(real, false));
    assert_ne!(
        redacted_lines("traced 4 processes", true),
        redacted_lines("traced 4 threads", true),
        "the words still count"
    );
}

#[test]
fn a_block_runs_in_a_stand_in_whose_readme_names_its_page() {
    let block = |page: &str, info: &str| Block {
        page: page.into(),
        line: 1,
        indent: 0,
        info: info.into(),
        body: Vec::new(),
    };
    let dir = "tests/fixtures/docs/project";
    assert_eq!(
        block("docs/check.md", &format!(" in: {dir}")).mark(),
        Mark::Run(Setting {
            dir: dir.into(),
            cgroup: false,
            ..Setting::default()
        })
    );
    assert_eq!(
        block("docs/check.md", &format!(" in: {dir}; needs: cgroup")).mark(),
        Mark::Run(Setting {
            dir: dir.into(),
            cgroup: true,
            ..Setting::default()
        })
    );
    assert_eq!(
        block("docs/limits.md", " needs: cgroup").mark(),
        Mark::Run(Setting {
            dir: PathBuf::new(),
            cgroup: true,
            ..Setting::default()
        })
    );
    // A stand-in described by the README of the fixture that holds it.
    let svc = "tests/fixtures/launcher/svc";
    assert_eq!(
        block("docs/check.md", &format!(" in: {svc}")).mark(),
        Mark::Run(Setting {
            dir: svc.into(),
            cgroup: false,
            ..Setting::default()
        })
    );
    // A stand-in that does not say it stands in for this page's project,
    // a folder that is none, one outside the workspace.
    for (page, info) in [
        ("docs/pool.md", format!(" in: {dir}")),
        ("docs/check.md", " in: tests/fixtures/docs/absent".into()),
        ("docs/check.md", " in: ../elsewhere".into()),
        ("docs/check.md", " in:".into()),
        ("docs/check.md", " needs: gpu".into()),
        ("docs/check.md", " figures: fixed".into()),
        ("docs/check.md", format!(" in: {dir}, needs: cgroup")),
    ] {
        let mark = block(page, &info).mark();
        assert!(matches!(mark, Mark::Bad(_)), "{info}: {mark:?}");
    }
}
