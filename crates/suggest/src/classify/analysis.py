# coldstart suggest, analysis: the names each scope binds, and where an
# import's names are read (functions, annotations, module level, other
# modules through this one).

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
        self.func_nodes = {}    # host def -> [the `Name` nodes that read them]
        self.lambdas = []       # lines: read in a lambda outside any def
        self.annotations = []   # (name, line, evaluated)
        self.hosts_qual = {}    # host def -> qualified name
        self.refs = {}          # host def -> global names it reads
        self.module_calls = []  # (name, line, what): module-level calls/decorators
        # Inside `if __name__ == "__main__":` at module level: the program's
        # run (a script's serving loop), not its import. A function called
        # there may read the name only after start-up; the evidence of the
        # patched copy's start-up decides, not this analysis.
        self.in_main_guard = False
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
            self.func_nodes.setdefault(ctx.host, []).append(node)

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
        if isinstance(node, ast.If) and ctx.mode == MODULE and is_main_guard(node.test) \
                and not self.in_main_guard:
            self.visit(node.test, ctx)
            self.in_main_guard = True
            try:
                self.visit_body(node.body, ctx)
            finally:
                self.in_main_guard = False
            self.visit_body(node.orelse, ctx)
            return
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
        if isinstance(node, ast.Call) and ctx.mode == MODULE and isinstance(node.func, ast.Name) \
                and not self.in_main_guard:
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
