"""Evidence types: what an inference returns, importable without any model runtime.

The worker builds its replies from these types at start-up and on every
request, so this module must stay light: standard library only, and never an
import of ``refworker.models`` or of torch, transformers or stanza.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Span:
    """One labelled stretch of the input text (``start``/``end`` in characters)."""

    start: int
    end: int
    label: str
    text: str
    score: float = 1.0

    def to_json(self):
        return {
            "start": self.start,
            "end": self.end,
            "label": self.label,
            "text": self.text,
            "score": self.score,
        }


@dataclass(frozen=True)
class Evidence:
    """The result of one inference: which model said what about the text."""

    task: str
    lang: str
    model: str
    spans: tuple = field(default_factory=tuple)

    def to_json(self):
        return {
            "task": self.task,
            "lang": self.lang,
            "model": self.model,
            "spans": [s.to_json() for s in self.spans],
        }


def echo(text, task, lang, model="echo"):
    """The evidence an echo gives: one span over the whole text, said by ``model``."""
    return Evidence(
        task=task,
        lang=lang,
        model=model,
        spans=(Span(start=0, end=len(text), label="ECHO", text=text),),
    )
