"""What `coldstart record` (or, with `--trace`, `coldstart trace`) costs the process it samples: the CPU time of a
fixed CPU-bound loop, run alone and run while `coldstart record --rate 100`
samples it from outside, interleaved round by round (the order alternates)
so drift on a shared machine falls on both. The loop's own CPU time leaves
out time it waited for a CPU (or sat stopped); its wall time does not. The
ratio per round is sampled / alone, of each. Prints each round, then
medians and the spread.

    python3 examples/live/record_overhead.py target/release/coldstart [ROUNDS] [ITERATIONS]
    python3 examples/live/record_overhead.py --trace target/release/coldstart [ROUNDS] [ITERATIONS]
    python3 examples/live/record_overhead.py --rust target/release/rust-spinner \
        target/release/coldstart [ROUNDS] [ITERATIONS]

The first loop is Python's; with `--rust SPINNER` it is a Rust process's
(`tests/bin/rust_spinner.rs`, `cargo build --release -p coldstart-tests
--bin rust-spinner`) and `record` reads it with `--native` (a coldstart
built with `--features native`): the process is stopped and unwound at
each sample, the cost of the Rust parent's half. `--trace` (first, before
`--rust`) measures `coldstart trace PID --rate 100` instead: the same
sampler plus its look at `/proc` every 50 ms, writing Chrome JSON.

(defaults: 9 rounds, 30,000,000 iterations for Python, 3,000,000,000 for
Rust, a few seconds of CPU each). Report the figures with the load at the
time (`uptime`).
"""
import os
import statistics
import subprocess
import sys
import tempfile

LOOP = r"""
import sys, time
def cpu_bound_loop(n):
    t = 0
    for i in range(n):
        t += i * i
    return t
print("ready", flush=True)
sys.stdin.readline()
c0, t0 = time.process_time_ns(), time.perf_counter_ns()
cpu_bound_loop(int(sys.argv[1]))
print(time.process_time_ns() - c0, time.perf_counter_ns() - t0, flush=True)
"""


def sampler_command(coldstart, trace, pid, out_dir):
    """The command that samples `pid`, and the first line it prints on
    stderr once it does."""
    if trace:
        return ([coldstart, "trace", str(pid), "--rate", "100",
                 "--output", "chrome-json=" + os.path.join(out_dir, "t.json")],
                "tracing process")
    return ([coldstart, "record", str(pid), "--rate", "100",
             "--format", "collapsed", "-o", os.path.join(out_dir, "rec.txt")],
            "recording process")


def run(coldstart, trace, rust, iterations, sampled, out_dir):
    command = [rust] if rust else [sys.executable, "-c", LOOP]
    loop = subprocess.Popen(
        command + [str(iterations)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert loop.stdout.readline().strip() == "ready"
    rec = None
    if sampled:
        command, says = sampler_command(coldstart, trace, loop.pid, out_dir)
        rec = subprocess.Popen(
            command + (["--native"] if rust else []),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Sampling has begun once it says so.
        line = rec.stderr.readline()
        assert line.startswith(says), line
    loop.stdin.write("go\n")
    loop.stdin.flush()
    cpu_ns, wall_ns = (int(x) for x in loop.stdout.readline().split())
    loop.stdin.close()
    loop.wait()
    if rec is not None:
        out, err = rec.communicate(timeout=60)  # it ends when the loop exits
        assert rec.returncode == 0, err
        assert "exited" in out, out
    return cpu_ns / 1e9, wall_ns / 1e9


def main():
    args = sys.argv[1:]
    trace = args[:1] == ["--trace"]
    if trace:
        args = args[1:]
    rust = None
    if args[:1] == ["--rust"]:
        rust, args = args[1], args[2:]
    coldstart = args[0]
    rounds = int(args[1]) if len(args) > 1 else 9
    default = 3_000_000_000 if rust else 30_000_000
    iterations = int(args[2]) if len(args) > 2 else default
    what = "trace" if trace else "record"
    print(f"loop: {f'Rust ({what} --native)' if rust else 'Python'} under {what}, "
          f"{iterations} iterations, "
          f"{rounds} rounds; load before: {os.getloadavg()}", flush=True)
    results = {False: [], True: []}
    ratios = {"CPU": [], "wall": []}
    with tempfile.TemporaryDirectory() as out_dir:
        for r in range(rounds):
            order = [False, True] if r % 2 == 0 else [True, False]
            got = {s: run(coldstart, trace, rust, iterations, s, out_dir) for s in order}
            for s in (False, True):
                results[s].append(got[s])
            ratios["CPU"].append(got[True][0] / got[False][0])
            ratios["wall"].append(got[True][1] / got[False][1])
            print(f"round {r + 1}: alone {got[False][0]:.3f} s CPU {got[False][1]:.3f} s wall, "
                  f"sampled {got[True][0]:.3f} s CPU {got[True][1]:.3f} s wall, "
                  f"ratio {ratios['CPU'][-1]:.4f} CPU {ratios['wall'][-1]:.4f} wall", flush=True)
    for i, what in enumerate(("CPU", "wall")):
        for s, name in ((False, "alone"), (True, "sampled")):
            xs = [x[i] for x in results[s]]
            print(f"loop {what} time {name}: median {statistics.median(xs):.3f} s "
                  f"(min {min(xs):.3f}, max {max(xs):.3f})")
        xs = ratios[what]
        print(f"sampled / alone per round, {what}: median {statistics.median(xs):.4f} "
              f"(min {min(xs):.4f}, max {max(xs):.4f})")
    print("load after:", os.getloadavg())


if __name__ == "__main__":
    main()
