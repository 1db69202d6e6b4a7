# coldstart's null recorder (embedded in the harness, run by
# `cargo xtask check-cost`): the body that follows the shared prelude in a
# bootstrap of its own, put first on PYTHONPATH the way the import recorder
# is. It opens the import recorder's two channels and puts nothing behind
# them: an audit hook that looks every event up in a dict of handlers, as
# the recorder's does, with handlers that do nothing, and a finder placed
# first on sys.meta_path that answers nothing. Then the chain runs, as it
# does after the recorder. It writes nothing.
#
# What it costs a worker's start is what any recorder that sees imports
# through both channels costs before it records a thing: the sitecustomize
# on PYTHONPATH, CPython building every audit event's arguments and calling
# the hook (and copying each .pyc for `marshal.loads`), and one more finder
# asked first on every import. The recorder's own work is what it costs
# above this floor.


def _null_install():
    def nothing(event, args):
        return None

    # The events the recorder's hook handles (the prelude's spawn events,
    # import and exec), each with a handler that does nothing.
    handler = dict.fromkeys(
        _CS_SPAWN_EVENTS + ("import", "exec"), nothing).get

    def hook(event, args):
        h = handler(event)
        if h is not None:
            h(event, args)

    class NullFinder:
        """First on sys.meta_path; answers nothing."""

        def find_spec(self, name, path=None, target=None):
            return None

    sys.addaudithook(hook)
    sys.meta_path.insert(0, NullFinder())
    return None


_cs_main(_null_install)
