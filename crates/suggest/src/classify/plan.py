# coldstart suggest, planning: the edits of each cut (move into functions,
# `if TYPE_CHECKING:`, PEP 562 `__getattr__`, PEP 810 `lazy`, drop).

# ---------------------------------------------------------------- cuts


def rel(path, root):
    return os.path.relpath(real(path), root).replace(os.sep, "/")


def body_insert_point(src, fn):
    """(line before which to insert, indentation) for an import at the top of
    `fn`'s body, after its docstring; raises Refuse for a one-line body."""
    first = fn.body[0]
    if first.lineno == fn.lineno or src.lines[first.lineno - 1][: first.col_offset].strip():
        raise Refuse("`%s` (line %d) has its body on the `def` line" % (fn.name, fn.lineno))
    indent = src.indent_of(first.lineno)
    if is_docstring(first):
        return first.end_lineno + 1, indent
    return first.lineno, indent


# ---------------------------------------------------------------- scopes
# The narrowest blocks of a function that read an import's names: the
# import goes in right before the first statement of each that reads them,
# so a request whose branch does not read them never runs it.


def statement_in_scope(src, node, host):
    """The statement of `host`'s own scope that holds `node`: a read inside
    a nested def, class, lambda or comprehension counts as the statement
    that holds that nested scope (the import binds in `host`'s scope)."""
    chain = [node]
    for a in src.ancestors(node):
        if a is host:
            break
        chain.append(a)
    start = 0
    for i, n in enumerate(chain):
        if isinstance(n, SCOPES + COMPS):
            start = i
    for n in chain[start:]:
        if isinstance(n, ast.stmt):
            return n
    return None


def block_of(src, stmt):
    """(the node whose statement list holds `stmt`, that list)."""
    parent = src.parent.get(stmt)
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and any(x is stmt for x in block):
            return parent, block
    return None, None


def block_path(src, stmt, host):
    """[(node, its statement list, the statement in it)] from `host`'s body
    down to the list that holds `stmt`; None when the shape is not one."""
    path = []
    s = stmt
    while True:
        parent, block = block_of(src, s)
        if block is None:
            return None
        path.append((parent, block, s))
        if parent is host:
            path.reverse()
            return path
        s = parent
        while s is not None and not isinstance(s, ast.stmt):
            s = src.parent.get(s)  # an `except` handler, a `case`
        if s is None:
            return None


def first_line(stmt):
    """A statement's first line, its decorators included."""
    return min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])


def insertable(src, parent, block, stmt):
    """Whether an import line can go in right before `stmt` in `block`:
    `stmt` starts its line (not after `if x:` or `a; b`), and the block is
    not the `elif` that an `if`'s `orelse` stands for."""
    line = first_line(stmt)
    if isinstance(parent, ast.If) and block is parent.orelse \
            and src.lines[stmt.lineno - 1][stmt.col_offset:].startswith("elif"):
        return False
    return len(src.indent_of(line)) == stmt.col_offset


def block_words(src, host, parent, block):
    """The block, in words (the `if op == ...:` block (line N)); None for
    `host`'s own body."""
    if parent is host:
        return None
    if block is getattr(parent, "body", None):
        anchor = getattr(parent, "pattern", parent)  # a `case` has no line of its own
        line = anchor.lineno
        head = src.lines[line - 1].strip()
    else:
        word = "else" if block is getattr(parent, "orelse", None) else "finally"
        line = block[0].lineno
        while line > parent.lineno and not src.lines[line - 1].strip().startswith(word):
            line -= 1
        head = word + ":"
    if len(head) > 60:
        head = head[:57] + "..."
    return "the `%s` block (line %d)" % (head, line)


