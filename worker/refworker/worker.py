"""The reference worker: start-up, the request loop and the ops.

Protocol (JSON lines, UTF-8, one object per line; ``docs/protocol.md`` has it
all with examples):

- start-up writes one ready line,
  ``{"ready": true, "pid": N, "transport": "stdio", "t_ns": T}``, where ``T`` is
  ``time.monotonic_ns()`` taken just before the write;
- each request ``{"op": ..., ...}`` gets exactly one reply line;
- ``{"op": "shutdown"}`` is acknowledged with ``{"op": "shutdown"}``, then the
  worker exits 0; EOF on stdin also ends it with exit 0;
- an unknown op, a malformed or over-long line gets
  ``{"op": "error", "error": "..."}`` and the worker goes on serving.

stdout carries nothing but protocol lines, each written whole with one
``write`` as soon as it is ready: the worker keeps a private copy of the
stdout descriptor for the protocol and points descriptor 1 at stderr, so a
stray ``print`` (or a library writing from C) lands in stderr. Logs go to
stderr through ``logging``.

With ``--transport tcp [--port P]`` the same protocol runs over one TCP
connection instead: the worker listens on 127.0.0.1 (``--port 0``, the
default, lets the kernel pick a free port), writes its ready line to stderr
among its logs, ``{"ready": true, "pid": N, "transport": "tcp", "host":
"127.0.0.1", "port": P, "t_ns": T}``, accepts one connection and serves it;
the connection's end is the EOF that ends the worker. Nothing is written to
stdout then.

Start-up imports only the standard library and ``refworker.evidence``; the
model code is imported by name inside ``load``.
"""

import argparse
import json
import logging
import os
import sys
import time

from refworker import __version__
from refworker.evidence import Evidence, echo
from refworker.models import PROFILES, REQUIRES

log = logging.getLogger("refworker")

#: The longest request line accepted, newline excluded (the protocol's cap).
MAX_LINE_BYTES = 1 << 20

#: The ops this worker serves, in the order ``capabilities`` lists them.
OPS = ("health", "capabilities", "load", "infer", "shutdown")

#: How much of an over-long line is read per call while skipping it.
_SKIP_CHUNK = 1 << 16


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="python -m refworker",
        description="coldstart's reference worker: the JSON-lines worker protocol "
        "on stdin/stdout, logs on stderr.",
    )
    p.add_argument(
        "--test-echo",
        action="store_true",
        help="load no models on its own: infer echoes without model code "
        "(an explicit load request still loads)",
    )
    p.add_argument(
        "--profile",
        choices=PROFILES,
        default="gpu",
        help="which model code load imports: gpu (torch, transformers), "
        "stanza (stanza), io (nothing heavy); default gpu",
    )
    p.add_argument(
        "--force-cpu",
        action="store_true",
        help="use the cpu without probing CUDA, so start-up never imports torch",
    )
    p.add_argument("--task", default="echo", help="task name reported in replies")
    p.add_argument("--lang", default="en", help="language code reported in replies")
    p.add_argument(
        "--transport",
        choices=("stdio", "tcp"),
        default="stdio",
        help="stdio: the protocol on stdin/stdout (default); tcp: on one TCP "
        "connection to 127.0.0.1, the ready line on stderr",
    )
    p.add_argument(
        "--port",
        type=int,
        default=0,
        help="with --transport tcp: the port to listen on; 0 (default) picks a free one",
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="stderr log level; default info",
    )
    return p.parse_args(argv)


def detect_device(profile, force_cpu):
    """``"cuda"`` or ``"cpu"``.

    Only the gpu profile probes CUDA. With ``force_cpu`` it returns before
    importing torch; without it, it imports torch (when installed) to ask.
    """
    if profile != "gpu":
        return "cpu"
    if force_cpu:
        return "cpu"
    try:
        import torch
    except ImportError:
        log.info("torch is not installed: device cpu")
        return "cpu"
    try:
        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception as e:  # a broken torch must not stop the worker
        log.warning("torch.cuda.is_available() failed (%s): device cpu", e)
        return "cpu"


class _IoModel:
    """The io profile's "model": no third-party code at all."""

    name = "refworker-echo-io"
    runtime = {}

    def __init__(self, task, lang):
        self.task = task
        self.lang = lang

    def predict(self, text):
        evidence = echo(text, self.task, self.lang)
        return Evidence(evidence.task, evidence.lang, self.name, evidence.spans)


class RequestError(Exception):
    """A request this worker answers with an error reply."""

    def __init__(self, message, **extra):
        super().__init__(message)
        self.extra = extra


def write_fd(fd):
    """A writer of whole lines to descriptor ``fd`` (one write when it fits)."""

    def write(data):
        data = memoryview(data)
        while data:
            n = os.write(fd, data)
            data = data[n:]

    return write


