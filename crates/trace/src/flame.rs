//! A thread's sampled stacks as nested slices: a flame chart per thread.
//! Each sample stands for the interval it was taken over (from the
//! previous read of its process to this one, as its CPU time is counted);
//! a frame that stays at its depth, under the same frames, over adjacent
//! samples is one slice, and a gap between samples (the thread idle, or
//! not read) closes every slice.

use crate::model::Slice;

/// One sample of one thread: the interval it stands for and its frames,
/// outermost first.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedStack {
    /// When the interval began (ns).
    pub start_ns: u64,
    /// When it ended: the read (ns).
    pub end_ns: u64,
    /// The frames, root first.
    pub frames: Vec<Frame>,
}

/// One frame of a [`TimedStack`]: what its slice is called and its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The slice's name.
    pub name: String,
    /// Its category (`python`, `native`, `wait`).
    pub category: String,
}

/// A frame still open while the samples go on.
struct Open {
    frame: Frame,
    start_ns: u64,
}

/// The slices of one thread's samples, given in time order. Samples whose
/// intervals overlap (a read's clock and the interval's clock differ by a
/// little) are placed end to end; a sample beginning more than half its
/// interval after the previous one's end starts afresh.
pub fn slices(samples: &[TimedStack]) -> Vec<Slice> {
    let mut out = Vec::new();
    let mut open: Vec<Open> = Vec::new();
    let mut last_end: Option<u64> = None;
    for s in samples {
        let span = s.end_ns.saturating_sub(s.start_ns);
        let start = match last_end {
            Some(end) if s.start_ns <= end + span / 2 => s.start_ns.max(end),
            Some(end) => {
                close(&mut open, 0, end, &mut out);
                s.start_ns
            }
            None => s.start_ns,
        };
        let same = open
            .iter()
            .zip(&s.frames)
            .take_while(|(o, f)| o.frame == **f)
            .count();
        close(&mut open, same, start, &mut out);
        for f in &s.frames[open.len()..] {
            open.push(Open {
                frame: f.clone(),
                start_ns: start,
            });
        }
        last_end = Some(s.end_ns.max(start));
    }
    if let Some(end) = last_end {
        close(&mut open, 0, end, &mut out);
    }
    out
}

/// Closes the open frames from `depth` up at `end_ns`, written outermost
/// first: frames opened together and closed together have one span, and
/// at one span the earlier slice is the enclosing one
/// ([`Thread::slice_order`](crate::Thread::slice_order)).
fn close(open: &mut Vec<Open>, depth: usize, end_ns: u64, out: &mut Vec<Slice>) {
    if open.len() <= depth {
        return;
    }
    out.extend(open.drain(depth..).map(|o| Slice {
        name: o.frame.name,
        category: o.frame.category,
        start_ns: o.start_ns,
        end_ns,
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Process, Thread, Trace};

    fn at(start_ns: u64, end_ns: u64, frames: &[&str]) -> TimedStack {
        TimedStack {
            start_ns,
            end_ns,
            frames: frames
                .iter()
                .map(|f| Frame {
                    name: f.to_string(),
                    category: "python".into(),
                })
                .collect(),
        }
    }

    fn spans(slices: &[Slice]) -> Vec<(&str, u64, u64)> {
        let mut v: Vec<_> = slices
            .iter()
            .map(|s| (s.name.as_str(), s.start_ns, s.end_ns))
            .collect();
        v.sort_by_key(|&(n, s, e)| (s, std::cmp::Reverse(e), n.to_owned()));
        v
    }

    #[test]
    fn adjacent_samples_of_one_frame_are_one_slice_and_children_nest() {
        let s = slices(&[
            at(0, 10, &["main", "load"]),
            at(10, 20, &["main", "load", "read"]),
            at(20, 30, &["main", "serve"]),
        ]);
        assert_eq!(
            spans(&s),
            vec![
                ("main", 0, 30),
                ("load", 0, 20),
                ("read", 10, 20),
                ("serve", 20, 30)
            ]
        );
    }

    #[test]
    fn a_gap_closes_every_slice_and_a_frame_under_another_parent_is_new() {
        let s = slices(&[
            at(0, 10, &["main", "work"]),
            // idle (not sampled) from 10 to 40
            at(40, 50, &["main", "work"]),
            at(50, 60, &["other", "work"]),
        ]);
        assert_eq!(
            spans(&s),
            vec![
                ("main", 0, 10),
                ("work", 0, 10),
                ("main", 40, 50),
                ("work", 40, 50),
                ("other", 50, 60),
                ("work", 50, 60)
            ]
        );
    }

    #[test]
    fn overlapping_intervals_still_give_slices_that_nest() {
        // The interval of a read's sample measured on another clock than
        // the read: it begins a little before the previous one ended.
        let s = slices(&[
            at(0, 10, &["main", "a"]),
            at(9, 20, &["main", "b"]),
            at(19, 30, &["main", "a"]),
        ]);
        let trace = Trace {
            processes: vec![Process {
                pid: 1,
                name: "p".into(),
                threads: vec![Thread {
                    tid: 1,
                    name: "t".into(),
                    slices: s.clone(),
                    instants: Vec::new(),
                    beside: None,
                }],
                ..Process::default()
            }],
            flows: Vec::new(),
        };
        assert_eq!(trace.check(), Ok(()), "{s:?}");
        assert_eq!(
            spans(&s),
            vec![("main", 0, 30), ("a", 0, 10), ("b", 10, 20), ("a", 20, 30)]
        );
    }
}
