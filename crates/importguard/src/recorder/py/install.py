# coldstart import recorder: the wiring. Reads the environment, opens the
# record file (the first image claims the one the harness made), builds
# each job's closures (the files before this one) in order, puts the hook,
# the filter, the fork and exit handlers and the finder in place, and
# writes the start record.


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
    # The project's own top-level names: their records say which file and
    # which finder answered (what shows a tree ran its own code).
    own_heads = frozenset(policy.get("own", ()))
    project_root = os.environ.get("COLDSTART_RECORD_ROOT") or None
    monotonic_ns = _cs_monotonic_ns
    get_ident = _thread.get_ident

    me, gen, parent, how = _rec_image()
    # Only the first image claims the file the harness made; the others
    # write their own beside it.
    records = _CsRecords(path, gen, how == "root")
    # Only the worker itself (whose start is timed) keeps records back;
    # children write each at once (forked ones often end with os._exit).
    records.deferring = how in ("root", "exec")
    emit = records.emit

    def fail(where, exc):
        emit({"type": "error", "t_ns": monotonic_ns(), "where": where,
              "error": "%s: %s" % (type(exc).__name__, exc)})

    try:
        os.environ[_IMAGE_ENV] = "%d:%d" % (me, gen)
    except Exception as exc:
        fail("image", exc)

    main_thread = get_ident()
    matches, forbid_heads, forbidden, refuse = _rec_policy(forbid, allow, block)
    describe, line_of, lazy_declaration = _rec_frames(
        forbid, matches, project_root, get_ident, main_thread)

    # Names the audit hook saw, per thread, for the finder to mark `both`;
    # names the hook wrote itself (the finder was not first), with the time.
    audited = {}
    audit_written = {}
    # The lines behind find_spec probes (where a LazyLoader module is
    # declared), and the lines of PEP 810 `lazy import`s, by name.
    probed_at = {}
    declared = {}
    lazy_files = {}
    finder = _rec_finder(
        records, fail, forbid_heads, forbidden, refuse, describe,
        lazy_declaration, audited, audit_written, probed_at, declared,
        lazy_files, get_ident, main_thread, own_heads)
    note_spawn, wrap_fork_exec, wrapped = _rec_spawns(
        path, records, fail, line_of, get_ident, main_thread)
    hook = _rec_audit_hook(
        records, fail, finder, forbidden, refuse, describe, note_spawn,
        wrap_fork_exec, wrapped, audited, audit_written, probed_at, declared,
        lazy_files, get_ident, main_thread)

    audit = False
    addaudithook = getattr(sys, "addaudithook", None)
    if addaudithook is not None:
        try:
            addaudithook(hook)
            audit = True
        except Exception as exc:
            fail("audit", exc)

    _rec_declare_lazy(line_of, declared, fail)

    after_fork, at_exit = _rec_lifecycle(
        records, fail, line_of, gen, audit, audited, audit_written,
        get_ident, main_thread)
    try:
        # Deferred records are written before a fork, so the child does not
        # inherit them (and a fork_exec'd child finds them on disk).
        os.register_at_fork(before=records.flush, after_in_child=after_fork)
    except Exception:
        pass

    _rec_start(records, me, gen, parent, how, audit, block, forbid, allow)
    sys.meta_path.insert(0, finder)
    atexit.register(at_exit)
    return emit, fail, records.defer


_cs_main(_install)
