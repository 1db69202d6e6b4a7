//! The byte-level parser: decoding, line classification and the post-order
//! tree rebuild, in one pass over the input.
//!
//! UTF-8 input is not validated up front: each line is checked as the scan
//! reaches it (an entry's numbers and columns are ASCII by construction, so
//! only its name is looked at), and a line that is not UTF-8 sends the whole
//! input to the lossy decoder. Lines printed exactly as CPython prints them
//! take a fixed-column fast path; anything else takes the general one.

use std::sync::Arc;

use super::tree::{
    Encoding, ImportLog, LineClass, NONE, Node, NodeId, NodeKind, Session, SharedBytes, Text,
    TextLine,
};
use super::{Warning, WarningKind};

const PREFIX: &[u8] = b"import time:";

/// What CPython prints before a cached line's name (`-X importtime=2`).
const CACHED_COLUMNS: &[u8; 38] = b"import time: cached    | cached     | ";

/// Parse raw stderr bytes (copies them once; see [`parse_owned`] to avoid
/// the copy).
pub fn parse(bytes: &[u8]) -> ImportLog {
    parse_owned(bytes.to_vec())
}

/// Parse raw stderr bytes, taking ownership of the buffer (no copy for
/// valid UTF-8 input).
pub fn parse_owned(bytes: Vec<u8>) -> ImportLog {
    if !plain_utf8_candidate(&bytes) {
        return parse_decoded(bytes);
    }
    let typed = Arc::new(bytes);
    if let Some(log) = build_checked(Text::Shared(typed.clone())) {
        return log;
    }
    // Not UTF-8: the builder's clone is gone, so this takes the buffer back.
    parse_decoded(Arc::try_unwrap(typed).unwrap_or_else(|shared| (*shared).clone()))
}

/// Parse shared bytes (for example a file mapped in memory) without
/// copying them when they are UTF-8 already; other encodings are decoded
/// into an owned copy.
pub fn parse_shared(bytes: SharedBytes) -> ImportLog {
    let raw = (*bytes).as_ref();
    if plain_utf8_candidate(raw)
        && let Some(log) = build_checked(Text::Shared(bytes.clone()))
    {
        return log;
    }
    parse_decoded((*bytes).as_ref().to_vec())
}

/// Input that may be read as it is: no BOM and no sign of UTF-16.
fn plain_utf8_candidate(raw: &[u8]) -> bool {
    !raw.starts_with(&[0xFF, 0xFE])
        && !raw.starts_with(&[0xFE, 0xFF])
        && !raw.starts_with(&[0xEF, 0xBB, 0xBF])
        && !looks_utf16le(raw)
}

/// Decode to UTF-8 first (BOMs, UTF-16, invalid bytes replaced), then parse.
fn parse_decoded(bytes: Vec<u8>) -> ImportLog {
    let (text, encoding, invalid) = decode(bytes);
    build(Text::Owned(text), encoding, invalid, false, true).expect("decoded text is UTF-8")
}

/// Parse bytes not yet known to be UTF-8, checking each line as it is
/// scanned; `None` when a line is not UTF-8.
fn build_checked(text: Text) -> Option<ImportLog> {
    build(text, Encoding::Utf8, false, true, true)
}

/// `fast: false` sends every line through the general path (for the tests
/// that hold both paths to the same result).
fn build(
    text: Text,
    encoding: Encoding,
    invalid: bool,
    check_utf8: bool,
    fast: bool,
) -> Option<ImportLog> {
    let mut b = Builder::new(text.bytes(), check_utf8);
    b.fast = fast;
    if invalid {
        b.warnings.push(Warning {
            line: None,
            kind: WarningKind::InvalidEncoding,
        });
    }
    b.run();
    let Builder {
        classes,
        nodes,
        texts,
        sessions,
        mut warnings,
        ambiguous,
        not_utf8,
        ..
    } = b;
    if not_utf8 {
        return None;
    }
    if ambiguous > 0 {
        warnings.push(Warning {
            line: None,
            kind: WarningKind::AmbiguousCachedDepth { count: ambiguous },
        });
    }
    // Stable: input-wide warnings first, then line order, emission order within a line.
    warnings.sort_by_key(|w| w.line.map_or(0, u64::from));
    Some(ImportLog {
        text,
        encoding,
        classes,
        nodes,
        texts,
        sessions,
        warnings,
    })
}

