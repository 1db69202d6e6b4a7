# coldstart bootstrap stub, written as `sitecustomize.py` (embedded in the
# importguard crate). It runs the bootstrap beside its folder
# (`../bootstrap.py`: the shared prelude, then the recorder's or the memory
# view's body), compiled once per Python version and kept as
# `../bootstrap.py.TAG.bin`, so a worker does not compile it at every start
# (PYTHONDONTWRITEBYTECODE or not). Only already-loaded modules are used.


def _cs_code():
    import sys
    import os
    import marshal
    from _frozen_importlib_external import MAGIC_NUMBER

    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(os.path.dirname(here), "bootstrap.py")
    cache = "%s.%s.bin" % (src, sys.implementation.cache_tag)
    try:
        with open(cache, "rb") as f:
            data = f.read()
        if data[:len(MAGIC_NUMBER)] == MAGIC_NUMBER:
            return marshal.loads(data[len(MAGIC_NUMBER):])
    except Exception:
        pass
    with open(src, "rb") as f:
        code = compile(f.read(), __file__, "exec", optimize=2)
    try:
        tmp = "%s.%d.tmp" % (cache, os.getpid())
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, MAGIC_NUMBER + marshal.dumps(code))
        finally:
            os.close(fd)
        os.replace(tmp, cache)
    except Exception:
        pass
    return code


exec(_cs_code(), globals())
