//! Tests only: a stand-in worker for harness's own unit tests, named as
//! such: a few lines of standard-library Python that speak the protocol
//! (ready, health, shutdown) and then exit with the code asked for, or
//! exit before their ready line.

use std::path::Path;

use crate::target::Target;

/// The stand-in: `argv[1]` is `ok`, `exit:N` (exit N after the shutdown
/// ack), `crash` (exit 3 before the ready line), `bare-health` (answers
/// health with `{"op": "health", "ok": true}`, no `response.status`) or
/// `slow:S:T` (sleeps S ms
/// before its ready line and T ms before each health reply: a slow start
/// and a service time, for the pool's dispatcher), or `gate:N:S:T:DIR`.
///
/// `gate:N:S:T:DIR` is `slow:S:T` with a gate, so that a pool test can
/// say which worker serves without racing the machine's load: each
/// stand-in takes the next free ordinal as it starts (exclusive files in
/// DIR); those below N hold their first request until stand-in N has been
/// handed its own first request. Stand-in N then marks the fifo `DIR/gate`
/// and keeps it open, so a later reader passes too. The hold gives up
/// after 60 s, so a stand-in N that never comes fails the test's
/// assertions instead of hanging it.
const SCRIPT: &str = r#"
import json, os, select, sys, time
mode = sys.argv[1]
if mode == "crash":
    sys.exit(3)
start_ms, service_ms, gate = 0, 0, None
if mode.startswith("slow:"):
    start_ms, service_ms = (float(x) for x in mode.split(":")[1:])
elif mode.startswith("gate:"):
    _, n, start_ms, service_ms, gate_dir = mode.split(":", 4)
    start_ms, service_ms = float(start_ms), float(service_ms)
    ordinal = 0
    while True:
        try:
            os.close(os.open(os.path.join(gate_dir, "started.%d" % ordinal), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            break
        except FileExistsError:
            ordinal += 1
    gate = os.path.join(gate_dir, "gate")
    try:
        os.mkfifo(gate)
    except FileExistsError:
        pass
    gate = ("hold", gate) if ordinal < int(n) else ("open", gate) if ordinal == int(n) else None
def pass_gate():
    global gate, opened
    how, path = gate
    gate = None
    if how == "hold":
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        select.select([fd], [], [], 60)
        os.close(fd)
    elif how == "open":
        opened = os.open(path, os.O_RDWR)
        os.write(opened, b"x")
time.sleep(start_ms / 1000)
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
send({"ready": True, "pid": os.getpid(), "t_ns": time.monotonic_ns()})
for line in sys.stdin:
    op = json.loads(line).get("op")
    if op == "health":
        if gate:
            pass_gate()
        time.sleep(service_ms / 1000)
        send({"op": "health", "ok": True} if mode == "bare-health" else {"op": "health", "response": {"status": "ok"}})
    elif op == "shutdown":
        send({"op": "shutdown"})
        break
sys.exit(int(mode.split(":")[1]) if mode.startswith("exit:") else 0)
"#;

/// A target running the stand-in in `mode` (see [`SCRIPT`]), named `name`.
pub(crate) fn target(dir: &Path, mode: &str, name: &str) -> Target {
    let python = test_interpreters::default_python();
    Target::ad_hoc(
        dir,
        vec![
            python.display().to_string(),
            "-c".to_owned(),
            SCRIPT.to_owned(),
            mode.to_owned(),
        ],
        name,
    )
}
