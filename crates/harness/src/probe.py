# An independent probe of a worker's time to ready, for
# `cargo xtask probe-check`: Python's subprocess, readline and
# time.monotonic, as a person would measure it by hand. Standard library only.
#
# stdin line 1: {"command": [...], "env": {...}, "env_remove": [...], "cwd": "..."}
# then one line per trial; each answers one JSON line on stdout:
# {"ready_s": 0.0612, "ok": true}
import json
import os
import subprocess
import sys
import time

cfg = json.loads(sys.stdin.readline())
env = dict(os.environ)
env.update(cfg["env"])
for key in cfg["env_remove"]:
    env.pop(key, None)

for _ in sys.stdin:
    t0 = time.monotonic()
    p = subprocess.Popen(
        cfg["command"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=cfg["cwd"],
        env=env,
    )
    ready = p.stdout.readline()
    t1 = time.monotonic()
    p.stdin.write(b'{"op": "shutdown"}\n')
    p.stdin.flush()
    ack = p.stdout.readline()
    p.stdin.close()
    code = p.wait()
    ok = b'"ready"' in ready and ack.startswith(b"{") and code == 0
    print(json.dumps({"ready_s": t1 - t0, "ok": ok}), flush=True)
