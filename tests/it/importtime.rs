//! The importtime parser, its renderings and `cargo xtask importtime`:
//! data-driven over the real logs in tests/fixtures/importtime, one test per
//! quirk of the format, property tests, and the CLI.

use std::fmt::Write as _;

use importguard::importtime::{self, ImportLog, LineClass, LogWarningKind, NodeId, NodeKind};
use proptest::prelude::*;
use report::importtime::View;

use crate::support;

fn parse_str(s: &str) -> ImportLog {
    importtime::parse(s.as_bytes())
}

fn tree(log: &ImportLog) -> String {
    let mut out = Vec::new();
    report::importtime::tree_text(log, &View::new(log, None, None), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn warnings(log: &ImportLog) -> Vec<String> {
    log.warnings().iter().map(ToString::to_string).collect()
}

/// Lines of the input, counted independently of the parser.
fn input_lines(bytes: &[u8]) -> usize {
    let n = bytes.iter().filter(|&&b| b == b'\n').count();
    n + usize::from(bytes.last().is_some_and(|&b| b != b'\n'))
}

/// Lines that look like entries or cached lines to a plain reading: they
/// start with `import time:` and hold two ` | ` separators, and are not
/// the header.
fn entry_like_lines(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            l.starts_with("import time:")
                && l.matches(" | ").count() == 2
                && !l.contains("self [us] | cumulative")
        })
        .count()
}

#[test]
fn fixtures_parse_without_losing_a_line() {
    insta::glob!("../fixtures/importtime", "*.log", |path| {
        let bytes = std::fs::read(path).unwrap();
        let log = importtime::parse(&bytes);
        assert_eq!(
            log.line_count(),
            input_lines(&bytes),
            "every input line is classified"
        );
        let classes = log.line_classes();
        let count = |c: LineClass| classes.iter().filter(|&&x| x == c).count();
        assert_eq!(
            count(LineClass::Header)
                + count(LineClass::Entry)
                + count(LineClass::Cached)
                + count(LineClass::Text),
            log.line_count()
        );
        assert_eq!(count(LineClass::Text), log.text_lines().len());
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert_eq!(
            log.nodes().len(),
            entry_like_lines(&text),
            "one node per entry or cached line"
        );
        assert_eq!(
            log.nodes()
                .iter()
                .filter(|n| n.kind == NodeKind::Entry)
                .count(),
            count(LineClass::Entry)
        );
        // Every node is reachable from exactly one root.
        let reached: usize = log
            .all_roots()
            .iter()
            .map(|&r| log.descendants(r).count())
            .sum();
        assert_eq!(reached, log.nodes().len());

        let mut snap = String::new();
        writeln!(
            snap,
            "lines {} | headers {} | entries {} | cached {} | text {} | sessions {}",
            log.line_count(),
            log.header_count(),
            log.entry_count(),
            log.cached_count(),
            log.text_lines().len(),
            log.sessions().len()
        )
        .unwrap();
        writeln!(snap, "--- warnings ---").unwrap();
        for w in warnings(&log) {
            writeln!(snap, "{w}").unwrap();
        }
        writeln!(snap, "--- tree ---").unwrap();
        snap.push_str(&tree(&log));
        insta::assert_snapshot!(snap);
    });
}

#[test]
fn fixtures_python_versions_share_one_shape() {
    // 3.7 to 3.14: the same columns; json's tree is the same everywhere.
    for v in ["37", "38", "39", "310", "312"] {
        let log = importtime::parse(
            &std::fs::read(support::fixtures().join(format!("importtime/py{v}-json.log"))).unwrap(),
        );
        assert!(log.warnings().is_empty(), "{v}: {:?}", warnings(&log));
        let json = log
            .find_module("json")
            .next()
            .unwrap_or_else(|| panic!("{v}: json has a line"));
        assert_eq!(log.node(json).depth, 0);
        let children: Vec<&str> = log.children(json).map(|c| log.name(c)).collect();
        assert!(children.contains(&"json.decoder"), "{v}: {children:?}");
    }
}

