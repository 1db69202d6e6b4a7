# coldstart's first-party rule (importguard::firstparty, whose doc is the
# definition), shared by the embedded scripts: the import recorder and
# suggest's classifier. A test holds it and the Rust side to one table.

import os

_CS_INSTALLED_DIRS = ("site-packages", "dist-packages", "__pypackages__")
_CS_VENV_MARKER = "pyvenv.cfg"


def _cs_excluded_dir(path):
    """Whether a folder is never first party: named like an installation
    target, or a virtual environment (it holds the marker)."""
    return (os.path.basename(path) in _CS_INSTALLED_DIRS
            or os.path.isfile(os.path.join(path, _CS_VENV_MARKER)))


def _cs_first_party(path, root, libs=()):
    """None if `path` is first-party code under `root`, else why not. `libs`:
    the interpreter's own library folders (never first party)."""
    if not path or path.startswith("<"):
        return "%s is not a source file (frozen or generated code)" % path
    sep = os.sep
    p, r = path, root.rstrip(sep) or sep
    if not (p == r or p.startswith(r + sep)):
        p, r = os.path.realpath(path), os.path.realpath(root)
        if not (p == r or p.startswith(r.rstrip(sep) + sep)):
            return "%s is outside the project (%s)" % (path, root)
    for lib in libs:
        lib = lib.rstrip(sep)
        if lib and (p.startswith(lib + sep) or p.startswith(os.path.realpath(lib) + sep)):
            return "%s belongs to the interpreter (%s)" % (path, lib)
    d = r
    for part in p[len(r):].strip(sep).split(sep)[:-1]:
        d = os.path.join(d, part)
        if part in _CS_INSTALLED_DIRS:
            return "%s is installed code (%s)" % (path, part)
        if os.path.isfile(os.path.join(d, _CS_VENV_MARKER)):
            return "%s is inside a virtual environment (%s)" % (path, d)
    return None
