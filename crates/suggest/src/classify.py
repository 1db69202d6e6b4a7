# coldstart suggest: reads the first-party links of an import chain with this
# interpreter's own `ast` and proposes the edits that cut each one.
#
# Run by the `suggest` crate as `python -I -B classify.py REQUEST.json`. The
# request names the project root and the chain's links (the importing file,
# line and function of each module of the chain). Prints one tagged JSON line
# (`COLDSTART_SUGGEST {...}`) on stdout. Standard library only; Python 3.8+
# (it needs `end_lineno`). A problem with one link (not first party, a
# syntax error, an unsupported shape) is that link's answer, never a crash.
import ast
import io
import json
import os
import sys
import sysconfig
import tokenize

TAG = "COLDSTART_SUGGEST "

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
SCOPES = FUNCS + (ast.Lambda, ast.ClassDef)
COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
TRY = tuple(getattr(ast, n) for n in ("Try", "TryStar") if hasattr(ast, n))
# Methods that run when a class is called: a module-level `C()` runs them.
CONSTRUCTORS = ("__init__", "__new__", "__post_init__")
# What is first party: `_cs_first_party` and `_cs_excluded_dir`, the project's
# one rule (importguard's firstparty.py), put before this script.
SKIP_DIRS = (".git", ".hg", ".svn", "__pycache__", "node_modules", ".tox", ".nox",
             ".mypy_cache", ".pytest_cache", ".ruff_cache", "target")


class Refuse(Exception):
    """This link cannot be cut; the message says why."""


# ---------------------------------------------------------------- sources


class Source:
    """One file: its lines exactly as the Rust side splits them (on `\\n`)."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            raw = f.read()
        try:
            enc = tokenize.detect_encoding(io.BytesIO(raw).readline)[0]
        except SyntaxError as e:
            raise Refuse("its encoding declaration cannot be read (%s)" % e)
        if enc not in ("utf-8", "utf-8-sig"):
            raise Refuse("it declares the encoding %s; suggestions only edit UTF-8 files" % enc)
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise Refuse("it is not valid UTF-8 (%s)" % e)
        if "\r" in text.replace("\r\n", ""):
            raise Refuse("it ends lines with bare carriage returns")
        self.text = text
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        self.lines = [l[:-1] if l.endswith("\r") else l for l in lines]
        try:
            self.tree = ast.parse(text, filename=path)
        except SyntaxError as e:
            raise Refuse("this interpreter cannot parse it: %s (line %s)" % (e.msg, e.lineno))
        self.parent = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node

    def ancestors(self, node):
        while node in self.parent:
            node = self.parent[node]
            yield node

    def indent_of(self, line):
        text = self.lines[line - 1]
        return text[: len(text) - len(text.lstrip(" \t"))]

    def has_future_annotations(self):
        for stmt in self.tree.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
                if any(a.name == "annotations" for a in stmt.names):
                    return True
            elif not is_docstring(stmt) and not isinstance(stmt, ast.ImportFrom):
                break
        return False


def is_docstring(stmt):
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str))


def real(path):
    return os.path.realpath(path)


def module_name_of(path, hint):
    """The dotted name of the module in `path`: `hint` if the path fits it,
    else the name its package folders (with `__init__.py`) give it."""
    stem = os.path.splitext(os.path.basename(path))[0]
    if hint:
        parts = hint.split(".")
        want = parts if stem != "__init__" else parts + ["__init__"]
        got = os.path.normpath(os.path.splitext(path)[0]).split(os.sep)
        if got[-len(want):] == want:
            return hint
    parts = [] if stem == "__init__" else [stem]
    d = os.path.dirname(path)
    while os.path.isfile(os.path.join(d, "__init__.py")):
        parts.insert(0, os.path.basename(d))
        nd = os.path.dirname(d)
        if nd == d:
            break
        d = nd
    return ".".join(parts) or None


def package_of(module, path):
    if module is None:
        return None
    if os.path.basename(path) == "__init__.py":
        return module
    return module.rpartition(".")[0]


def resolve_from(node, package):
    """The absolute module an `ImportFrom` reads from, or None."""
    if node.level == 0:
        return node.module
    if package is None:
        return None
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts):
        return None
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    base = ".".join(parts)
    if node.module:
        base = base + "." + node.module if base else node.module
    return base or None


def prefixes(name):
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def imported_modules(node, package):
    if isinstance(node, ast.Import):
        out = []
        for a in node.names:
            out.extend(prefixes(a.name))
        return out
    base = resolve_from(node, package)
    if base is None:
        return []
    return prefixes(base) + [base + "." + a.name for a in node.names]


def bound_names(node):
    out = []
    for a in node.names:
        if a.asname:
            out.append(a.asname)
        elif isinstance(node, ast.Import):
            out.append(a.name.split(".")[0])
        else:
            out.append(a.name)
    return out


def statement_text(node, names=None):
    """The import statement, on one line, binding only `names` (all if None)."""
    aliases = [a for a, b in zip(node.names, bound_names(node)) if names is None or b in names]
    parts = [a.name + (" as " + a.asname if a.asname else "") for a in aliases]
    if isinstance(node, ast.Import):
        return "import " + ", ".join(parts)
    return "from %s%s import %s" % ("." * node.level, node.module or "", ", ".join(parts))


def is_type_checking(test):
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
                and isinstance(test.value, ast.Name) and test.value.id == "typing"))


# ---------------------------------------------------------------- bindings


def target_names(node, out):
    """Names a binding position binds (Name stores, starred, tuples)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.append((n.id, n.lineno))


