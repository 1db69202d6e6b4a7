//! A seeded, deterministic generator of `-X importtime` logs shaped like
//! real `import transformers` and `import torch` logs, interleaved with
//! the project's recorded fixture logs.
//!
//! Shapes measured here (CPython 3.11.7, the test venv's transformers
//! 4.57.6 without torch, `import transformers` plus `AutoTokenizer`,
//! `pipeline` and `transformers.pipelines`): 630 timed imports, 46 roots;
//! depth mean 7.2, median 8, p90 12, max 18; 60% leaves, a parent has
//! 2.3 children on average (median 1, p90 4, max 28); names 18.9 bytes on
//! average (p90 35, max 61), dotted parts 8.5 bytes (p90 15, max 42), 1.1
//! dots; 64% of children share their parent's top-level package.
//! `-X importtime=2` needs 3.14, which is not installed here, so cached
//! lines were counted by wrapping `__import__` on 3.11 (a cached line for
//! every import that finds its module in `sys.modules`, at the level of
//! modules still initialising): 6.8 cached lines per timed import (87% of
//! the import lines); before an entry a run of cached lines, none in 26%
//! of cases, median 3, p90 17; cached names 10.8 bytes, 41% of them the
//! ten most frequent (`_io`, `typing`, `os`, `sys`, ...); 68% padded (the
//! depth is known). The recorded 3.14 `=2` fixture has 5.4 per entry.
//!
//! torch cannot be installed here; its sessions scale these shapes to what
//! is known of `import torch` (about 1,300 source modules and 45 extension
//! modules executed, by a public cProfile of torch 2.0): 1,400 imports,
//! depth up to 26, longer names (parts as above, up to 5 dots).
//!
//! Model: a session's import budget is split over its roots, and each
//! node's budget over its children, with skewed random weights (one heavy
//! child, many light ones: deep chains that fan out); the fan-out is 1 in
//! half the cases, 2-4, 5-8, and 9-28 in 4%. What comes out (seed 16):
//! transformers-like sessions have depth mean 5.4, p90 12, max 18, 57%
//! leaves, 2.1 children per parent, names of 20.4 bytes (p90 37);
//! torch-like ones depth mean 9.3, p90 20, max 26, names of 22.4 bytes
//! (p90 42, max 101); `=2` sessions 6.2 cached lines per import, a run of
//! median 4 (p90 16, none in 26%) before an entry.
//! Times are consistent (cumulative = self + children's cumulative), so
//! the generated part raises no warning but ambiguous cached depths. One
//! session in ten is `=2`, and the fixtures are appended after every 16
//! sessions (about a tenth of the bytes).

use std::io::Write;

/// SplitMix64: small, seeded, the same on every machine.
pub struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }

    /// Exponential with the given mean.
    fn exp(&mut self, mean: f64) -> f64 {
        -(1.0 - self.unit()).ln() * mean
    }
}

/// One kind of session: imports, roots, maximum depth, maximum dots.
struct Profile(usize, usize, usize, usize);

const TRANSFORMERS: Profile = Profile(630, 46, 18, 3);
const TORCH: Profile = Profile(1400, 60, 26, 5);

/// What was written.
#[derive(Debug, Default)]
pub struct Written {
    pub bytes: u64,
    pub tuna_bytes: u64,
    pub sessions: u64,
    pub entries: u64,
    pub cached: u64,
    pub fixture_bytes: u64,
}

