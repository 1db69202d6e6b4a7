use super::lex::*;
use super::*;
use crate::importtime::LineClass::{Cached, Entry, Header, Text};
use crate::importtime::tree::{NodeId, NodeKind};

/// `name@depth[flags]` per node in depth-first order, indented.
fn outline(log: &ImportLog) -> String {
    let mut out = String::new();
    for s in log.sessions() {
        out.push_str(&format!("session {} header={:?}\n", s.index, s.header_line));
        for &r in &s.roots {
            for id in log.descendants(r) {
                let n = log.node(id);
                let level = log.chain(id).len() - 1;
                let kind = match n.kind {
                    NodeKind::Entry => format!(" {}/{}", n.self_us, n.cumulative_us),
                    NodeKind::Cached => " cached".into(),
                    NodeKind::CachedAmbiguous => " cached?".into(),
                };
                out.push_str(&format!(
                    "{}{}@{}{kind}\n",
                    "  ".repeat(level),
                    log.name(id),
                    n.depth
                ));
            }
        }
    }
    out
}

fn kinds(log: &ImportLog) -> Vec<String> {
    log.warnings().iter().map(|w| w.to_string()).collect()
}

#[track_caller]
fn check(input: &str, expect: &str) {
    let log = parse(input.as_bytes());
    assert_eq!(
        outline(&log).trim(),
        expect.trim(),
        "\nwarnings: {:#?}",
        kinds(&log)
    );
}

const H: &str = "import time: self [us] | cumulative | imported package\n";

#[test]
fn post_order_rebuilds_children_in_import_order() {
    check(
        &format!(
            "{H}import time:        78 |         78 |     _codecs\nimport time:       411 |        489 |   codecs\nimport time:       592 |        592 |   encodings.aliases\nimport time:       987 |       2066 | encodings\nimport time:       304 |        304 | encodings.utf_8\n"
        ),
        "session 0 header=Some(1)\nencodings@0 987/2066\n  codecs@1 411/489\n    _codecs@2 78/78\n  encodings.aliases@1 592/592\nencodings.utf_8@0 304/304",
    );
}

#[test]
fn python37_shape_without_cumulative_padding_change() {
    // 3.7 prints the same columns; only the header's spelling is shared.
    check(
        "import time: self [us] | cumulative | imported package\nimport time:       100 |        100 |   a.b\nimport time:        50 |        150 | a\n",
        "session 0 header=Some(1)\na@0 50/150\n  a.b@1 100/100",
    );
}

#[test]
fn negative_numbers_parse_and_warn() {
    let log = parse(format!("{H}import time:    -57927 |       1521 | selectors\n").as_bytes());
    assert_eq!(log.node(NodeId(0)).self_us, -57927);
    assert_eq!(kinds(&log), ["line 2: negative self time -57927 us"]);
}

#[test]
fn oversized_numbers_shift_columns() {
    check(
        &format!(
            "{H}import time: 12345678901 | 123456789012 |   big\nimport time:         1 | 123456789013 | top\n"
        ),
        "session 0 header=Some(1)\ntop@0 1/123456789013\n  big@1 12345678901/123456789012",
    );
    let log = parse(format!("{H}import time: 99999999999999999999 |          1 | x\n").as_bytes());
    assert_eq!(log.node(NodeId(0)).self_us, i64::MAX);
    assert!(kinds(&log).iter().any(|k| k.contains("too large")));
}

#[test]
fn crlf_line_ends() {
    let input = format!("{H}import time:         1 |          1 |   b\r\nimport time:         1 |          2 | a\r\n").replace(
        "package\n",
        "package\r\n",
    );
    let log = parse(input.as_bytes());
    assert_eq!(
        outline(&log).trim(),
        "session 0 header=Some(1)\na@0 1/2\n  b@1 1/1"
    );
    assert_eq!(log.line_classes(), [Header, Entry, Entry]);
}

