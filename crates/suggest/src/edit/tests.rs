use super::*;

use std::process::Command;

use proptest::prelude::*;

fn e(start: usize, end: usize, lines: &[&str]) -> LineEdit {
    LineEdit {
        start,
        end,
        lines: lines.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// Applies `diff` to `original` with `git apply` and with `patch -p1` in a
/// scratch folder; both must give `expected`.
fn both_tools_agree(original: &[u8], diff: &str, expected: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pkg").join("mod.py");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let patch = dir.path().join("cut.diff");
    std::fs::write(&patch, diff).unwrap();
    for tool in ["git", "patch"] {
        std::fs::write(&file, original).unwrap();
        let out = match tool {
            "git" => Command::new("git")
                .args(["apply", "--whitespace=nowarn"])
                .arg(&patch)
                .current_dir(dir.path())
                .output()
                .unwrap(),
            _ => Command::new("patch")
                .args(["-p1", "--quiet", "--no-backup-if-mismatch", "-i"])
                .arg(&patch)
                .current_dir(dir.path())
                .output()
                .unwrap(),
        };
        assert!(
            out.status.success(),
            "{tool} refused the diff:\n{diff}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let got = std::fs::read(&file).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(expected),
            "{tool} gave another file from:\n{diff}"
        );
    }
}

fn check(original: &[u8], edits: &[LineEdit]) -> (Vec<u8>, String) {
    let (patched, applied) = apply(original, edits).unwrap();
    let diff = unified_diff("pkg/mod.py", original, &applied);
    both_tools_agree(original, &diff, &patched);
    (patched, diff)
}

#[test]
fn lines_keep_their_terminators() {
    assert_eq!(split_lines(b""), Vec::<&[u8]>::new());
    assert_eq!(split_lines(b"a\nb"), vec![&b"a\n"[..], &b"b"[..]]);
    assert_eq!(split_lines(b"a\r\n\n"), vec![&b"a\r\n"[..], &b"\n"[..]]);
}

const TEN: &[u8] = b"l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n";

/// Each shape of edit, as a diff both tools take and as text to review.
#[test]
fn each_shape_of_edit_makes_a_diff_that_git_and_patch_take() {
    let cases: Vec<(&str, &[u8], Vec<LineEdit>)> = vec![
        ("insert_in_the_middle", TEN, vec![e(4, 4, &["new"])]),
        ("remove_a_line", TEN, vec![e(2, 3, &[])]),
        ("insert_at_the_start", TEN, vec![e(0, 0, &["first"])]),
        ("append_at_the_end", TEN, vec![e(10, 10, &["", "last"])]),
        (
            "append_after_a_last_line_without_newline",
            b"a\nb",
            vec![e(2, 2, &["c"])],
        ),
        (
            "replace_a_last_line_without_newline",
            b"a\nb",
            vec![e(1, 2, &["B"])],
        ),
        (
            "remove_a_last_line_without_newline",
            b"a\nb",
            vec![e(1, 2, &[])],
        ),
        (
            "context_of_a_last_line_without_newline",
            b"a\nb\nc",
            vec![e(0, 1, &["A"])],
        ),
        (
            "far_apart_edits_make_two_hunks",
            TEN,
            vec![e(0, 1, &[]), e(9, 9, &["x"])],
        ),
        (
            "close_edits_share_a_hunk",
            TEN,
            vec![e(1, 2, &[]), e(6, 6, &["x"])],
        ),
        (
            "an_insertion_right_before_a_removal_is_one_edit",
            TEN,
            vec![
                e(3, 4, &[]),
                e(3, 3, &["from __future__ import annotations"]),
            ],
        ),
        (
            "crlf_files_stay_crlf",
            b"a\r\nb\r\nc\r\n",
            vec![e(1, 1, &["x"])],
        ),
        (
            "a_bom_stays_first",
            b"\xef\xbb\xbfa\nb\n",
            vec![e(0, 0, &["x"])],
        ),
        (
            "a_bom_stays_when_line_one_goes",
            b"\xef\xbb\xbfa\nb\n",
            vec![e(0, 1, &[])],
        ),
        ("remove_everything", b"a\nb\n", vec![e(0, 2, &[])]),
    ];
    let mut all = String::new();
    for (name, original, edits) in cases {
        let (patched, diff) = check(original, &edits);
        all.push_str(&format!("## {name}\n{diff}"));
        if name.starts_with("crlf") {
            assert_eq!(patched, b"a\r\nx\r\nb\r\nc\r\n");
        }
        if name.starts_with("a_bom") {
            assert!(patched.starts_with(BOM), "{name}: {patched:?}");
            assert_eq!(patched.windows(3).filter(|w| *w == BOM).count(), 1);
        }
    }
    insta::assert_snapshot!(all);
}

#[test]
fn edits_that_do_not_fit_are_refused() {
    assert!(
        apply(b"a\n", &[e(0, 2, &[])])
            .unwrap_err()
            .contains("1 lines")
    );
    assert!(
        apply(TEN, &[e(0, 3, &[]), e(2, 4, &[])])
            .unwrap_err()
            .contains("overlap")
    );
}

#[test]
fn only_non_blank_changed_lines_count() {
    let diff = "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+\n+c\n";
    assert_eq!(lines_changed(diff), 2);
}

fn file_strategy() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec("[a-z ]{0,6}", 0..14),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(lines, crlf, open_end)| {
            let nl = if crlf { "\r\n" } else { "\n" };
            let mut s = lines.join(nl);
            if !lines.is_empty() && !open_end {
                s.push_str(nl);
            }
            s.into_bytes()
        })
}

fn edits_strategy(n: usize) -> impl Strategy<Value = Vec<LineEdit>> {
    prop::collection::vec(
        (0..=n, 0..=2usize, prop::collection::vec("[A-Z]{1,4}", 0..3)),
        0..4,
    )
    .prop_map(move |raw| {
        let mut out: Vec<LineEdit> = Vec::new();
        let mut last_end = 0;
        let mut raw = raw;
        raw.sort_by_key(|r| r.0);
        for (start, len, lines) in raw {
            let start = start.max(last_end);
            if start > n {
                break;
            }
            let end = (start + len).min(n);
            if out
                .last()
                .is_some_and(|l: &LineEdit| l.end == start && start == end)
            {
                continue;
            }
            out.push(LineEdit { start, end, lines });
            last_end = end + 1;
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Whatever the edits, the diff takes the original to the patched file
    /// with git and with patch.
    #[test]
    fn any_edit_round_trips_through_git_apply_and_patch(
        (original, edits) in file_strategy().prop_flat_map(|f| {
            let n = split_lines(&f).len();
            (Just(f), edits_strategy(n))
        })
    ) {
        let (patched, applied) = apply(&original, &edits).unwrap();
        let diff = unified_diff("pkg/mod.py", &original, &applied);
        prop_assert_eq!(diff.is_empty(), applied.is_empty());
        if !diff.is_empty() {
            both_tools_agree(&original, &diff, &patched);
        }
    }
}
