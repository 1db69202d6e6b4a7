# coldstart suggest, the driver: each link's import statement found and
# classified into its cuts, and the one tagged answer printed.

# ---------------------------------------------------------------- links


def first_party(path, root):
    """None if `path` is first-party code under `root`, else why not (the
    project's one rule; the interpreter's own library folders are not)."""
    paths = sysconfig.get_paths()
    libs = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(k)]
    return _cs_first_party(real(path), root, libs)


def find_statement(src, line, module, package):
    found = []
    for node in ast.walk(src.tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno <= line <= node.end_lineno:
            found.append(node)
    found.sort(key=lambda n: n.col_offset)
    for node in found:
        if module in imported_modules(node, package):
            return node
    if found:
        return found[0]
    return None


def search_importer(link, req, project):
    """Without a recorder line: the importer's source under the project (its
    root, `src/`, or where the other links' modules live) and its first
    module-level import of the link's module."""
    importer = link["importer"]
    bases = [project.root, os.path.join(project.root, "src")]
    for other in req["links"]:
        f, hint = other.get("file"), other.get("importer")
        if f and hint and os.path.isabs(f):
            depth = hint.count(".") + (1 if os.path.basename(f) == "__init__.py" else 0)
            base = os.path.dirname(f)
            for _ in range(depth):
                base = os.path.dirname(base)
            bases.append(base)
    stem = os.path.join(*importer.split("."))
    for base in bases:
        for cand in (os.path.join(base, stem + ".py"), os.path.join(base, stem, "__init__.py")):
            if not os.path.isfile(cand) or first_party(cand, project.root):
                continue
            src = project.parsed(cand)
            if src is None:
                continue
            package = package_of(module_name_of(cand, importer), cand)
            for stmt in src.tree.body:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)) and \
                        link["module"] in imported_modules(stmt, package):
                    return cand, stmt.lineno
    return None, None


def classify_link(link, req, project, version):
    root = project.root
    out = {"index": link["index"], "module": link["module"], "cuts": [], "blocked": []}
    path = link.get("file")
    if not path and link.get("importer"):
        path, line = search_importer(link, req, project)
        if path:
            link = dict(link, file=path, line=line)
            out["searched"] = True
    if not path:
        out["reason"] = "no line is known for the import of `%s` (the recorder did not see it)" % link["module"]
        return out
    if not os.path.isabs(path):
        path = os.path.join(req.get("cwd") or root, path)
    if not os.path.isfile(path):
        out["reason"] = "%s is not a source file" % link["file"]
        return out
    why = first_party(path, root)
    if why:
        out["reason"] = why
        return out
    out["file"] = rel(path, root)
    out["line"] = link["line"]
    try:
        src = Source(path)
    except Refuse as e:
        out["reason"] = "%s cannot be edited: %s" % (out["file"], e)
        return out
    out["line_count"] = len(src.lines)
    out["trailing_newline"] = src.text.endswith("\n")
    module = module_name_of(path, link.get("importer"))
    package = package_of(module, path)
    out["file_module"] = module
    stmt = find_statement(src, link["line"], link["module"], package)
    if stmt is None:
        out["reason"] = ("line %d of %s holds no import statement (importlib.import_module "
                         "or __import__?); change it by hand" % (link["line"], out["file"]))
        return out
    out["line"] = stmt.lineno
    out["statement"] = statement_text(stmt) if not any(a.name == "*" for a in stmt.names) \
        else ast.get_source_segment(src.text, stmt)
    for anc in src.ancestors(stmt):
        if isinstance(anc, FUNCS + (ast.Lambda,)):
            out["reason"] = ("the import is inside `%s` (line %d), which runs while `%s` is imported; "
                             "make that call lazy instead" % (getattr(anc, "name", "lambda"), anc.lineno,
                                                              module or out["file"]))
            return out
        if isinstance(anc, ast.ClassDef):
            out["reason"] = "the import is in the body of class `%s` (line %d)" % (anc.name, anc.lineno)
            return out
    if any(a.name == "*" for a in stmt.names):
        out["reason"] = "`import *` binds names no reader can list; import the names it needs by hand"
        return out
    names = bound_names(stmt)
    evaluated = version < (3, 14) and not src.has_future_annotations()
    uses = analyse(src, stmt, names, evaluated)
    module_level = [t for _, t in sorted(uses.module)]
    module_level += [t for _, t in sorted(indirect_module_uses(uses, src.tree))]
    for name in names:
        for line in module_binds(src, name):
            if line != stmt.lineno:
                module_level.append("`%s` is bound again at module level (line %d)" % (name, line))
    for line, name, fn in uses.globals_declared:
        module_level.append("`%s` declares `global %s` (line %d)" % (fn, name, line))
    if module_level:
        reason = "not cuttable here: " + "; ".join(module_level[:3])
        if len(module_level) > 3:
            reason += " (and %d more)" % (len(module_level) - 3)
        out["reason"] = reason
        return out
    in_try = any(isinstance(a, TRY) for a in src.ancestors(stmt))
    is_lazy = bool(getattr(stmt, "is_lazy", False))
    plans = []
    if version >= (3, 15) and not is_lazy:
        if in_try:
            out["blocked"].append("`lazy` is not allowed inside `try` (PEP 810)")
        elif isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
            out["blocked"].append("a `__future__` import cannot be lazy")
        else:
            plans.append(plan_lazy(src, stmt))
    try:
        if uses.lambdas:
            raise Refuse("read inside a lambda at module level (line %d), which cannot hold an import"
                         % uses.lambdas[0])
        line = shares_a_line(src, stmt)
        if line is not None:
            raise Refuse("the import shares line %d with another statement" % line)
        # Narrowest first: only there does a request whose branch does not
        # read the names leave the module unimported; the top of each
        # function follows, for a model path that needs it imported sooner.
        narrow = plan_defer(src, stmt, names, uses, project, module, link["module"], narrow=True)
        if narrow is not None:
            plans.append(narrow)
        plans.append(plan_defer(src, stmt, names, uses, project, module, link["module"]))
    except Refuse as e:
        out["blocked"].append(str(e))
    for plan in plans:
        new = apply_edits(src.lines, plan["edits"])
        try:
            if plan["kind"] == "lazy_import" and sys.version_info < (3, 15):
                # only when told to assume a newer target (tests)
                plan["notes"].append("not compiled: this interpreter predates PEP 810")
            else:
                compile("\n".join(new) + "\n", path, "exec", dont_inherit=True)
        except SyntaxError as e:
            out["blocked"].append("internal: the %s edit does not compile (%s, line %s)"
                                  % (plan["kind"], e.msg, e.lineno))
            continue
        plan["names"] = names
        plan["edits"] = [{"start": s, "end": e, "lines": l} for s, e, l in plan["edits"]]
        out["cuts"].append(plan)
    if not out["cuts"]:
        out["reason"] = "; ".join(out["blocked"]) or "no cut applies"
    return out


def main(argv):
    if sys.version_info < (3, 8):
        sys.stdout.write(TAG + json.dumps({"too_old": ".".join(str(p) for p in sys.version_info[:3])}) + "\n")
        return 0
    with open(argv[1], encoding="utf-8") as f:
        req = json.load(f)
    version = tuple(req.get("assume_version") or sys.version_info[:3])
    root = real(req["root"])
    project = Project(root)
    links = [classify_link(link, req, project, version) for link in req["links"]]
    answer = {
        "python": {
            "version": ".".join(str(p) for p in sys.version_info[:3]),
            "implementation": sys.implementation.name,
            "executable": sys.executable,
        },
        "root": root,
        "links": links,
    }
    sys.stdout.write(TAG + json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