#[test]
fn utf16_le_with_bom() {
    let text = format!("{H}import time:         5 |          5 | json\r\n");
    let mut bytes = vec![0xFF, 0xFE];
    bytes.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
    let log = parse(&bytes);
    assert_eq!(log.encoding(), Encoding::Utf16Le);
    assert_eq!(outline(&log).trim(), "session 0 header=Some(1)\njson@0 5/5");
    assert!(log.warnings().is_empty());
}

#[test]
fn missing_header_keeps_the_first_entry() {
    let log = parse(b"import time:       215 |        215 |   _io\nimport time:       552 |       1305 | _frozen_importlib_external\n");
    assert_eq!(
        outline(&log).trim(),
        "session 0 header=None\n_frozen_importlib_external@0 552/1305\n  _io@1 215/215"
    );
    assert_eq!(
        kinds(&log)[0],
        "line 1: entries before any header (log cut at the top?)"
    );
}

#[test]
fn repeated_headers_split_sessions() {
    let log = parse(format!("{H}import time: 1 | 1 | a\n{H}import time: 2 | 2 | b\n").as_bytes());
    assert_eq!(
        outline(&log).trim(),
        "session 0 header=Some(1)\na@0 1/1\nsession 1 header=Some(3)\nb@0 2/2"
    );
    assert_eq!(log.sessions()[0].last_line, 2);
    assert_eq!(log.session_of(NodeId(1)), 1);
}

#[test]
fn truncated_last_line_is_kept_and_flagged() {
    let log = parse(
        format!("{H}import time:         1 |          1 | a\nimport time:      12").as_bytes(),
    );
    assert_eq!(log.line_classes(), [Header, Entry, Text]);
    let k = kinds(&log);
    assert!(
        k.contains(
            &"line 3: no newline at the end of the input; the last line may be cut".to_owned()
        ),
        "{k:?}"
    );
}

#[test]
fn orphans_become_roots_with_a_warning() {
    let log =
        parse(format!("{H}import time: 1 | 1 |     deep\nimport time: 1 | 2 |   mid\n").as_bytes());
    assert_eq!(
        outline(&log).trim(),
        "session 0 header=Some(1)\nmid@1 1/2\n  deep@2 1/1"
    );
    assert_eq!(
        kinds(&log),
        ["line 3: orphan: mid at depth 1 has no parent line; kept as a root"]
    );
    let log =
        parse(format!("{H}import time: 1 | 1 |     deep\nimport time: 1 | 2 | top\n").as_bytes());
    assert_eq!(
        outline(&log).trim(),
        "session 0 header=Some(1)\ntop@0 1/2\n  deep@2 1/1"
    );
    assert_eq!(
        kinds(&log),
        ["line 2: depth jump: deep at depth 2 adopted by a parent at depth 0"]
    );
}

#[test]
fn program_output_and_lookalikes_are_text() {
    let input = format!(
        "INFO start\n{H}import time: 1 | 1 | a\nWARNING x | y | z\nimport time: this line is printed by the program, not by python\nimport time: 1 | 2 | b\n\n"
    );
    let log = parse(input.as_bytes());
    assert_eq!(
        log.line_classes(),
        [Text, Header, Entry, Text, Text, Entry, Text]
    );
    assert_eq!(log.text_lines().len(), 4);
    assert_eq!(log.text_of(&log.text_lines()[0]), "INFO start");
    assert_eq!(
        kinds(&log),
        ["line 5: begins with `import time:` but is not an entry; kept as text"]
    );
    assert_eq!(
        outline(&log).trim(),
        "session 0 header=Some(2)\na@0 1/1\nb@0 1/2"
    );
}

#[test]
fn cached_lines_with_known_and_ambiguous_depth() {
    // `sys` at level 2: "%*s" of width 4 pads it with one space.
    // `_io` at level 0 or 1: no padding, ambiguous unless bounded.
    let input = format!(
        "{H}import time: cached    | cached     | _io\nimport time: cached    | cached     |  sys\nimport time:         1 |          1 |   b\nimport time:         2 |          3 | a\n"
    );
    let log = parse(input.as_bytes());
    assert_eq!(log.line_classes(), [Header, Cached, Cached, Entry, Entry]);
    assert_eq!(
        outline(&log).trim(),
        "session 0 header=Some(1)\na@0 2/3\n  _io@1 cached?\n  b@1 1/1\n    sys@2 cached"
    );
}

