# coldstart import recorder (embedded in the importguard crate, written at run
# time to a private temporary folder that is put first on PYTHONPATH).
#
# It records, as JSON lines flushed one by one to the file named by
# COLDSTART_RECORD:
#   start   when this bootstrap ran (time.monotonic_ns, the harness's clock)
#   chain   the sitecustomize the environment already had, run after us
#   import  every import attempt that reaches sys.meta_path: the name, found
#           or not, who asked (file:line), the modules executing at the time
#   error   anything that went wrong inside the recorder (swallowed)
#   exit    sys.modules at exit, lazy modules marked
# With COLDSTART_RECORD_POLICY {"block": true, ...} it refuses forbidden
# names with a ModuleNotFoundError that names the policy.
#
# It must stay cheap and must never break the worker: it imports only what
# the interpreter has already loaded at this point (plus the builtin atexit),
# so it adds no lines of its own to the worker's importtime tree; it writes
# its JSON by hand; every failure is caught and written down, never raised.

import sys
import os
import time

_VERSION = 1
_monotonic_ns = time.monotonic_ns
_getframe = sys._getframe
_here = os.path.dirname(os.path.abspath(__file__))


_ESCAPES = {i: "\\u%04x" % i for i in range(32)}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\", ord("\n"): "\\n", ord("\t"): "\\t"})


def _dumps(v):
    """JSON for the few types the records hold (no json import: it pulls in re)."""
    if isinstance(v, str):
        if v.isprintable() and '"' not in v and "\\" not in v:
            return '"' + v + '"'
        return '"' + v.translate(_ESCAPES) + '"'
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


def _policy(text):
    """`block=1;forbid=torch,transformers;allow=transformers.utils`"""
    out = {}
    for part in (text or "").split(";"):
        key, _, value = part.partition("=")
        out[key.strip()] = tuple(x.strip() for x in value.split(",") if x.strip())
    return out


def _install():
    import _thread

    dumps = _dumps
    path = os.environ.get("COLDSTART_RECORD")
    if not path:
        return
    policy = _policy(os.environ.get("COLDSTART_RECORD_POLICY"))
    forbid = policy.get("forbid", ())
    allow = policy.get("allow", ())
    block = policy.get("block", ()) == ("1",)

    # The first interpreter to start owns the file; child interpreters
    # (subprocess, multiprocessing spawn) and forked children write beside it.
    state = {"fd": -1, "pid": os.getpid()}

    def open_record(p, exclusive):
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        if exclusive:
            flags |= os.O_EXCL
        return os.open(p, flags, 0o600)

    try:
        state["fd"] = open_record(path, True)
    except FileExistsError:
        state["fd"] = open_record("%s.%d" % (path, os.getpid()), False)

    write = os.write
    fstat = os.fstat

    def identity(fd):
        st = fstat(fd)
        return (st.st_dev, st.st_ino)

    state["id"] = identity(state["fd"])

    def emit(rec):
        fd = state["fd"]
        if fd < 0:
            return
        try:
            # The worker may close every descriptor and open its own files:
            # never write into a file that is not ours.
            if identity(fd) != state["id"]:
                state["fd"] = -1
                return
            write(fd, (dumps(rec) + "\n").encode("utf-8", "replace"))
        except Exception:
            state["fd"] = -1

    def after_fork():
        try:
            inherited = state["fd"]
            state["pid"] = os.getpid()
            state["fd"] = open_record("%s.%d" % (path, state["pid"]), False)
            if inherited >= 0:
                os.close(inherited)
            state["id"] = identity(state["fd"])
            emit({"type": "start", "t_ns": _monotonic_ns(), "pid": state["pid"],
                  "forked": True, "version": _VERSION})
        except Exception:
            state["fd"] = -1

    try:
        os.register_at_fork(after_in_child=after_fork)
    except Exception:
        pass

    def fail(where, exc):
        emit({"type": "error", "t_ns": _monotonic_ns(), "where": where,
              "error": "%s: %s" % (type(exc).__name__, exc)})

    # Where the import machinery and the standard library live: "who asked"
    # skips the machinery; "first party" also skips the standard library and
    # the forbidden packages' own code.
    stdlib = os.path.dirname(os.__file__) + os.sep
    recorder_file = os.path.abspath(__file__)

    def machinery(filename):
        return (filename.startswith("<frozen importlib")
                or filename == recorder_file
                or (filename.startswith(stdlib)
                    and filename[len(stdlib):].startswith("importlib" + os.sep)))

    def not_first_party(frame):
        # The standard library (not the site-packages folder inside it),
        # frozen modules, and the forbidden packages' own code.
        filename = frame.f_code.co_filename
        if filename.startswith("<frozen "):
            return True
        if (filename.startswith(stdlib) and "site-packages" not in filename
                and "dist-packages" not in filename):
            return True
        return matches(frame.f_globals.get("__name__") or "", forbid) is not None

    def where(frame):
        code = frame.f_code
        return {"file": code.co_filename, "line": frame.f_lineno, "func": code.co_name}

    def matches(name, patterns):
        for p in patterns:
            if name == p or (name.startswith(p) and name[len(p)] == "."):
                return p
        return None

    main_thread = _thread.get_ident()
    busy = set()

    class ColdstartRecorder:
        """First on sys.meta_path: writes down every import attempt, then lets
        the rest of sys.meta_path answer exactly as it would have."""

        def find_spec(self, name, path=None, target=None):
            tid = _thread.get_ident()
            if tid in busy:
                return None
            busy.add(tid)
            try:
                return self._find(name, path, target, tid)
            finally:
                busy.discard(tid)

        def _find(self, name, path, target, tid):
            t_ns = _monotonic_ns()
            rec = {"type": "import", "name": name, "t_ns": t_ns}
            try:
                by = None
                first_party = None
                # Who started a forbidden import: worth a closer look.
                want_origin = matches(name, forbid) is not None
                stack = []
                f = _getframe(2)
                # importlib.util.find_spec("torch") asks the finders without
                # importing: an availability probe, not an import.
                caller = f.f_back
                if (caller is not None and caller.f_code.co_name == "find_spec"
                        and machinery(caller.f_code.co_filename)):
                    rec["probe"] = True
                while f is not None:
                    code = f.f_code
                    if by is None and not machinery(code.co_filename):
                        by = f
                    if (want_origin and first_party is None and by is not None
                            and not not_first_party(f)):
                        first_party = f
                    if code.co_name == "<module>":
                        stack.append(f.f_globals.get("__name__", "?"))
                    f = f.f_back
                if by is not None:
                    rec["by"] = where(by)
                if first_party is not None and first_party is not by:
                    rec["first_party"] = where(first_party)
                # Nesting: how many modules' top-level code was running and
                # the innermost one; the whole stack only where a verdict
                # needs it (forbidden names), to keep records small.
                rec["depth"] = len(stack)
                if stack:
                    rec["parent"] = stack[0]
                if want_origin:
                    stack.reverse()
                    rec["stack"] = stack
                if tid != main_thread:
                    rec["thread"] = tid
                if state["pid"] != os.getpid():
                    rec["pid"] = os.getpid()
            except Exception as exc:
                fail("frames", exc)

            if block and matches(name, forbid) and not matches(name, allow):
                rec["found"] = None
                rec["blocked"] = True
                emit(rec)
                if rec.get("probe"):
                    # An availability probe is told "not installed", so the
                    # library takes its path for a missing package.
                    return None
                pattern = matches(name, forbid)
                raise ModuleNotFoundError(
                    "coldstart import policy: `%s` is forbidden in this worker "
                    "(pattern `%s`); import it inside the operation that needs it, "
                    "or allow it with a reason in coldstart.toml "
                    "(allowed = [{ module = \"%s\", reason = \"...\" }]), "
                    "or run the check without --block" % (name, pattern, name),
                    name=name,
                )

            spec = None
            err = None
            try:
                seen_self = False
                for finder in sys.meta_path:
                    if not seen_self:
                        seen_self = finder is self
                        continue
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
            emit(rec)
            if err is not None:
                raise err
            return spec

    finder = ColdstartRecorder()

    def at_exit():
        try:
            lazy_cls = getattr(sys.modules.get("importlib.util"), "_LazyModule", None)
            names = []
            lazy = []
            for name, mod in list(sys.modules.items()):
                if name == "_coldstart_recorder":
                    continue
                names.append(name)
                if lazy_cls is not None and issubclass(type(mod), lazy_cls):
                    lazy.append(name)
            emit({"type": "exit", "t_ns": _monotonic_ns(), "modules": names, "lazy": lazy})
        except Exception as exc:
            fail("exit", exc)

    emit({
        "type": "start",
        "t_ns": _monotonic_ns(),
        "pid": os.getpid(),
        "version": _VERSION,
        "python": "%d.%d.%d" % sys.version_info[:3],
        "implementation": sys.implementation.name,
        "executable": sys.executable,
        "argv": list(getattr(sys, "argv", [])),
        "block": block,
        "forbid": list(forbid),
        "allow": list(allow),
        "modules": len(sys.modules),
    })
    sys.meta_path.insert(0, finder)
    import atexit
    atexit.register(at_exit)
    return emit, fail


