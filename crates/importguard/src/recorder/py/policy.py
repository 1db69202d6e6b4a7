# coldstart import recorder: the body that follows the shared prelude
# (prelude.py) and the first-party rule (firstparty.py) in the bootstrap run
# as `sitecustomize` from a private temporary folder put first on PYTHONPATH.
# The body is several files, one a job, concatenated in this order into the
# one bootstrap (compiled once and cached): policy.py (this file: what is
# recorded, the policy), frames.py (who asked), finder.py (the sys.meta_path
# finder), spawns.py (what an image starts), audit.py (the audit hook, lazy
# loading), lifecycle.py (an image's start, fork and exit) and install.py
# (wires them). Each job is a factory taking what it needs and returning its
# closures, so the hot paths (the finder, the hook) read locals and cells.
#
# It records, as JSON lines written to the file named by COLDSTART_RECORD
# (child images write `FILE.PID.GEN` beside it), each at once except the
# worker's imports of names outside the policy and the rest of its start
# record (after a short one written at once), which are kept back until
# the next record that is written (in order), a fork, an exec, exit, or 256
# of them: what a verdict needs (forbidden names, probes, failures, spawns)
# is on disk before the worker goes on, even if it then crashes.
#   start   this image began: pid, ppid, exec generation, the image that
#           started it, argv, sys.flags, whether importtime is on, and for a
#           forked child the line that called fork (the worker's: first the
#           short record, later the whole one, of the same pid and t_ns)
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


def _policy(text):
    """`block=1;forbid=torch,transformers;allow=transformers.utils`"""
    out = {}
    for part in (text or "").split(";"):
        key, _, value = part.partition("=")
        out[key.strip()] = tuple(x.strip() for x in value.split(",") if x.strip())
    return out


def _rec_policy(forbid, allow, block):
    """The policy's closures: `matches(name, patterns)` (the pattern a name
    falls under, or None), the heads of the forbidden patterns,
    `forbidden(name)` and `refuse(name)` (the error a refused name raises)."""

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

    return matches, forbid_heads, forbidden, refuse
