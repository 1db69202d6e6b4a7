//! A Rust process busy in a known function of its own: what `top --native`
//! must find in a Rust parent, and the fixed CPU-bound loop whose cost
//! under `record --native` `examples/live/record_overhead.py --rust`
//! measures.
//!
//! `rust-spinner N`: prints `ready`, waits for a line on stdin, runs
//! `spin_in_a_known_function` for N iterations and prints its own CPU time
//! and wall time in nanoseconds (`CPU WALL`), then exits. `rust-spinner 0`:
//! after the line, spins until stdin closes. A second argument
//! `not-dumpable` first makes the process non-dumpable (`PR_SET_DUMPABLE`
//! 0), so only a reader with `CAP_SYS_PTRACE` may read it.

use std::hint::black_box;
use std::io::{BufRead, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// The loop: `n` additions with no call in them, so every sample taken
/// while it runs lands in this function itself and one unwinding step
/// reaches `main`. (Written with iterators, a debug build spends most of
/// it in core's calls, whose frames the samples then land in instead.)
#[inline(never)]
fn spin_in_a_known_function(n: u64) -> u64 {
    let mut t = 0u64;
    if n == 0 {
        return t;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let mut i = 0u64;
        // SAFETY: register arithmetic only: no memory, no stack, no call.
        unsafe {
            std::arch::asm!(
                "2:",
                "add {t}, {i}",
                "add {i}, 1",
                "cmp {i}, {n}",
                "jb 2b",
                t = inout(reg) t,
                i = inout(reg) i,
                n = in(reg) n,
                options(nomem, nostack),
            );
        }
        black_box(i);
    }
    #[cfg(not(target_arch = "x86_64"))]
    for i in 0..n {
        t = t.wrapping_add(black_box(i));
    }
    t
}

/// This process's CPU time so far, in nanoseconds.
fn cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid, writable timespec; the clock always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    if std::env::args().nth(2).as_deref() == Some("not-dumpable") {
        // SAFETY: prctl(2) with an integer argument; no memory involved.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0) };
    }
    let mut out = std::io::stdout();
    let _ = writeln!(out, "ready");
    let _ = out.flush();
    let mut stdin = std::io::stdin().lock();
    let mut line = String::new();
    let _ = stdin.read_line(&mut line);
    drop(stdin);
    if n == 0 {
        let closed = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&closed);
        std::thread::spawn(move || {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
            flag.store(true, Ordering::Relaxed);
        });
        while !closed.load(Ordering::Relaxed) {
            black_box(spin_in_a_known_function(1_000_000));
        }
        return;
    }
    let (c0, t0) = (cpu_ns(), Instant::now());
    black_box(spin_in_a_known_function(n));
    let wall = t0.elapsed().as_nanos();
    let _ = writeln!(out, "{} {wall}", cpu_ns() - c0);
}