def _chain(emit, fail):
    """Run the sitecustomize this environment had before us (a venv's or a
    distribution's), found on sys.path after our own folder."""
    try:
        from _frozen_importlib_external import PathFinder
        from _frozen_importlib import module_from_spec
    except Exception as exc:
        fail("chain", exc)
        return
    rest = []
    ours = False
    for entry in sys.path:
        try:
            same = os.path.abspath(entry or os.curdir) == _here
        except Exception:
            same = False
        if same:
            ours = True
            continue
        if ours:
            rest.append(entry)
    # Our folder has done its job: leave sys.path as the worker expects it.
    sys.path[:] = [e for e in sys.path if not _is_here(e)]
    try:
        spec = PathFinder.find_spec("sitecustomize", rest)
    except Exception as exc:
        fail("chain", exc)
        return
    if spec is None:
        if emit is not None:
            emit({"type": "chain", "t_ns": _monotonic_ns(), "file": None})
        return
    if emit is not None:
        emit({"type": "chain", "t_ns": _monotonic_ns(), "file": spec.origin})
    module = module_from_spec(spec)
    mine = sys.modules.get("sitecustomize")
    if mine is not None:
        sys.modules["_coldstart_recorder"] = mine
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        # What site.py does for a failing sitecustomize, and nothing more.
        fail("chained sitecustomize", exc)
        if mine is not None:
            sys.modules["sitecustomize"] = mine
        print("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
              "%s: %s" % (type(exc).__name__, exc), file=sys.stderr)


def _is_here(entry):
    try:
        return os.path.abspath(entry or os.curdir) == _here
    except Exception:
        return False


def _main():
    emit = None
    fail = None
    try:
        hooks = _install()
        if hooks is not None:
            emit, fail = hooks
    except Exception:
        pass

    def quiet(where, exc):
        if fail is not None:
            fail(where, exc)

    try:
        _chain(emit, quiet)
    except Exception as exc:
        quiet("chain", exc)


_main()