// ---- one test per quirk, minimal inputs ----

const H: &str = "import time: self [us] | cumulative | imported package\n";

#[test]
fn quirk_py314_has_no_io_line_and_errno_under_os() {
    let log = parse_str(&format!(
        "{H}import time:        90 |         90 |     errno\nimport time:       500 |        590 |   os\nimport time:      1000 |       1590 | site\n"
    ));
    let errno = log.find_module("errno").next().unwrap();
    assert_eq!(log.chain_names(errno), "site > os > errno");
    assert!(log.find_module("io").next().is_none());
}

#[test]
fn quirk_cached_lines_of_importtime_2() {
    let log = parse_str(&format!(
        "{H}import time: cached    | cached     |  sys\nimport time:         1 |          1 |   a.b\nimport time: cached    | cached     | builtins\nimport time:         2 |          3 | a\n"
    ));
    assert_eq!(
        log.line_classes(),
        [
            LineClass::Header,
            LineClass::Cached,
            LineClass::Entry,
            LineClass::Cached,
            LineClass::Entry
        ]
    );
    let sys = log.find_module("sys").next().unwrap();
    assert_eq!(
        (log.node(sys).depth, log.node(sys).kind),
        (2, NodeKind::Cached)
    );
    assert_eq!(log.chain_names(sys), "a > a.b > sys");
    assert_eq!(log.cached_count(), 2);
    assert_eq!(log.entry_count(), 2);
    let builtins = log.find_module("builtins").next().unwrap();
    // After `a.b` (depth 1) the level is at least 1, and `a` (depth 0)
    // closes it: `builtins` is determined to be a's child at depth 1.
    assert_eq!(
        (log.node(builtins).depth, log.node(builtins).kind),
        (1, NodeKind::Cached)
    );
    assert_eq!(log.chain_names(builtins), "a > builtins");
    // At the start of a session nothing bounds the level from below.
    let log = parse_str(&format!(
        "{H}import time: cached    | cached     | builtins\nimport time:         1 |          1 |   b\n"
    ));
    let builtins = log.find_module("builtins").next().unwrap();
    assert_eq!(
        (log.node(builtins).depth, log.node(builtins).kind),
        (2, NodeKind::CachedAmbiguous)
    );
    assert!(
        log.warnings()
            .iter()
            .any(|w| w.kind == LogWarningKind::AmbiguousCachedDepth { count: 1 })
    );
}

#[test]
fn quirk_negative_numbers() {
    let log = parse_str(&format!(
        "{H}import time:    -57927 |       1521 | selectors\nimport time:        -5 |         -3 | neg\n"
    ));
    assert_eq!(log.node(NodeId(0)).self_us, -57927);
    assert_eq!(log.node(NodeId(1)).cumulative_us, -3);
    let kinds: Vec<&LogWarningKind> = log.warnings().iter().map(|w| &w.kind).collect();
    assert!(matches!(
        kinds[0],
        LogWarningKind::NegativeSelf { self_us: -57927 }
    ));
    assert!(
        kinds
            .iter()
            .any(|k| matches!(k, LogWarningKind::NegativeCumulative { cumulative_us: -3 }))
    );
}

#[test]
fn quirk_oversized_numbers_shift_columns() {
    let log = parse_str(&format!(
        "{H}import time: 1234567890 | 12345678901 |   wide\nimport time: 5 | 12345678906 | top\n"
    ));
    let wide = log.find_module("wide").next().unwrap();
    assert_eq!(log.node(wide).self_us, 1_234_567_890);
    assert_eq!(log.node(wide).cumulative_us, 12_345_678_901);
    assert_eq!(log.chain_names(wide), "top > wide");
}

#[test]
fn quirk_cumulative_below_self() {
    let log = parse_str(&format!("{H}import time:       100 |         50 | odd\n"));
    assert!(matches!(
        log.warnings()[0].kind,
        LogWarningKind::CumulativeBelowSelf {
            self_us: 100,
            cumulative_us: 50
        }
    ));
}

