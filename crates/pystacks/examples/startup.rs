//! A start-up profile as `profile --until ready` would take it: start a
//! Python command, sample it from its spawn until it prints its ready
//! line, then say how much of that went into imports, which frames took
//! the rest, when the first sample landed after the spawn and what the
//! sampler cost.
//!
//! `cargo run -p pystacks --example startup -- [RATE_HZ] [-- PYTHON ARGS...]`
//! (default: 1000 Hz; `python3 -c` importing a few heavy stdlib modules
//! then printing `ready`). The command must print a line when ready.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use pystacks::{Sampler, SamplerOptions, collapsed_text, import_share};

const DEFAULT: &str = "import asyncio, decimal, email.mime.multipart, http.client, json, logging.handlers, \
     sqlite3, unittest, xml.etree.ElementTree, zipfile; print('ready', flush=True)";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (rate, command) = match args.iter().position(|a| a == "--") {
        Some(i) => (args[..i].first().cloned(), args[i + 1..].to_vec()),
        None => (args.first().cloned(), Vec::new()),
    };
    let rate: u32 = rate.map_or(1000, |r| r.parse().expect("RATE_HZ"));
    let command = if command.is_empty() {
        vec!["python3".to_owned(), "-c".to_owned(), DEFAULT.to_owned()]
    } else {
        command
    };

    let spawned_ns = timeline::monotonic_ns();
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdout(Stdio::piped())
        .spawn()
        .expect("the command starts");
    let sampler = Sampler::start(child.id(), SamplerOptions::at_rate(rate)).expect("sampler");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("a ready line");
    let ready_ns = timeline::monotonic_ns();
    let profile = sampler.stop();
    let _ = child.wait();

    let start_up = profile.collapsed_before(ready_ns);
    let share = import_share(&start_up, 10);
    let first = profile.samples.iter().map(|s| s.t_ns).min();
    println!("{}", command.join(" "));
    println!(
        "ready after {:.1} ms; first sample {} after the spawn; {} samples at {rate} Hz before ready, {} errors, {} late rounds",
        (ready_ns - spawned_ns) as f64 / 1e6,
        first.map_or("never".to_owned(), |t| format!(
            "{:.1} ms",
            (t - spawned_ns) as f64 / 1e6
        )),
        share.samples,
        profile.errors,
        profile.late_ticks,
    );
    println!(
        "inside imports: {} of {} samples ({:.0}%)",
        share.inside_imports,
        share.samples,
        share.share_inside() * 100.0
    );
    println!("top frames outside imports (self, total):");
    for f in &share.top_outside {
        println!(
            "  {:>5} {:>5}  {}",
            f.self_samples, f.total_samples, f.frame
        );
    }
    let c = profile.cost;
    println!(
        "sampler: {:.1} ms attaching, {:.1} ms reading ({:.1}% of {:.1} ms), {:.1} ms CPU",
        c.attach_ns as f64 / 1e6,
        c.read_ns as f64 / 1e6,
        c.reading_share() * 100.0,
        c.wall_ns() as f64 / 1e6,
        c.cpu_ns as f64 / 1e6
    );
    if std::env::var_os("SHOW_STACKS").is_some() {
        print!("{}", collapsed_text(&start_up));
    }
}
