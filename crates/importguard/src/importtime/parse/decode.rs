//! The input's encoding: UTF-16 (with a BOM, or LE without one), a UTF-8
//! BOM, invalid bytes replaced and reported.

use crate::importtime::tree::Encoding;

/// UTF-16 LE without a BOM: ASCII text with a zero after every byte.
pub(super) fn looks_utf16le(b: &[u8]) -> bool {
    b.len() >= 4 && b[0] != 0 && b[1] == 0 && b[2] != 0 && b[3] == 0
}

/// Decode the input to UTF-8: a UTF-16 BOM (or the zero bytes of UTF-16 LE
/// text) selects UTF-16; a UTF-8 BOM is dropped; invalid sequences are
/// replaced and reported.
pub(super) fn decode(mut bytes: Vec<u8>) -> (String, Encoding, bool) {
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

pub(super) fn decode_utf16(bytes: &[u8], unit: fn([u8; 2]) -> u16) -> (String, bool) {
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
