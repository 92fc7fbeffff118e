"""The model protocol: one method."""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

from subagent_lab.core.types import ModelRequest, ModelResponse


@runtime_checkable
class Model(Protocol):
    """Anything that turns a request into a response."""

    def complete(self, request: ModelRequest) -> ModelResponse: ...


class ModelCallError(Exception):
    """A model call failed for good (after the allowed retries, or with a non-retryable error)."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        attempts: int = 1,
        latency_s: float = 0.0,
        spent_attempts: int = 0,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.attempts = attempts
        self.latency_s = latency_s
        self.spent_attempts = spent_attempts
        """Attempts that likely made the server evaluate the prompt (timed out, or answered 200
        with a body that could not be used): the loop charges their prompt, as an estimate."""


_SNAPSHOT = re.compile(r"-(\d|v\d|latest$|preview$)")
"""What may follow an asked id in a served one and still name the same model: a date, a version,
``latest`` or ``preview`` (``gpt-4o`` -> ``gpt-4o-2024-08-06``; not ``gpt-4o`` -> ``gpt-4o-mini``)."""


def same_model(asked: str, served: str) -> bool:
    """Whether an endpoint reporting ``served`` ran the model ``asked`` for: the same id ignoring
    case and a provider prefix (``openai/``), or a dated or versioned snapshot of it."""
    a, s = (name.strip().lower().rsplit("/", 1)[-1] for name in (asked, served))
    return a == s or (s.startswith(a) and _SNAPSHOT.match(s, len(a)) is not None)