/// UTF-16 LE without a BOM: ASCII text with a zero after every byte.
fn looks_utf16le(b: &[u8]) -> bool {
    b.len() >= 4 && b[0] != 0 && b[1] == 0 && b[2] != 0 && b[3] == 0
}

/// Decode the input to UTF-8: a UTF-16 BOM (or the zero bytes of UTF-16 LE
/// text) selects UTF-16; a UTF-8 BOM is dropped; invalid sequences are
/// replaced and reported.
fn decode(mut bytes: Vec<u8>) -> (String, Encoding, bool) {
    if bytes.starts_with(&[0xFF, 0xFE]) {
        let (s, bad) = decode_utf16(&bytes[2..], u16::from_le_bytes);
        return (s, Encoding::Utf16Le, bad);
    }
    if bytes.starts_with(&[0xFE, 0xFF]) {
        let (s, bad) = decode_utf16(&bytes[2..], u16::from_be_bytes);
        return (s, Encoding::Utf16Be, bad);
    }
    if looks_utf16le(&bytes) {
        let (s, bad) = decode_utf16(&bytes, u16::from_le_bytes);
        return (s, Encoding::Utf16Le, bad);
    }
    if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        bytes.drain(..3);
    }
    match String::from_utf8(bytes) {
        Ok(s) => (s, Encoding::Utf8, false),
        Err(e) => (
            String::from_utf8_lossy(e.as_bytes()).into_owned(),
            Encoding::Utf8,
            true,
        ),
    }
}

fn decode_utf16(bytes: &[u8], unit: fn([u8; 2]) -> u16) -> (String, bool) {
    let mut bad = !bytes.len().is_multiple_of(2);
    let units = bytes.chunks_exact(2).map(|c| unit([c[0], c[1]]));
    let mut out = String::with_capacity(bytes.len() / 2);
    for r in char::decode_utf16(units) {
        match r {
            Ok(c) => out.push(c),
            Err(_) => {
                bad = true;
                out.push(char::REPLACEMENT_CHARACTER);
            }
        }
    }
    (out, bad)
}

/// What one line turned out to be.
enum Parsed {
    Header,
    Entry {
        self_us: i64,
        cum_us: i64,
        spaces: usize,
        name: (usize, usize),
        overflow: bool,
    },
    Cached {
        spaces: usize,
        name: (usize, usize),
    },
    NotAnEntry,
}

#[inline]
fn skip_spaces(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i] == b' ' {
        i += 1;
    }
    i
}

/// A signed decimal at `b[i..]`: (value, end, overflowed).
#[inline]
fn number(b: &[u8], mut i: usize) -> Option<(i64, usize, bool)> {
    let neg = i < b.len() && b[i] == b'-';
    if neg {
        i += 1;
    }
    let start = i;
    let mut v: i64 = 0;
    let mut overflow = false;
    while i < b.len() && b[i].is_ascii_digit() {
        let d = i64::from(b[i] - b'0');
        match v.checked_mul(10).and_then(|x| x.checked_add(d)) {
            Some(x) => v = x,
            None => {
                overflow = true;
                v = i64::MAX;
            }
        }
        i += 1;
    }
    if i == start {
        return None;
    }
    Some((if neg { -v } else { v }, i, overflow))
}

