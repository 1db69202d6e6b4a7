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
/// and a service time, for the pool's dispatcher).
const SCRIPT: &str = r#"
import json, os, sys, time
mode = sys.argv[1]
if mode == "crash":
    sys.exit(3)
start_ms, service_ms = (float(x) for x in mode.split(":")[1:]) if mode.startswith("slow:") else (0, 0)
time.sleep(start_ms / 1000)
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
send({"ready": True, "pid": os.getpid(), "t_ns": time.monotonic_ns()})
for line in sys.stdin:
    op = json.loads(line).get("op")
    if op == "health":
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
