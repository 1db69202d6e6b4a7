# coldstart bootstrap prelude (embedded in the importguard crate).
#
# Shared by every bootstrap coldstart writes as `sitecustomize.py` into a
# private temporary folder put first on PYTHONPATH (the import recorder, the
# memory view): the bootstrap file is this prelude followed by its body.
#
# It gives the body:
#   _cs_dumps(v)          JSON for the few types records hold (no json import:
#                         it pulls in re, which would show in importtime)
#   _CsRecords(path)      a JSON-lines record file, one write per record, that
#                         one image claims, and that never writes into a
#                         descriptor that is no longer its own (a worker may
#                         close every descriptor: it is opened again)
#   _cs_chain(emit, fail) runs the sitecustomize the environment already had,
#                         found on sys.path after our own folder, and takes our
#                         folder off sys.path
#   _CS_FORMAT            the record format version, written in every start
#                         record; the Rust reader refuses a version it does
#                         not know
#   _CS_SPAWN_EVENTS      the audit events that start a process (the import
#                         recorder's and the null recorder's one list)
#   _cs_main(install, on_error)
#                         runs a body: its `install()`, then the chain, with
#                         the chain's failures told to the body's `fail` (and
#                         the chain's record kept back by its `keep`, if it
#                         gives one, when there is no sitecustomize to run)
# It imports only what the interpreter has loaded before site runs.

import sys
import os
import time

_CS_FORMAT = 3
_CS_SPAWN_EVENTS = (
    "subprocess.Popen", "os.posix_spawn", "os.exec", "os.spawn", "os.system",
)
_cs_monotonic_ns = time.monotonic_ns
_cs_here = os.path.dirname(os.path.abspath(__file__))

_CS_ESCAPES = {i: "\\u%04x" % i for i in range(32)}
_CS_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\", ord("\n"): "\\n", ord("\t"): "\\t"})


def _cs_str(v, _esc=_CS_ESCAPES):
    if v.isprintable() and '"' not in v and "\\" not in v:
        return '"' + v + '"'
    return '"' + v.translate(_esc) + '"'


def _cs_dumps(v):
    """JSON for str, None, bool, int, dict, list and tuple (others as str)."""
    t = type(v)
    if t is str:
        return _cs_str(v)
    if t is int:
        return str(v)
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if t is dict:
        # Keys are the bootstrap's own field names: plain ASCII, no escaping.
        parts = []
        add = parts.append
        for k, x in v.items():
            tx = type(x)
            if tx is str:
                # _cs_str inline: most values need no escaping.
                if x.isprintable() and '"' not in x and "\\" not in x:
                    add('"%s":"%s"' % (k, x))
                else:
                    add('"%s":%s' % (k, _cs_str(x)))
            elif tx is int:
                add('"%s":%d' % (k, x))
            elif x is True:
                add('"%s":true' % k)
            elif x is False:
                add('"%s":false' % k)
            elif x is None:
                add('"%s":null' % k)
            else:
                add('"%s":%s' % (k, _cs_dumps(x)))
        return "{" + ",".join(parts) + "}"
    if t is list or t is tuple:
        if not v:
            return "[]"
        try:
            # A list of strings none of which needs escaping (sys.path,
            # argv, module names): joined in C, not element by element.
            whole = "".join(v)
        except TypeError:
            whole = None
        if whole is not None and whole.isprintable() and '"' not in whole and "\\" not in whole:
            return '["' + '","'.join(v) + '"]'
        return "[" + ",".join(_cs_str(x) if type(x) is str else _cs_dumps(x) for x in v) + "]"
    if isinstance(v, str):
        return _cs_str(str(v))
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, dict):
        return _cs_dumps(dict(v))
    if isinstance(v, (list, tuple)):
        return _cs_dumps(list(v))
    return _cs_str(str(v))