#[test]
fn arbitrary_spacing_and_odd_indent() {
    let log = parse(format!("{H}import time: 1 | 1 |    odd\n").as_bytes());
    assert_eq!(log.node(NodeId(0)).depth, 1);
    assert!(
        kinds(&log)
            .iter()
            .any(|k| k.contains("odd indentation of 3"))
    );
}

#[test]
fn shared_bytes_parse_like_owned_ones() {
    let text = format!("{H}import time: 1 | 1 |   b\nimport time: 1 | 2 | a\n");
    let shared = parse_shared(std::sync::Arc::new(text.clone().into_bytes()));
    assert_eq!(outline(&shared), outline(&parse(text.as_bytes())));
    assert_eq!(shared.text(), text);
    // UTF-16 input cannot be shared as it is: it is decoded into a copy.
    let mut utf16 = vec![0xFF, 0xFE];
    utf16.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
    let decoded = parse_shared(std::sync::Arc::new(utf16));
    assert_eq!(decoded.encoding(), Encoding::Utf16Le);
    assert_eq!(outline(&decoded), outline(&shared));
}

#[test]
fn not_a_log() {
    let log = parse(b"hello\nworld\n");
    assert!(!log.is_importtime());
    assert_eq!(log.line_count(), 2);
    assert!(parse(b"").line_classes().is_empty());
}

/// Everything a log holds, as text, for comparing two parses.
fn digest(log: &ImportLog) -> String {
    let texts: Vec<(u32, &str)> = log
        .text_lines()
        .iter()
        .map(|t| (t.line, log.text_of(t)))
        .collect();
    format!(
        "{:?}\n{}{:?}\n{:?}\n{:?}",
        log.line_classes(),
        outline(log),
        kinds(log),
        texts,
        log.sessions()
    )
}

fn general_only(text: &str) -> ImportLog {
    let text = crate::importtime::tree::Text::Owned(text.to_owned());
    build(text, Encoding::Utf8, false, false, false).expect("UTF-8 text")
}

#[test]
fn invalid_utf8_in_one_line_decodes_the_whole_input_lossily() {
    for bad in [
        &b"import time:         1 |          1 | na\xFFme\n"[..],
        b"text \xC3 line\n",
        b"import time: self [us] | cumulative | imported package \xFF\n",
    ] {
        let mut input = format!("{H}import time:         2 |          2 | ok\n").into_bytes();
        input.extend_from_slice(bad);
        let shared = parse_shared(std::sync::Arc::new(input.clone()));
        assert_eq!(digest(&shared), digest(&parse_decoded(input.clone())));
        assert!(shared.warnings()[0].to_string().contains("not valid UTF-8"));
        assert!(shared.text().contains('\u{FFFD}'));
        assert_eq!(digest(&parse(&input)), digest(&shared));
    }
}

#[test]
fn non_ascii_and_odd_names_take_the_general_path() {
    let input = format!(
        "{H}import time:         1 |          1 |   données\nimport time:         1 |          1 |   a\x0bb\r\nimport time:         3 |          5 | top \t\n"
    );
    let log = parse(input.as_bytes());
    assert_eq!(
        outline(&log).trim(),
        "session 0 header=Some(1)\ntop@0 3/5\n  données@1 1/1\n  a\x0bb@1 1/1"
    );
    assert_eq!(digest(&log), digest(&general_only(&input)));
}

