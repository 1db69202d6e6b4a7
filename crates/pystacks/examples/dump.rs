//! Prints every thread's Python stack of a process and of its Python
//! descendants, as `py-spy dump` would.
//!
//! `cargo run -p pystacks --example dump -- PID [TIMEOUT_SECONDS]`

use std::process::ExitCode;
use std::time::Duration;

use pystacks::{DumpOptions, dump};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(pid) = args.next().and_then(|a| a.parse::<u32>().ok()) else {
        eprintln!("usage: dump PID [TIMEOUT_SECONDS]");
        return ExitCode::from(2);
    };
    let timeout = args
        .next()
        .and_then(|a| a.parse::<f64>().ok())
        .map_or(Duration::from_secs(10), Duration::from_secs_f64);
    match dump(pid, &DumpOptions::with_timeout(timeout)) {
        Ok(d) => {
            print!("{d}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
