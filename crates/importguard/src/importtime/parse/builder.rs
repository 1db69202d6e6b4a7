//! The post-order tree rebuilt from classified lines: sessions split at
//! headers, nodes in an arena, depths and cached lines resolved, every line
//! kept with its class and anomalies as warnings.

use super::lex::*;
use super::packages::Packages;
use crate::importtime::tree::{
    LineClass, LogBytes, NONE, Node, NodeId, NodeKind, Session, Slot, TextLine, Wide, name_range,
    place_name,
};
use crate::importtime::{LogWarning, LogWarningKind};

/// The eight bytes of `cols` from `at`, as one word (compared inline,
/// where a slice compare calls `memcmp`).
#[inline]
fn word(cols: &[u8; CACHED_COLUMNS.len()], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&cols[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Ask the kernel to back the node arena with huge pages where it can: a
/// large log's arena is tens of megabytes, and faulting it in 4 KiB at a
/// time cost a quarter of the parse. Only the whole 2 MiB pages inside the
/// buffer are advised; an arena smaller than that is left alone.
fn advise_huge_pages(nodes: &Vec<Slot>) {
    const HUGE: usize = 2 << 20;
    let start = nodes.as_ptr() as usize;
    let end = start + nodes.capacity() * std::mem::size_of::<Slot>();
    let (from, to) = (start.div_ceil(HUGE) * HUGE, end / HUGE * HUGE);
    if to > from {
        // SAFETY: the range lies inside the vector's own allocation, and
        // MADV_HUGEPAGE only changes which pages back it, never what it
        // holds; a kernel without huge pages returns an error, ignored.
        unsafe {
            libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
        }
    }
}

/// How far the scan goes between two calls of [`LogBytes::read_past`].
const RELEASE_EVERY: usize = 4 << 20;

pub(super) struct Builder<'a> {
    pub(super) text: &'a [u8],
    /// The part of `text` this builder reads: all of it, or one part of a
    /// log read on several threads (see `parts`), which begins at a
    /// header and ends after a line end.
    start: usize,
    end: usize,
    /// Told of each part of `text` the scan has left behind.
    source: Option<&'a dyn LogBytes>,
    /// `text[start..released]` was given to `source.read_past`.
    released: usize,
    pub(super) packages: Packages,
    /// Names too long to pack into their node.
    pub(super) long_names: Vec<(u32, u64, u64)>,
    pub(super) classes: Vec<LineClass>,
    pub(super) nodes: Vec<Slot>,
    /// What did not fit in the nodes' slots.
    pub(super) wide: Wide,
    pub(super) texts: Vec<TextLine>,
    pub(super) sessions: Vec<Session>,
    pub(super) warnings: Vec<LogWarning>,
    /// Completed nodes waiting for their parent: (node, lowest possible depth).
    pub(super) pending: Vec<(u32, u16)>,
    /// The import level is at least this (the depth of the last printed line).
    pub(super) level_lo: u16,
    /// Whether a session is open.
    pub(super) open: bool,
    pub(super) ambiguous: u32,
    pub(super) seen_header: bool,
    /// Whether lines must be checked for UTF-8 as they are scanned.
    pub(super) check_utf8: bool,
    /// A line was not UTF-8: the scan stopped and the result is discarded.
    pub(super) not_utf8: bool,
    /// Whether the fixed-column fast path is tried.
    pub(super) fast: bool,
}

impl<'a> Builder<'a> {
    pub(super) fn new(
        text: &'a [u8],
        part: std::ops::Range<usize>,
        source: Option<&'a dyn LogBytes>,
        check_utf8: bool,
    ) -> Self {
        // A guess from the lines of a real log (about 70 bytes each): no
        // pass over the input to count them. Capacity beyond what the lines
        // fill is never touched, so it takes no memory; and a large vector
        // grows by remapping its pages, not by copying them.
        // The first part's arena becomes the whole log's (`parts` appends
        // the others to it), so it is sized, and advised, for all of it.
        let sized_for = if part.start == 0 {
            text.len()
        } else {
            part.len()
        };
        let lines = sized_for / 64 + 16;
        let nodes: Vec<Slot> = Vec::with_capacity(lines);
        advise_huge_pages(&nodes);
        Builder {
            text,
            start: part.start,
            end: part.end,
            source,
            released: part.start,
            packages: Packages::default(),
            long_names: Vec::new(),
            classes: Vec::with_capacity(lines),
            nodes,
            wide: Wide::default(),
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

    fn warn(&mut self, line: u32, kind: LogWarningKind) {
        self.warnings.push(LogWarning {
            line: Some(line),
            kind,
        });
    }

    pub(super) fn run(&mut self) {
        // The fast path reads a line's columns from `text` as a whole (they
        // may run past `end` when a short line is the part's last); a line
        // it takes ends at its own line end, so never past `end`.
        let bytes = &self.text[..self.end];
        let mut pos = self.start;
        let mut line_no: u32 = 0;
        while pos < bytes.len() {
            line_no = line_no.saturating_add(1);
            if pos - self.released >= RELEASE_EVERY {
                self.release(pos);
            }
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
            self.warn(line_no, LogWarningKind::TruncatedLastLine);
        }
        self.close_session(line_no);
        self.release(bytes.len());
    }

    /// Tell the source the scan is done with `text[..pos]`: names and text
    /// lines are kept as positions, so the bytes are needed again only
    /// for the few names a rendering prints.
    #[cold]
    fn release(&mut self, pos: usize) {
        if let Some(source) = self.source.filter(|_| pos > self.released) {
            source.read_past(self.released..pos);
        }
        self.released = pos;
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
        if word(cols, 0) != word(CACHED_COLUMNS, 0) || word(cols, 5) != word(CACHED_COLUMNS, 5) {
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
        if word(cols, 13) == word(CACHED_COLUMNS, 13)
            && word(cols, 21) == word(CACHED_COLUMNS, 21)
            && word(cols, 29) == word(CACHED_COLUMNS, 29)
            && word(cols, 30) == word(CACHED_COLUMNS, 30)
        {
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
                LogWarningKind::OddIndent {
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
                self.warn(line_no, LogWarningKind::NotAnEntry);
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
                    self.warn(line_no, LogWarningKind::NumberOverflow);
                }
                if !spaces.is_multiple_of(2) {
                    self.warn(
                        line_no,
                        LogWarningKind::OddIndent {
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
                self.warn(line_no, LogWarningKind::DepthClamped);
                u16::MAX - 1
            }
        }
    }

    fn ensure_session(&mut self, line_no: u32) {
        if !self.open {
            if !self.seen_header {
                self.warn(line_no, LogWarningKind::MissingHeader);
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
            if n.kind() == NodeKind::CachedAmbiguous {
                n.set_depth(lo);
                if lo == 0 {
                    self.ambiguous += 1;
                } else {
                    n.set_kind(NodeKind::Cached);
                }
            }
            if n.depth() > 0 {
                let (line, depth) = (n.line, u32::from(n.depth()));
                let name = self.name_of(id);
                self.warn(line, LogWarningKind::Orphan { name, depth });
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
        let r = name_range(id, self.nodes[id as usize].name, &self.long_names);
        String::from_utf8_lossy(&self.text[r]).into_owned()
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
            if n.depth() <= d {
                break;
            }
            self.pending.pop();
            if n.kind() == NodeKind::CachedAmbiguous {
                n.set_depth(d + 1);
                if lo > d {
                    n.set_kind(NodeKind::Cached);
                } else {
                    self.ambiguous += 1;
                }
            } else if n.depth() != d + 1 {
                let (child_line, child_depth) = (n.line, u32::from(n.depth()));
                let child = self.name_of(top);
                self.warn(
                    child_line,
                    LogWarningKind::DepthJump {
                        child,
                        child_depth,
                        parent_depth: u32::from(d),
                    },
                );
            }
            let n = &mut self.nodes[top as usize];
            if n.kind() == NodeKind::Entry {
                children_cum = children_cum.saturating_add(n.cumulative_us(top, &self.wide));
                entry_children += 1;
            }
            n.parent = id;
            first = top;
        }
        let package = self
            .packages
            .of(&self.text[name_start..name_start + name_len]);
        let node = Node {
            self_us,
            cumulative_us: cum_us,
            name: place_name(id, name_start, name_len, &mut self.long_names),
            line: line_no,
            parent: NONE,
            first_child: first,
            package,
            depth: d,
            kind: NodeKind::Entry,
        };
        self.nodes.push(Slot::pack(id, &node, &mut self.wide));
        self.pending.push((id, d));
        self.level_lo = d;
        let s = self.sessions.last_mut().expect("an open session exists");
        s.entries += 1;
        s.last_line = line_no;
        if self_us < 0 {
            self.warn(line_no, LogWarningKind::NegativeSelf { self_us });
        }
        if cum_us < 0 {
            self.warn(
                line_no,
                LogWarningKind::NegativeCumulative {
                    cumulative_us: cum_us,
                },
            );
        } else if cum_us < self_us {
            self.warn(
                line_no,
                LogWarningKind::CumulativeBelowSelf {
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
                    LogWarningKind::ChildrenMismatch {
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
                    LogWarningKind::OddIndent {
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
        let node = Node {
            self_us: 0,
            cumulative_us: 0,
            name: place_name(id, name_start, name_len, &mut self.long_names),
            line: line_no,
            parent: NONE,
            first_child: NONE,
            package: NONE,
            depth,
            kind,
        };
        self.nodes.push(Slot::pack(id, &node, &mut self.wide));
        self.pending.push((id, lo));
        self.level_lo = lo;
        let s = self.sessions.last_mut().expect("an open session exists");
        s.cached += 1;
        s.last_line = line_no;
    }
}
