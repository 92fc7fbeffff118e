"""The model protocol: one method."""

from __future__ import annotations

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