#[test]
fn quirk_crlf() {
    let log = parse_str(
        &format!("{H}import time: 1 | 1 |   b\r\nimport time: 1 | 2 | a\r\n")
            .replace("package\n", "package\r\n"),
    );
    assert_eq!(log.name(NodeId(0)), "b");
    assert_eq!(log.name(NodeId(1)), "a");
    assert_eq!(log.parent(NodeId(0)), Some(NodeId(1)));
    assert!(log.warnings().is_empty());
}

#[test]
fn quirk_utf16_le_with_bom() {
    let text = format!("{H}import time: 1 | 1 |   b\r\nimport time: 1 | 2 | a\r\n");
    let mut bytes = vec![0xFF, 0xFE];
    bytes.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
    let log = importtime::parse(&bytes);
    assert_eq!(log.encoding(), importtime::Encoding::Utf16Le);
    assert_eq!(log.line_count(), 3);
    assert_eq!(log.chain_names(NodeId(0)), "a > b");
}

#[test]
fn quirk_missing_header_keeps_first_entry() {
    let log = parse_str(
        "import time:       215 |        215 |   _io\nimport time:       552 |       1305 | _frozen_importlib_external\n",
    );
    assert_eq!(log.entry_count(), 2);
    assert_eq!(log.sessions()[0].header_line, None);
    assert_eq!(log.warnings()[0].kind, LogWarningKind::MissingHeader);
    assert_eq!(log.warnings()[0].line, Some(1));
}

#[test]
fn quirk_repeated_headers_are_sessions() {
    let log = parse_str(&format!(
        "{H}import time: 1 | 1 | a\n{H}import time: 1 | 1 | b\n{H}"
    ));
    assert_eq!(log.sessions().len(), 3);
    assert_eq!(log.sessions()[1].header_line, Some(3));
    assert_eq!(log.sessions()[2].entries, 0);
    assert_eq!(log.session_of(log.find_module("b").next().unwrap()), 1);
}

#[test]
fn quirk_truncated_last_line() {
    let log = parse_str(&format!("{H}import time: 1 | 1 | a\nimport time:     3"));
    assert_eq!(log.line_count(), 3);
    assert_eq!(log.line_classes()[2], LineClass::Text);
    assert!(
        log.warnings()
            .iter()
            .any(|w| w.kind == LogWarningKind::TruncatedLastLine && w.line == Some(3))
    );
}

#[test]
fn quirk_orphans_at_any_depth() {
    let log = parse_str(&format!(
        "{H}import time: 1 | 1 |       deep\nimport time: 1 | 1 |   mid\n"
    ));
    assert_eq!(log.chain_names(NodeId(0)), "mid > deep");
    assert_eq!(
        warnings(&log),
        [
            "line 2: depth jump: deep at depth 3 adopted by a parent at depth 1",
            "line 3: orphan: mid at depth 1 has no parent line; kept as a root",
        ]
    );
    assert_eq!(log.sessions()[0].roots, [NodeId(1)]);
}

#[test]
fn quirk_mixed_program_output() {
    let log = parse_str(&format!(
        "{H}import time: 1 | 1 | a\nINFO worker: starting\nWARNING worker: loaded json | not an import line\nimport time: this line is printed by the program, not by python\nimport time: 2 | 2 | b\n"
    ));
    assert_eq!(log.entry_count(), 2);
    assert_eq!(log.text_lines().len(), 3);
    assert_eq!(
        log.text_of(&log.text_lines()[1]),
        "WARNING worker: loaded json | not an import line"
    );
    assert_eq!(
        warnings(&log),
        ["line 5: begins with `import time:` but is not an entry; kept as text"]
    );
    assert_eq!(log.sessions()[0].roots.len(), 2);
}

#[test]
fn quirk_duplicate_names_are_separate_nodes() {
    let log = parse_str(&format!(
        "{H}import time: 1 | 1 | a\nimport time: 1 | 1 | a\n"
    ));
    assert_eq!(log.find_module("a").count(), 2);
}

