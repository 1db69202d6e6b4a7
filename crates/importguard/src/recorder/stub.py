# coldstart bootstrap stub, written as `sitecustomize.py` (embedded in the
# importguard crate). It runs the bootstrap beside its folder
# (`../bootstrap.py`: the shared prelude, then the recorder's or the memory
# view's body), compiled once per Python version and kept as
# `../bootstrap.py.TAG.bin`, so a worker does not compile it at every start.
# Only already-loaded modules are used.
#
# It also writes the import system's own cache of this file
# (`__pycache__/sitecustomize.TAG.pyc`, where `cache_from_source` says,
# checked against this file's mtime and size as usual) holding the
# bootstrap's code itself: the next interpreter of that version imports
# `sitecustomize` from it and runs the bootstrap straight away, in the same
# globals `exec` below would give it, without compiling or running this
# stub (which PYTHONDONTWRITEBYTECODE would otherwise make every worker do).
# The folder is written once and never rewritten, so that cache stays
# valid; where it cannot be written, this stub runs at every start.


def _cs_code():
    import sys
    import os
    import marshal
    from _frozen_importlib_external import MAGIC_NUMBER

    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(os.path.dirname(here), "bootstrap.py")
    cache = "%s.%s.bin" % (src, sys.implementation.cache_tag)
    code = None
    try:
        with open(cache, "rb") as f:
            data = f.read()
        if data[:len(MAGIC_NUMBER)] == MAGIC_NUMBER:
            code = marshal.loads(data[len(MAGIC_NUMBER):])
    except Exception:
        pass
    if code is None:
        with open(src, "rb") as f:
            code = compile(f.read(), __file__, "exec", optimize=2)
        _cs_write(cache, MAGIC_NUMBER + marshal.dumps(code))
    try:
        from _frozen_importlib_external import cache_from_source
        st = os.stat(__file__)
        pyc = cache_from_source(__file__)
        os.makedirs(os.path.dirname(pyc), mode=0o700, exist_ok=True)
        # PEP 552 timestamp pyc: flags 0, source mtime, source size.
        header = MAGIC_NUMBER + b"\0\0\0\0" + (
            (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
            + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
        _cs_write(pyc, header + marshal.dumps(code))
    except Exception:
        pass
    return code


def _cs_write(path, data):
    """Writes `data` to `path` atomically (0600), or not at all."""
    import os
    try:
        tmp = "%s.%d.tmp" % (path, os.getpid())
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except Exception:
        pass


exec(_cs_code(), globals())
