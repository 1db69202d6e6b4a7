# coldstart memory view bootstrap: the BODY that follows the shared prelude
# (importguard::recorder::bootstrap::PRELUDE). The harness writes both with
# `importguard::recorder::bootstrap::Bootstrap::prepare("coldstart-memory-", MEMORY_BODY)`
# and puts `Bootstrap::site()` first on PYTHONPATH; the stub there runs
# the prelude and this body, and `_cs_chain` runs the sitecustomize the
# environment had.
#
# Only for the memory view, a run of its own: never in timed trials.
# tracemalloc is on from interpreter start (the harness sets
# PYTHONTRACEMALLOC=1; if that was ignored, this starts it here and says so).
# It writes JSON lines, one write each, to the file named by COLDSTART_MEMORY
# (another interpreter started with the same environment writes its own
# `FILE.PID.GEN` beside it, which the harness ignores):
#   start     this bootstrap ran: pid, the record format `version` (the
#             prelude's _CS_FORMAT, checked by the reader), whether tracing
#             began at interpreter start
#   chain     the sitecustomize the environment already had (or null)
#   snapshot  on SIGUSR1 or SIGUSR2 (sent by the harness, which first writes
#             the reading's number, `seq`, to FILE.want and resends the
#             signal until the reading appears; each number is answered
#             once, so a resend is a no-op): traced current
#             and peak (the peak is then reset: each reading's peak is the
#             most since the previous one), the tracer's own overhead, VmRSS
#             and VmHWM read at the same moment, and `threads`; with SIGUSR1
#             also the top allocation sites by file:line, listed by a forked
#             copy of the worker when the worker has one thread (listing
#             allocates megabytes the worker should not keep), else in place,
#             with what that left recorded (see the notes: no fork in a
#             threaded process)
#   exit      the same figures at interpreter exit (atexit)
#   error     anything that went wrong in here (swallowed, never raised)
#
# It imports only builtin modules (_tracemalloc, _signal, atexit), so the
# worker's own imports and memory stay as they are.


def _status():
    """VmRSS and VmHWM in bytes and the thread count of this process (None
    where absent)."""
    rss = hwm = threads = None
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith(b"VmHWM:"):
                    hwm = int(line.split()[1]) * 1024
                elif line.startswith(b"Threads:"):
                    threads = int(line.split()[1])
    except Exception:
        pass
    return rss, hwm, threads


def _install():
    path = os.environ.get("COLDSTART_MEMORY")
    if not path:
        return None
    import _signal
    import _tracemalloc

    top_n = int(os.environ.get("COLDSTART_MEMORY_TOP", "15"))
    from_start = _tracemalloc.is_tracing()
    if not from_start:
        _tracemalloc.start(1)
    records = _CsRecords(path)
    emit = records.emit    # only from the worker itself
    write = records.write  # from the forked lister too
    state = {"seq": 0}

    def figures(kind):
        # The figures first, before anything here allocates.
        current, peak = _tracemalloc.get_traced_memory()
        t_ns = _cs_monotonic_ns()
        rss, hwm, threads = _status()
        return {
            "type": kind,
            "t_ns": t_ns,
            "traced_current": current,
            "traced_peak": peak,
            "tracemalloc_overhead": _tracemalloc.get_tracemalloc_memory(),
            "rss": rss,
            "hwm": hwm,
            "threads": threads,
        }

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
        own. Only when this process has a single thread: a fork copies the
        locks other threads hold (tracemalloc's own, a C library's) into a
        child where no thread will ever release them. False when it did
        not fork."""
        if rec.get("threads") != 1:
            return False
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

    want_path = path + ".want"

    def wanted():
        # The number of the reading the harness asks for (it writes
        # FILE.want, then signals, and resends the signal until the reading
        # appears); None when there is no such file (a signal from
        # elsewhere).
        try:
            fd = os.open(want_path, os.O_RDONLY)
            try:
                return int(os.read(fd, 32))
            finally:
                os.close(fd)
        except Exception:
            return None

    def on_signal(signum, frame):
        try:
            rec = figures("snapshot")
            want = wanted()
            if want is None:
                want = state["seq"] + 1
            elif want <= state["seq"]:
                # A resent signal for a reading already taken: no second
                # reading, and the peak is not reset again.
                return
            state["seq"] = want
            rec["seq"] = want
            # Each reading's peak is the most since the previous reading.
            reset = getattr(_tracemalloc, "reset_peak", None)
            if reset is not None:
                reset()
            rec["peak_reset"] = reset is not None
            if signum == _signal.SIGUSR1:
                if list_elsewhere(rec):
                    return
                # No fork (threads, or fork failed): list in place, and say
                # what that left.
                rec["top"] = top_sites()
                rec["listed_in"] = "the worker"
                rec["traced_after"] = _tracemalloc.get_traced_memory()[0]
                rec["rss_after"] = _status()[0]
            emit(rec)
        except Exception as exc:
            emit({"type": "error", "t_ns": _cs_monotonic_ns(), "where": "snapshot",
                  "error": "%s: %s" % (type(exc).__name__, exc)})

    def at_exit():
        try:
            emit(figures("exit"))
        except Exception as exc:
            emit({"type": "error", "t_ns": _cs_monotonic_ns(), "where": "exit",
                  "error": "%s: %s" % (type(exc).__name__, exc)})

    import atexit

    _signal.signal(_signal.SIGUSR1, on_signal)
    _signal.signal(_signal.SIGUSR2, on_signal)
    atexit.register(at_exit)
    emit({"type": "start", "t_ns": _cs_monotonic_ns(), "pid": os.getpid(),
          "version": _CS_FORMAT, "tracing_from_start": from_start})

    def fail(where, exc):
        emit({"type": "error", "t_ns": _cs_monotonic_ns(), "where": where,
              "error": "%s: %s" % (type(exc).__name__, exc)})

    return emit, fail


def _report(exc):
    sys.stderr.write("coldstart memory bootstrap: %s: %s\n" % (type(exc).__name__, exc))


_cs_main(_install, _report)
