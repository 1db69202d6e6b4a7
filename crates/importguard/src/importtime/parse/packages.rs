//! Every timed node's top-level package, found as its line is read: one
//! index per distinct package, so the totals per package never read the
//! names again.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A multiply-rotate hash taking eight bytes at a time (as FxHash does):
/// package names are short, and SipHash, then a byte-wise FNV, dominated
/// the totals.
#[derive(Debug, Default)]
struct WordHash(u64);

impl WordHash {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for WordHash {
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap_or_default()));
        }
        let mut tail = [0u8; 8];
        let rest = chunks.remainder();
        tail[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(tail) ^ (rest.len() as u64) << 59);
    }
}

/// The distinct top-level packages seen so far.
#[derive(Debug, Default)]
pub(super) struct Packages {
    index: HashMap<Box<[u8]>, u32, BuildHasherDefault<WordHash>>,
    /// The names, indexed by package.
    pub(super) names: Vec<String>,
    /// The last timed line's package: neighbouring lines mostly share one,
    /// so only a change of package costs a hash lookup.
    last: Option<u32>,
}

impl Packages {
    /// The package of the module `name` (`email` for `email.mime.text`).
    #[inline]
    pub(super) fn of(&mut self, name: &[u8]) -> u32 {
        if let Some(p) = self.last {
            let last = self.names[p as usize].as_bytes();
            // A byte loop: `starts_with` calls `memcmp`, slow for a short name.
            if name.len() >= last.len()
                && name.iter().zip(last).all(|(a, b)| a == b)
                && name.get(last.len()).is_none_or(|&c| c == b'.')
            {
                return p;
            }
        }
        let dot = name.iter().position(|&c| c == b'.');
        let top = dot.map_or(name, |dot| &name[..dot]);
        let p = self.index_of(top);
        self.last = Some(p);
        p
    }

    /// The index of the top-level package `top`, new ones numbered in the
    /// order they are first asked for.
    pub(super) fn index_of(&mut self, top: &[u8]) -> u32 {
        match self.index.get(top) {
            Some(&p) => p,
            None => {
                let p = self.names.len() as u32;
                self.names.push(String::from_utf8_lossy(top).into_owned());
                self.index.insert(top.into(), p);
                p
            }
        }
    }
}
