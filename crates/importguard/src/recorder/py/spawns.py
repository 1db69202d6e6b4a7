# coldstart import recorder: what this image starts (subprocess,
# posix_spawn, os.exec*, os.system, os.spawn*, and multiprocessing's
# fork_exec, which raises no audit event): the line, the argv, and whether
# the new environment still carries the recorder and importtime.


def _rec_spawns(record_path, records, fail, line_of, get_ident, main_thread):
    """`(note_spawn, wrap_fork_exec, wrapped)`: a spawn written down, the
    wrapper of _posixsubprocess.fork_exec put in place, and whether it was
    (`wrapped[0]`, read by the audit hook)."""
    monotonic_ns = _cs_monotonic_ns
    getframe = sys._getframe
    emit = records.emit

    importtime_vars = ("PYTHONPROFILEIMPORTTIME",)

    def env_keeps(env):
        """Whether an environment (None: inherited, a mapping, or a list of
        b"K=V") still carries the recorder and importtime."""
        out = {"inherited": env is None}
        get = None
        if env is None:
            get = os.environ.get
        elif isinstance(env, dict) or hasattr(env, "get"):
            def get(k, _e=env):
                v = _e.get(k)
                if v is None:
                    v = _e.get(k.encode())
                if isinstance(v, bytes):
                    v = os.fsdecode(v)
                return v
        else:
            values = {}
            for item in env:
                if isinstance(item, bytes):
                    item = os.fsdecode(item)
                k, _, v = str(item).partition("=")
                values[k] = v
            get = values.get
        pythonpath = get("PYTHONPATH") or ""
        out["record"] = get("COLDSTART_RECORD") == record_path
        out["pythonpath"] = any(_cs_is_here(p) for p in pythonpath.split(os.pathsep) if p)
        out["importtime"] = any(bool(get(k)) for k in importtime_vars)
        return out

    def argv_of(args):
        out = []
        try:
            if isinstance(args, (str, bytes)) or hasattr(args, "__fspath__"):
                args = [args]
            for a in list(args)[:64]:
                if isinstance(a, bytes):
                    a = os.fsdecode(a)
                elif not isinstance(a, str):
                    a = os.fspath(a) if hasattr(a, "__fspath__") else str(a)
                    if isinstance(a, bytes):
                        a = os.fsdecode(a)
                out.append(a[:1000])
        except Exception:
            pass
        return out

    last_spawn = {}

    def note_spawn(kind, executable, args, env, f):
        argv = argv_of(args)
        tid = get_ident()
        if kind in ("posix_spawn", "fork_exec"):
            # subprocess raised subprocess.Popen for this start already.
            if last_spawn.get(tid) == argv:
                del last_spawn[tid]
                return
        elif kind == "subprocess":
            last_spawn[tid] = argv
        rec = {"type": "spawn", "t_ns": monotonic_ns(), "kind": kind, "argv": argv,
               "env": env_keeps(env)}
        exe = argv_of([executable]) if executable is not None else None
        if exe:
            rec["executable"] = exe[0]
        line = line_of(f)
        if line is not None:
            rec["by"] = line
        if tid != main_thread:
            rec["thread"] = tid
        emit(rec)

    wrapped = [False]

    def wrap_fork_exec():
        """multiprocessing's spawn (and its resource tracker) starts
        interpreters through _posixsubprocess.fork_exec, which raises no
        audit event: a thin wrapper says which line started them."""
        wrapped[0] = True
        mod = sys.modules.get("_posixsubprocess")
        orig = getattr(mod, "fork_exec", None)
        if orig is None:
            return

        def fork_exec(*args, **kwargs):
            try:
                note_spawn("fork_exec", None, args[0] if args else (),
                           args[5] if len(args) > 5 else None, getframe(1))
            except Exception as exc:
                fail("spawn", exc)
            return orig(*args, **kwargs)

        fork_exec.__wrapped__ = orig
        fork_exec.__doc__ = getattr(orig, "__doc__", None)
        try:
            mod.fork_exec = fork_exec
        except Exception as exc:
            fail("spawn", exc)

    return note_spawn, wrap_fork_exec, wrapped
