"""Model code of the ``gpu`` profile: imports torch and transformers at module level.

Import this module only inside the ``load`` operation (``refworker.worker``
does, by name). Importing it anywhere reachable from start-up puts seconds of
import time and gigabytes of memory in front of every worker's ready line.

The reference worker ships no weights: the "model" echoes, but importing this
module really imports torch and transformers, which is what start-up
measurements and import-boundary checks care about.
"""

import torch
import transformers

from refworker.evidence import echo


class EchoModel:
    """An echo "model" that reports the runtime it was loaded with."""

    def __init__(self, device, task, lang):
        self.device = device
        self.task = task
        self.lang = lang
        self.runtime = {
            "torch": getattr(torch, "__version__", "unknown"),
            "transformers": getattr(transformers, "__version__", "unknown"),
        }

    @property
    def name(self):
        return "refworker-echo-gpu"

    def predict(self, text):
        return echo(text, self.task, self.lang, model=self.name)


def load(device, task, lang):
    """Returns the loaded model for ``device`` (``"cpu"`` or ``"cuda"``)."""
    return EchoModel(device, task, lang)
