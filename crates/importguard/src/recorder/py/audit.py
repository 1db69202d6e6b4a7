# coldstart import recorder: the audit hook, the channel code cannot remove
# (imports when the finder is not first, bodies of lazily loaded modules as
# they run, spawns), and the line that declared a PEP 810 lazy import.


def _rec_audit_hook(records, fail, finder, forbidden, refuse, describe,
                    note_spawn, wrap_fork_exec, wrapped, audited, audit_written,
                    probed_at, declared, lazy_files, get_ident, main_thread):
    """The audit hook (to pass to sys.addaudithook). The dicts are shared
    with the finder (see install.py)."""
    monotonic_ns = _cs_monotonic_ns
    getframe = sys._getframe
    getpid = os.getpid
    emit = records.emit
    defer = records.defer

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
            # Above it: on_exec, hook, the frame that ran the code.
            f = getframe(3)
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

    def on_import(event, args):
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
                describe(rec, getframe(2), True)
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

    def on_exec(event, args):
        # Only a lazily loaded module's body is looked at, and only once
        # a probe of a forbidden name has named its file.
        if not lazy_files:
            return
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
            describe(rec, getframe(2), bad)
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

    def on_spawn(event, args):
        # getframe(2): the line that raised the event (above `hook`).
        try:
            f = getframe(2)
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

    # Every audit event of the process calls the hook: it holds one
    # variable and asks one dict, so the events it does not use (most of
    # them: open, compile, marshal.loads...) cost a call and a lookup.
    handlers = dict.fromkeys(_CS_SPAWN_EVENTS, on_spawn)
    handlers["import"] = on_import
    handlers["exec"] = on_exec
    handler = handlers.get

    def hook(event, args):
        h = handler(event)
        if h is not None:
            h(event, args)

    return hook


def _rec_declare_lazy(line_of, declared, fail):
    """PEP 810 (3.15): a lazy imports filter, chained to the one in place,
    that keeps the line that declared each lazy import (`declared`)."""
    getframe = sys._getframe
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
