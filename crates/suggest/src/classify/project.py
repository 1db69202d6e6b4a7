# coldstart suggest, the project: its other first-party modules that read
# a module's names (the users a cut must keep working).

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
