"""coldstart's pytest plugin: the ``coldstart`` fixture.

Installed with the ``coldstart`` wheel, which registers it under pytest's
``pytest11`` entry point, so ``pip install coldstart`` is all a project does:

    def test_worker_boundary(coldstart):
        coldstart.check("ner-worker")

    def test_import_alone(coldstart):
        coldstart.module("mypkg", forbid=["torch"])

The plugin runs the ``coldstart`` command shipped beside it in the same
wheel (see :func:`coldstart_pytest.plugin.find_binary`) and fails the test
with the check's report: each violation's chain, the file:line behind each
link, the protocol phase and the cost.
"""

from coldstart_pytest.plugin import Coldstart, CheckFailed, find_binary

__all__ = ["Coldstart", "CheckFailed", "find_binary"]
