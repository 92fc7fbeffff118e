"""Scaffold presets: the built-in ones, and those of ``profiles.yaml`` resolved through ``extends``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from subagent_lab.config.agent_profile import validation_problems
from subagent_lab.config.legacy import apply_keys
from subagent_lab.config.scaffolds import BASE, PARENT, PLAIN, PolicySpec, Scaffold, extend


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
    "parent": (
        "A main agent's scaffold when it names none: a repeat sits out, a grace turn, long actions.",
        PARENT,
    ),
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
        except ValidationError as exc:
            raise ValueError(f"scaffolds.{name}: {validation_problems(exc)}") from None
        except ValueError as exc:
            raise ValueError(f"scaffolds.{name}: {exc}") from None
        return resolved[name]

    for name in presets:
        if name in BUILT_IN or name in (known or {}):
            raise ValueError(f"scaffolds.{name}: built in, it cannot be redefined")
        resolve(name, ())
    return resolved


@dataclass(frozen=True)
class NamedScaffold:
    """A preset by name: its description and its resolved scaffold."""

    name: str
    description: str
    scaffold: Scaffold

    def resolved(self) -> dict[str, Any]:
        """The preset as profile fields (JSON): an override layer that replaces a profile's scaffold."""
        return {"scaffold": self.scaffold.model_dump(mode="json")}


def preset(where: str, raw: Any) -> ScaffoldPreset:
    try:
        return ScaffoldPreset.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(f"{where}: {validation_problems(exc)}") from None


def named_scaffold(
    where: str, profile: Mapping[str, Any], presets: Mapping[str, Scaffold], *, over: str = "plain"
) -> dict[str, Any]:
    """A profile's fields with its ``scaffold`` (a preset's name, a list of entries over ``over``,
    or a preset written in place, which extends ``over`` unless it says otherwise) resolved."""
    given = profile.get("scaffold")
    if given is None or isinstance(given, Scaffold):
        return dict(profile)
    if isinstance(given, str):
        if given not in presets:
            raise ValueError(f"{where}.scaffold: unknown preset {given!r}; known: {sorted(presets)}")
        return {**profile, "scaffold": presets[given]}
    if is_dump(given):
        return dict(profile)  # a resolved scaffold's fields: validated as they are
    written = preset(f"{where}.scaffold", {"policies": given} if isinstance(given, list) else given)
    if written.extends is None:
        written = written.model_copy(update={"extends": over})
    try:
        scaffold = resolve_presets({"(in place)": written}, known=presets)["(in place)"]
    except ValueError as exc:
        raise ValueError(f"{where}.scaffold: {str(exc).removeprefix('scaffolds.(in place): ')}") from None
    return {**profile, "scaffold": scaffold}