#[test]
fn right_aligned_reads_columns_like_the_byte_loop() {
    let mut cases: Vec<String> = Vec::new();
    for width in [9usize, 10] {
        for v in [
            0i64, 7, -7, 42, 999, -57927, 1234567, 12345678, -1234567, 123456789,
        ] {
            cases.push(format!("{v:>width$}"));
        }
    }
    cases.extend(
        [
            " 12 34 567",
            "      -  5",
            "     --5",
            "   5-",
            "    +12",
            "         ",
            "        -",
        ]
        .map(str::to_owned),
    );
    cases.extend(["  1\u{e9}9", "\u{ff}9999999", "    \u{ba}9"].map(str::to_owned));
    for c in &cases {
        let b = c.as_bytes();
        assert_eq!(right_aligned(b), right_aligned_slow(b), "{c:?}");
    }
    assert_eq!(right_aligned(b"    -57927"), Some(-57927));
    assert_eq!(right_aligned(b"  12345678"), Some(12345678));
}

#[test]
fn plain_len_stops_at_the_first_byte_outside_printable_ascii() {
    let naive = |b: &[u8]| b.iter().take_while(|c| (0x21..0x7F).contains(*c)).count();
    let mut bytes: Vec<u8> = b"torch._C._nn.functional_utils_with_a_long_tail".to_vec();
    for stop in [
        b' ', b'\t', b'\n', b'\r', 0x00, 0x20, 0x7F, 0x80, 0xC3, 0xFF,
    ] {
        for at in 0..bytes.len() {
            let keep = bytes[at];
            bytes[at] = stop;
            assert_eq!(plain_len(&bytes), naive(&bytes), "{stop:#x} at {at}");
            bytes[at] = keep;
        }
    }
    assert_eq!(plain_len(&bytes), bytes.len());
    assert_eq!(plain_len(b""), 0);
}

mod paths {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
    fn prop_right_aligned_matches_the_byte_loop(field in "[ 0-9-]{8,10}|[ 0-9\\-\\x80-\\xff]{8,10}") {
        let b = field.as_bytes();
        // The fast reading may decline (None) where a carry flagged a
        // digit next to a non-ASCII byte; it never reads a different number.
        let fast = right_aligned(b);
        prop_assert!(fast.is_none() || fast == right_aligned_slow(b), "{:?}", field);
        if field.is_ascii() {
            prop_assert_eq!(fast, right_aligned_slow(b));
        }
    }

    /// The fast path and the general path read every line alike.
        #[test]
        fn prop_fast_and_general_paths_agree(
            lines in prop::collection::vec(
                prop_oneof![
                    Just(H.trim_end().to_owned()),
                    (0usize..30, "[a-z._]{1,12}|[a-z]{1,3}[\\t \\x0b\\x7f\\u{e9}][a-z]{0,3}", -99_999i64..9_999_999_999, -99i64..99_999_999_999)
                        .prop_map(|(d, n, s, c)| format!("import time: {s:>9} | {c:>10} | {}{n}", " ".repeat(d))),
                    (0usize..30, "[a-z._]{1,12}")
                        .prop_map(|(w, n)| format!("import time: cached    | cached     | {n:>w$}")),
                    (0usize..12, "[a-z._ ]{0,8}", "[ |0-9a-z-]{0,40}")
                        .prop_map(|(d, n, junk)| format!("import time: {junk}{}{n}", " ".repeat(d))),
                    "[ -~]{0,50}",
                ],
                0..40,
            ),
            crlf in any::<bool>(),
            trailing in any::<bool>(),
        ) {
            let sep = if crlf { "\r\n" } else { "\n" };
            let mut text = lines.join(sep);
            if trailing && !lines.is_empty() {
                text.push_str(sep);
            }
            prop_assert_eq!(digest(&parse(text.as_bytes())), digest(&general_only(&text)));
        }
    }
}

/// Shared bytes that record what the parser says it has read past.
struct Recording {
    bytes: Vec<u8>,
    past: std::sync::Mutex<Vec<std::ops::Range<usize>>>,
}

impl crate::importtime::LogBytes for Recording {
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn read_past(&self, range: std::ops::Range<usize>) {
        self.past.lock().unwrap().push(range);
    }
}

