"""A child (sub-agent) profile: the ``profiles:`` section of ``profiles.yaml``.

``RuntimeProfile`` is a child type: the read-only tools it may hold (``READONLY_TOOLS``; never one of
``FORBIDDEN_IN_SUBAGENTS``), its limits (``config.limits``, shared with the main agent's profile),
its model and answer contract, and its scaffold, into which the flat scaffold fields of older files
fold (``config.legacy``). The main agent's profile is ``config.agent_profile``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, model_validator

from subagent_lab.config import legacy
from subagent_lab.config.agent_profile import apply_overrides
from subagent_lab.config.limits import Limits
from subagent_lab.config.scaffolds import BASE, Scaffold, symbol_tools_allowed
from subagent_lab.core.contracts import CONTRACTS
from subagent_lab.core.types import ModelChoice
from subagent_lab.tools.symbols import SYMBOL_TOOLS

READONLY_TOOLS: frozenset[str] = frozenset({"Read", "Grep", "Glob", *SYMBOL_TOOLS})
"""Every tool a child profile may hold."""
FORBIDDEN_IN_SUBAGENTS: frozenset[str] = frozenset(
    {"Task", "Edit", "Write", "Bash", "MultiEdit", "NotebookEdit", "TodoWrite", "WebFetch"}
)
"""Tools a child never holds: it reads, it does not write, run commands or delegate."""


class RuntimeProfile(Limits):
    """A child type: what it may use, how far it may go (its ``Limits``), what it must return."""

    name: str = Field(min_length=1)
    description: str = ""
    system_prompt: str = Field(min_length=1)
    tools: tuple[str, ...] = ("Read", "Grep", "Glob")
    model: ModelChoice = "light"
    allow_model_fallback: bool = False
    """Let the run go on when the endpoint reports serving another model than the one asked for
    (the result says ``fallback``); False ends such a run as ``model_mismatch``."""
    contract: str = "ExploreResult"
    scaffold: Scaffold = BASE
    """How the child acts, observes and cites: its policies and observation sizes
    (``config.scaffolds``). In ``profiles.yaml`` a preset's name or a list of policy specs; the
    flat fields of older files (``cite_margin: 2``) fold into it (``config.legacy``)."""
    model_overrides: dict[ModelChoice, dict[str, Any]] = Field(default_factory=dict)
    """Per-model tuning of this profile (e.g. a stricter scaffold for ``light``), applied before a
    request's own overrides when that model runs; recorded with the run."""

    @model_validator(mode="before")
    @classmethod
    def _fold_scaffold(cls, raw: Any) -> Any:
        return cls.fold(raw) if isinstance(raw, Mapping) else raw

    @classmethod
    def fold(cls, raw: Mapping[str, Any]) -> dict[str, Any]:
        """``raw`` with its scaffold keys (flat fields, ``Policy.param``, sizes) folded into its
        ``scaffold`` (``apply_overrides`` folds each layer in turn)."""
        return legacy.fold(raw, BASE)

    @model_validator(mode="after")
    def _invariants(self) -> RuntimeProfile:
        forbidden = sorted(set(self.tools) & FORBIDDEN_IN_SUBAGENTS)
        if forbidden:
            raise ValueError(
                f"tools: a sub-agent profile may not hold {forbidden} (read-only, no delegation)"
            )
        unknown = sorted(set(self.tools) - READONLY_TOOLS)
        if unknown:
            raise ValueError(f"tools: unknown tools {unknown}; allowed are {sorted(READONLY_TOOLS)}")
        for problem in symbol_tools_allowed(self.scaffold, self.tools):
            raise ValueError(problem)
        if "model_overrides" in {k for v in self.model_overrides.values() for k in v}:
            raise ValueError("model_overrides: an override cannot itself hold model_overrides")
        for choice, tuned in self.model_overrides.items():
            apply_overrides(
                RuntimeProfile,
                self.model_dump(exclude={"model_overrides"}),
                tuned,
                where=f"model_overrides.{choice}",
            )
        if self.contract not in CONTRACTS:
            raise ValueError(f"contract: unknown contract {self.contract!r}; known: {sorted(CONTRACTS)}")
        return self
