# coldstart import recorder: the body that follows the shared prelude
# (prelude.py) in the `sitecustomize.py` written to a private temporary
# folder put first on PYTHONPATH.
#
# It records, as JSON lines written to the file named by COLDSTART_RECORD
# (child images write `FILE.PID.GEN` beside it), each at once except the
# worker's imports of names outside the policy, which are kept back until
# the next record that is written (in order), a fork, an exec, exit, or 256
# of them: what a verdict needs (forbidden names, probes, failures, spawns)
# is on disk before the worker goes on, even if it then crashes.
#   start   this image began: pid, ppid, exec generation, the image that
#           started it, argv, sys.flags, whether importtime is on, and for a
#           forked child the line that called fork
#   chain   the sitecustomize the environment already had, run after us
#   import  an import attempt: the name, found or not, and the channel that
#           saw it; for a forbidden name also who asked (file:line), the
#           first-party line, and the modules executing at the time with
#           the line that imported each (every link of its chain):
#           `finder` (our sys.meta_path finder, placed first), `audit` (the
#           `import` audit event, which code cannot remove: a worker that
#           rewrote sys.meta_path) or `both`; `reified` when the body of a
#           lazily imported module runs now (LazyLoader on first attribute
#           access, a PEP 810 lazy import made real), with the line that
#           declared it
#   spawn   this image starts another: subprocess, posix_spawn, os.exec*,
#           os.system, os.spawn*, or a fork_exec without an audit event
#           (multiprocessing spawn): the line, the argv, and whether the
#           new environment still carries the recorder and importtime
#   error   anything that went wrong inside the recorder (swallowed)
#   exit    sys.modules at exit, lazy modules marked
# With COLDSTART_RECORD_POLICY `block=1;...` it refuses forbidden names with
# a ModuleNotFoundError that names the policy (from the audit hook too).
#
# COLDSTART_RECORD_IMAGE (`PID:GEN`, set by each image for its children)
# says who started an image: the same pid is an exec (generation + 1),
# another pid a child.
#
# It must stay cheap and must never break the worker: it imports only what
# the interpreter has already loaded (plus the builtins _thread and atexit),
# so it adds no lines to the worker's importtime tree; every failure is
# caught and written down, never raised (except the policy's refusal).

_IMAGE_ENV = "COLDSTART_RECORD_IMAGE"
_SPAWN_EVENTS = frozenset((
    "subprocess.Popen", "os.posix_spawn", "os.exec", "os.spawn", "os.system",
))


def _policy(text):
    """`block=1;forbid=torch,transformers;allow=transformers.utils`"""
    out = {}
    for part in (text or "").split(";"):
        key, _, value = part.partition("=")
        out[key.strip()] = tuple(x.strip() for x in value.split(",") if x.strip())
    return out