/// A log of several times the release step: the parser gives the bytes
/// back in order, each part once, all of them by the end, and the log is
/// the one the owned bytes give.
#[test]
fn shared_bytes_are_given_back_in_order_as_the_scan_leaves_them() {
    let mut text = String::from(H);
    let mut i = 0;
    while text.len() < 10 << 20 {
        let name = format!("pkg{}.mod{i}", i % 7);
        text.push_str(&format!(
            "import time:      {:>4} | {:>10} |   {name}\nimport time: cached    | cached     |   {name}\n",
            i % 997,
            i % 997
        ));
        text.push_str(&format!(
            "import time:         1 | {:>10} | pkg{}\n",
            i % 997 + 1,
            i % 7
        ));
        i += 1;
    }
    let source = Arc::new(Recording {
        bytes: text.clone().into_bytes(),
        past: Default::default(),
    });
    let log = parse_shared(source.clone());
    let past = source.past.lock().unwrap().clone();
    assert!(past.len() >= 3, "{past:?}");
    assert_eq!(past[0].start, 0);
    assert_eq!(past.last().unwrap().end, text.len());
    assert!(
        past.windows(2)
            .all(|w| w[0].end == w[1].start && w[0].start < w[0].end)
    );
    assert_eq!(outline(&log), outline(&parse(text.as_bytes())));
    assert_eq!(
        log.package_totals(None),
        parse(text.as_bytes()).package_totals(None)
    );
}

/// A name too long to pack into its node (16 MiB) is kept whole, beside
/// short ones, and the node stays one 32-byte slot of the arena.
#[test]
fn a_name_too_long_to_pack_is_kept_whole() {
    let long = "m".repeat(1 << 24);
    let text = format!(
        "{H}import time: 1 | 1 |   a.b\nimport time: 2 | 4 | {long}\nimport time: 3 | 3 | c\n"
    );
    let log = parse(text.as_bytes());
    assert_eq!(log.name(NodeId(0)), "a.b");
    assert_eq!(log.name(NodeId(1)), long);
    assert_eq!(log.name(NodeId(2)), "c");
    assert_eq!(log.children(NodeId(1)).collect::<Vec<_>>(), [NodeId(0)]);
    assert_eq!(std::mem::size_of::<crate::importtime::tree::Slot>(), 32);
}

/// Times that do not fit a slot's 32 bits (and the one 32-bit value a slot
/// keeps as its mark) are read back exactly, in the nodes, the warnings and
/// the totals; an arena slot is 32 bytes.
#[test]
fn times_too_wide_for_a_slot_are_kept_whole() {
    let text = format!(
        "{H}import time: -2147483648 | 3000000000 |   a.x\n\
         import time: 2147483647 | -2147483647 |   a.y\n\
         import time: 1 | 9000000000 | a\n\
         import time: 7 | 7 | b\n"
    );
    let log = parse(text.as_bytes());
    let times: Vec<(i64, i64)> = log
        .nodes()
        .iter()
        .map(|n| (n.self_us, n.cumulative_us))
        .collect();
    assert_eq!(
        times,
        [
            (-2_147_483_648, 3_000_000_000),
            (2_147_483_647, -2_147_483_647),
            (1, 9_000_000_000),
            (7, 7)
        ]
    );
    let totals = log.package_totals(None);
    assert_eq!(
        (
            totals[0].package.as_str(),
            totals[0].self_us,
            totals[0].cumulative_us
        ),
        ("a", 0, 9_000_000_000)
    );
    let wide = log.nodes().iter().map(|n| n.self_us).sum::<i64>();
    assert_eq!(wide, 7);
    assert_eq!(std::mem::size_of::<crate::importtime::tree::Slot>(), 32);
}

/// More distinct packages than a slot's package field holds: the totals
/// still count each one, and a package's modules stay together.
#[test]
fn packages_beyond_a_slots_field_are_counted() {
    let mut text = H.to_owned();
    for i in 0..20_000 {
        text.push_str(&format!(
            "import time: 1 | 1 |   p{i}.sub\nimport time: 2 | 3 | p{i}\n"
        ));
    }
    let log = parse(text.as_bytes());
    let totals = log.package_totals(None);
    assert_eq!(totals.len(), 20_000);
    assert!(
        totals
            .iter()
            .all(|t| (t.modules, t.self_us, t.cumulative_us) == (2, 3, 3))
    );
    let last = log.nodes().len() as u32 - 1;
    assert_eq!(log.name(NodeId(last)), "p19999");
    assert_eq!(
        log.children(NodeId(last)).collect::<Vec<_>>(),
        [NodeId(last - 1)]
    );
}