def scope_bindings(body, args=None):
    """Names bound in one scope (not in nested scopes), with lines, and the
    names it declares global."""
    bound = []
    declared = set()
    if args is not None:
        for a in (getattr(args, "posonlyargs", []) + args.args + args.kwonlyargs
                  + [x for x in (args.vararg, args.kwarg) if x is not None]):
            bound.append((a.arg, getattr(a, "lineno", 0)))
    stack = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            declared.update(n.names)
            continue
        if isinstance(n, FUNCS + (ast.ClassDef,)):
            bound.append((n.name, n.lineno))
            # decorators and defaults belong to this scope
            stack.extend(getattr(n, "decorator_list", []))
            if isinstance(n, FUNCS):
                stack.extend(n.args.defaults + [d for d in n.args.kw_defaults if d is not None])
            else:
                stack.extend(n.bases + [k.value for k in n.keywords])
            continue
        if isinstance(n, ast.Lambda):
            stack.extend(n.args.defaults + [d for d in n.args.kw_defaults if d is not None])
            continue
        if isinstance(n, COMPS):
            # only a walrus inside a comprehension binds here
            for w in ast.walk(n):
                if isinstance(w, ast.NamedExpr):
                    target_names(w.target, bound)
            stack.append(n.generators[0].iter)
            continue
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            for b in bound_names(n):
                if b != "*":
                    bound.append((b, n.lineno))
            continue
        if isinstance(n, ast.ExceptHandler) and n.name:
            bound.append((n.name, n.lineno))
        for kind in ("MatchAs", "MatchStar"):
            if hasattr(ast, kind) and isinstance(n, getattr(ast, kind)) and n.name:
                bound.append((n.name, n.lineno))
        if hasattr(ast, "MatchMapping") and isinstance(n, ast.MatchMapping) and n.rest:
            bound.append((n.rest, n.lineno))
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            bound.append((n.id, n.lineno))
            continue
        stack.extend(ast.iter_child_nodes(n))
    return bound, declared


# ---------------------------------------------------------------- uses


MODULE, FUNC, DEAD = "module", "function", "dead"


