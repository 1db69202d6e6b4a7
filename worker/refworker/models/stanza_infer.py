"""Model code of the ``stanza`` profile: imports stanza at module level.

Import this module only inside the ``load`` operation (``refworker.worker``
does, by name). The reference worker ships no stanza models: the "pipeline"
echoes, but importing this module really imports stanza.
"""

import stanza

from refworker.evidence import echo


class EchoPipeline:
    """An echo "pipeline" that reports the stanza it was loaded with."""

    def __init__(self, device, task, lang):
        self.device = device
        self.task = task
        self.lang = lang
        self.runtime = {"stanza": getattr(stanza, "__version__", "unknown")}

    @property
    def name(self):
        return "refworker-echo-stanza"

    def predict(self, text):
        return echo(text, self.task, self.lang, model=self.name)


def load(device, task, lang):
    """Returns the loaded pipeline."""
    return EchoPipeline(device, task, lang)
