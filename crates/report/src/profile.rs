//! Sampled profiles (py-spy's collapsed stacks): a flame graph SVG,
//! speedscope JSON and a table of the top frames by sampled time.
//!
//! The input is already-parsed stacks, `(frames root first, sample count)`;
//! this module formats them and reads no file.

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};

/// One distinct stack and how many samples landed on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampledStack {
    /// Frames from the root (process or thread) to the leaf.
    pub frames: Vec<String>,
    /// How many samples landed on this stack.
    pub samples: u64,
}

/// Reads collapsed-stack lines (`a;b;c 12`, the format of py-spy's `raw`
/// output and of flamegraph tools). Lines that are not of that shape are
/// returned as problems with their 1-based line number, never dropped
/// silently.
pub fn parse_collapsed(text: &str) -> (Vec<SampledStack>, Vec<(usize, String)>) {
    let mut stacks = Vec::new();
    let mut problems = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        let parsed = line
            .rsplit_once(' ')
            .and_then(|(stack, n)| Some((stack, n.parse::<u64>().ok()?)));
        match parsed {
            Some((stack, samples)) if !stack.is_empty() => stacks.push(SampledStack {
                frames: stack.split(';').map(str::to_owned).collect(),
                samples,
            }),
            _ => problems.push((i + 1, line.to_owned())),
        }
    }
    (stacks, problems)
}

/// A clickable flame graph SVG (inferno) with widths in samples.
pub fn flamegraph_svg(stacks: &[SampledStack], title: &str, w: &mut dyn Write) -> io::Result<()> {
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = crate::printable(title).into_owned();
    opt.count_name = "samples".to_owned();
    opt.hash = true;
    let lines: Vec<String> = stacks
        .iter()
        .filter(|s| s.samples > 0)
        .map(|s| {
            let frames: Vec<_> = s.frames.iter().map(|f| crate::printable(f)).collect();
            format!("{} {}", frames.join(";"), s.samples)
        })
        .collect();
    let mut w = BufWriter::new(w);
    if lines.is_empty() {
        let empty = ["(no samples: the worker was idle or ended before the first sample) 1"];
        inferno::flamegraph::from_lines(&mut opt, empty.iter().copied(), &mut w)?;
    } else {
        inferno::flamegraph::from_lines(&mut opt, lines.iter().map(String::as_str), &mut w)?;
    }
    w.flush()
}

/// speedscope JSON: one `sampled` profile, weights in samples.
pub fn speedscope(stacks: &[SampledStack], name: &str, w: &mut dyn Write) -> io::Result<()> {
    speedscope_profiles(&[(name.to_owned(), stacks.to_vec())], name, w)
}

/// speedscope JSON with one `sampled` profile per named group of stacks
/// (a process each: the service and each of its workers), over one shared
/// frame table, weights in samples; `name` names the file.
pub fn speedscope_profiles(
    profiles: &[(String, Vec<SampledStack>)],
    name: &str,
    w: &mut dyn Write,
) -> io::Result<()> {
    let mut frames: Vec<&str> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::with_capacity(profiles.len());
    for (profile_name, stacks) in profiles {
        let mut samples = Vec::with_capacity(stacks.len());
        let mut weights = Vec::with_capacity(stacks.len());
        for s in stacks {
            let ids: Vec<usize> = s
                .frames
                .iter()
                .map(|f| {
                    *index.entry(f.as_str()).or_insert_with(|| {
                        frames.push(f.as_str());
                        frames.len() - 1
                    })
                })
                .collect();
            samples.push(ids);
            weights.push(s.samples);
        }
        let total: u64 = weights.iter().sum();
        out.push(serde_json::json!({
            "type": "sampled",
            "name": profile_name,
            "unit": "none",
            "startValue": 0,
            "endValue": total,
            "samples": samples,
            "weights": weights,
        }));
    }
    let doc = serde_json::json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": { "frames": frames.iter().map(|f| serde_json::json!({ "name": f })).collect::<Vec<_>>() },
        "profiles": out,
        "name": name,
        "exporter": concat!("coldstart ", env!("CARGO_PKG_VERSION")),
    });
    serde_json::to_writer(&mut *w, &doc)?;
    w.write_all(b"\n")
}

