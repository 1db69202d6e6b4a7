# coldstart suggest: reads the first-party links of an import chain with this
# interpreter's own `ast` and proposes the edits that cut each one.
#
# One script cut by job into files concatenated in order at compile time
# (query.rs), after the first-party rule (importguard's firstparty.py):
# sources.py (this file: the shared constants, a source file and its
# import statements), analysis.py (where an import's names are read), project.py
# (the project's other modules that read them), plan.py (the edits of each
# cut) and driver.py (each link classified, the answer printed).
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


def is_main_guard(test):
    """`__name__ == "__main__"` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
            and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))


def is_type_checking(test):
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
                and isinstance(test.value, ast.Name) and test.value.id == "typing"))
