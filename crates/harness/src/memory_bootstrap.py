# coldstart memory view bootstrap (embedded in xtask, written at run time to
# a private temporary folder that is put first on PYTHONPATH as
# `sitecustomize`; it chains to the sitecustomize the environment had).
#
# Only for the memory view, a run of its own: never in timed trials.
# tracemalloc is on from interpreter start (the harness sets
# PYTHONTRACEMALLOC=1; if that was ignored, this starts it here and says so).
# It writes JSON lines, one write each, to the file named by COLDSTART_MEMORY:
#   start     this bootstrap ran: pid, whether tracing began at interpreter start
#   snapshot  on SIGUSR1 or SIGUSR2 (sent by the harness): traced current
#             and peak (the peak is then reset: each reading's peak is the
#             most since the previous one), the tracer's own overhead, VmRSS
#             and VmHWM read at the same moment; with SIGUSR1 also the top
#             allocation sites by file:line, listed by a forked copy of the
#             worker (listing allocates megabytes the worker should not keep;
#             where fork fails, in place, with what that left recorded)
#   exit      the same figures at interpreter exit (atexit)
#   error     anything that went wrong in here (swallowed, never raised)
#
# It imports only builtin modules (_tracemalloc, _signal, atexit), so the
# worker's own imports and memory stay as they are.

import os
import sys
import time


def _dumps(v):
    if isinstance(v, str):
        out = []
        for ch in v:
            o = ord(ch)
            if ch == '"' or ch == "\\":
                out.append("\\" + ch)
            elif o < 32:
                out.append("\\u%04x" % o)
            else:
                out.append(ch)
        return '"' + "".join(out) + '"'
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, dict):
        return "{" + ",".join(_dumps(str(k)) + ":" + _dumps(x) for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_dumps(x) for x in v) + "]"
    return _dumps(str(v))


def _status():
    """VmRSS and VmHWM of this process in bytes (None where absent)."""
    rss = hwm = None
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith(b"VmHWM:"):
                    hwm = int(line.split()[1]) * 1024
    except Exception:
        pass
    return rss, hwm


def _install():
    path = os.environ.get("COLDSTART_MEMORY")
    if not path:
        return
    import _signal
    import _tracemalloc

    top_n = int(os.environ.get("COLDSTART_MEMORY_TOP", "15"))
    from_start = _tracemalloc.is_tracing()
    if not from_start:
        _tracemalloc.start(1)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o600)
    pid = os.getpid()
    state = {"seq": 0}

    def write(rec):
        try:
            os.write(fd, (_dumps(rec) + "\n").encode("utf-8", "replace"))
        except Exception:
            pass

    def emit(rec):
        if os.getpid() == pid:  # not a child the worker forked
            write(rec)

    def figures(kind):
        # The figures first, before anything here allocates.
        current, peak = _tracemalloc.get_traced_memory()
        t_ns = time.monotonic_ns()
        rss, hwm = _status()
        rec = {
            "type": kind,
            "t_ns": t_ns,
            "traced_current": current,
            "traced_peak": peak,
            "tracemalloc_overhead": _tracemalloc.get_tracemalloc_memory(),
            "rss": rss,
            "hwm": hwm,
        }
        return rec

    def top_sites():
        sites = {}
        for trace in _tracemalloc._get_traces():
            # (domain, size, frames, ...) with frames ((file, line), ...).
            size, frames = trace[1], trace[2]
            key = frames[0] if frames else ("<unknown>", 0)
            s = sites.get(key)
            if s is None:
                sites[key] = [size, 1]
            else:
                s[0] += size
                s[1] += 1
        ranked = sorted(sites.items(), key=lambda kv: kv[1][0], reverse=True)[:top_n]
        return [{"file": k[0], "line": k[1], "size": v[0], "count": v[1]} for k, v in ranked]

    def list_elsewhere(rec):
        """Lists the allocation sites in a grandchild (a copy of this
        process's memory and traces) that writes the record: listing
        allocates megabytes, which the worker then never holds, and the
        worker never waits for that copy, so its wait4 peak RSS stays its
        own. False when fork is not possible."""
        try:
            child = os.fork()
        except Exception:
            return False
        if child == 0:
            try:
                if os.fork() == 0:
                    try:
                        rec["top"] = top_sites()
                        rec["listed_in"] = "a forked copy"
                        write(rec)
                    finally:
                        os._exit(0)
            finally:
                os._exit(0)
        os.waitpid(child, 0)
        return True

    def on_signal(signum, frame):
        try:
            state["seq"] += 1
            rec = figures("snapshot")
            rec["seq"] = state["seq"]
            # Each reading's peak is the most since the previous reading.
            reset = getattr(_tracemalloc, "reset_peak", None)
            if reset is not None:
                reset()
            rec["peak_reset"] = reset is not None
            if signum == _signal.SIGUSR1:
                if list_elsewhere(rec):
                    return
                # No fork here: list in place, and say what that left.
                rec["top"] = top_sites()
                rec["listed_in"] = "the worker"
                rec["traced_after"] = _tracemalloc.get_traced_memory()[0]
                rec["rss_after"] = _status()[0]
            emit(rec)
        except Exception as exc:
            emit({"type": "error", "where": "snapshot", "error": "%s: %s" % (type(exc).__name__, exc)})

    def at_exit():
        try:
            emit(figures("exit"))
        except Exception as exc:
            emit({"type": "error", "where": "exit", "error": "%s: %s" % (type(exc).__name__, exc)})

    import atexit

    _signal.signal(_signal.SIGUSR1, on_signal)
    _signal.signal(_signal.SIGUSR2, on_signal)
    atexit.register(at_exit)
    emit({"type": "start", "t_ns": time.monotonic_ns(), "pid": pid, "tracing_from_start": from_start})


_here = os.path.dirname(os.path.abspath(__file__))


def _is_here(entry):
    try:
        return os.path.abspath(entry or os.curdir) == _here
    except Exception:
        return False


def _chain():
    """Runs the sitecustomize this environment had before us, found on
    sys.path after our own folder, and takes our folder off sys.path."""
    from _frozen_importlib_external import PathFinder
    from _frozen_importlib import module_from_spec

    rest = []
    ours = False
    for entry in sys.path:
        if _is_here(entry):
            ours = True
        elif ours:
            rest.append(entry)
    sys.path[:] = [e for e in sys.path if not _is_here(e)]
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is None:
        return
    module = module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    _install()
except Exception as _exc:
    sys.stderr.write("coldstart memory bootstrap: %s: %s\n" % (type(_exc).__name__, _exc))
try:
    _chain()
except Exception as _exc:
    print("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
          "%s: %s" % (type(_exc).__name__, _exc), file=sys.stderr)