/// Logs read on several threads: each part is built on its own and the
/// parts joined, which must give the log one scan of the whole gives.
mod threads {
    use super::*;
    use crate::importtime::tree::Text;
    use proptest::prelude::*;

    /// Everything a parse holds: the digest, the nodes as the arena packs
    /// them (names, packages, lines), the warnings and the totals.
    fn whole(log: &ImportLog) -> String {
        let names: Vec<&str> = (0..log.nodes().len() as u32)
            .map(|i| log.name(NodeId(i)))
            .collect();
        format!(
            "{}\n{:?}\n{names:?}\n{:?}\n{:?}",
            digest(log),
            log.nodes().iter().collect::<Vec<_>>(),
            log.warnings(),
            log.package_totals(None)
        )
    }

    /// `bytes` parsed as UTF-8 it may not be, on `threads` threads of parts
    /// of at least `min_part` bytes; `None` when a line is not UTF-8.
    fn on(bytes: &[u8], threads: usize, min_part: usize) -> Option<ImportLog> {
        let text = Text::Shared(Arc::new(bytes.to_vec()));
        build_in(text, Encoding::Utf8, false, true, true, threads, min_part)
    }

    fn agree(bytes: &[u8], what: &str) {
        let one = on(bytes, 1, 1).map(|log| whole(&log));
        for threads in 2..=5 {
            for min_part in [1, 7, 64, 1000] {
                let many = on(bytes, threads, min_part).map(|log| whole(&log));
                assert_eq!(
                    one, many,
                    "{what}: {threads} threads, parts of at least {min_part} bytes"
                );
            }
        }
    }

