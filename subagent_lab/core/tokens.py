"""Prompt token counts for the pre-call budget decision: exact where the model can count, else estimated.

A model that can count its own prompts exposes ``count_prompt(request) -> TokenCount`` next to its
one ``complete`` method (the embedded server renders the chat template and tokenizes it with the
model's own vocabulary, so the count equals the ``prompt_tokens`` it then reports). Any other model
gets a conservative byte estimate, marked ``exact=False`` in the trace and the tables.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from subagent_lab.core.context import estimate_messages
from subagent_lab.core.types import ModelRequest

SAFETY = 1.10
"""Margin on byte estimates: the decision then errs towards refusing a call, never overshooting."""


class TokenCount(BaseModel):
    """The prompt tokens of one request and whether the figure is exact."""

    tokens: int
    exact: bool


@runtime_checkable
class CountsPrompts(Protocol):
    """A model that can count the prompt tokens of a request exactly."""

    def count_prompt(self, request: ModelRequest) -> TokenCount: ...


PromptCounter = Callable[[ModelRequest], TokenCount]


def estimate_count(request: ModelRequest) -> TokenCount:
    """UTF-8 bytes / 3 plus per-message and protocol overhead, with a 10% margin; ``exact=False``."""
    return TokenCount(
        tokens=math.ceil(estimate_messages(request.messages, request.tools) * SAFETY), exact=False
    )


def prompt_counter(model: object) -> PromptCounter:
    """The model's own exact counter when it has one, else the estimate."""
    if isinstance(model, CountsPrompts):
        return model.count_prompt
    return estimate_count
