//! Aggregated stacks in the collapsed-stack format (`frame;frame;frame
//! count`, root first), and where start-up samples went: inside imports or
//! outside them, and on which frames.

use std::collections::HashMap;
use std::io::{self, Write};

/// One distinct stack and how many samples landed on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollapsedStack {
    /// Frame labels from the root (a `process PID:"command"` label when
    /// subprocesses are followed) to the leaf, as [`Frame::label`] writes
    /// them.
    ///
    /// [`Frame::label`]: crate::Frame::label
    pub frames: Vec<String>,
    /// How many samples.
    pub samples: u64,
}

/// Writes `stacks` as collapsed-stack lines, the format of `py-spy record
/// --format raw` that `report::profile::parse_collapsed` reads.
pub fn write_collapsed(stacks: &[CollapsedStack], w: &mut dyn Write) -> io::Result<()> {
    for s in stacks {
        writeln!(w, "{} {}", s.frames.join(";"), s.samples)?;
    }
    Ok(())
}

/// [`write_collapsed`] into a string.
pub fn collapsed_text(stacks: &[CollapsedStack]) -> String {
    let mut out = Vec::new();
    write_collapsed(stacks, &mut out).expect("writing to a Vec cannot fail");
    String::from_utf8(out).expect("labels are UTF-8")
}

/// Whether a frame label belongs to the import machinery: importlib's
/// `_find_and_load`, or any frame of `importlib._bootstrap` (frozen as
/// `<frozen importlib._bootstrap>` / `_bootstrap_external`, or the
/// `importlib/_bootstrap.py` file of old interpreters).
pub fn is_import_frame(label: &str) -> bool {
    label.starts_with("_find_and_load ")
        || label == "_find_and_load"
        || label.contains("(<frozen importlib._bootstrap")
        || label.contains("importlib/_bootstrap.py")
        || label.contains("importlib/_bootstrap_external.py")
}

/// A root label that names a process or thread rather than a frame.
pub fn is_label_frame(label: &str) -> bool {
    label.starts_with("process ") || label.starts_with("thread ")
}

/// One frame's share of samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameTotal {
    /// The frame's label.
    pub frame: String,
    /// Samples where it was the leaf (on CPU itself).
    pub self_samples: u64,
    /// Samples where it was anywhere on the stack (once per stack, even
    /// under recursion).
    pub total_samples: u64,
}

/// Where the samples of a (start-up) profile went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportShare {
    /// All samples.
    pub samples: u64,
    /// Samples with an import frame ([`is_import_frame`]) on the stack.
    pub inside_imports: u64,
    /// The frames of the samples outside imports, ranked by self samples,
    /// then total samples, then name; process and thread labels left out.
    pub top_outside: Vec<FrameTotal>,
}

impl ImportShare {
    /// `inside_imports / samples`, 0 without samples.
    pub fn share_inside(&self) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            self.inside_imports as f64 / self.samples as f64
        }
    }
}

/// Splits `stacks` into samples inside imports and outside them, and ranks
/// the `top` frames outside.
pub fn import_share(stacks: &[CollapsedStack], top: usize) -> ImportShare {
    let mut samples = 0;
    let mut inside = 0;
    let mut outside = Vec::new();
    for s in stacks {
        samples += s.samples;
        if s.frames.iter().any(|f| is_import_frame(f)) {
            inside += s.samples;
        } else {
            outside.push(s.clone());
        }
    }
    ImportShare {
        samples,
        inside_imports: inside,
        top_outside: top_frames(&outside, top),
    }
}

