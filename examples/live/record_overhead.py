"""What `coldstart record` costs the process it samples: the CPU time of a
fixed CPU-bound Python loop, run alone and run while `coldstart record
--rate 100` samples it from outside, interleaved round by round (the order
alternates) so drift on a shared machine falls on both. The loop's own CPU
time (time.process_time) leaves out time it waited for a CPU; the ratio per
round is sampled / alone. Prints each round, then medians and the spread.

    python3 examples/live/record_overhead.py target/release/coldstart [ROUNDS] [ITERATIONS]

(defaults: 9 rounds, 30,000,000 iterations, a few seconds of CPU each).
Report the figures with the load at the time (`uptime`).
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
c0 = time.process_time_ns()
cpu_bound_loop(int(sys.argv[1]))
print(time.process_time_ns() - c0, flush=True)
"""


def run(coldstart, iterations, sampled, out_dir):
    loop = subprocess.Popen(
        [sys.executable, "-c", LOOP, str(iterations)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert loop.stdout.readline().strip() == "ready"
    rec = None
    if sampled:
        rec = subprocess.Popen(
            [coldstart, "record", str(loop.pid), "--rate", "100",
             "--format", "collapsed", "-o", os.path.join(out_dir, "rec.txt")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Sampling has begun once it says so.
        line = rec.stderr.readline()
        assert line.startswith("recording process"), line
    loop.stdin.write("go\n")
    loop.stdin.flush()
    cpu_ns = int(loop.stdout.readline())
    loop.stdin.close()
    loop.wait()
    if rec is not None:
        out, err = rec.communicate(timeout=60)  # it ends when the loop exits
        assert rec.returncode == 0, err
        assert "the process exited" in out, out
    return cpu_ns / 1e9


def main():
    coldstart = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    iterations = int(sys.argv[3]) if len(sys.argv) > 3 else 30_000_000
    alone, sampled, ratios = [], [], []
    with tempfile.TemporaryDirectory() as out_dir:
        for r in range(rounds):
            order = [False, True] if r % 2 == 0 else [True, False]
            got = {s: run(coldstart, iterations, s, out_dir) for s in order}
            alone.append(got[False])
            sampled.append(got[True])
            ratios.append(got[True] / got[False])
            print(f"round {r + 1}: alone {got[False]:.3f} s, sampled {got[True]:.3f} s, "
                  f"ratio {ratios[-1]:.4f}", flush=True)
    print(f"loop CPU time alone:   median {statistics.median(alone):.3f} s "
          f"(min {min(alone):.3f}, max {max(alone):.3f})")
    print(f"loop CPU time sampled: median {statistics.median(sampled):.3f} s "
          f"(min {min(sampled):.3f}, max {max(sampled):.3f})")
    print(f"sampled / alone per round: median {statistics.median(ratios):.4f} "
          f"(min {min(ratios):.4f}, max {max(ratios):.4f})")
    print("load:", os.getloadavg())


if __name__ == "__main__":
    main()