/// After the second `|`: one space, the indentation, then a module name
/// (no inner whitespace). Returns (spaces, (start, len)) relative to `b`.
#[inline]
fn indented_name(b: &[u8], i: usize) -> Option<(usize, (usize, usize))> {
    if i >= b.len() || b[i] != b' ' {
        return None;
    }
    let start = skip_spaces(b, i + 1);
    let mut end = b.len();
    while end > start && matches!(b[end - 1], b' ' | b'\t') {
        end -= 1;
    }
    if end == start || b[start..end].iter().any(|&c| c == b' ' || c == b'\t') {
        return None;
    }
    Some((start - (i + 1), (start, end - start)))
}

/// Classify what follows `import time:`.
fn classify(rest: &[u8]) -> Parsed {
    let i = skip_spaces(rest, 0);
    let r = &rest[i..];
    if r.starts_with(b"self [us]") {
        return Parsed::Header;
    }
    if r.starts_with(b"cached") {
        return cached(rest, i + 6).unwrap_or(Parsed::NotAnEntry);
    }
    entry(rest, i).unwrap_or(Parsed::NotAnEntry)
}

fn entry(b: &[u8], i: usize) -> Option<Parsed> {
    let (self_us, i, o1) = number(b, i)?;
    let i = skip_spaces(b, i);
    if b.get(i) != Some(&b'|') {
        return None;
    }
    let i = skip_spaces(b, i + 1);
    let (cum_us, i, o2) = number(b, i)?;
    let i = skip_spaces(b, i);
    if b.get(i) != Some(&b'|') {
        return None;
    }
    let (spaces, name) = indented_name(b, i + 1)?;
    Some(Parsed::Entry {
        self_us,
        cum_us,
        spaces,
        name,
        overflow: o1 || o2,
    })
}

fn cached(b: &[u8], i: usize) -> Option<Parsed> {
    let i = skip_spaces(b, i);
    if b.get(i) != Some(&b'|') {
        return None;
    }
    let i = skip_spaces(b, i + 1);
    if !b[i..].starts_with(b"cached") {
        return None;
    }
    let i = skip_spaces(b, i + 6);
    if b.get(i) != Some(&b'|') {
        return None;
    }
    let (spaces, name) = indented_name(b, i + 1)?;
    Some(Parsed::Cached { spaces, name })
}