class Worker:
    def __init__(self, args, write):
        self.args = args
        self.write = write
        self.input_name = "stdin"
        self.device = "cpu"
        self.model = None

    # -- output ---------------------------------------------------------

    def send(self, obj):
        """Writes one protocol line whole."""
        self.write((json.dumps(obj) + "\n").encode("utf-8"))

    # -- input ----------------------------------------------------------

    def read_line(self, stdin):
        """The next request line without its newline, or ``None`` at EOF.

        An over-long line is read to its end without keeping it and raised
        as a ``RequestError``.
        """
        line = stdin.readline(MAX_LINE_BYTES + 1)
        if not line:
            return None
        if line.endswith(b"\n"):
            return line[:-1]
        if len(line) <= MAX_LINE_BYTES:
            return line  # the last line, without a newline, at EOF
        length = len(line)
        while True:
            chunk = stdin.readline(_SKIP_CHUNK)
            if not chunk:
                break
            if chunk.endswith(b"\n"):
                length += len(chunk) - 1
                break
            length += len(chunk)
        raise RequestError(
            f"request line of {length} bytes exceeds the {MAX_LINE_BYTES}-byte cap; "
            "send one JSON object per line, smaller"
        )

    @staticmethod
    def parse(line):
        """The request object of one line; ``RequestError`` when malformed."""
        if line.endswith(b"\r"):
            line = line[:-1]
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise RequestError(
                f"malformed request: not UTF-8 (bad byte at offset {e.start}); "
                "send UTF-8 JSON, one object per line"
            ) from None
        try:
            req = json.loads(text)
        except ValueError as e:
            raise RequestError(
                f"malformed request: not JSON ({e}); send one JSON object per line"
            ) from None
        if not isinstance(req, dict):
            raise RequestError(
                f"malformed request: expected a JSON object, got {type(req).__name__}"
            )
        op = req.get("op")
        if not isinstance(op, str):
            raise RequestError(
                'malformed request: missing string field "op"',
                **_id_of(req),
            )
        return req

    # -- the loop -------------------------------------------------------

    def serve(self, stdin):
        """Answers requests until shutdown (exit 0) or EOF on stdin (exit 0)."""
        while True:
            try:
                line = self.read_line(stdin)
            except RequestError as e:
                self.send(_error(str(e), e.extra))
                continue
            if line is None:
                log.info("%s closed: exiting", self.input_name)
                return 0
            if not line.strip():
                continue  # blank lines are tolerated, not answered
            try:
                req = self.parse(line)
                reply = self.handle(req)
            except RequestError as e:
                log.warning("%s", e)
                self.send(_error(str(e), e.extra))
                continue
            self.send(reply)
            if req["op"] == "shutdown":
                log.info("shutdown acknowledged: exiting")
                return 0

    def handle(self, req):
        op = req["op"]
        ident = _id_of(req)
        handler = getattr(self, "op_" + op, None) if op in OPS else None
        if handler is None:
            raise RequestError(f"unknown op: {op!r}", **ident)
        try:
            response = handler(req)
        except RequestError as e:
            e.extra.update(ident)
            raise
        except Exception as e:  # a bug in an op must not end the worker
            log.exception("op %r failed", op)
            raise RequestError(
                f"op {op!r} failed: {type(e).__name__}: {e}", **ident
            ) from None
        reply = {"op": op}
        if response is not None:
            reply["response"] = response
        reply.update(ident)
        return reply

    # -- ops ------------------------------------------------------------

    def op_health(self, req):
        return {
            "status": "ok",
            "pid": os.getpid(),
            "profile": self.args.profile,
            "device": self.device,
            "task": self.args.task,
            "lang": self.args.lang,
            "test_echo": self.args.test_echo,
            "model_loaded": self.model is not None,
        }

    def op_capabilities(self, req):
        return {
            "ops": list(OPS),
            "profiles": list(PROFILES),
            "profile": self.args.profile,
            "requires": list(REQUIRES[self.args.profile]),
            "device": self.device,
            "task": self.args.task,
            "lang": self.args.lang,
            "test_echo": self.args.test_echo,
            "max_line_bytes": MAX_LINE_BYTES,
            "version": __version__,
        }

    def op_load(self, req):
        already = self.model is not None
        t0 = time.monotonic_ns()
        if not already:
            self.model = self._load_model()
        return {
            "status": "loaded",
            "already_loaded": already,
            "profile": self.args.profile,
            "model": self.model.name,
            "device": self.device,
            "runtime": dict(self.model.runtime),
            "load_ns": time.monotonic_ns() - t0,
        }

    def op_infer(self, req):
        if self.model is None and not self.args.test_echo:
            self.model = self._load_model()
        text = req.get("text")
        evidence = None
        if isinstance(text, str):
            if self.model is None:
                evidence = echo(text, self.args.task, self.args.lang)
            else:
                evidence = self.model.predict(text)
        return {
            "echo": {k: v for k, v in req.items() if k not in ("op", "id")},
            "model": None if self.model is None else self.model.name,
            "evidence": None if evidence is None else evidence.to_json(),
        }

    def op_shutdown(self, req):
        return None  # the ack is exactly {"op": "shutdown"}

    def _load_model(self):
        profile, task, lang = self.args.profile, self.args.task, self.args.lang
        if profile == "io":
            log.info("profile io: no model code to import")
            return _IoModel(task, lang)
        log.info("loading the %s profile's model code", profile)
        try:
            # Imported here and only here: these modules import the heavy
            # packages at module level.
            if profile == "gpu":
                from refworker.models import infer as code
            else:
                from refworker.models import stanza_infer as code
        except ModuleNotFoundError as e:
            needs = " and ".join(REQUIRES[profile])
            missing = e.name or "a required package"
            raise RequestError(
                f"cannot load the {profile} profile: {missing} is not installed; "
                f"install {needs} in this interpreter, or run with --profile io",
                missing=missing,
            ) from None
        except Exception as e:
            raise RequestError(
                f"cannot load the {profile} profile: importing its model code "
                f"raised {type(e).__name__}: {e}"
            ) from None
        model = code.load(self.device, task, lang)
        log.info("loaded %s on %s", model.name, self.device)
        return model