class Ctx(object):
    __slots__ = ("mode", "host", "shadow", "what", "qual")

    def __init__(self, mode, host, shadow, what, qual):
        self.mode = mode      # MODULE: runs at import; FUNC: when called; DEAD: never
        self.host = host      # the def an import can move into (None: a lambda)
        self.shadow = shadow  # names local to the enclosing function scopes
        self.what = what      # for module-level uses: where the name is read
        self.qual = qual      # qualified name of the scope

    def but(self, **kw):
        c = Ctx(self.mode, self.host, self.shadow, self.what, self.qual)
        for k, v in kw.items():
            setattr(c, k, v)
        return c


class Uses(object):
    """Where the names an import binds are read, and how."""

    def __init__(self, src, names, evaluated):
        self.src = src
        self.names = set(names)
        self.evaluated = evaluated  # annotations of defs and classes run at definition
        self.module = []        # (line, text): read while the module is imported
        self.func = {}          # host def -> [lines]
        self.lambdas = []       # lines: read in a lambda outside any def
        self.annotations = []   # (name, line, evaluated)
        self.hosts_qual = {}    # host def -> qualified name
        self.refs = {}          # host def -> global names it reads
        self.module_calls = []  # (name, line, what): module-level calls/decorators
        self.globals_declared = []  # (line, function)

    def record(self, name, node, ctx):
        if ctx.mode == DEAD:
            # under `if TYPE_CHECKING:`: only type checkers read it
            self.annotations.append((name, node.lineno, False))
            return
        if ctx.mode == MODULE:
            self.module.append((node.lineno, "`%s` is %s (line %d)" % (name, ctx.what, node.lineno)))
        elif ctx.host is None:
            self.lambdas.append(node.lineno)
        else:
            self.func.setdefault(ctx.host, []).append(node.lineno)

    def annotation(self, expr, ctx, evaluated):
        if expr is None:
            return
        evaluated = evaluated and ctx.mode != DEAD
        for n in ast.walk(expr):
            if isinstance(n, ast.Name) and n.id in self.names and n.id not in ctx.shadow:
                self.annotations.append((n.id, n.lineno, evaluated and self.evaluated))

    def visit_body(self, body, ctx):
        for stmt in body:
            self.visit(stmt, ctx)

    def visit(self, node, ctx):
        if isinstance(node, FUNCS):
            return self.visit_def(node, ctx)
        if isinstance(node, ast.ClassDef):
            return self.visit_class(node, ctx)
        if isinstance(node, ast.Lambda):
            return self.visit_lambda(node, ctx)
        if isinstance(node, COMPS):
            return self.visit_comp(node, ctx)
        if isinstance(node, ast.If) and ctx.mode == MODULE and is_type_checking(node.test):
            self.visit(node.test, ctx)
            self.visit_body(node.body, ctx.but(mode=DEAD))
            self.visit_body(node.orelse, ctx)
            return
        if isinstance(node, ast.AnnAssign):
            # local variable annotations are never evaluated
            self.annotation(node.annotation, ctx, ctx.mode == MODULE)
            self.visit(node.target, ctx)
            if node.value is not None:
                self.visit(node.value, ctx)
            return
        if hasattr(ast, "TypeAlias") and isinstance(node, ast.TypeAlias):
            self.annotation(node.value, ctx, False)
            return
        if isinstance(node, ast.Call) and ctx.mode == MODULE and isinstance(node.func, ast.Name):
            self.module_calls.append((node.func.id, node.lineno, "called at module level"))
        if isinstance(node, ast.Name):
            if node.id in self.names and node.id not in ctx.shadow:
                if isinstance(node.ctx, ast.Load):
                    what = ctx.what
                    parent = self.src.parent.get(node)
                    if ctx.mode == MODULE and isinstance(parent, ast.Call) and parent.func is node:
                        what = "called at module level"
                    self.record(node.id, node, ctx.but(what=what))
            if ctx.mode == FUNC and ctx.host is not None and isinstance(node.ctx, ast.Load) \
                    and node.id not in ctx.shadow:
                self.refs.setdefault(ctx.host, set()).add(node.id)
            return
        for child in ast.iter_child_nodes(node):
            self.visit(child, ctx)

    def decorators(self, node, ctx, kind):
        for d in node.decorator_list:
            what = "a decorator of %s `%s`" % (kind, node.name)
            self.visit(d, ctx.but(what=what))
            if ctx.mode == MODULE:
                head = d.func if isinstance(d, ast.Call) else d
                if isinstance(head, ast.Name):
                    self.module_calls.append((head.id, d.lineno, what))

    def visit_def(self, node, ctx):
        self.decorators(node, ctx, "function")
        args = node.args
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.visit(d, ctx.but(what="a default argument of `%s`" % node.name))
        for a in (getattr(args, "posonlyargs", []) + args.args + args.kwonlyargs
                  + [x for x in (args.vararg, args.kwarg) if x is not None]):
            self.annotation(a.annotation, ctx, True)
        self.annotation(node.returns, ctx, True)
        for tp in getattr(node, "type_params", []) or []:
            self.annotation(getattr(tp, "bound", None), ctx, False)
            self.annotation(getattr(tp, "default_value", None), ctx, False)
        bound, declared = scope_bindings(node.body, args)
        for name in declared & self.names:
            self.globals_declared.append((node.lineno, name, node.name))
        local = set(b for b, _ in bound) - declared
        qual = ctx.qual + node.name
        if ctx.mode == DEAD:
            inner = ctx.but(qual=qual + ".")
        else:
            host = ctx.host if ctx.mode == FUNC else node
            if ctx.mode == MODULE:
                self.hosts_qual[node] = qual
            inner = Ctx(FUNC, host, (ctx.shadow if ctx.mode == FUNC else frozenset()) | local,
                        "", qual + ".")
        self.visit_body(node.body, inner)

    def visit_class(self, node, ctx):
        self.decorators(node, ctx, "class")
        for b in node.bases:
            self.visit(b, ctx.but(what="a base class of `%s`" % node.name))
        for k in node.keywords:
            self.visit(k.value, ctx.but(what="a keyword (`%s=`) of class `%s`" % (k.arg, node.name)))
        for tp in getattr(node, "type_params", []) or []:
            self.annotation(getattr(tp, "bound", None), ctx, False)
        what = "read in the body of class `%s`" % node.name
        self.visit_body(node.body, ctx.but(what=what, qual=ctx.qual + node.name + "."))

    def visit_lambda(self, node, ctx):
        args = node.args
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.visit(d, ctx.but(what="a default argument of a lambda"))
        bound, _ = scope_bindings([], args)
        mode = DEAD if ctx.mode == DEAD else FUNC
        host = ctx.host if ctx.mode == FUNC else None
        self.visit(node.body, Ctx(mode, host, ctx.shadow | set(b for b, _ in bound), "", ctx.qual))

    def visit_comp(self, node, ctx):
        gens = node.generators
        self.visit(gens[0].iter, ctx)
        names = []
        for g in gens:
            target_names(g.target, names)
        inner = ctx.but(shadow=ctx.shadow | set(n for n, _ in names))
        for i, g in enumerate(gens):
            if i:
                self.visit(g.iter, inner)
            for cond in g.ifs:
                self.visit(cond, inner)
        for part in ("elt", "key", "value"):
            if hasattr(node, part):
                self.visit(getattr(node, part), inner)


