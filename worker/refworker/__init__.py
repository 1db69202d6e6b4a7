"""refworker: coldstart's reference worker, the protocol's executable reference.

Run it as ``python -m refworker`` with ``worker/`` on ``PYTHONPATH``. It speaks
the JSON-lines worker protocol on stdin/stdout (see ``docs/protocol.md``) and
is built the way a fixed production worker is: start-up imports only the
standard library and the light modules of this package (``refworker.evidence``);
the model code in ``refworker.models.infer`` (torch, transformers) and
``refworker.models.stanza_infer`` (stanza) imports the heavy packages at module
level and is itself imported only inside the ``load`` operation.

Standard library only. Importing this package imports nothing else.
"""

__version__ = "0.1.0"
