# coldstart import recorder: an image's life. Who started it (the variable
# the image before it left), its start record, the forked child's own file
# and start record, and sys.modules at exit.


def _rec_image():
    """`(pid, gen, parent, how)`: this image, its exec generation, the image
    that started it (`[pid, gen]` or None) and how (`root`, `exec`, `child`)."""
    getpid = os.getpid
    # Who started this image: the variable the image before it left.
    me = getpid()
    gen = 0
    parent = None
    how = "root"
    try:
        prev = os.environ.get(_IMAGE_ENV) or ""
        if prev:
            p, _, g = prev.partition(":")
            parent = [int(p), int(g)]
            if parent[0] == me:
                gen = parent[1] + 1
                how = "exec"
            else:
                how = "child"
    except Exception:
        parent = None
    return me, gen, parent, how


def _rec_lifecycle(records, fail, line_of, gen, audit, audited, audit_written,
                   get_ident, main_thread):
    """`(after_fork, at_exit)`: the handlers of a fork's child and of exit."""
    monotonic_ns = _cs_monotonic_ns
    getframe = sys._getframe
    getpid = os.getpid
    emit = records.emit
    state = {"gen": gen}

    # -- fork: the child writes its own file --------------------------------
    def after_fork():
        try:
            old = records.pid
            old_gen = state["gen"]
            records.reopen(0)
            records.deferring = False
            state["gen"] = 0
            pid = getpid()
            os.environ[_IMAGE_ENV] = "%d:0" % pid
            audited.clear()
            audit_written.clear()
            rec = {"type": "start", "t_ns": monotonic_ns(), "pid": pid,
                   "ppid": os.getppid(), "gen": 0, "parent": [old, old_gen],
                   "how": "fork", "forked": True, "version": _CS_FORMAT,
                   "audit": audit}
            f = getframe(1)
            line = line_of(f)
            if line is not None:
                rec["by"] = line
            if get_ident() != main_thread:
                rec["thread"] = get_ident()
            emit(rec)
        except Exception:
            records.fd = -1

    def at_exit():
        try:
            lazy_cls = getattr(sys.modules.get("importlib.util"), "_LazyModule", None)
            names = []
            lazy = []
            for name, mod in list(sys.modules.items()):
                if name == "_coldstart_bootstrap":
                    continue
                names.append(name)
                if lazy_cls is not None and issubclass(type(mod), lazy_cls):
                    lazy.append(name)
            # PEP 810: declared lazy and never made real.
            for name in getattr(sys, "lazy_modules", ()) or ():
                if name not in sys.modules and name not in lazy:
                    lazy.append(name)
            emit({"type": "exit", "t_ns": monotonic_ns(), "modules": names, "lazy": lazy})
        except Exception as exc:
            fail("exit", exc)

    return after_fork, at_exit


def _rec_ancestors():
    """`[[pid, comm], ...]`: the processes above this one, its parent first,
    up to and with the first one outside its process group (the harness
    starts each worker as a group of its own, so that one is the harness:
    every process between is a launcher, `uv run`, a shell, `make`). Read
    from `/proc`; empty where there is none, and when this process leads
    its group (the harness started it itself: no launcher stands between,
    and the start record's ppid names the harness), so reading nothing."""
    out = []
    try:
        group = os.getpgid(0)
        if group == os.getpid():
            return out
        pid = os.getppid()
        for _ in range(16):
            if pid <= 0:
                break
            fd = os.open("/proc/%d/stat" % pid, os.O_RDONLY)
            try:
                data = os.read(fd, 4096)
            finally:
                os.close(fd)
            # `pid (comm) state ppid pgrp ...`; comm may hold ')' itself.
            head, _, tail = data.rpartition(b")")
            comm = head.partition(b"(")[2].decode("utf-8", "replace")
            fields = tail.split()
            out.append([pid, comm])
            if int(fields[2]) != group:
                break
            pid = int(fields[1])
    except Exception:
        pass
    return out


def _rec_start(records, me, gen, parent, how, audit, block, forbid, allow):
    """Writes this image's start record. An image that keeps records back
    (the worker, whose start is timed) writes a short one at once (who,
    how, the format, the channels: what says the recorder ran, even if the
    worker dies before anything else is written, with the launchers above
    it when there are any) and keeps the whole one back, built later from
    what is taken now; the reader completes the first with the second (the
    same pid, generation and time)."""
    monotonic_ns = _cs_monotonic_ns
    t_ns = monotonic_ns()
    ppid = os.getppid()
    xoptions = getattr(sys, "_xoptions", {})
    importtime = bool(xoptions.get("importtime")) or (
        not sys.flags.ignore_environment and bool(os.environ.get("PYTHONPROFILEIMPORTTIME")))
    argv = list(getattr(sys, "argv", []))
    # Where imports are looked for (the project's roots, PYTHONPATH, what
    # .pth files added): why a module came from where it did.
    path = [p for p in sys.path if type(p) is str]
    modules = len(sys.modules)
    # The first recorded image: who stands between it and the harness.
    ancestors = _rec_ancestors() if how == "root" else None

    def whole():
        flags = {}
        for key in ("isolated", "ignore_environment", "no_site", "no_user_site", "safe_path"):
            value = getattr(sys.flags, key, None)
            if value is not None:
                flags[key] = int(value)
        start = {
            "type": "start",
            "t_ns": t_ns,
            "pid": me,
            "ppid": ppid,
            "gen": gen,
            "parent": parent,
            "how": how,
            "version": _CS_FORMAT,
            "python": "%d.%d.%d" % sys.version_info[:3],
            "implementation": sys.implementation.name,
            "executable": sys.executable,
            "argv": argv,
            "orig_argv": list(getattr(sys, "orig_argv", [])),
            "flags": flags,
            "importtime": importtime,
            "audit": audit,
            "block": block,
            "forbid": list(forbid),
            "allow": list(allow),
            "modules": modules,
            "path": path,
        }
        if ancestors is not None:
            start["ancestors"] = ancestors
        return start

    if not records.deferring:
        records.emit(whole())
        return
    # The launchers above the worker (none when the harness started it
    # itself) go in the short record too: which process the harness
    # started is read from them.
    records.write_line(
        '{"type":"start","t_ns":%d,"pid":%d,"ppid":%d,"gen":%d,"parent":%s,'
        '"how":"%s","version":%d,"importtime":%s,"audit":%s,"block":%s%s}' % (
            t_ns, me, ppid, gen,
            "null" if parent is None else "[%d,%d]" % (parent[0], parent[1]),
            how, _CS_FORMAT, "true" if importtime else "false",
            "true" if audit else "false", "true" if block else "false",
            ',"ancestors":%s' % _cs_dumps(ancestors) if ancestors else ""))
    records.defer(whole)
