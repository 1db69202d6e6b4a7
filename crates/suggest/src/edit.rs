//! Line edits on a file's bytes, and the unified diff that shows them.
//!
//! An edit replaces whole lines `[start, end)` (0-based) with new lines.
//! [`apply`] keeps everything the classifier cannot see: the file's newline
//! style (`\n` or `\r\n`), a UTF-8 byte-order mark, and a last line without
//! a newline (an edit that touches it gives it one). [`unified_diff`] writes
//! the hunks straight from the edits, with three lines of context, `a/` and
//! `b/` prefixes and `\ No newline at end of file` where due, so both
//! `git apply` and `patch -p1` take it.

use std::fmt::Write as _;

const BOM: &[u8] = b"\xef\xbb\xbf";
const CONTEXT: usize = 3;

/// Replace lines `[start, end)` (0-based) of a file with `lines` (no line
/// terminators).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LineEdit {
    pub start: usize,
    pub end: usize,
    pub lines: Vec<String>,
}

/// An edit in bytes: old lines `[start, end)` become `new` (each with its
/// terminator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ByteEdit {
    start: usize,
    end: usize,
    new: Vec<Vec<u8>>,
}

/// A file's lines, each with its terminator (the last may have none).
pub(crate) fn split_lines(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        match rest.iter().position(|&b| b == b'\n') {
            Some(i) => {
                out.push(&rest[..=i]);
                rest = &rest[i + 1..];
            }
            None => {
                out.push(rest);
                break;
            }
        }
    }
    out
}

