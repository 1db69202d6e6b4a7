"""`python -m mlworker`: the JSON-lines protocol on stdin/stdout."""

import json
import os
import sys
import time


def waiting_forever():
    while True:
        time.sleep(1)


def tokenize_batch(ms):
    """CPU-bound work for about `ms` milliseconds, as a model call is."""
    deadline = time.monotonic() + ms / 1000.0
    tokens = 0
    while time.monotonic() < deadline:
        tokens += len("the quick brown fox jumps over the lazy dog".split())
    return tokens


def main():
    out = sys.stdout
    out.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    out.flush()
    model = None
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            out.write(json.dumps({"op": "error", "error": "not JSON"}) + "\n")
            out.flush()
            continue
        op = msg.get("op")
        if op == "health":
            reply = {"op": "health", "response": {"status": "ok", "model": model is not None}}
        elif op == "shutdown":
            out.write(json.dumps({"op": "shutdown"}) + "\n")
            out.flush()
            return 0
        elif op == "hang":
            # A request that never finishes, as a wedged model call would.
            waiting_forever()
        elif op == "work":
            tokens = tokenize_batch(float(msg.get("ms", 100)))
            reply = {"op": "work", "response": {"tokens": tokens}}
        elif op == "load":
            # The only place the model runtime is imported.
            from mlworker.models import load_model

            model = load_model(msg.get("name", "ner"))
            reply = {"op": "load", "response": {"loaded": True}}
        else:
            reply = {"op": "error", "error": "unknown op %r" % (op,)}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
