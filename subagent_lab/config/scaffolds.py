"""Scaffold presets: named, complete settings of every scaffold field of a child profile.

A comparison of models holds the scaffold fixed; a preset is how it says which. Every preset sets
every field of ``SCAFFOLD_FIELDS`` (what it leaves out takes the plain value), so applying it on
top of a profile replaces whatever scaffold that profile, or a model's own tuning
(``model_overrides``), carried: the same preset is the same scaffold for every model.

Presets live in ``profiles.yaml`` under ``scaffolds:``; ``plain`` is built in (the mechanism of
the seed article: free actions, the contract check and its repairs, budgets — nothing chosen or
forced by the harness) and cannot be redefined.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

PLAIN_FIELDS: dict[str, Any] = {
    # The observation interface, as the shipped explore profile sizes it (no thought before an
    # action, 30-line Read windows: every token shown is prompt a CPU evaluates); the same for
    # every preset unless a preset says otherwise, so presets differ in their aids only.
    "tool_interface": "simple",
    "action_max_tokens": 160,
    "thought_max_chars": 0,
    "arg_max_chars": 160,
    "grep_max_matches": 15,
    "read_window": 30,
    "glob_max_results": 50,
    # The aids, all off: nothing chosen, forced or ranked by the harness.
    "constrain_paths": False,
    "evidence_from_seen": False,
    "require_seen": False,
    "require_grounded_evidence": False,
    "finish_after_stale": 0,
    "finish_after_reads": 0,
    "read_after_hits": False,
    "read_on": 0,
    "first_search": 0,
    "min_evidence": 0,
    "read_outline": 0,
    "cite_anchors": False,
    "cite_margin": None,
    "cite_units": False,
    "max_evidence": 6,
    "absence_check": False,
    "task_paths": False,
    "show_layout": False,
    "min_tool_calls": 0,
    # The symbol index (tools/symbols): its four tools and the repo map as first context.
    "symbol_tools": False,
    "repo_map_tokens": 0,
    "tool_guide": False,
    # The task's retrieval run by the harness before the first action, its best units the candidates.
    "retrieval_start": 0,
}
"""The built-in ``plain`` preset, and the value of every field a preset leaves out."""

SCAFFOLD_FIELDS: frozenset[str] = frozenset(PLAIN_FIELDS)
"""The profile fields a preset sets: how the child acts, observes and cites (not its limits)."""

GRAMMAR_FIELDS: dict[str, Any] = {
    "constrain_paths": False,
    "evidence_from_seen": False,
    "first_search": 0,
    "cite_anchors": False,
    "cite_units": False,
}
"""Aids only a grammar can enforce, with their off value: refused on an endpoint configured
without constrained output (``constrain_output: false``)."""


class ScaffoldPreset(BaseModel):
    """A named scaffold: a description and the scaffold fields it sets (the rest are plain)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: str = ""
    fields: dict[str, Any] = Field(default_factory=dict)

    def resolved(self) -> dict[str, Any]:
        """Every scaffold field's value under this preset."""
        return {**PLAIN_FIELDS, **self.fields}


PLAIN = ScaffoldPreset(
    description="The seed article's mechanism: free actions, contract check and repairs, budgets.",
)


def unknown_fields(preset: ScaffoldPreset) -> list[str]:
    """Fields a preset names that are not scaffold fields (sorted)."""
    return sorted(set(preset.fields) - SCAFFOLD_FIELDS)


HASH_NEUTRAL: dict[str, Any] = {
    "symbol_tools": False,
    "repo_map_tokens": 0,
    "tool_guide": False,
    "cite_units": False,
    "retrieval_start": 0,
}
"""Scaffold fields added after rows were recorded, with their off value: ``scaffold_hash`` leaves
them out at that value, so a scaffold that does not use them hashes as before they existed."""


def scaffold_hash(fields: dict[str, Any]) -> str:
    """A short, stable hash of resolved scaffold fields (the same settings, the same hash)."""
    kept = {k: v for k, v in fields.items() if k not in HASH_NEUTRAL or v != HASH_NEUTRAL[k]}
    blob = json.dumps(kept, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


def grammar_aids_on(fields: dict[str, Any]) -> list[str]:
    """The grammar-only aids that ``fields`` switch on (sorted)."""
    return sorted(k for k, off in GRAMMAR_FIELDS.items() if k in fields and fields[k] not in (off, None))
