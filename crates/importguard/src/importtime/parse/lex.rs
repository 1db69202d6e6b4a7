//! One line's columns: the `import time:` prefix, a header, an entry's
//! numbers and indented name, a cached line; the fixed-column fast path and
//! the general one.

pub(super) const PREFIX: &[u8] = b"import time:";

/// What CPython prints before a cached line's name (`-X importtime=2`).
pub(super) const CACHED_COLUMNS: &[u8; 38] = b"import time: cached    | cached     | ";

/// What one line turned out to be.
pub(super) enum Parsed {
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
pub(super) fn skip_spaces(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i] == b' ' {
        i += 1;
    }
    i
}

/// A signed decimal at `b[i..]`: (value, end, overflowed).
#[inline]
pub(super) fn number(b: &[u8], mut i: usize) -> Option<(i64, usize, bool)> {
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
pub(super) fn indented_name(b: &[u8], i: usize) -> Option<(usize, (usize, usize))> {
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
pub(super) fn classify(rest: &[u8]) -> Parsed {
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

pub(super) fn entry(b: &[u8], i: usize) -> Option<Parsed> {
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

pub(super) fn cached(b: &[u8], i: usize) -> Option<Parsed> {
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
pub(super) fn plain_len(b: &[u8]) -> usize {
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
pub(super) fn skip_spaces_fast(b: &[u8]) -> usize {
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
pub(super) fn right_aligned(field: &[u8]) -> Option<i64> {
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
pub(super) fn right_aligned_slow(field: &[u8]) -> Option<i64> {
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
