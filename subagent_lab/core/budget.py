"""The run's token budget: limits, what was charged, and admission of the next model call.

A call is admitted only when its counted prompt fits the context budget and the prompt plus the
call's output cap fits what is left of the total budget, so a started call can never overshoot.
With an exact counter (the model's own tokenizer) that is a guarantee; with an estimate the
counter adds a safety margin and the trace says the figure was estimated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from subagent_lab.core.types import LimitReached, Usage

MIN_OUTPUT_TOKENS = 48
"""A call that could not produce at least this many tokens is not worth starting."""


@dataclass
class Budget:
    """Limits, usage charged so far, and the admission rule for the next call."""

    total: int
    """``total_token_budget``: prompt + completion tokens over the whole run."""
    context: int
    """``context_token_budget``: the prompt tokens of any one call."""
    used: Usage = field(default_factory=Usage)

    @property
    def remaining(self) -> int:
        return self.total - self.used.total_tokens

    def output_cap(self, prompt_tokens: int, wanted: int) -> int:
        """The output cap a call with this prompt would get (may be below ``MIN_OUTPUT_TOKENS``)."""
        return min(wanted, self.remaining - prompt_tokens)

    def admit(self, prompt_tokens: int, wanted: int) -> int:
        """The output cap for a call with ``prompt_tokens``; raises ``LimitReached`` if it may not start."""
        if prompt_tokens > self.context:
            raise LimitReached(
                "context_budget", f"prompt needs {prompt_tokens} tokens > context budget {self.context}"
            )
        cap = self.output_cap(prompt_tokens, wanted)
        if cap < min(MIN_OUTPUT_TOKENS, wanted):  # a short question needs only its own cap
            raise LimitReached(
                "token_budget", f"{self.remaining} tokens left, next call needs {prompt_tokens} + output"
            )
        return cap

    def charge(self, usage: Usage) -> None:
        """Add what a call (or a failed attempt) spent; the provider's figure when it gave one."""
        self.used = self.used + usage

    def share(self, wanted: int) -> int:
        """How much of the remaining budget a child asking for ``wanted`` may get."""
        return max(0, min(wanted, self.remaining))