/// What a table of sampled frames stands for: its samples, those of
/// threads on CPU and the CPU time they stand for, and the rounds and
/// wall time they were taken over (the rate actually used).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SampleSummary {
    /// Samples in the table (idle threads' too, when they were kept).
    pub samples: u64,
    /// Those of threads on CPU.
    pub on_cpu: u64,
    /// The CPU time the samples on CPU stand for, each weighted by the
    /// interval it was taken at; idle samples count nothing.
    pub cpu_ms: f64,
    /// Sampling rounds run.
    pub rounds: u64,
    /// The wall time they covered.
    pub seconds: f64,
    /// The CPU time the kernel counted for the sampled processes over
    /// those rounds, ms (`None` when it was not read): the measured figure
    /// beside `cpu_ms`, which also counts a runnable thread's wait for a
    /// CPU on a loaded machine.
    pub kernel_cpu_ms: Option<f64>,
}

impl SampleSummary {
    /// Rounds per second: the rate actually used.
    pub fn rate_hz(&self) -> f64 {
        if self.seconds > 0.0 {
            self.rounds as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// The top-frames table as text: what the samples stand for (the rate
/// used, the samples on CPU and the CPU time they stand for, the idle
/// ones apart), then each ranked row (frame, self samples, total samples)
/// with its share of all samples. The ranking is the sampler's
/// (`pystacks::top_frames`).
pub fn top_table(
    rows: &[(&str, u64, u64)],
    summary: &SampleSummary,
    w: &mut dyn Write,
) -> io::Result<()> {
    let all = summary.samples;
    let idle = all.saturating_sub(summary.on_cpu);
    writeln!(
        w,
        "{all} samples in {} rounds over {:.1} s ({:.1} Hz used): {} on CPU, about {:.0} ms of CPU time{}{}",
        summary.rounds,
        summary.seconds,
        summary.rate_hz(),
        summary.on_cpu,
        summary.cpu_ms,
        if idle > 0 {
            format!("; {idle} idle (not CPU time)")
        } else {
            String::new()
        },
        summary
            .kernel_cpu_ms
            .map_or(String::new(), |k| format!("; the kernel counted {k:.0} ms"))
    )?;
    writeln!(
        w,
        "{:>8} {:>6} {:>8} {:>6}  frame",
        "self", "%", "total", "%"
    )?;
    let pct = |x: u64| {
        if all == 0 {
            0.0
        } else {
            x as f64 * 100.0 / all as f64
        }
    };
    for &(frame, self_samples, total_samples) in rows {
        writeln!(
            w,
            "{:>8} {:>5.1}% {:>8} {:>5.1}%  {frame}",
            self_samples,
            pct(self_samples),
            total_samples,
            pct(total_samples),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every SVG written here is parsed as XML: a control character (a NUL
    /// read from a target) would make it a file no browser opens.
    #[test]
    fn a_flame_graph_with_control_characters_in_its_frames_is_well_formed_xml() {
        let stacks = vec![
            SampledStack {
                frames: vec![
                    "process 1:\"py\"".into(),
                    "\0\0\0\0 (torch/_ops.py:491)".into(),
                    "g\u{1b}[31m (a.py:2)".into(),
                ],
                samples: 5,
            },
            SampledStack {
                frames: vec!["process 1:\"py\"".into(), "<module> (a&b.py:1)".into()],
                samples: 3,
            },
        ];
        let mut out = Vec::new();
        flamegraph_svg(&stacks, "title \u{7}", &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(
            !svg.chars()
                .any(|c| c.is_control() && !matches!(c, '\n' | '\t' | '\r')),
            "a control character reached the SVG"
        );
        crate::assert_well_formed_svg(&svg);
        assert!(
            svg.contains("(torch/_ops.py:491)"),
            "the frame's place is kept"
        );
    }

    /// The figures are the summary's (the rate used, the CPU time of the
    /// samples on CPU), never the samples over an asked rate: 260 idle
    /// samples over 1 s are no CPU time.
    #[test]
    fn the_table_states_the_rate_used_and_counts_no_idle_sample_as_cpu() {
        let mut out = Vec::new();
        let summary = SampleSummary {
            samples: 260,
            on_cpu: 0,
            cpu_ms: 0.0,
            rounds: 100,
            seconds: 1.0,
            kernel_cpu_ms: None,
        };
        top_table(&[("accept (server.py:3)", 260, 260)], &summary, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("260 samples in 100 rounds over 1.0 s (100.0 Hz used): 0 on CPU, about 0 ms of CPU time; 260 idle (not CPU time)\n"),
            "{text}"
        );
        let mut out = Vec::new();
        let lowered = SampleSummary {
            samples: 25,
            on_cpu: 25,
            cpu_ms: 5000.0,
            rounds: 25,
            seconds: 5.0,
            kernel_cpu_ms: Some(4210.0),
        };
        top_table(&[], &lowered, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("25 samples in 25 rounds over 5.0 s (5.0 Hz used): 25 on CPU, about 5000 ms of CPU time; the kernel counted 4210 ms\n"),
            "{text}"
        );
    }

    #[test]
    fn printable_replaces_control_characters_only() {
        assert_eq!(crate::printable("a\0b\u{1b}c"), "a\u{FFFD}b\u{FFFD}c");
        assert!(matches!(
            crate::printable("plain é"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn speedscope_writes_a_profile_per_process_over_one_frame_table() {
        let parent = stacks("process 1:\"svc\";main;work 3\n");
        let worker = stacks("process 2:\"py\";<module> (a.py:1);work 2\n");
        let mut out = Vec::new();
        speedscope_profiles(
            &[("svc".into(), parent), ("py".into(), worker)],
            "both",
            &mut out,
        )
        .unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let profiles = doc["profiles"].as_array().unwrap();
        assert_eq!(profiles.len(), 2);
        assert_eq!(profiles[0]["name"], "svc");
        assert_eq!(profiles[1]["endValue"], 2);
        // `work` is one frame of the shared table, in both.
        let frames = doc["shared"]["frames"].as_array().unwrap();
        assert_eq!(frames.iter().filter(|f| f["name"] == "work").count(), 1);
        assert_eq!(frames.len(), 5);
    }

    fn stacks(text: &str) -> Vec<SampledStack> {
        let (s, problems) = parse_collapsed(text);
        assert!(problems.is_empty(), "{problems:?}");
        s
    }

    #[test]
    fn parses_collapsed_lines_and_reports_bad_ones() {
        let (s, problems) = parse_collapsed(
            "process 1:\"py\";<module> (a.py:1);f (a.py:3) 7\n\ngarbage\nx;y notanumber\n",
        );
        assert_eq!(s.len(), 1);
        assert_eq!(
            s[0].frames,
            ["process 1:\"py\"", "<module> (a.py:1)", "f (a.py:3)"]
        );
        assert_eq!(s[0].samples, 7);
        assert_eq!(
            problems,
            [(3, "garbage".to_owned()), (4, "x;y notanumber".to_owned())]
        );
    }

    #[test]
    fn frames_with_spaces_keep_them() {
        let s = stacks("<module> (my app/x.py:1);g (y.py:2) 3\n");
        assert_eq!(s[0].frames[0], "<module> (my app/x.py:1)");
        assert_eq!(s[0].samples, 3);
    }

    #[test]
    fn speedscope_is_a_sampled_profile_with_shared_frames() {
        let s = stacks("a;b 2\na;c 3\n");
        let mut out = Vec::new();
        speedscope(&s, "w", &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["shared"]["frames"].as_array().unwrap().len(), 3);
        assert_eq!(v["profiles"][0]["type"], "sampled");
        assert_eq!(
            v["profiles"][0]["samples"],
            serde_json::json!([[0, 1], [0, 2]])
        );
        assert_eq!(v["profiles"][0]["weights"], serde_json::json!([2, 3]));
        assert_eq!(v["profiles"][0]["endValue"], 5);
    }

    #[test]
    fn flamegraph_names_the_frames_and_survives_no_samples() {
        let mut out = Vec::new();
        flamegraph_svg(&stacks("main;burn_cpu (w.py:3) 9\n"), "start-up", &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(svg.contains("burn_cpu (w.py:3)"));
        assert!(svg.contains("start-up"));
        let mut out = Vec::new();
        flamegraph_svg(&[], "empty", &mut out).unwrap();
        assert!(String::from_utf8(out).unwrap().contains("no samples"));
    }
}