/// Writes generated sessions (and the fixtures after every 16) to `out`
/// until it holds `target` bytes; `tuna` gets the same lines less those
/// tuna 0.5.15 cannot read (cached lines, `import time:` lines that are not
/// entries).
pub fn write(
    out: &mut dyn Write,
    tuna: &mut dyn Write,
    target: u64,
    seed: u64,
    fixtures: &[u8],
) -> std::io::Result<Written> {
    let mut rng = Rng(seed);
    let world: Vec<String> = (0..400).map(|_| part(&mut rng)).collect();
    let mut w = Written::default();
    let mut buf = Vec::with_capacity(1 << 20);
    while w.bytes < target {
        buf.clear();
        if w.sessions > 0 && w.sessions.is_multiple_of(16) && w.fixture_bytes * 9 < w.bytes {
            buf.extend_from_slice(fixtures);
            w.fixture_bytes += fixtures.len() as u64;
        }
        let p = [&TRANSFORMERS, &TORCH][usize::from(rng.unit() >= 0.6)];
        let cached = rng.unit() < 0.1;
        let (world, names) = (&world, Vec::new());
        let (rng, w) = (&mut rng, &mut w);
        Session {
            rng,
            p,
            world,
            cached,
            names,
            w,
        }
        .write(&mut buf);
        out.write_all(&buf)?;
        for line in buf.split_inclusive(|&b| b == b'\n') {
            if tuna_reads(line) {
                tuna.write_all(line)?;
                w.tuna_bytes += line.len() as u64;
            }
        }
        w.bytes += buf.len() as u64;
        w.sessions += 1;
    }
    Ok(w)
}

/// Whether tuna's `read_import_profile` reads `line` without failing: not
/// an `import time: ` line (skipped), the header, or an entry with an
/// integer self time and even indentation.
pub fn tuna_reads(line: &[u8]) -> bool {
    let Some(rest) = line.strip_prefix(b"import time: ") else {
        return true;
    };
    let Ok(content) = std::str::from_utf8(rest) else {
        return false;
    };
    let content = content.trim_end();
    if content == "self [us] | cumulative | imported package" {
        return true;
    }
    let items: Vec<&str> = content.split(" | ").collect();
    items.len() == 3
        && items[0].trim().parse::<i64>().is_ok()
        && (items[2].len() - items[2].trim_start().len()).is_multiple_of(2)
}

/// A dotted part: lowercase letters and `_`, 8.5 bytes on average.
fn part(rng: &mut Rng) -> String {
    let len = (2.0 + rng.exp(6.5)).min(42.0) as usize;
    let mut s = String::with_capacity(len);
    if rng.unit() < 0.1 {
        s.push('_');
    }
    while s.len() < len {
        let c = rng.range(0, 26);
        s.push(if c == 26 {
            '_'
        } else {
            (b'a' + c as u8) as char
        });
    }
    s
}

struct Session<'a> {
    rng: &'a mut Rng,
    p: &'a Profile,
    /// Top-level names; the first ten are the hot names of cached lines.
    world: &'a [String],
    cached: bool,
    /// Names imported so far, for cached lines.
    names: Vec<String>,
    w: &'a mut Written,
}