    #[test]
    fn the_recorded_logs_read_on_several_threads_as_on_one() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/importtime");
        let mut read = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "log") {
                agree(&std::fs::read(&path).unwrap(), &path.display().to_string());
                read += 1;
            }
        }
        assert!(read >= 10, "{read} logs in {}", dir.display());
    }

    /// What the arena keeps beside its slots, met in a later part: names
    /// too long to pack, times too wide for a slot, more packages than a
    /// slot's field numbers, orphans, ambiguous cached lines, a last line
    /// without its line end; each part's numbering moved into the whole.
    #[test]
    fn what_a_slot_cannot_hold_is_joined_from_every_part() {
        let long = "m".repeat(1 << 17);
        let mut text = String::from("before any header\nimport time: 5 | 5 | early\n");
        for s in 0..6 {
            text.push_str(H);
            for i in 0..4_000 {
                text.push_str(&format!(
                    "import time: 1 | 1 |   p{}.sub\nimport time: 2 | 3 | p{}\n",
                    s * 4_000 + i,
                    s * 4_000 + i
                ));
            }
            text.push_str(&format!(
                "import time: -2147483648 | 3000000000 |   a.{long}\n\
                 import time: cached    | cached     | b\n\
                 import time: 1 | 9000000000 | a\n\
                 import time: 1 | 1 |     orphan{s}\n\
                 some program output\n"
            ));
        }
        text.push_str("import time: 1 | 2 | unterminated");
        let log = on(text.as_bytes(), 1, 1).unwrap();
        assert_eq!(log.sessions().len(), 7);
        // p0..p23999, then early, a, orphan0..orphan5 and unterminated.
        assert_eq!(log.package_totals(None).len(), 24_000 + 9);
        for threads in [2, 3, 6] {
            for min_part in [1, 1 << 16, 1 << 20] {
                let many = on(text.as_bytes(), threads, min_part).unwrap();
                assert_eq!(whole(&log), whole(&many), "{threads} threads, {min_part}");
            }
        }
    }

    /// A line that is not UTF-8 in any part sends the whole input to the
    /// lossy decoder, as it does on one thread.
    #[test]
    fn a_bad_line_in_a_later_part_fails_the_whole_read() {
        let mut text = Vec::new();
        for s in 0..4 {
            text.extend_from_slice(H.as_bytes());
            text.extend_from_slice(format!("import time: 1 | 1 | m{s}\n").as_bytes());
        }
        text.extend_from_slice(b"import time: 1 | 1 | bad\xFF\n");
        assert!(on(&text, 1, 1).is_none());
        assert!(on(&text, 4, 1).is_none());
        assert_eq!(digest(&parse(&text)), digest(&parse_decoded(text.clone())),);
    }

    /// Each part gives its bytes back once: the ranges, in whatever order
    /// the threads finish, tile the input without overlap.
    #[test]
    fn shared_bytes_are_each_given_back_once_on_several_threads() {
        let mut text = String::new();
        let mut i = 0;
        while text.len() < 9 << 20 {
            if i % 5_000 == 0 {
                text.push_str(H);
            }
            text.push_str(&format!(
                "import time: {:>9} | {:>10} | m{i}\n",
                i % 97,
                i % 97
            ));
            i += 1;
        }
        let source = Arc::new(Recording {
            bytes: text.clone().into_bytes(),
            past: Default::default(),
        });
        let shared: crate::importtime::tree::SharedBytes = source.clone();
        let log = build_in(
            Text::Shared(shared),
            Encoding::Utf8,
            false,
            true,
            true,
            4,
            1 << 20,
        )
        .unwrap();
        let mut past = source.past.lock().unwrap().clone();
        past.sort_by_key(|r| r.start);
        assert!(past.len() >= 4, "{past:?}");
        assert_eq!(past[0].start, 0);
        assert_eq!(past.last().unwrap().end, text.len());
        assert!(past.windows(2).all(|w| w[0].end == w[1].start), "{past:?}");
        assert!(past.iter().all(|r| r.start < r.end), "{past:?}");
        assert_eq!(whole(&log), whole(&parse(text.as_bytes())));
    }

    proptest! {
        /// Logs of several sessions of any lines the paths know, cut
        /// anywhere a header begins, read as one scan reads them.
        #[test]
        fn prop_parts_join_as_one_scan(
            sessions in prop::collection::vec(
                (any::<bool>(), prop::collection::vec(
                    prop_oneof![
                        (0usize..8, "[a-z]{1,3}(\\.[a-z]{1,3}){0,2}", -99_999i64..9_999_999_999, -9i64..99_999_999_999)
                            .prop_map(|(d, n, s, c)| format!("import time: {s:>9} | {c:>10} | {}{n}", " ".repeat(d))),
                        (0usize..16, "[a-z.]{1,6}")
                            .prop_map(|(w, n)| format!("import time: cached    | cached     | {n:>w$}")),
                        "import time: self \\[us\\][ -~]{0,10}",
                        "import time:[ |0-9a-z-]{0,20}",
                        "[ -~]{0,30}",
                    ],
                    0..30,
                )),
                1..8,
            ),
            crlf in any::<bool>(),
            trailing in any::<bool>(),
            bad in any::<bool>(),
            threads in 2usize..6,
            min_part in 1usize..200,
        ) {
            let sep = if crlf { "\r\n" } else { "\n" };
            let mut lines = Vec::new();
            for (header, body) in &sessions {
                if *header {
                    lines.push(H.trim_end().to_owned());
                }
                lines.extend(body.iter().cloned());
            }
            let mut text = lines.join(sep).into_bytes();
            if trailing && !lines.is_empty() {
                text.extend_from_slice(sep.as_bytes());
            }
            if bad {
                let at = text.len() / 2;
                text.insert(at, 0xFF);
            }
            let one = on(&text, 1, 1).map(|log| whole(&log));
            let many = on(&text, threads, min_part).map(|log| whole(&log));
            prop_assert_eq!(one, many);
        }
    }
}