/// The `n` frames with the most self samples (then total samples, then
/// name), process and thread labels left out.
pub fn top_frames(stacks: &[CollapsedStack], n: usize) -> Vec<FrameTotal> {
    let mut by: HashMap<&str, (u64, u64)> = HashMap::new();
    for s in stacks {
        let mut seen: Vec<&str> = Vec::new();
        let leaf = s.frames.len().saturating_sub(1);
        for (i, f) in s.frames.iter().enumerate() {
            if is_label_frame(f) {
                continue;
            }
            let e = by.entry(f.as_str()).or_default();
            if !seen.contains(&f.as_str()) {
                e.1 += s.samples;
                seen.push(f.as_str());
            }
            if i == leaf {
                e.0 += s.samples;
            }
        }
    }
    let mut out: Vec<FrameTotal> = by
        .into_iter()
        .map(|(frame, (self_samples, total_samples))| FrameTotal {
            frame: frame.to_owned(),
            self_samples,
            total_samples,
        })
        .collect();
    out.sort_by(|a, b| {
        b.self_samples
            .cmp(&a.self_samples)
            .then(b.total_samples.cmp(&a.total_samples))
            .then(a.frame.cmp(&b.frame))
    });
    out.truncate(n);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_frames_count_self_at_the_leaf_and_total_once_per_stack() {
        let stack = |frames: &[&str], samples| CollapsedStack {
            frames: frames.iter().map(|f| f.to_string()).collect(),
            samples,
        };
        let s = [
            stack(&["process 1", "main", "f", "f"], 4),
            stack(&["process 1", "main", "g"], 6),
            stack(&["process 1", "main"], 1),
        ];
        let top = top_frames(&s, 10);
        let get = |name: &str| top.iter().find(|f| f.frame == name).unwrap().clone();
        assert_eq!(get("g").self_samples, 6);
        assert_eq!(get("f").self_samples, 4);
        assert_eq!(get("f").total_samples, 4, "recursion counts a stack once");
        assert_eq!(get("main").total_samples, 11);
        assert_eq!(get("main").self_samples, 1);
        assert!(top.iter().all(|f| !f.frame.starts_with("process ")));
        assert_eq!(top[0].frame, "g");
    }

    fn stack(frames: &str, samples: u64) -> CollapsedStack {
        CollapsedStack {
            frames: frames.split(';').map(str::to_owned).collect(),
            samples,
        }
    }

    #[test]
    fn import_frames_are_recognised_across_versions() {
        let cases = [
            ("_find_and_load (<frozen importlib._bootstrap>:1165)", true),
            (
                "_call_with_frames_removed (<frozen importlib._bootstrap>:241)",
                true,
            ),
            (
                "exec_module (<frozen importlib._bootstrap_external>:940)",
                true,
            ),
            ("_find_and_load (importlib/_bootstrap.py:958)", true),
            ("_find_and_load", true),
            ("load_weights (model.py:12)", false),
            ("<module> (app.py:1)", false),
            ("process 12:\"python3 -c import x\"", false),
        ];
        for (label, want) in cases {
            assert_eq!(is_import_frame(label), want, "{label}");
        }
    }

    #[test]
    fn the_share_and_the_top_frames_outside_imports() {
        let stacks = [
            stack(
                "process 1:\"python3 w.py\";<module> (w.py:1);_find_and_load (<frozen importlib._bootstrap>:1165);<module> (torch_standin.py:1)",
                70,
            ),
            stack(
                "process 1:\"python3 w.py\";<module> (w.py:1);probe_cuda (w.py:10)",
                20,
            ),
            stack(
                "process 1:\"python3 w.py\";<module> (w.py:1);load (w.py:20);read_weights (w.py:30)",
                10,
            ),
        ];
        let share = import_share(&stacks, 3);
        assert_eq!(share.samples, 100);
        assert_eq!(share.inside_imports, 70);
        assert!((share.share_inside() - 0.7).abs() < 1e-12);
        let names: Vec<_> = share
            .top_outside
            .iter()
            .map(|f| (f.frame.as_str(), f.self_samples, f.total_samples))
            .collect();
        assert_eq!(
            names,
            [
                ("probe_cuda (w.py:10)", 20, 20),
                ("read_weights (w.py:30)", 10, 10),
                ("<module> (w.py:1)", 0, 30),
            ]
        );
    }

    #[test]
    fn no_samples_is_a_zero_share() {
        let share = import_share(&[], 5);
        assert_eq!(share.share_inside(), 0.0);
        assert!(share.top_outside.is_empty());
    }

    #[test]
    fn collapsed_text_is_one_line_per_stack() {
        let text = collapsed_text(&[stack("a (x.py:1);b (x.py:2)", 3), stack("a (x.py:1)", 1)]);
        assert_eq!(text, "a (x.py:1);b (x.py:2) 3\na (x.py:1) 1\n");
    }
}
