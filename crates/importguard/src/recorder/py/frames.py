# coldstart import recorder: who asked. Where the import machinery, the
# standard library and first-party code stand, and the walks up the stack a
# record makes: `describe` (who asked, the first-party line, the executing
# modules and the line that imported each), `line_of` (the worker's line of a
# spawn, a fork or a lazy declaration) and `lazy_declaration` (the line
# behind a find_spec probe).


def _rec_frames(forbid, matches, project_root, get_ident, main_thread):
    """The stack walks: `(describe, line_of, lazy_declaration)`."""
    # Where the import machinery and the standard library live: "who asked"
    # skips the machinery; "first party" also skips the standard library and
    # the forbidden packages' own code.
    stdlib = os.path.dirname(os.__file__) + os.sep
    importlib_dir = stdlib + "importlib" + os.sep
    recorder_file = os.path.abspath(__file__)

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

    return describe, line_of, lazy_declaration