def _id_of(req):
    """``{"id": ...}`` when the request carried an id, to echo in the reply."""
    return {"id": req["id"]} if "id" in req else {}


def _error(message, extra=None):
    reply = {"op": "error", "error": message}
    if extra:
        reply.update(extra)
    return reply


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s refworker[%(process)d] %(levelname)s %(message)s",
    )
    # The protocol gets a private copy of stdout; descriptor 1 becomes
    # stderr, so nothing else can ever write a line into the protocol.
    out_fd = os.dup(1)
    os.dup2(2, 1)
    if args.transport == "tcp":
        os.close(out_fd)
        return serve_tcp(args)

    worker = Worker(args, write_fd(out_fd))
    worker.device = detect_device(args.profile, args.force_cpu)
    log.info(
        "pid %d profile %s device %s task %s lang %s%s",
        os.getpid(),
        args.profile,
        worker.device,
        args.task,
        args.lang,
        " test-echo" if args.test_echo else "",
    )
    try:
        worker.send(
            {
                "ready": True,
                "pid": os.getpid(),
                "transport": "stdio",
                "t_ns": time.monotonic_ns(),
            }
        )
        return worker.serve(sys.stdin.buffer)
    except BrokenPipeError:
        log.error("stdout closed before the worker finished: exiting")
        return 1
    except KeyboardInterrupt:
        log.info("interrupted: exiting")
        return 130


def serve_tcp(args):
    """The tcp transport: listen on 127.0.0.1, the ready line on stderr,
    then serve the one connection the harness opens until shutdown or its
    end (exit 0)."""
    # Imported here, not at the top: a stdio worker's start-up (what
    # coldstart checks and times) imports nothing it does not use.
    import socket

    host = "127.0.0.1"
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, args.port))
        listener.listen(1)
    except OSError as e:
        log.error("cannot listen on %s:%d: %s", host, args.port, e)
        return 1
    port = listener.getsockname()[1]
    worker = Worker(args, None)
    worker.device = detect_device(args.profile, args.force_cpu)
    log.info(
        "pid %d profile %s device %s task %s lang %s transport tcp %s:%d%s",
        os.getpid(),
        args.profile,
        worker.device,
        args.task,
        args.lang,
        host,
        port,
        " test-echo" if args.test_echo else "",
    )
    ready = {
        "ready": True,
        "pid": os.getpid(),
        "transport": "tcp",
        "host": host,
        "port": port,
        "t_ns": time.monotonic_ns(),
    }
    try:
        # One whole line with one write, so it never interleaves with logs.
        write_fd(2)((json.dumps(ready) + "\n").encode("utf-8"))
        conn, peer = listener.accept()
    except KeyboardInterrupt:
        log.info("interrupted: exiting")
        return 130
    finally:
        listener.close()
    log.info("connection from %s:%d", peer[0], peer[1])
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    worker.write = conn.sendall
    worker.input_name = "the connection"
    try:
        with conn, conn.makefile("rb") as stream:
            return worker.serve(stream)
    except (BrokenPipeError, ConnectionResetError):
        log.error("the connection closed before the worker finished: exiting")
        return 1
    except KeyboardInterrupt:
        log.info("interrupted: exiting")
        return 130