def narrowest_sites(src, host, reads):
    """Where in `host` the import goes so that it runs only on the paths that
    read its names: for each read, the deepest block of `host`'s own scope
    that holds it and can take a line before the statement holding it; a
    block inside another one chosen goes. [(line, indent, words)], or None
    when a read cannot be placed that way."""
    paths = []
    for node in reads:
        s = statement_in_scope(src, node, host)
        path = block_path(src, s, host) if s is not None else None
        if not path:
            return None
        deepest = [i for i, (p, b, st) in enumerate(path) if insertable(src, p, b, st)]
        if not deepest:
            return None
        paths.append(path[: deepest[-1] + 1])
    chosen = []
    for path in paths:
        block = path[-1][1]
        covered = any(other[-1][1] is b for other in paths for _, b, _ in path[:-1])
        if not covered and not any(block is c[1] for c in chosen):
            chosen.append((path[-1][0], block))
    sites = []
    for parent, block in chosen:
        # the first statement of the block that holds a read
        first = min((st for path in paths for _, b, st in path if b is block), key=first_line)
        if not insertable(src, parent, block, first):
            return None
        line = first_line(first)
        sites.append((line, src.indent_of(line), block_words(src, host, parent, block)))
    return sorted(sites)


def future_insert_point(src):
    """(line before which to insert, lines): after the docstring and the
    blank line that follows it, else right before the first statement."""
    body = src.tree.body
    future = ["from __future__ import annotations", ""]
    if body and is_docstring(body[0]):
        at = body[0].end_lineno + 1
        if at <= len(src.lines) and not src.lines[at - 1].strip():
            return at + 1, future
        return at, [""] + future
    return (body[0].lineno if body else 1), future