impl Session<'_> {
    fn write(mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"import time: self [us] | cumulative | imported package\n");
        let budgets = self.split(self.p.0, self.p.1, 12);
        for b in budgets {
            let root = self.world[self.rng.range(0, self.world.len() - 1)].clone();
            self.node(out, b, 0, root);
        }
    }

    /// `n` into `k` shares of at least 1, weights `u^skew`.
    fn split(&mut self, n: usize, k: usize, skew: i32) -> Vec<usize> {
        let k = k.min(n).max(1);
        let w: Vec<f64> = (0..k).map(|_| self.rng.unit().powi(skew) + 1e-3).collect();
        let sum: f64 = w.iter().sum();
        let rest = (n - k) as f64;
        let mut out: Vec<usize> = w.iter().map(|x| 1 + (rest * x / sum) as usize).collect();
        let heavy = (0..k).max_by(|&a, &b| w[a].total_cmp(&w[b])).unwrap_or(0);
        out[heavy] += n - out.iter().sum::<usize>();
        out
    }

    fn fan_out(&mut self, budget: usize) -> usize {
        let x = self.rng.unit();
        let k = if budget > 120 {
            if x < 0.7 { 1 } else { 2 }
        } else if x < 0.5 {
            1
        } else if x < 0.82 {
            self.rng.range(2, 4)
        } else if x < 0.96 {
            self.rng.range(5, 8)
        } else {
            self.rng.range(9, 28)
        };
        k.min(budget - 1)
    }

    /// A child's name: in the parent's package (64%), else another
    /// top-level package with up to two parts.
    fn child_name(&mut self, parent: &str) -> String {
        if self.rng.unit() < 0.64 {
            let dots = parent.matches('.').count();
            let base = match parent.rfind('.') {
                Some(i) if dots >= self.p.3 || self.rng.unit() < 0.5 => &parent[..i],
                _ => parent,
            };
            return format!("{base}.{}", part(self.rng));
        }
        let mut name = self.world[self.rng.range(0, self.world.len() - 1)].clone();
        for _ in 0..self.rng.range(0, 2) {
            name.push('.');
            name.push_str(&part(self.rng));
        }
        name
    }

    /// Writes the subtree of `name` (post-order) and returns its cumulative time.
    fn node(&mut self, out: &mut Vec<u8>, budget: usize, depth: usize, name: String) -> i64 {
        let mut children_us = 0;
        if budget > 1 && depth < self.p.2 {
            let k = self.fan_out(budget);
            for b in self.split(budget - 1, k, 4) {
                let child = self.child_name(&name);
                children_us += self.node(out, b, depth + 1, child);
            }
        }
        if self.cached {
            self.cached_run(out, depth + 1);
        }
        let self_us = (5.0 * 1000f64.powf(self.rng.unit())) as i64;
        let cum = self_us + children_us;
        let _ = writeln!(
            out,
            "import time: {self_us:>9} | {cum:>10} | {:indent$}{name}",
            "",
            indent = depth * 2
        );
        self.w.entries += 1;
        self.names.push(name);
        cum
    }

    /// The cached lookups of a module body at `level`: none in 26% of
    /// cases, else 1 + an exponential of mean 8.2 (6.8 on average).
    fn cached_run(&mut self, out: &mut Vec<u8>, level: usize) {
        if self.rng.unit() < 0.26 {
            return;
        }
        let n = 1 + self.rng.exp(8.2).min(300.0) as usize;
        for _ in 0..n {
            let name = if self.rng.unit() < 0.41 || self.names.is_empty() {
                &self.world[self.rng.range(0, 9)]
            } else {
                &self.names[self.rng.range(0, self.names.len() - 1)]
            };
            let _ = writeln!(
                out,
                "import time: cached    | cached     | {name:>width$}",
                width = level * 2
            );
        }
        self.w.cached += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generate(seed: u64) -> (Vec<u8>, Vec<u8>, Written) {
        let (mut out, mut tuna) = (Vec::new(), Vec::new());
        let w = write(&mut out, &mut tuna, 3_000_000, seed, b"").unwrap();
        (out, tuna, w)
    }

    #[test]
    fn seeded_output_is_deterministic_and_parses_cleanly() {
        let (a, tuna, w) = generate(7);
        assert_eq!(a, generate(7).0);
        assert_ne!(a, generate(8).0);
        assert_eq!(w.bytes, a.len() as u64);
        let log = importguard::importtime::parse(&a);
        assert_eq!(log.entry_count() as u64, w.entries);
        assert_eq!(log.cached_count() as u64, w.cached);
        assert_eq!(log.sessions().len() as u64, w.sessions);
        // Only input-wide warnings (ambiguous cached depths), none on a line.
        let warnings = log.warnings();
        assert!(warnings.iter().all(|x| x.line.is_none()), "{warnings:?}");
        // tuna's twin is the same log without its cached lines.
        let twin = importguard::importtime::parse(&tuna);
        assert_eq!(twin.entry_count() as u64, w.entries);
        assert_eq!(twin.cached_count(), 0);
        let entries = log.nodes().iter().filter(|n| !n.is_cached());
        let max_depth = entries.map(|n| n.depth).max().unwrap();
        assert!((18..=26).contains(&max_depth), "{max_depth}");
    }

    #[test]
    fn tuna_filter_keeps_what_tuna_reads() {
        for (line, reads) in [
            (&b"import time:       215 |        215 |   _io\n"[..], true),
            (
                b"import time: self [us] | cumulative | imported package\r\n",
                true,
            ),
            (b"INFO something else\n", true),
            (b"import time: cached    | cached     |  sys\n", false),
            (b"import time: printed by the program\n", false),
            (b"import time:         1 |          1 |    odd\n", false),
        ] {
            assert_eq!(tuna_reads(line), reads, "{line:?}");
        }
    }
}
