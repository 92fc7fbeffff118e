"""A grammar's constraints as checks: where an endpoint decodes without a grammar, what the
grammar would have held (an answer's evidence limited to the lines shown, an action's arguments
limited to the turn's choices) is checked after the reply instead, and each breach is worded as a
repair message the model gets back.

Only the keywords the scaffold's grammars use are checked: ``enum``, ``const``, ``minItems``,
``maxItems``, ``items``, ``properties`` and ``required``; the contract's own validation does the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from subagent_lab.core.policy import ActionMenu
from subagent_lab.core.types import ToolCall

MAX_LISTED = 8
"""Allowed values a repair message lists (the newest first would be no better: the first are)."""


def schema_breaches(value: Any, schema: dict[str, Any], where: str = "answer") -> list[str]:
    """How ``value`` breaks the grammar-enforced parts of ``schema``, one message per breach."""
    problems: list[str] = []
    if not isinstance(schema, dict):
        return problems
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} is not one you may give; choose from {_listed(schema['enum'])}")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{where}: must be {schema['const']!r}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            choices = (schema.get("items") or {}).get("enum")
            # The allowed values named: a model told only "at least 1" repeats its answer at T=0.
            offered = f"; choose from {_listed(choices)}" if choices else ""
            problems.append(f"{where}: give at least {schema['minItems']} items{offered}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(f"{where}: give at most {schema['maxItems']} items")
        for i, item in enumerate(value):
            problems += schema_breaches(item, schema.get("items") or {}, f"{where}[{i}]")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key in schema.get("required") or ():
            if key not in value and key in props:
                problems.append(f"{where}: {key} is missing")
        for key, item in value.items():
            problems += schema_breaches(item, props.get(key) or {}, f"{where}.{key}")
    return problems


def off_menu(menu: ActionMenu, calls: Sequence[ToolCall]) -> list[str]:
    """How ``calls`` leave the turn's menu (actions allowed, values per argument), as messages."""
    problems = []
    for call in calls:
        if call.name not in menu.allowed:
            problems.append(
                f"{call.name} is not offered this turn; the actions offered: {_listed(menu.allowed)}"
            )
            continue
        for arg, values in menu.choices.get(call.name, {}).items():
            given = call.arguments.get(arg)
            if given is not None and str(given) not in values:
                problems.append(f"{call.name} {arg}={given!r} is not offered; choose from {_listed(values)}")
    return problems


def _listed(values: Sequence[Any]) -> str:
    shown = ", ".join(repr(v) for v in list(values)[:MAX_LISTED])
    return f"[{shown}{', ...' if len(values) > MAX_LISTED else ''}]"
