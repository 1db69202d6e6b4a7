# coldstart import recorder: the finder placed first on sys.meta_path. It
# writes down every import attempt (a forbidden name's with where it came
# from), refuses what the policy blocks, and lets the rest of sys.meta_path
# answer exactly as it would have.


def _rec_finder(records, fail, forbid_heads, forbidden, refuse, describe,
                lazy_declaration, audited, audit_written, probed_at, declared,
                lazy_files, get_ident, main_thread, own_heads):
    """The finder (to put first on sys.meta_path). `audited`,
    `audit_written`, `probed_at`, `declared` and `lazy_files` are shared
    with the audit hook (see install.py). A name under `own_heads` (the
    project's own packages) is written with the file its spec names and
    the finder that answered."""
    monotonic_ns = _cs_monotonic_ns
    getframe = sys._getframe
    getpid = os.getpid
    emit = records.emit
    defer = records.defer

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
        head = name.partition(".")[0]
        if head in forbid_heads:
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
        # Most attempts (a name outside the policy, on the main thread, no
        # lazy declaration waiting) skip the stack and the refusal.
        if bad or tid != main_thread or declared:
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
        answered = None
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
                    answered = finder
                    break
        except BaseException as exc:
            err = exc
        rec["found"] = spec is not None
        if spec is not None and head in own_heads:
            try:
                origin = spec.origin
                if type(origin) is not str:
                    # A namespace package: its first folder.
                    locations = list(spec.submodule_search_locations or ())
                    origin = locations[0] if locations else None
                if type(origin) is str:
                    rec["file"] = origin
                kind = answered if isinstance(answered, type) else type(answered)
                rec["finder"] = "%s.%s" % (
                    getattr(kind, "__module__", "?"), getattr(kind, "__qualname__", "?"))
            except Exception as exc:
                fail("origin", exc)
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
    return finder