def removal(src, stmt):
    """Edits that remove `stmt` (its own lines), leaving `pass` where it was
    the only statement of a block and dropping a now doubled blank line."""
    start, end = stmt.lineno, stmt.end_lineno
    parent = src.parent.get(stmt)
    for field in ("body", "orelse", "finalbody", "handlers"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and stmt in block and len(block) == 1 and not isinstance(parent, ast.Module):
            return [(start, end + 1, [src.indent_of(start) + "pass"])]
    before_blank = start == 1 or not src.lines[start - 2].strip()
    after_blank = end < len(src.lines) and not src.lines[end].strip()
    if before_blank and after_blank:
        end += 1
    return [(start, end + 1, [])]


def shares_a_line(src, stmt):
    """The line of another statement on one of `stmt`'s lines, if any
    (`import os; import torch`); the blocks around it do not count."""
    around = set(src.ancestors(stmt))
    for node in ast.walk(src.tree):
        if node is stmt or node in around or not isinstance(node, ast.stmt):
            continue
        if node.lineno <= stmt.end_lineno and stmt.lineno <= node.end_lineno:
            return node.lineno
    return None


def getattr_block(stmt, names, imported, own_package):
    """A PEP 562 `__getattr__` that imports `names` on first access, and a
    `__dir__` that keeps listing them."""
    q = ", ".join('"%s"' % n for n in names) + ("," if len(names) == 1 else "")
    out = [
        "",
        "",
        "def __getattr__(name):",
        "    # PEP 562: imported on first access, so that importing this module",
        "    # does not import %s." % imported,
        "    if name in (%s):" % q,
    ]
    submodule_of_self = (isinstance(stmt, ast.ImportFrom) and own_package is not None
                         and resolve_from(stmt, own_package) == own_package)
    if submodule_of_self:
        # `from . import sub` here would ask this very `__getattr__` again
        out.append("        import importlib")
        out.append("")
        for a, b in zip(stmt.names, bound_names(stmt)):
            out.append('        globals()["%s"] = importlib.import_module(__name__ + ".%s")' % (b, a.name))
    else:
        out.append("        " + statement_text(stmt))
        out.append("")
        for b in names:
            out.append('        globals()["%s"] = %s' % (b, b))
    out += [
        "        return globals()[name]",
        '    raise AttributeError("module {!r} has no attribute {!r}".format(__name__, name))',
        "",
        "",
        "def __dir__():",
        "    return sorted(set(globals()) | {%s})" % ", ".join('"%s"' % n for n in names),
    ]
    return out


def module_binds(src, name):
    bound, _ = scope_bindings(src.tree.body)
    return [line for b, line in bound if b == name]


def plan_defer(src, stmt, names, uses, project, module, link_module, narrow=False):
    """Moves the import out of module level: into the functions that read it
    (at the top of each, or with `narrow` into the narrowest blocks of each
    that read it; None when that is the top of every one), under
    `if TYPE_CHECKING:` for annotations, behind a module `__getattr__` for a
    package's re-export or names other modules import from here."""
    hosts = sorted(uses.func, key=lambda h: h.lineno)
    edits = []
    functions = []
    narrower = False
    for h in hosts:
        line, indent = body_insert_point(src, h)
        sites = [(line, indent, None)]
        if narrow:
            found = narrowest_sites(src, h, uses.func_nodes.get(h, []))
            if found and [l for l, _, _ in found] != [line]:
                sites = found
                narrower = True
        used = sorted(set(n for n in names if any(
            isinstance(x, ast.Name) and x.id == n for x in ast.walk(h))))
        text = statement_text(stmt, set(used) or None)
        for at, ind, _ in sites:
            edits.append((at, at, [ind + text]))
        functions.append({"name": uses.hosts_qual.get(h, h.name), "line": h.lineno,
                          "lines": sorted(set(uses.func[h])),
                          "blocks": [{"line": at, "block": words}
                                     for at, _, words in sites] if sites[0][0] != line else []})
    if narrow and not narrower:
        return None
    is_init = os.path.basename(src.path) == "__init__.py"
    users = project.users(module, names, real(src.path)) if module else []
    need_getattr = is_init or bool(users)
    notes = []
    ann_names = sorted(set(n for n, _, _ in uses.annotations))
    future = False
    repl = []
    if ann_names:
        indent = src.indent_of(stmt.lineno)
        tc_bound = module_binds(src, "TYPE_CHECKING")
        if not tc_bound and module_binds(src, "typing"):
            guard = "typing.TYPE_CHECKING"
        else:
            guard = "TYPE_CHECKING"
            if not tc_bound:
                repl.append(indent + "from typing import TYPE_CHECKING")
                repl.append("")
        notes.append("code that evaluates these annotations at run time (typing.get_type_hints, "
                     "pydantic) no longer finds %s in the module" % ", ".join("`%s`" % n for n in ann_names))
        repl.append(indent + "if %s:" % guard)
        repl.append(indent + "    " + statement_text(stmt, set(ann_names)))
        if any(ev for _, _, ev in uses.annotations) and not src.has_future_annotations():
            future = True
    if repl:
        edits.append((stmt.lineno, stmt.end_lineno + 1, repl))
    else:
        edits.extend(removal(src, stmt))
    if future:
        at, lines = future_insert_point(src)
        edits.append((at, at, lines))
    if need_getattr:
        for fn in ("__getattr__", "__dir__"):
            if module_binds(src, fn):
                raise Refuse("the module already defines `%s` (line %d); add the names to it by hand"
                             % (fn, module_binds(src, fn)[0]))
        own_package = module if is_init else None
        n = len(src.lines)
        block = getattr_block(stmt, names, link_module, own_package)
        trailing = 0
        while trailing < n and trailing < 2 and not src.lines[n - 1 - trailing].strip():
            trailing += 1
        edits.append((n + 1, n + 1, block[trailing:]))
        if is_init and not module_binds(src, "__all__"):
            notes.append("the package has no `__all__`: `from %s import *` no longer brings %s"
                         % (module, ", ".join("`%s`" % n for n in names)))
    if need_getattr:
        kind = "module_getattr"
    elif narrow:
        kind = "move_into_blocks"
    elif functions:
        kind = "move_into_functions"
    elif ann_names:
        kind = "type_checking"
    else:
        kind = "drop_import"
    return {
        "kind": kind,
        "functions": functions,
        "type_checking": bool(ann_names),
        "future_annotations": future,
        "getattr": need_getattr,
        "users": [{"file": rel(p, project.root), "line": l} for p, l in users],
        "notes": notes,
        "edits": edits,
    }


def plan_lazy(src, stmt):
    line = src.lines[stmt.lineno - 1]
    raw = line.encode("utf-8")
    col = len(raw[: stmt.col_offset].decode("utf-8"))
    return {
        "kind": "lazy_import",
        "functions": [],
        "type_checking": False,
        "future_annotations": False,
        "getattr": False,
        "users": [],
        "notes": [],
        "edits": [(stmt.lineno, stmt.lineno + 1, [line[:col] + "lazy " + line[col:]])],
    }


def apply_edits(lines, edits):
    out = list(lines)
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out[start - 1: end - 1] = new
    return out