class _CsRecords(object):
    """A record file of JSON lines, claimed by one interpreter image.

    The root image (`claim`) takes `path` when it can: the harness makes
    it beforehand (holding one blank line, which readers skip), so opening
    it costs neither a file's creation nor its first block (together about
    ten times what opening it costs); where nobody made it, the first to
    create it (O_EXCL) takes it. The taker holds a lock on it (`lockf`)
    for as long as it runs, and takes it only while it holds no record
    (at most that blank line): another image that runs at the same time
    (a shell running python twice) finds it locked, one that runs later
    finds it written, and each writes `path.PID.GEN` beside it, as every
    other image does (a child interpreter, an exec'd image, a forked child
    after `reopen`).

    The descriptor stays where the system put it; before every write it is
    checked to be the file opened (fstat), and when the worker closed it
    (a daemon closes every descriptor) or its number now names the
    worker's own file, the file is opened again by its name: records are
    never written into a file that is not ours, and not lost to a closed
    descriptor.

    `defer(rec)` keeps a record back, to be written by the next `emit` (in
    order, before it), by `flush`, or when 256 are waiting: for records no
    verdict needs if the process dies before then (the body defers only
    those), so the worker does not serialise them while it starts. A
    deferred record may be a function of no arguments that returns it,
    called when it is written."""

    __slots__ = ("path", "name", "fd", "id", "pid", "pending", "deferring")

    _FLAGS = os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)

    def __init__(self, path, gen=0, claim=True):
        self.path = path
        self.fd = -1
        self.id = None
        self.pid = os.getpid()
        self.pending = []
        self.deferring = True
        self.name = path
        fd = self._claim(path) if claim else -1
        self.fd = fd if fd >= 0 else self._beside(gen)

    def _beside(self, gen):
        """Opens this image's own file, `path.PID.GEN`, and returns it."""
        self.name = "%s.%d.%d" % (self.path, self.pid, gen)
        fd = os.open(self.name, self._FLAGS | os.O_CREAT, 0o600)
        self.id = self._identity(fd)
        return fd

    def _claim(self, path):
        """The descriptor of `path`, locked and empty, or -1 when another
        image has it."""
        flags = self._FLAGS
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                return -1
        try:
            try:
                os.lockf(fd, os.F_TLOCK, 0)
            except (BlockingIOError, PermissionError):
                # Locked: an image that runs now has it.
                os.close(fd)
                return -1
            except (OSError, AttributeError):
                # No locks on this filesystem: the size alone tells.
                pass
            st = os.fstat(fd)
            if st.st_size > 1:
                # Written: an image that ran before has it.
                os.close(fd)
                return -1
            self.id = (st.st_dev, st.st_ino)
            return fd
        except Exception:
            os.close(fd)
            raise

    @staticmethod
    def _identity(fd):
        st = os.fstat(fd)
        return (st.st_dev, st.st_ino)

    def _checked(self):
        """The descriptor, checked to be the file opened (reopened by name
        when it is not), or -1."""
        fd = self.fd
        if fd < 0:
            return -1
        try:
            if self._identity(fd) == self.id:
                return fd
        except OSError:
            pass
        # Closed, or its number reused by the worker: ours again by name
        # (never created here, never someone else's).
        self.fd = -1
        try:
            fd = os.open(self.name, self._FLAGS)
        except OSError:
            return -1
        if self._identity(fd) != self.id:
            os.close(fd)
            return -1
        self.fd = fd
        return fd

    def write(self, rec):
        """Writes one record, whichever process this is."""
        self.write_line(_cs_dumps(rec))

    def write_line(self, line):
        """Writes one record already in JSON, whichever process this is."""
        try:
            fd = self._checked()
            if fd >= 0:
                os.write(fd, (line + "\n").encode("utf-8", "replace"))
        except Exception:
            self.fd = -1

    def emit(self, rec):
        """Writes one record (after any deferred ones) if this is the
        process that opened the file (a forked child that did not `reopen`
        stays silent)."""
        if os.getpid() == self.pid:
            if self.pending:
                self.flush()
            self.write(rec)

    def defer(self, rec):
        """Keeps a record back (see the class doc), unless `deferring` was
        turned off (then it is `emit`)."""
        if not self.deferring:
            self.emit(rec if type(rec) is dict else rec())
            return
        pending = self.pending
        pending.append(rec)
        if len(pending) >= 256:
            self.flush()

    def flush(self):
        """Writes the deferred records, in order, in one write."""
        pending, self.pending = self.pending, []
        if not pending or os.getpid() != self.pid or self.fd < 0:
            return
        try:
            text = "\n".join([_cs_dumps(r if type(r) is dict else r()) for r in pending])
        except Exception:
            return
        self.write_line(text)

    def reopen(self, gen=0):
        """In a forked child: a file of its own, `path.PID.GEN`."""
        inherited = self.fd
        self.pid = os.getpid()
        self.fd = -1
        self.pending = []
        if inherited >= 0:
            try:
                os.close(inherited)
            except Exception:
                pass
        try:
            self.fd = self._beside(gen)
        except Exception:
            self.fd = -1


