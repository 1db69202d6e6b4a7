# coldstart lazy's RSS bootstrap: the BODY that follows the shared prelude
# (importguard::recorder::bootstrap::PRELUDE), injected as `sitecustomize`
# the recorder's way (`Bootstrap::prepare("coldstart-lazy-", BODY)`).
#
# Only in an untimed run of its own. For the modules named in
# COLDSTART_LAZY_MODULES (comma separated), the first import of each in
# this process has VmRSS read right before its module body runs and right
# after, written as JSON lines to the file named by COLDSTART_LAZY_RSS:
#   start  this bootstrap ran: pid, the record format `version`
#   rss    module, before, after (bytes; null where unreadable)
#   error  anything that went wrong in here (swallowed, never raised)
# Every other import is untouched: the finder answers None at once, so the
# worker's start-up stays as it is but for those few readings.


def _cs_rss():
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except Exception:
        return None


def _install():
    path = os.environ.get("COLDSTART_LAZY_RSS")
    wanted = set(n for n in os.environ.get("COLDSTART_LAZY_MODULES", "").split(",") if n)
    if not path or not wanted:
        return None
    records = _CsRecords(path)
    emit = records.emit
    emit({"type": "start", "version": _CS_FORMAT, "pid": os.getpid()})

    class _CsMeasured(object):
        """The real loader, with VmRSS read around its module body."""

        def __init__(self, name, loader):
            self.name = name
            self.loader = loader

        def create_module(self, spec):
            return self.loader.create_module(spec)

        def exec_module(self, module):
            # The module keeps its real loader, seen from inside too.
            try:
                module.__loader__ = self.loader
                module.__spec__.loader = self.loader
            except Exception:
                pass
            before = _cs_rss()
            try:
                self.loader.exec_module(module)
            finally:
                emit({"type": "rss", "module": self.name, "before": before, "after": _cs_rss()})

    class _CsRssFinder(object):
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name not in wanted:
                return None
            wanted.discard(name)
            for finder in sys.meta_path:
                if finder is _CsRssFinder:
                    continue
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    break
            else:
                return None
            if getattr(spec.loader, "exec_module", None) is None:
                return spec
            spec.loader = _CsMeasured(name, spec.loader)
            return spec

    sys.meta_path.insert(0, _CsRssFinder)

    def fail(where, exc):
        emit({"type": "error", "where": where, "error": "%s: %s" % (type(exc).__name__, exc)})

    return emit, fail


_cs_main(_install)