def _install():
    # Both builtins; imported before the finder is in place (where site has
    # not imported atexit already, the finder would see it first).
    import _thread
    import atexit

    path = os.environ.get("COLDSTART_RECORD")
    if not path:
        return None
    policy = _policy(os.environ.get("COLDSTART_RECORD_POLICY"))
    forbid = policy.get("forbid", ())
    allow = policy.get("allow", ())
    block = policy.get("block", ()) == ("1",)
    project_root = os.environ.get("COLDSTART_RECORD_ROOT") or None
    monotonic_ns = _cs_monotonic_ns
    getframe = sys._getframe
    get_ident = _thread.get_ident
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
    state = {"gen": gen}
    records = _CsRecords(path, gen)
    # Only the worker itself (whose start is timed) keeps records back;
    # children write each at once (forked ones often end with os._exit).
    records.deferring = how in ("root", "exec")
    emit = records.emit
    defer = records.defer

    def fail(where, exc):
        emit({"type": "error", "t_ns": monotonic_ns(), "where": where,
              "error": "%s: %s" % (type(exc).__name__, exc)})

    try:
        os.environ[_IMAGE_ENV] = "%d:%d" % (me, gen)
    except Exception as exc:
        fail("image", exc)

    # Where the import machinery and the standard library live: "who asked"
    # skips the machinery; "first party" also skips the standard library and
    # the forbidden packages' own code.
    stdlib = os.path.dirname(os.__file__) + os.sep
    importlib_dir = stdlib + "importlib" + os.sep
    recorder_file = os.path.abspath(__file__)
    multiprocessing_dir = stdlib + "multiprocessing" + os.sep

    def machinery(filename):
        return (filename.startswith("<frozen importlib")
                or filename == recorder_file
                or filename.startswith(importlib_dir))

    # Frames are told apart by their module (f_globals) where possible:
    # reading frame.f_code raises an `object.__getattr__` audit event, which
    # would call this recorder's own hook once per frame walked.
    my_globals = globals()
    machinery_names = ("importlib", "_frozen_importlib", "_frozen_importlib_external")

    def machinery_frame(f):
        g = f.f_globals
        if g is my_globals:
            return True
        name = g.get("__name__")
        if type(name) is not str:
            return machinery(f.f_code.co_filename)
        return name in machinery_names or name.startswith("importlib.")

    def matches(name, patterns):
        for p in patterns:
            if name == p or (name.startswith(p) and name[len(p)] == "."):
                return p
        return None

    # The first component of every forbidden pattern: most names are told
    # apart from the policy by one set lookup.
    forbid_heads = frozenset(p.partition(".")[0] for p in forbid)

    def forbidden(name):
        """The policy's verdict on `name`: whether it matches a forbidden
        pattern, and then whether it is refused (`--block` and not allowed)."""
        if name.partition(".")[0] not in forbid_heads or matches(name, forbid) is None:
            return False, False
        return True, block and matches(name, allow) is None

    def not_first_party(frame):
        # The forbidden packages' own code; with a project root, what the
        # one first-party rule refuses (firstparty.py); without one, the
        # standard library (not the site-packages folder inside it) and
        # frozen modules.
        if matches(frame.f_globals.get("__name__") or "", forbid) is not None:
            return True
        filename = frame.f_code.co_filename
        if project_root is not None:
            return _cs_first_party(filename, project_root, (stdlib,)) is not None
        if filename.startswith("<frozen "):
            return True
        return (filename.startswith(stdlib) and "site-packages" not in filename
                and "dist-packages" not in filename)

    def where(frame):
        code = frame.f_code
        return {"file": code.co_filename, "line": frame.f_lineno, "func": code.co_name}

    main_thread = get_ident()

    def describe(rec, f, want_origin):
        """Fills who asked (`by`) and the innermost executing module
        (`parent`), from frame `f` up; with `want_origin` (a forbidden name)
        also the first-party line and the whole stack of executing modules,
        outermost first, with the line that imported each (`stack_by`: the
        first frame outside the machinery above that module's own frame):
        the lines of a chain's every link, read at the one moment they are
        all on the stack. Without it the walk stops at the first module."""
        by = None
        first_party = None
        stack = []
        stack_by = []
        importer_of = -1
        while f is not None:
            if machinery_frame(f):
                f = f.f_back
                continue
            g = f.f_globals
            if by is None:
                by = f
            elif importer_of >= 0:
                stack_by[importer_of] = where(f)
                importer_of = -1
            if want_origin and first_party is None and not not_first_party(f):
                first_party = f
            back = f.f_back
            # A module's top-level code runs with its globals as its locals
            # (a function's, a class body's do not); only the outermost frame
            # of a run of frames of one module is worth asking.
            if (back is None or back.f_globals is not g) and f.f_locals is g:
                stack.append(g.get("__name__", "?"))
                if not want_origin:
                    break
                stack_by.append(None)
                importer_of = len(stack_by) - 1
            f = back
        if by is not None:
            rec["by"] = where(by)
        if first_party is not None and first_party is not by:
            rec["first_party"] = where(first_party)
        if stack:
            rec["parent"] = stack[0]
        if want_origin:
            rec["depth"] = len(stack)
            stack.reverse()
            rec["stack"] = stack
            stack_by.reverse()
            rec["stack_by"] = stack_by
        tid = get_ident()
        if tid != main_thread:
            rec["thread"] = tid

    def line_of(f):
        """The first frame outside the machinery and the standard library
        (the worker's line), else the first outside the machinery."""
        by = None
        while f is not None:
            filename = f.f_code.co_filename
            if not machinery(filename):
                if by is None:
                    by = f
                if not not_first_party(f):
                    return where(f)
            f = f.f_back
        return None if by is None else where(by)

    def refuse(name):
        pattern = matches(name, forbid)
        return ModuleNotFoundError(
            "coldstart import policy: `%s` is forbidden in this worker "
            "(pattern `%s`); import it inside the operation that needs it, "
            "or allow it with a reason in coldstart.toml "
            "(allowed = [{ module = \"%s\", reason = \"...\" }]), "
            "or run the check without --block" % (name, pattern, name),
            name=name,
        )

    # Names the audit hook saw, per thread, for the finder to mark `both`;
    # names the hook wrote itself (the finder was not first), with the time.
    audited = {}
    audit_written = {}
    # The lines behind find_spec probes (where a LazyLoader module is
    # declared), and the lines of PEP 810 `lazy import`s, by name.
    probed_at = {}
    declared = {}
    lazy_files = {}
    busy = set()

    class ColdstartRecorder:
        """First on sys.meta_path: writes down every import attempt, then lets
        the rest of sys.meta_path answer exactly as it would have."""

        def find_spec(self, name, path=None, target=None):
            tid = get_ident()
            if tid in busy:
                return None
            busy.add(tid)
            try:
                return find_attempt(self, name, path, target, tid)
            finally:
                busy.discard(tid)

    def find_attempt(self, name, path, target, tid):
        """The finder's work for one attempt (outside the recursion guard)."""
        t_ns = monotonic_ns()
        rec = {"type": "import", "name": name, "t_ns": t_ns}
        if name.partition(".")[0] in forbid_heads:
            bad, refused = forbidden(name)
        else:
            bad = refused = False
        probe = False
        probe_origin = False
        seen = audited.get(tid)
        if seen is not None and name in seen:
            seen.discard(name)
            rec["channel"] = "both"
        else:
            written = audit_written.get(tid)
            if written is not None and name in written:
                # The hook wrote this attempt already (another finder
                # came first and did not answer): the reader merges them.
                rec["channel"] = "both"
                rec["audit_t_ns"] = written.pop(name)
            else:
                rec["channel"] = "finder"
        try:
            # Only a forbidden name's record says where it came from: its
            # stack holds the line of every link of its chain, and a probe
            # of it may declare a lazy module. The worker's other imports
            # are not walked (it would cost each of them; nothing is judged
            # on them).
            if bad:
                f = getframe(2)
                # importlib.util.find_spec("torch") asks the finders without
                # importing: an availability probe, not an import.
                caller = f.f_back
                if (caller is not None
                        and caller.f_globals.get("__name__") == "importlib.util"
                        and caller.f_code.co_name == "find_spec"):
                    rec["probe"] = probe = True
                    line = lazy_declaration(caller)
                    if line is not None:
                        probed_at[name] = line
                    probe_origin = True
                describe(rec, f, True)
                if records.pid != getpid():
                    rec["pid"] = getpid()
            elif tid != main_thread:
                rec["thread"] = tid
            if name in declared and not probe:
                rec["declared"] = declared.pop(name)
                rec["reified"] = True
        except Exception as exc:
            fail("frames", exc)

        if refused:
            rec["found"] = None
            rec["blocked"] = True
            emit(rec)
            if probe:
                # An availability probe is told "not installed", so the
                # library takes its path for a missing package.
                return None
            raise refuse(name)

        spec = None
        err = None
        try:
            meta_path = sys.meta_path
            try:
                rest = meta_path[meta_path.index(self) + 1:]
            except ValueError:
                rest = ()
            for finder in rest:
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    break
        except BaseException as exc:
            err = exc
        rec["found"] = spec is not None
        if err is not None:
            rec["error"] = "%s: %s" % (type(err).__name__, err)
        if probe_origin and spec is not None:
            # A module that may be loaded lazily (LazyLoader starts
            # from find_spec): its body, when it runs, is looked at.
            origin = getattr(spec, "origin", None)
            if type(origin) is str:
                lazy_files[origin] = name
        if err is None and not bad and not probe:
            # Nothing a verdict needs if the worker dies before the next
            # record is written: keep it back (see _CsRecords.defer).
            defer(rec)
        else:
            emit(rec)
        if err is not None:
            raise err
        return spec

    finder = ColdstartRecorder()

    def lazy_declaration(f):
        """The line behind a find_spec probe, kept in case the module is
        then loaded lazily: the first frame outside the machinery, the
        standard library and the `lazy_loader` package."""
        while f is not None:
            if not machinery(f.f_code.co_filename) and not not_first_party(f):
                mod = f.f_globals.get("__name__") or ""
                if mod != "lazy_loader" and not mod.startswith("lazy_loader."):
                    return where(f)
            f = f.f_back
        return None

    # -- spawns: what this image starts -----------------------------------
    record_path = path
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

    # -- the audit hook: the channel code cannot remove ---------------------
    lazy_code = [None]

    def lazy_body(code):
        """The module name when this exec of `<module>` code is the body of
        a LazyLoader module running on first attribute access, else None."""
        if code.co_filename not in lazy_files:
            return None
        lc = lazy_code[0]
        if lc is None:
            util = sys.modules.get("importlib.util")
            cls = getattr(util, "_LazyModule", None)
            if cls is None:
                return None
            lc = lazy_code[0] = (cls.__getattribute__.__code__, util.__dict__)
        try:
            f = getframe(2)
        except ValueError:
            return None
        n = 0
        while f is not None and n < 6:
            if f.f_globals is lc[1] and f.f_code is lc[0]:
                local = f.f_locals
                name = local.get("original_name")
                if name is None:
                    spec = local.get("__spec__")
                    name = getattr(spec, "name", None)
                return name or lazy_files[code.co_filename]
            f = f.f_back
            n += 1
        return None

    def hook(event, args):
        if event not in hooked:
            return
        if event == "import":
            try:
                name = args[0]
                if not wrapped[0] and "_posixsubprocess" in sys.modules:
                    wrap_fork_exec()
                meta_path = args[3]
                if meta_path is None:
                    # An extension module's own load event (name, file):
                    # not a request, its request was audited already.
                    return
                tid = get_ident()
                if meta_path and meta_path[0] is finder:
                    seen = audited.get(tid)
                    if seen is None:
                        audited[tid] = seen = set()
                    seen.add(name)
                    return
                # The finder is not first (sys.meta_path rewritten or
                # reordered): this hook writes the attempt itself.
                t_ns = monotonic_ns()
                rec = {"type": "import", "name": name, "t_ns": t_ns, "channel": "audit"}
                bad, refused = forbidden(name)
                if bad:
                    describe(rec, getframe(1), True)
                elif tid != main_thread:
                    rec["thread"] = tid
                if name in declared:
                    rec["declared"] = declared.pop(name)
                    rec["reified"] = True
                if refused:
                    rec["blocked"] = True
                    emit(rec)
                    raise refuse(name)
                written = audit_written.get(tid)
                if written is None:
                    audit_written[tid] = written = {}
                written[name] = t_ns
                if records.pid != getpid():
                    rec["pid"] = getpid()
                if bad:
                    emit(rec)
                else:
                    defer(rec)
            except ModuleNotFoundError:
                raise
            except Exception as exc:
                fail("audit", exc)
        elif event == "exec":
            try:
                code = args[0]
                if getattr(code, "co_name", None) != "<module>":
                    return
                name = lazy_body(code)
                if name is None:
                    return
                rec = {"type": "import", "name": name, "t_ns": monotonic_ns(),
                       "channel": "audit", "reified": True, "found": True}
                bad, refused = forbidden(name)
                describe(rec, getframe(1), bad)
                line = probed_at.get(name)
                if line is not None:
                    rec["declared"] = line
                if refused:
                    rec["blocked"] = True
                    rec["found"] = None
                    emit(rec)
                    raise refuse(name)
                emit(rec)
            except ModuleNotFoundError:
                raise
            except Exception as exc:
                fail("audit", exc)
        elif event in _SPAWN_EVENTS:
            try:
                f = getframe(1)
                if event == "subprocess.Popen":
                    note_spawn("subprocess", args[0], args[1], args[3], f)
                elif event == "os.posix_spawn":
                    note_spawn("posix_spawn", args[0], args[1], args[2], f)
                elif event == "os.exec":
                    # The image ends here: what the next one will have.
                    note_spawn("exec", args[0], args[1], args[2], f)
                elif event == "os.spawn":
                    note_spawn("spawn", args[1], args[2], args[3], f)
                elif event == "os.system":
                    note_spawn("system", "/bin/sh", ["/bin/sh", "-c", args[0]], None, f)
            except Exception as exc:
                fail("spawn", exc)

    hooked = frozenset(("import", "exec")) | _SPAWN_EVENTS
    audit = False
    addaudithook = getattr(sys, "addaudithook", None)
    if addaudithook is not None:
        try:
            addaudithook(hook)
            audit = True
        except Exception as exc:
            fail("audit", exc)

    # -- PEP 810 (3.15): the line that declared a lazy import ---------------
    set_filter = getattr(sys, "set_lazy_imports_filter", None)
    if set_filter is not None:
        try:
            previous = sys.get_lazy_imports_filter()

            def lazy_filter(importer, name, fromlist=None, _prev=previous):
                try:
                    line = line_of(getframe(1))
                    if line is not None and name not in declared:
                        declared[name] = line
                except Exception:
                    pass
                if _prev is not None:
                    return _prev(importer, name, fromlist)
                return True

            set_filter(lazy_filter)
        except Exception as exc:
            fail("lazy imports filter", exc)

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

    try:
        # Deferred records are written before a fork, so the child does not
        # inherit them (and a fork_exec'd child finds them on disk).
        os.register_at_fork(before=records.flush, after_in_child=after_fork)
    except Exception:
        pass

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

    flags = {}
    for key in ("isolated", "ignore_environment", "no_site", "no_user_site", "safe_path"):
        value = getattr(sys.flags, key, None)
        if value is not None:
            flags[key] = int(value)
    xoptions = getattr(sys, "_xoptions", {})
    importtime = bool(xoptions.get("importtime")) or (
        not sys.flags.ignore_environment and bool(os.environ.get("PYTHONPROFILEIMPORTTIME")))
    start = {
        "type": "start",
        "t_ns": monotonic_ns(),
        "pid": me,
        "ppid": os.getppid(),
        "gen": gen,
        "parent": parent,
        "how": how,
        "version": _CS_FORMAT,
        "python": "%d.%d.%d" % sys.version_info[:3],
        "implementation": sys.implementation.name,
        "executable": sys.executable,
        "argv": list(getattr(sys, "argv", [])),
        "orig_argv": list(getattr(sys, "orig_argv", [])),
        "flags": flags,
        "importtime": importtime,
        "audit": audit,
        "block": block,
        "forbid": list(forbid),
        "allow": list(allow),
        "modules": len(sys.modules),
    }
    emit(start)
    sys.meta_path.insert(0, finder)
    atexit.register(at_exit)
    return emit, fail


_cs_main(_install)