#[test]
fn not_a_log_is_recognised() {
    assert!(!parse_str("Traceback (most recent call last):\n  File x\n").is_importtime());
    assert!(!parse_str("").is_importtime());
    assert!(parse_str(H).is_importtime());
}

// ---- properties ----

#[derive(Debug, Clone, PartialEq)]
struct T {
    name: String,
    self_us: i64,
    cum_us: i64,
    children: Vec<T>,
}

fn arb_tree() -> impl Strategy<Value = T> {
    let leaf = (
        "[a-z_][a-z0-9_.]{0,12}",
        -100_000i64..10_000_000_000,
        -1000i64..10_000_000_000,
    )
        .prop_map(|(name, self_us, cum_us)| T {
            name,
            self_us,
            cum_us,
            children: vec![],
        });
    leaf.prop_recursive(6, 64, 5, |inner| {
        (
            "[a-z_][a-z0-9_.]{0,12}",
            -100_000i64..10_000_000,
            0i64..100_000_000,
            prop::collection::vec(inner, 0..5),
        )
            .prop_map(|(name, self_us, cum_us, children)| T {
                name,
                self_us,
                cum_us,
                children,
            })
    })
}

/// Print trees the way CPython does: post-order, depth as indentation.
fn render(roots: &[T]) -> String {
    fn go(t: &T, depth: usize, out: &mut String) {
        for c in &t.children {
            go(c, depth + 1, out);
        }
        writeln!(
            out,
            "import time: {:>9} | {:>10} | {}{}",
            t.self_us,
            t.cum_us,
            "  ".repeat(depth),
            t.name
        )
        .unwrap();
    }
    let mut out = String::from(H);
    for r in roots {
        go(r, 0, &mut out);
    }
    out
}

fn rebuild(log: &ImportLog, id: NodeId) -> T {
    let n = log.node(id);
    T {
        name: log.name(id).to_owned(),
        self_us: n.self_us,
        cum_us: n.cumulative_us,
        children: log.children(id).map(|c| rebuild(log, c)).collect(),
    }
}

proptest! {
    #[test]
    fn prop_rendered_trees_parse_back(roots in prop::collection::vec(arb_tree(), 1..6)) {
        let text = render(&roots);
        let log = parse_str(&text);
        let back: Vec<T> = log.sessions()[0].roots.iter().map(|&r| rebuild(&log, r)).collect();
        prop_assert_eq!(back, roots);
        prop_assert_eq!(log.line_count(), text.lines().count());
        let broken = log.warnings().iter().any(|w| matches!(w.kind, LogWarningKind::DepthJump { .. } | LogWarningKind::Orphan { .. }));
        prop_assert!(!broken, "a well-formed log has no depth jumps nor orphans");
    }

    #[test]
    fn prop_arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let log = importtime::parse(&bytes);
        prop_assert_eq!(log.line_classes().len(), log.line_count());
        let reached: usize = log.all_roots().iter().map(|&r| log.descendants(r).count()).sum();
        prop_assert_eq!(reached, log.nodes().len());
        let mut sink = Vec::new();
        report::importtime::tree_text(&log, &View::new(&log, None, None), &mut sink).unwrap();
    }

    #[test]
    fn prop_log_like_lines_never_panic_nor_lose_lines(
        lines in prop::collection::vec(
            prop_oneof![
                Just(H.trim_end().to_owned()),
                Just("import time: cached    | cached     | ".to_owned()),
                Just("import time: ".to_owned()),
                Just("import time: -".to_owned()),
                Just("import time: 99999999999999999999999 | 1 | x".to_owned()),
                (0usize..40, "[a-z._]{1,8}", any::<i32>(), any::<i32>())
                    .prop_map(|(d, n, s, c)| format!("import time: {s:>9} | {c:>10} | {}{n}", " ".repeat(d))),
                (0usize..12, "[a-z._]{1,8}")
                    .prop_map(|(d, n)| format!("import time: cached    | cached     | {}{n}", " ".repeat(d))),
                "[ -~]{0,30}",
            ],
            0..60,
        ),
        crlf in any::<bool>(),
        trailing in any::<bool>(),
    ) {
        let sep = if crlf { "\r\n" } else { "\n" };
        let mut text = lines.join(sep);
        if trailing && !lines.is_empty() {
            text.push_str(sep);
        }
        let log = parse_str(&text);
        prop_assert_eq!(log.line_count(), input_lines(text.as_bytes()));
        let reached: usize = log.all_roots().iter().map(|&r| log.descendants(r).count()).sum();
        prop_assert_eq!(reached, log.nodes().len());
        for s in log.sessions() {
            for &r in &s.roots {
                prop_assert_eq!(log.parent(r), None);
            }
        }
        let view = View::new(&log, None, None);
        let mut sink = Vec::new();
        report::importtime::json_tree(&log, &view, &mut sink).unwrap();
        let _: serde_json::Value = serde_json::from_slice(&sink).unwrap();
        sink.clear();
        report::importtime::snapshot(&log, &view, &Default::default(), &mut sink).unwrap();
    }
}