def analyse(src, stmt, names, evaluated):
    """Where the names `stmt` binds are read in the module, as `Uses`."""
    uses = Uses(src, names, evaluated)
    top = Ctx(MODULE, None, frozenset(), "read at module level", "")
    for s in src.tree.body:
        if s is stmt:
            continue
        uses.visit(s, top)
    return uses


def indirect_module_uses(uses, tree):
    """Module-level calls of module-level functions (or classes, through
    their constructors) that read the names, directly or through each other."""
    by_name = {}
    for host, qual in uses.hosts_qual.items():
        if "." not in qual:
            by_name.setdefault(qual, []).append(host)
        else:
            cls, _, meth = qual.rpartition(".")
            if "." not in cls and meth in CONSTRUCTORS:
                by_name.setdefault(cls, []).append(host)
    users = set()
    changed = True
    while changed:
        changed = False
        for name, hosts in by_name.items():
            if name in users:
                continue
            for h in hosts:
                if h in uses.func or uses.refs.get(h, set()) & users:
                    users.add(name)
                    changed = True
                    break
    out = []
    for name, line, what in uses.module_calls:
        if name in users:
            out.append((line, "`%s` reads it and is %s (line %d)" % (name, what, line)))
    return out


# ---------------------------------------------------------------- users elsewhere