/// The length of the plain name at the start of `b`: bytes up to the
/// first that is not printable ASCII (a space, a line end, a control or a
/// non-ASCII byte), found eight bytes at a time. In a line printed by
/// CPython, that byte is the line end.
#[inline]
fn plain_len(b: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut i = 0;
    while let Some(chunk) = b[i..].first_chunk::<8>() {
        let w = u64::from_le_bytes(*chunk);
        // High bit of each byte that is <= 0x20, >= 0x7F or >= 0x80. A
        // borrow or carry can only flag bytes after a flagged one, so the
        // lowest flag is exact.
        let odd = ((w.wrapping_sub(0x21 * ONES) & !w) | w.wrapping_add(ONES) | w) & HIGH;
        if odd != 0 {
            return i + (odd.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + b[i..]
        .iter()
        .position(|&c| !(0x21..0x7F).contains(&c))
        .unwrap_or(b.len() - i)
}

/// Leading spaces of `b`, eight bytes at a time.
#[inline]
fn skip_spaces_fast(b: &[u8]) -> usize {
    let mut i = 0;
    while let Some(chunk) = b[i..].first_chunk::<8>() {
        let word = u64::from_le_bytes(*chunk);
        let diff = word ^ 0x2020_2020_2020_2020;
        if diff != 0 {
            return i + (diff.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    skip_spaces(b, i)
}

/// A right-aligned number filling its column exactly: spaces, an optional
/// `-`, at least one digit (at most ten: no overflow). The column's last
/// eight bytes are read as one word: which are digits, their value, and
/// what lies before them, without a loop.
#[inline]
fn right_aligned(field: &[u8]) -> Option<i64> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let (lead, last) = field.split_last_chunk::<8>()?;
    let t = u64::from_le_bytes(*last) ^ (0x30 * ONES);
    // High bit of each byte that is not a digit (a carry may flag a digit
    // too, which only sends the line to the slow path).
    let not_digit = (t.wrapping_add(0x76 * ONES) | t) & HIGH;
    if not_digit == 0 || !lead.iter().all(|&c| c == b' ') {
        return right_aligned_slow(field);
    }
    let digits = not_digit.leading_zeros() / 8;
    if digits == 0 {
        return None;
    }
    // Bytes before the digits: spaces, or a `-` then spaces.
    let shift = 64 - 8 * digits;
    let below = (1u64 << shift) - 1;
    let before = u64::from_le_bytes(*last) & below;
    let minus = u64::from(b'-' ^ b' ') << (shift - 8);
    let spaces = (b' ' as u64 * ONES) & below;
    let neg = before == spaces ^ minus;
    if before != spaces && !neg {
        return None;
    }
    // The digits, most significant in the lowest byte, below them zeros.
    let mut v = t & !below;
    v = (v.wrapping_mul(10) + (v >> 8)) & 0x00FF_00FF_00FF_00FF;
    v = (v.wrapping_mul(100) + (v >> 16)) & 0x0000_FFFF_0000_FFFF;
    v = (v.wrapping_mul(10_000) + (v >> 32)) & 0xFFFF_FFFF;
    let v = v as i64;
    Some(if neg { -v } else { v })
}

/// [`right_aligned`] a byte at a time (eight digits or more, short fields).
fn right_aligned_slow(field: &[u8]) -> Option<i64> {
    let mut i = skip_spaces(field, 0);
    let neg = field.get(i) == Some(&b'-');
    i += usize::from(neg);
    if i == field.len() {
        return None;
    }
    let mut v: i64 = 0;
    for &c in &field[i..] {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + i64::from(d);
    }
    Some(if neg { -v } else { v })
}

struct Builder<'a> {
    text: &'a [u8],
    classes: Vec<LineClass>,
    nodes: Vec<Node>,
    texts: Vec<TextLine>,
    sessions: Vec<Session>,
    warnings: Vec<Warning>,
    /// Completed nodes waiting for their parent: (node, lowest possible depth).
    pending: Vec<(u32, u16)>,
    /// The import level is at least this (the depth of the last printed line).
    level_lo: u16,
    /// Whether a session is open.
    open: bool,
    ambiguous: u32,
    seen_header: bool,
    /// Whether lines must be checked for UTF-8 as they are scanned.
    check_utf8: bool,
    /// A line was not UTF-8: the scan stopped and the result is discarded.
    not_utf8: bool,
    /// Whether the fixed-column fast path is tried.
    fast: bool,
}

impl<'a> Builder<'a> {
    fn new(text: &'a [u8], check_utf8: bool) -> Self {
        // An exact count (a few percent of the time): no vector grows, and
        // nothing is reserved beyond what the lines need.
        let lines = memchr::memchr_iter(b'\n', text).count() + 1;
        Builder {
            text,
            classes: Vec::with_capacity(lines),
            nodes: Vec::with_capacity(lines),
            texts: Vec::new(),
            sessions: Vec::new(),
            warnings: Vec::new(),
            pending: Vec::new(),
            level_lo: 0,
            open: false,
            ambiguous: 0,
            seen_header: false,
            check_utf8,
            not_utf8: false,
            fast: true,
        }
    }

    fn warn(&mut self, line: u32, kind: WarningKind) {
        self.warnings.push(Warning {
            line: Some(line),
            kind,
        });
    }

    fn run(&mut self) {
        let bytes = self.text;
        let mut pos = 0usize;
        let mut line_no: u32 = 0;
        while pos < bytes.len() {
            line_no = line_no.saturating_add(1);
            if let Some(next) = self.fast.then(|| self.fast_line(pos, line_no)).flatten() {
                pos = next;
                continue;
            }
            let (end, next) = match memchr::memchr(b'\n', &bytes[pos..]) {
                Some(i) => (pos + i, pos + i + 1),
                None => (bytes.len(), bytes.len()),
            };
            let mut le = end;
            if le > pos && bytes[le - 1] == b'\r' {
                le -= 1;
            }
            self.general_line(pos, le, line_no);
            if self.not_utf8 {
                return;
            }
            pos = next;
        }
        if bytes.last().is_some_and(|&c| c != b'\n') {
            self.warn(line_no, WarningKind::TruncatedLastLine);
        }
        self.close_session(line_no);
    }

    fn text_line(&mut self, start: usize, end: usize, line_no: u32) {
        self.classes.push(LineClass::Text);
        let len = u32::try_from(end - start).unwrap_or(u32::MAX);
        self.texts.push(TextLine {
            line: line_no,
            start: start as u64,
            len,
        });
        if let Some(s) = self.sessions.last_mut().filter(|_| self.open) {
            s.last_line = line_no;
        }
    }

    /// The line at `pos` when it is exactly as CPython prints it: fixed
    /// columns, numbers within their widths, a plain ASCII name, then LF or
    /// CRLF. Returns where the next line starts, or `None` (nothing done)
    /// for the general path. The name's scan finds the line end, so such a
    /// line is read once, and its bytes are ASCII: UTF-8 by construction.
    #[inline]
    fn fast_line(&mut self, pos: usize, line_no: u32) -> Option<usize> {
        const COLUMNS: usize = CACHED_COLUMNS.len();
        let rest = &self.text[pos..];
        let cols: &[u8; COLUMNS] = rest.first_chunk()?;
        if cols.first_chunk::<13>() != CACHED_COLUMNS.first_chunk::<13>() {
            return None;
        }
        let spaces = skip_spaces_fast(&rest[COLUMNS..]);
        let name = COLUMNS + spaces;
        let len = plain_len(&rest[name..]);
        let end = name + len;
        let next = match (rest.get(end), rest.get(end + 1)) {
            (Some(b'\n'), _) => end + 1,
            (Some(b'\r'), Some(b'\n')) => end + 2,
            _ => return None,
        };
        if len == 0 {
            return None;
        }
        if cols == CACHED_COLUMNS {
            self.ensure_session(line_no);
            self.classes.push(LineClass::Cached);
            self.cached(line_no, pos + name, len, spaces);
            return Some(pos + next);
        }
        if cols[22..25] != *b" | " || cols[35..38] != *b" | " {
            return None;
        }
        let (Some(self_us), Some(cum_us)) =
            (right_aligned(&cols[13..22]), right_aligned(&cols[25..35]))
        else {
            return None;
        };
        self.ensure_session(line_no);
        self.classes.push(LineClass::Entry);
        if !spaces.is_multiple_of(2) {
            self.warn(
                line_no,
                WarningKind::OddIndent {
                    spaces: spaces as u32,
                },
            );
        }
        let depth = self.clamp_depth(spaces / 2, line_no);
        self.entry(line_no, pos + name, len, depth, self_us, cum_us);
        Some(pos + next)
    }

    /// Any line the fast path did not take; checks it for UTF-8 first.
    fn general_line(&mut self, start: usize, end: usize, line_no: u32) {
        let line = &self.text[start..end];
        if self.check_utf8 && !line.is_ascii() && std::str::from_utf8(line).is_err() {
            self.not_utf8 = true;
            return;
        }
        if !line.starts_with(PREFIX) {
            self.text_line(start, end, line_no);
            return;
        }
        let off = start + PREFIX.len();
        match classify(&line[PREFIX.len()..]) {
            Parsed::Header => {
                self.close_session(line_no.saturating_sub(1));
                self.seen_header = true;
                self.open_session(Some(line_no), line_no);
                self.classes.push(LineClass::Header);
            }
            Parsed::NotAnEntry => {
                self.warn(line_no, WarningKind::NotAnEntry);
                self.text_line(start, end, line_no);
            }
            Parsed::Entry {
                self_us,
                cum_us,
                spaces,
                name,
                overflow,
            } => {
                self.ensure_session(line_no);
                self.classes.push(LineClass::Entry);
                if overflow {
                    self.warn(line_no, WarningKind::NumberOverflow);
                }
                if !spaces.is_multiple_of(2) {
                    self.warn(
                        line_no,
                        WarningKind::OddIndent {
                            spaces: spaces as u32,
                        },
                    );
                }
                let depth = self.clamp_depth(spaces / 2, line_no);
                self.entry(line_no, off + name.0, name.1, depth, self_us, cum_us);
            }
            Parsed::Cached { spaces, name } => {
                self.ensure_session(line_no);
                self.classes.push(LineClass::Cached);
                self.cached(line_no, off + name.0, name.1, spaces);
            }
        }
    }

    fn clamp_depth(&mut self, depth: usize, line_no: u32) -> u16 {
        match u16::try_from(depth) {
            Ok(d) if d < u16::MAX => d,
            _ => {
                self.warn(line_no, WarningKind::DepthClamped);
                u16::MAX - 1
            }
        }
    }

    fn ensure_session(&mut self, line_no: u32) {
        if !self.open {
            if !self.seen_header {
                self.warn(line_no, WarningKind::MissingHeader);
            }
            self.open_session(None, line_no);
        }
    }

    fn open_session(&mut self, header_line: Option<u32>, line_no: u32) {
        let first_node = self.nodes.len() as u32;
        self.sessions.push(Session {
            index: self.sessions.len(),
            header_line,
            first_line: line_no,
            last_line: line_no,
            roots: Vec::new(),
            first_node,
            end_node: first_node,
            entries: 0,
            cached: 0,
        });
        self.open = true;
        self.level_lo = 0;
    }

    fn close_session(&mut self, last_line: u32) {
        if !self.open {
            return;
        }
        self.open = false;
        let pending = std::mem::take(&mut self.pending);
        let mut roots = Vec::with_capacity(pending.len());
        for (id, lo) in pending {
            let n = &mut self.nodes[id as usize];
            if n.kind == NodeKind::CachedAmbiguous {
                n.depth = lo;
                if lo == 0 {
                    self.ambiguous += 1;
                } else {
                    n.kind = NodeKind::Cached;
                }
            }
            if n.depth > 0 {
                let (line, depth) = (n.line, u32::from(n.depth));
                let name = self.name_of(id);
                self.warn(line, WarningKind::Orphan { name, depth });
            }
            roots.push(NodeId(id));
        }
        let end_node = self.nodes.len() as u32;
        let s = self.sessions.last_mut().expect("an open session exists");
        s.roots = roots;
        s.end_node = end_node;
        s.last_line = s.last_line.max(last_line);
    }

    /// A node's name as an owned string, for warnings only.
    fn name_of(&self, id: u32) -> String {
        let n = &self.nodes[id as usize];
        let start = n.name_start as usize;
        String::from_utf8_lossy(&self.text[start..start + n.name_len as usize]).into_owned()
    }

    fn entry(
        &mut self,
        line_no: u32,
        name_start: usize,
        name_len: usize,
        depth: u16,
        self_us: i64,
        cum_us: i64,
    ) {
        let id = self.nodes.len() as u32;
        let d = depth;
        let mut first = NONE;
        let mut children_cum: i64 = 0;
        let mut entry_children: i64 = 0;
        while let Some(&(top, lo)) = self.pending.last() {
            let n = &mut self.nodes[top as usize];
            if n.depth <= d {
                break;
            }
            self.pending.pop();
            if n.kind == NodeKind::CachedAmbiguous {
                n.depth = d + 1;
                if lo > d {
                    n.kind = NodeKind::Cached;
                } else {
                    self.ambiguous += 1;
                }
            } else if n.depth != d + 1 {
                let (child_line, child_depth) = (n.line, u32::from(n.depth));
                let child = self.name_of(top);
                self.warn(
                    child_line,
                    WarningKind::DepthJump {
                        child,
                        child_depth,
                        parent_depth: u32::from(d),
                    },
                );
            }
            let n = &mut self.nodes[top as usize];
            if n.kind == NodeKind::Entry {
                children_cum = children_cum.saturating_add(n.cumulative_us);
                entry_children += 1;
            }
            n.parent = id;
            n.next_sibling = first;
            first = top;
        }
        self.nodes.push(Node {
            self_us,
            cumulative_us: cum_us,
            name_start: name_start as u64,
            name_len: name_len as u32,
            line: line_no,
            parent: NONE,
            first_child: first,
            next_sibling: NONE,
            depth: d,
            kind: NodeKind::Entry,
        });
        self.pending.push((id, d));
        self.level_lo = d;
        let s = self.sessions.last_mut().expect("an open session exists");
        s.entries += 1;
        s.last_line = line_no;
        if self_us < 0 {
            self.warn(line_no, WarningKind::NegativeSelf { self_us });
        }
        if cum_us < 0 {
            self.warn(
                line_no,
                WarningKind::NegativeCumulative {
                    cumulative_us: cum_us,
                },
            );
        } else if cum_us < self_us {
            self.warn(
                line_no,
                WarningKind::CumulativeBelowSelf {
                    self_us,
                    cumulative_us: cum_us,
                },
            );
        }
        if first != NONE {
            let diff = cum_us.saturating_sub(self_us).saturating_sub(children_cum);
            if diff > 1 || diff < -(entry_children + 1) {
                self.warn(
                    line_no,
                    WarningKind::ChildrenMismatch {
                        difference_us: diff,
                    },
                );
            }
        }
    }

    fn cached(&mut self, line_no: u32, name_start: usize, name_len: usize, spaces: usize) {
        let id = self.nodes.len() as u32;
        let (depth, lo, kind) = if spaces > 0 {
            let total = spaces + name_len;
            if !total.is_multiple_of(2) {
                self.warn(
                    line_no,
                    WarningKind::OddIndent {
                        spaces: spaces as u32,
                    },
                );
            }
            let d = self.clamp_depth(total / 2, line_no);
            (d, d, NodeKind::Cached)
        } else {
            let hi = self.clamp_depth(name_len / 2, line_no);
            let lo = self.level_lo.min(hi);
            if lo == hi {
                (hi, hi, NodeKind::Cached)
            } else {
                (hi, lo, NodeKind::CachedAmbiguous)
            }
        };
        self.nodes.push(Node {
            self_us: 0,
            cumulative_us: 0,
            name_start: name_start as u64,
            name_len: name_len as u32,
            line: line_no,
            parent: NONE,
            first_child: NONE,
            next_sibling: NONE,
            depth,
            kind,
        });
        self.pending.push((id, lo));
        self.level_lo = lo;
        let s = self.sessions.last_mut().expect("an open session exists");
        s.cached += 1;
        s.last_line = line_no;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::importtime::LineClass::{Cached, Entry, Header, Text};

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
        let log =
            parse(format!("{H}import time: 99999999999999999999 |          1 | x\n").as_bytes());
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
        let log =
            parse(format!("{H}import time: 1 | 1 | a\n{H}import time: 2 | 2 | b\n").as_bytes());
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
        let log = parse(
            format!("{H}import time: 1 | 1 |     deep\nimport time: 1 | 2 |   mid\n").as_bytes(),
        );
        assert_eq!(
            outline(&log).trim(),
            "session 0 header=Some(1)\nmid@1 1/2\n  deep@2 1/1"
        );
        assert_eq!(
            kinds(&log),
            ["line 3: orphan: mid at depth 1 has no parent line; kept as a root"]
        );
        let log = parse(
            format!("{H}import time: 1 | 1 |     deep\nimport time: 1 | 2 | top\n").as_bytes(),
        );
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
}
