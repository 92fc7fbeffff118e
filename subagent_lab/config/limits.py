"""How far a run may go: the limits a child's and a parent's profile share (``Limits``).

Both profile kinds inherit these fields, so each limit has one name, one type, one bound and one
check for parent and child; only the parent's defaults differ (``PARENT_LIMITS``). The names of
older files (``max_contract_repairs``) are ``config.legacy``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from typing_extensions import Self  # typing's from Python 3.11

from subagent_lab.config import legacy
from subagent_lab.core.budget import CostCapUsd


class Limits(BaseModel):
    """Steps, tokens, cost, time, output and tool calls of one run, and its repairs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_steps: int = Field(gt=0)
    """Model calls in the working phase (grace and repair turns are counted apart)."""
    context_token_budget: int = Field(gt=0)
    """Upper bound on the prompt tokens of any single model call; with the output cap it must fit
    in the served context."""
    total_token_budget: int = Field(gt=0)
    """Upper bound on prompt + completion tokens over the whole run (a parent's: its own calls,
    over all verification retries)."""
    cost_budget_usd: CostCapUsd | None = None
    """Upper bound on the run's cost in USD at its models' prices (None: no cost cap); a parent's
    covers its own calls and its children's, and a child of a parent with a cost cap gets at most
    what is left of the parent's."""
    timeout_s: float = Field(default=900.0, gt=0)
    """Wall-clock limit of the whole run."""
    max_output_tokens: int | None = Field(default=None, gt=0)
    """Per-call output cap; None takes the model's ``max_output_tokens``."""
    max_tool_calls_per_step: int = Field(default=4, gt=0)
    max_parallel_tools: int = Field(default=4, gt=0)
    """How many tool calls of one turn (e.g. a parent's Task calls) run at once."""
    max_stale_turns: int = Field(default=3, ge=1)
    """Consecutive turns without a new observation (repeats are answered from the record) that end
    the run as ``loop_detected``."""
    max_repairs: int = Field(default=2, ge=0, le=10)
    """Repair turns after an answer that breaks its contract (or its checks), over the run."""

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; with ``update``, validated as a profile is (older names and scaffold keys
        folded in), not pydantic's unchecked copy: a profile is never a state that validation
        would refuse."""
        if not update:
            return super().model_copy(deep=deep)
        return self.model_validate({**dict(self), **legacy.renamed(update)})

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, raw: Any) -> Any:
        return legacy.renamed(raw) if isinstance(raw, Mapping) else raw

    @model_validator(mode="after")
    def _limits_fit(self) -> Limits:
        if self.context_token_budget > self.total_token_budget:
            raise ValueError(
                f"context_token_budget ({self.context_token_budget}) must be <= "
                f"total_token_budget ({self.total_token_budget})"
            )
        return self


LIMIT_FIELDS: frozenset[str] = frozenset(Limits.model_fields)
"""The fields every profile holds as its limits."""
PARENT_LIMITS: dict[str, Any] = {
    "max_steps": 20,
    "context_token_budget": 12000,
    "total_token_budget": 120000,
    "timeout_s": 1800.0,
}
"""A parent's limits where its profile names none (a child's profile must name its own)."""


def parent_limits_schema(schema: dict[str, Any]) -> None:
    """A parent profile's JSON schema with ``PARENT_LIMITS`` as its limits' defaults, not required."""
    for name, value in PARENT_LIMITS.items():
        schema.get("properties", {}).get(name, {})["default"] = value
    required = [name for name in schema.get("required", []) if name not in PARENT_LIMITS]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