class Project(object):
    def __init__(self, root):
        self.root = root
        self._files = None
        self._parsed = {}

    def files(self):
        if self._files is None:
            out = []
            for d, dirs, files in os.walk(self.root):
                dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith(".")
                                 and not _cs_excluded_dir(os.path.join(d, x)))
                out.extend(os.path.join(d, f) for f in sorted(files) if f.endswith(".py"))
            self._files = out
        return self._files

    def parsed(self, path):
        if path not in self._parsed:
            try:
                self._parsed[path] = Source(path)
            except (Refuse, OSError, ValueError):
                self._parsed[path] = None
        return self._parsed[path]

    def users(self, module, names, exclude):
        """Other first-party modules that read `module.name` for a name in
        `names`: `from module import name`, or an attribute of the module."""
        out = []
        for path in self.files():
            if real(path) == exclude:
                continue
            try:
                with open(path, "rb") as f:
                    raw = f.read()
            except OSError:
                continue
            if not any(n.encode("utf-8") in raw for n in names):
                continue
            src = self.parsed(path)
            if src is None:
                continue
            mod = module_name_of(path, None)
            pkg = package_of(mod, path)
            aliases = {}  # local name -> module it stands for
            for node in ast.walk(src.tree):
                if isinstance(node, ast.ImportFrom):
                    base = resolve_from(node, pkg)
                    if base is None:
                        continue
                    for a in node.names:
                        if base == module and (a.name in names or a.name == "*"):
                            out.append((path, node.lineno))
                        aliases[a.asname or a.name] = base + "." + a.name
                elif isinstance(node, ast.Import):
                    for a in node.names:
                        if a.asname:
                            aliases[a.asname] = a.name
                        else:
                            top = a.name.split(".")[0]
                            aliases.setdefault(top, top)
            for node in ast.walk(src.tree):
                if isinstance(node, ast.Attribute) and node.attr in names:
                    chain = []
                    v = node.value
                    while isinstance(v, ast.Attribute):
                        chain.insert(0, v.attr)
                        v = v.value
                    if isinstance(v, ast.Name) and v.id in aliases:
                        if ".".join([aliases[v.id]] + chain) == module:
                            out.append((path, node.lineno))
        return sorted(set(out))


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


def plan_defer(src, stmt, names, uses, project, module, link_module):
    """Moves the import out of module level: into the functions that read it,
    under `if TYPE_CHECKING:` for annotations, behind a module `__getattr__`
    for a package's re-export or names other modules import from here."""
    hosts = sorted(uses.func, key=lambda h: h.lineno)
    edits = []
    functions = []
    for h in hosts:
        line, indent = body_insert_point(src, h)
        used = sorted(set(n for n in names if any(
            isinstance(x, ast.Name) and x.id == n for x in ast.walk(h))))
        text = statement_text(stmt, set(used) or None)
        edits.append((line, line, [indent + text]))
        functions.append({"name": uses.hosts_qual.get(h, h.name), "line": h.lineno,
                          "lines": sorted(set(uses.func[h]))})
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
