//! The byte-level parser: decoding, line classification and the post-order
//! tree rebuild, in one pass over the input.
//!
//! UTF-8 input is not validated up front: each line is checked as the scan
//! reaches it (an entry's numbers and columns are ASCII by construction, so
//! only its name is looked at), and a line that is not UTF-8 sends the whole
//! input to the lossy decoder. Lines printed exactly as CPython prints them
//! take a fixed-column fast path; anything else takes the general one.
//!
//! A log of at least two `parts::MIN_PART` (8 MiB) is cut at session
//! headers into parts of at least that, read on as many threads as the
//! machine has, and the parts joined into the arena one scan builds. A log
//! of one session has no header to cut at and is read on one thread, as
//! are the workers' and tests' logs (kilobytes).
//!
//! This module is the entry (which bytes take which path, and the finished
//! log); `decode` turns BOMs, UTF-16 and invalid bytes into UTF-8, `lex`
//! reads one line's columns, `builder` rebuilds the tree from the
//! classified lines, and `parts` cuts a large log and joins what the
//! threads built.

mod builder;
mod decode;
mod lex;
mod packages;
mod parts;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use super::tree::{Encoding, ImportLog, SharedBytes, Text};
use super::{LogWarning, LogWarningKind};
use builder::Builder;
use decode::{decode, looks_utf16le};

/// Parse raw stderr bytes (copies them once; see [`parse_owned`] to avoid
/// the copy).
pub fn parse(bytes: &[u8]) -> ImportLog {
    parse_owned(bytes.to_vec())
}

/// Parse raw stderr bytes, taking ownership of the buffer (no copy for
/// valid UTF-8 input).
pub fn parse_owned(bytes: Vec<u8>) -> ImportLog {
    let shared = Arc::new(bytes);
    // Not UTF-8: the builder's clone is gone by then, so this takes the
    // buffer back without copying it.
    parse_from(shared.clone(), move || {
        Arc::try_unwrap(shared).unwrap_or_else(|shared| (*shared).clone())
    })
}

/// Parse shared bytes (for example a file mapped in memory) without
/// copying them when they are UTF-8 already; other encodings are decoded
/// into an owned copy.
pub fn parse_shared(bytes: SharedBytes) -> ImportLog {
    parse_from(bytes.clone(), move || bytes.bytes().to_vec())
}

/// The one entry of both: the bytes as they are when they may be UTF-8 and
/// every line is, else `owned()` decoded first. `bytes` is dropped before
/// `owned` runs, so an owner holding the only other reference gets its
/// buffer back.
fn parse_from(bytes: SharedBytes, owned: impl FnOnce() -> Vec<u8>) -> ImportLog {
    if plain_utf8_candidate(bytes.bytes()) {
        if let Some(log) = build_checked(Text::Shared(bytes)) {
            return log;
        }
    } else {
        drop(bytes);
    }
    parse_decoded(owned())
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
    // Asking for the cores reads the process's CPU quota from its cgroup:
    // only a log large enough to cut asks.
    let threads = if text.bytes().len() >= 2 * parts::MIN_PART {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        1
    };
    build_in(
        text,
        encoding,
        invalid,
        check_utf8,
        fast,
        threads,
        parts::MIN_PART,
    )
}

/// [`build`] on at most `threads` threads, each part at least `min_part`
/// bytes (the tests cut small logs into parts).
fn build_in(
    text: Text,
    encoding: Encoding,
    invalid: bool,
    check_utf8: bool,
    fast: bool,
    threads: usize,
    min_part: usize,
) -> Option<ImportLog> {
    let source = match &text {
        Text::Shared(bytes) => Some(&**bytes),
        Text::Owned(_) => None,
    };
    let bytes = text.bytes();
    let cut = parts::cut(bytes, threads, min_part);
    let mut b = parts::read(&cut, |part| {
        let mut b = Builder::new(bytes, part, source, check_utf8);
        b.fast = fast;
        b
    });
    if invalid {
        b.warnings.insert(
            0,
            LogWarning {
                line: None,
                kind: LogWarningKind::InvalidEncoding,
            },
        );
    }
    let Builder {
        classes,
        nodes,
        wide,
        texts,
        sessions,
        mut warnings,
        ambiguous,
        not_utf8,
        packages,
        long_names,
        ..
    } = b;
    if not_utf8 {
        return None;
    }
    if ambiguous > 0 {
        warnings.push(LogWarning {
            line: None,
            kind: LogWarningKind::AmbiguousCachedDepth { count: ambiguous },
        });
    }
    // Stable: input-wide warnings first, then line order, emission order within a line.
    warnings.sort_by_key(|w| w.line.map_or(0, u64::from));
    Some(ImportLog {
        text,
        encoding,
        classes,
        nodes,
        wide,
        texts,
        sessions,
        warnings,
        packages: packages.names,
        long_names,
    })
}
