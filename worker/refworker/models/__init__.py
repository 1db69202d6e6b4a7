"""Model code, split so that start-up never pays for it.

This package deliberately re-exports nothing from its submodules: one eager
``from .infer import ...`` here would import torch and transformers in every
worker at start-up, the exact bug coldstart exists to catch. It holds only
light facts about the profiles; the heavy modules are imported by name inside
the ``load`` operation:

- ``refworker.models.infer``: the ``gpu`` profile (torch, transformers);
- ``refworker.models.stanza_infer``: the ``stanza`` profile (stanza);
- the ``io`` profile has no model code and imports nothing heavy.
"""

PROFILES = ("gpu", "stanza", "io")

#: The third-party packages each profile's model code imports at module level.
REQUIRES = {
    "gpu": ("torch", "transformers"),
    "stanza": ("stanza",),
    "io": (),
}