fn strip_terminator(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The edited file and the edits as applied (sorted, merged, in bytes), or
/// what does not fit.
pub(crate) fn apply(
    original: &[u8],
    edits: &[LineEdit],
) -> Result<(Vec<u8>, Vec<ByteEdit>), String> {
    let old = split_lines(original);
    let n = old.len();
    let newline: &[u8] = match old.first() {
        Some(l) if l.ends_with(b"\r\n") => b"\r\n",
        _ => b"\n",
    };
    // An edit that changes nothing makes no hunk.
    let mut sorted: Vec<LineEdit> = edits
        .iter()
        .filter(|e| e.start != e.end || !e.lines.is_empty())
        .cloned()
        .collect();
    sorted.sort_by_key(|e| (e.start, e.end));
    // Adjacent edits become one (an insertion right before a replacement).
    let mut merged: Vec<LineEdit> = Vec::new();
    for e in sorted {
        if e.start > e.end || e.end > n {
            return Err(format!(
                "lines {}..{} of a file of {n} lines",
                e.start + 1,
                e.end + 1
            ));
        }
        match merged.last_mut() {
            Some(last) if e.start < last.end => {
                return Err(format!(
                    "edits overlap at line {} (a classifier bug)",
                    e.start + 1
                ));
            }
            Some(last) if e.start == last.end => {
                last.end = e.end;
                last.lines.extend(e.lines);
            }
            _ => merged.push(e),
        }
    }
    let text_of = |i: usize| -> Result<String, String> {
        let mut line = strip_terminator(old[i]);
        if i == 0 {
            line = line.strip_prefix(BOM).unwrap_or(line);
        }
        String::from_utf8(line.to_vec()).map_err(|_| format!("line {} is not UTF-8", i + 1))
    };
    let has_bom = original.starts_with(BOM);
    let last_open = old.last().is_some_and(|l| !l.ends_with(b"\n"));
    let mut out_edits = Vec::with_capacity(merged.len());
    for mut e in merged {
        // The byte-order mark stays in front of the file.
        if has_bom && e.start == 0 {
            if e.end == 0 {
                e.end = 1;
                e.lines.push(text_of(0)?);
            }
            while e.lines.is_empty() && e.end < n {
                e.lines.push(text_of(e.end)?);
                e.end += 1;
            }
        }
        // Nothing goes after a last line that has no newline: it joins the edit.
        if last_open && e.start == n {
            e.start = n - 1;
            e.lines.insert(0, text_of(n - 1)?);
        }
        let mut new: Vec<Vec<u8>> = e
            .lines
            .iter()
            .map(|l| {
                let mut b = l.as_bytes().to_vec();
                b.extend_from_slice(newline);
                b
            })
            .collect();
        if has_bom
            && e.start == 0
            && let Some(first) = new.first_mut()
        {
            first.splice(0..0, BOM.iter().copied());
        }
        out_edits.push(ByteEdit {
            start: e.start,
            end: e.end,
            new: std::mem::take(&mut new),
        });
    }
    // A BOM edit may now touch the next one.
    let mut fused: Vec<ByteEdit> = Vec::with_capacity(out_edits.len());
    for e in out_edits {
        match fused.last_mut() {
            Some(last) if e.start < last.end => {
                return Err(format!("edits overlap at line {}", e.start + 1));
            }
            Some(last) if e.start == last.end => {
                last.end = e.end;
                last.new.extend(e.new);
            }
            _ => fused.push(e),
        }
    }
    let mut out = Vec::with_capacity(original.len() + 256);
    let mut i = 0;
    for e in &fused {
        for l in &old[i..e.start] {
            out.extend_from_slice(l);
        }
        for l in &e.new {
            out.extend_from_slice(l);
        }
        i = e.end;
    }
    for l in &old[i..] {
        out.extend_from_slice(l);
    }
    Ok((out, fused))
}

/// `start,len` of a hunk side: the 1-based first line, or the line before
/// when the side is empty.
fn range(lo: usize, len: usize) -> String {
    if len == 0 {
        format!("{lo},0")
    } else {
        format!("{},{len}", lo + 1)
    }
}

fn push_line(out: &mut String, prefix: char, line: &[u8]) {
    out.push(prefix);
    out.push_str(&String::from_utf8_lossy(line));
    if !line.ends_with(b"\n") {
        out.push_str("\n\\ No newline at end of file\n");
    }
}

/// The unified diff of `edits` (as [`apply`] returned them) on `original`,
/// for the file at `path` (relative, `/`-separated).
pub(crate) fn unified_diff(path: &str, original: &[u8], edits: &[ByteEdit]) -> String {
    let old = split_lines(original);
    let n = old.len();
    let mut out = String::new();
    if edits.is_empty() {
        return out;
    }
    let _ = writeln!(out, "--- a/{path}");
    let _ = writeln!(out, "+++ b/{path}");
    let mut delta: isize = 0;
    let mut g = 0;
    while g < edits.len() {
        // A group: edits whose context windows touch.
        let mut h = g;
        while h + 1 < edits.len() && edits[h + 1].start - edits[h].end <= 2 * CONTEXT {
            h += 1;
        }
        let group = &edits[g..=h];
        let lo = group[0].start.saturating_sub(CONTEXT);
        let hi = (group[group.len() - 1].end + CONTEXT).min(n);
        let old_len = hi - lo;
        let grow: isize = group
            .iter()
            .map(|e| e.new.len() as isize - (e.end - e.start) as isize)
            .sum();
        let new_len = (old_len as isize + grow) as usize;
        let new_lo = (lo as isize + delta) as usize;
        let _ = writeln!(
            out,
            "@@ -{} +{} @@",
            range(lo, old_len),
            range(new_lo, new_len)
        );
        let mut i = lo;
        for e in group {
            for l in &old[i..e.start] {
                push_line(&mut out, ' ', l);
            }
            for l in &old[e.start..e.end] {
                push_line(&mut out, '-', l);
            }
            for l in &e.new {
                push_line(&mut out, '+', l);
            }
            i = e.end;
        }
        for l in &old[i..hi] {
            push_line(&mut out, ' ', l);
        }
        delta += grow;
        g = h + 1;
    }
    out
}

/// Lines added or removed that hold more than white space: what a reader
/// of the diff has to look at.
pub(crate) fn lines_changed(diff: &str) -> usize {
    diff.lines()
        .filter(|l| !l.starts_with("+++ ") && !l.starts_with("--- "))
        .filter(|l| (l.starts_with('+') || l.starts_with('-')) && !l[1..].trim().is_empty())
        .count()
}

#[cfg(test)]
mod tests;