# The folder's own name (the bootstrap's hash, unique): an absolute path
# can only name this folder if it holds that name, since normalising never
# invents a component.
_cs_tag = os.path.basename(os.path.dirname(_cs_here))


def _cs_is_here(entry):
    """Whether a sys.path or PYTHONPATH entry names this folder. Most
    entries are told apart without a call: ours as the harness wrote it, and
    absolute paths that do not hold the folder's unique name."""
    if entry == _cs_here:
        return True
    if type(entry) is str and entry[:1] == "/" and _cs_tag not in entry:
        return False
    try:
        return os.path.abspath(entry or os.curdir) == _cs_here
    except Exception:
        return False


def _cs_chain(emit, fail, keep=None):
    """Runs the sitecustomize this environment had before us (a venv's or a
    distribution's), found on sys.path after our own folder, and takes our
    folder off sys.path. `emit(rec)` gets a `chain` record (may be None),
    or `keep(rec)` (a deferred write, when given) if there is none to run:
    only a chained file that may break the worker needs its record on disk
    before it runs. `fail(where, exc)` hears of anything that went wrong."""
    try:
        from _frozen_importlib_external import PathFinder
        from _frozen_importlib import module_from_spec
    except Exception as exc:
        fail("chain", exc)
        return
    rest = []
    kept = []
    ours = False
    for entry in sys.path:
        if _cs_is_here(entry):
            ours = True
            continue
        kept.append(entry)
        if ours:
            rest.append(entry)
    # Our folder has done its job: leave sys.path as the worker expects it.
    sys.path[:] = kept
    try:
        spec = PathFinder.find_spec("sitecustomize", rest)
    except Exception as exc:
        fail("chain", exc)
        return
    if emit is not None:
        write = emit if spec is not None or keep is None else keep
        write({"type": "chain", "t_ns": _cs_monotonic_ns(),
               "file": None if spec is None else spec.origin})
    if spec is None:
        return
    module = module_from_spec(spec)
    mine = sys.modules.get("sitecustomize")
    if mine is not None:
        sys.modules["_coldstart_bootstrap"] = mine
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


def _cs_main(install, on_error=None):
    """Runs a bootstrap's body: `install()` returns `(emit, fail)` or
    `(emit, fail, keep)` (or None when it records nothing; `keep`: see
    `_cs_chain`); an exception it raises goes to `on_error` (else it is
    dropped: a bootstrap never breaks the worker); then the environment's
    own sitecustomize runs (`_cs_chain`), its failures told to the body's
    `fail`."""
    emit = None
    fail = None
    keep = None
    try:
        hooks = install()
        if hooks is not None:
            emit, fail = hooks[0], hooks[1]
            if len(hooks) > 2:
                keep = hooks[2]
    except Exception as exc:
        if on_error is not None:
            on_error(exc)

    def quiet(where, exc):
        if fail is not None:
            fail(where, exc)

    try:
        _cs_chain(emit, quiet, keep)
    except Exception as exc:
        quiet("chain", exc)

# ---- end of the prelude; the bootstrap's body follows ----
