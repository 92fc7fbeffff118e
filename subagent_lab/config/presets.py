"""Scaffold presets: the built-in ones, and those of ``profiles.yaml`` resolved through ``extends``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from subagent_lab.config.legacy import apply_keys
from subagent_lab.config.scaffolds import BASE, PLAIN, PolicySpec, Scaffold, extend


class ScaffoldPreset(BaseModel):
    """A named scaffold as written: what it extends, its policy entries and observation sizes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: str = ""
    extends: str | None = None
    """Another preset (``plain`` by default): its policies and sizes, then this preset's entries."""
    policies: list[Any] = Field(default_factory=list)
    """``Name``, ``Name: {param: value}`` (over what it inherits), or ``Name: false`` (removed)."""
    observation: dict[str, Any] = Field(default_factory=dict)
    """Sizes over the inherited ones (``Observation``)."""
    fields: dict[str, Any] = Field(default_factory=dict)
    """The flat fields of older files (``cite_margin: 2``), folded over the rest
    (``config.legacy``)."""


def is_dump(given: Any) -> bool:
    """Whether ``given`` is a resolved ``Scaffold``'s fields (each policy as ``policy``/``params``)
    rather than a preset as written."""
    if not isinstance(given, Mapping) or set(given) - {"policies", "observation"}:
        return False
    entries = given.get("policies") or []
    return isinstance(entries, (list, tuple)) and all(
        isinstance(e, PolicySpec) or (isinstance(e, Mapping) and "policy" in e) for e in entries
    )


BUILT_IN: dict[str, tuple[str, Scaffold]] = {
    "plain": ("The seed article's mechanism: free actions, contract check and repairs, budgets.", PLAIN),
    "base": ("A child profile's scaffold when it names none: paths and evidence from what was shown.", BASE),
}


def resolve_presets(
    presets: Mapping[str, ScaffoldPreset], known: Mapping[str, Scaffold] | None = None
) -> dict[str, Scaffold]:
    """Every preset resolved through its ``extends`` chain (built-ins and ``known`` included). A
    ValueError names the preset and the field (``scaffolds.NAME.policies``)."""
    resolved: dict[str, Scaffold] = {name: scaffold for name, (_, scaffold) in BUILT_IN.items()}
    resolved.update(known or {})

    def resolve(name: str, chain: tuple[str, ...]) -> Scaffold:
        if name in resolved:
            return resolved[name]
        if name not in presets:
            known = sorted({*presets, *BUILT_IN})
            raise ValueError(f"scaffolds.{chain[-1]}.extends: unknown preset {name!r}; known: {known}")
        if name in chain:
            raise ValueError(f"scaffolds.{name}.extends: a circle ({' -> '.join((*chain, name))})")
        preset = presets[name]
        base = resolve(preset.extends or "plain", (*chain, name))
        try:
            scaffold = extend(base, preset.policies, preset.observation)
            resolved[name] = apply_keys(scaffold, preset.fields) if preset.fields else scaffold
        except (ValueError, ValidationError) as exc:
            raise ValueError(f"scaffolds.{name}: {_problem(exc)}") from None
        return resolved[name]

    for name in presets:
        if name in BUILT_IN or name in (known or {}):
            raise ValueError(f"scaffolds.{name}: built in, it cannot be redefined")
        resolve(name, ())
    return resolved


def _problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg'].removeprefix('Value error, ')}" for e in exc.errors()
        )
    return str(exc)
