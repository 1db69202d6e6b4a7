"""Model code: imports torch, so only the `load` operation imports this."""


def load_model(name):
    import torch  # noqa: F401  (the model runtime, on request only)

    return name