// ---- the CLI ----

fn fixture(name: &str) -> std::path::PathBuf {
    support::fixtures().join("importtime").join(name)
}

fn stdout_of(args: &[&str]) -> String {
    let out = support::xtask()
        .args(["importtime"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn cli_formats_on_a_fixture() {
    let log = fixture("py311-sample.log");
    let log = log.to_str().unwrap();

    let top = stdout_of(&[log, "--format", "top", "--top", "3"]);
    insta::assert_snapshot!("cli_top_py311", top);

    let json: serde_json::Value =
        serde_json::from_str(&stdout_of(&[log, "--format", "json"])).unwrap();
    assert_eq!(json["schema"], "coldstart.importtime/1");
    let roots = json["sessions"][0]["roots"].as_array().unwrap();
    assert_eq!(roots[0]["name"], "_frozen_importlib_external");
    assert_eq!(roots[0]["cumulative_us"], 1305);
    assert_eq!(roots[0]["children"][0]["name"], "_io");

    let collapsed = stdout_of(&[log, "--format", "collapsed"]);
    assert!(
        collapsed
            .lines()
            .any(|l| l == "encodings;codecs;_codecs 78"),
        "{collapsed}"
    );
    assert!(collapsed.lines().all(|l| {
        l.rsplit_once(' ')
            .is_some_and(|(_, n)| n.parse::<u64>().is_ok())
    }));

    let svg = stdout_of(&[log, "--format", "svg"]);
    assert!(svg.starts_with("<?xml"), "{}", &svg[..100.min(svg.len())]);
    crate::support::assert_well_formed_svg(&svg);
    assert!(
        svg.contains("<title>encodings (2,068 us"),
        "frames carry titles: {svg}"
    );
    assert!(
        svg.contains("onclick") || svg.contains("zoom"),
        "frames are clickable"
    );

    let speedscope: serde_json::Value =
        serde_json::from_str(&stdout_of(&[log, "--format", "speedscope"])).unwrap();
    assert_eq!(
        speedscope["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    let frames = speedscope["shared"]["frames"].as_array().unwrap();
    let profile = &speedscope["profiles"][0];
    assert_eq!(profile["type"], "sampled");
    assert_eq!(profile["unit"], "microseconds");
    let samples = profile["samples"].as_array().unwrap();
    assert_eq!(samples.len(), profile["weights"].as_array().unwrap().len());
    assert!(
        samples
            .iter()
            .flat_map(|s| s.as_array().unwrap())
            .all(|i| (i.as_u64().unwrap() as usize) < frames.len())
    );

    let snapshot = stdout_of(&[log, "--format", "snapshot", "--first-party", "email"]);
    insta::assert_snapshot!("cli_snapshot_py311_email_first_party", snapshot);
}

#[test]
fn cli_focus_depth_min_ms_session_and_output_file() {
    let log = fixture("py311-sample.log");
    let log = log.to_str().unwrap();
    let focus = stdout_of(&[log, "--focus", "email", "--depth", "1", "--min-ms", "1"]);
    insta::assert_snapshot!("cli_tree_focus_email_depth1_min1ms", focus);

    let sub = fixture("py314-subinterpreters.log");
    let s1 = stdout_of(&[
        sub.to_str().unwrap(),
        "--session",
        "1",
        "--format",
        "collapsed",
    ]);
    assert!(!s1.is_empty());
    let all = stdout_of(&[sub.to_str().unwrap(), "--format", "collapsed"]);
    assert!(
        all.lines().all(|l| l.starts_with("session ")),
        "two sessions are tagged"
    );

    let out = support::xtask()
        .args(["importtime", log, "--session", "7"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    support::redactions().bind(|| insta::assert_snapshot!("no_session_7", stderr));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("graph.svg");
    let out = support::xtask()
        .args([
            "importtime",
            log,
            "--format",
            "svg",
            "-o",
            file.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    crate::support::assert_well_formed_svg(&std::fs::read_to_string(&file).unwrap());
}

#[test]
fn cli_reads_stdin_and_prints_warnings_to_stderr() {
    let out = support::xtask()
        .args(["importtime", "-", "--format", "collapsed"])
        .write_stdin(std::fs::read(fixture("noheader.log")).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    support::redactions().bind(|| insta::assert_snapshot!("stdin_warnings", stderr));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l == "_frozen_importlib_external;_io 215")
    );
}

#[test]
fn cli_not_a_log_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "hello\nthis is not a log\n").unwrap();
    let out = support::xtask()
        .args(["importtime", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // What the file is not, and how to make a log.
    let stderr = String::from_utf8_lossy(&out.stderr);
    support::redactions().bind(|| insta::assert_snapshot!("cli_not_a_log", stderr));
    assert!(out.stdout.is_empty());
}

#[test]
fn cli_runs_a_command_with_importtime() {
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("coldstart_demo_app");
    std::fs::create_dir(&pkg).unwrap();
    std::fs::write(
        pkg.join("__init__.py"),
        "import colorsys\nfrom . import sub\n",
    )
    .unwrap();
    std::fs::write(pkg.join("sub.py"), "X = 1\n").unwrap();
    let code = format!(
        "import sys; sys.path.insert(0, {:?}); import coldstart_demo_app",
        dir.path().to_str().unwrap()
    );
    let py = support::python();
    let out = support::xtask()
        .args([
            "importtime",
            "--format",
            "snapshot",
            "--first-party",
            "coldstart_demo_app",
            "--",
        ])
        .arg(py)
        .args(["-c", &code])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    insta::assert_snapshot!(
        "cli_live_command_snapshot",
        String::from_utf8(out.stdout).unwrap()
    );
}

/// Without `--first-party`, the project's own packages (by the one
/// first-party rule, in the folder the command runs in) are shown in full
/// and a package inside its virtual environment stays third party.
#[test]
fn cli_snapshot_of_a_command_knows_the_project_s_own_package() {
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("coldstart_demo_app");
    std::fs::create_dir(&pkg).unwrap();
    std::fs::write(
        pkg.join("__init__.py"),
        "import coldstart_demo_dep\nfrom . import sub\n",
    )
    .unwrap();
    std::fs::write(pkg.join("sub.py"), "X = 1\n").unwrap();
    let venv = dir.path().join("venv");
    let dep = venv.join("lib").join("coldstart_demo_dep");
    std::fs::create_dir_all(&dep).unwrap();
    std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    std::fs::write(dep.join("__init__.py"), "from . import inner\n").unwrap();
    std::fs::write(dep.join("inner.py"), "").unwrap();
    let code = "import sys; sys.path[:0] = ['', 'venv/lib']; import coldstart_demo_app";
    let out = support::xtask()
        .current_dir(dir.path())
        .args(["importtime", "--format", "snapshot", "--"])
        .arg(support::python())
        .args(["-c", code])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The project's own package in full (its submodule too), the one in
    // the virtual environment third party and folded (no `.inner`).
    let text = String::from_utf8(out.stdout).unwrap();
    support::redactions().bind(|| insta::assert_snapshot!("cli_snapshot_own_package", text));
}
