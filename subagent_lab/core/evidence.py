"""Evidence provenance: was an evidence item shown to the child, and which items may the grammar offer.

``grounded`` (see ``contracts.ground_evidence``) says a cited file and lines exist; ``seen`` says a
tool of this run showed them to the model: a Grep match line, or lines inside a Read window.
"""

from __future__ import annotations

from typing import Any

from subagent_lab.core.contracts import parse_evidence
from subagent_lab.core.types import Span, json_copy

MAX_EVIDENCE_CHOICES = 400
"""The newest seen lines offered to constrained decoding (a grammar alternation per item)."""


def seen_check(items: list[str], seen: list[Span]) -> tuple[float | None, list[str]]:
    """(share of items inside a seen span, the items that are not); (None, []) for no items."""
    if not items:
        return None, []
    unseen = []
    for item in items:
        parsed = parse_evidence(item)
        if parsed is None or not any(span.covers(*parsed) for span in seen):
            unseen.append(item)
    return 1 - len(unseen) / len(items), unseen


def evidence_choices(seen: list[Span], limit: int = MAX_EVIDENCE_CHOICES) -> list[str]:
    """Every ``path:line`` a tool has shown, newest last, at most ``limit`` (the newest)."""
    items: dict[str, None] = {}
    for span in seen:
        if span.start >= 1:
            for line in range(span.start, span.end + 1):
                items.pop(f"{span.path}:{line}", None)
                items[f"{span.path}:{line}"] = None
    return list(items)[-limit:]


def constrain_evidence(
    schema: dict[str, Any], choices: list[str], min_items: int = 0, max_items: int | None = None
) -> dict[str, Any]:
    """A copy of a contract schema whose ``evidence`` items can only be ``choices`` (none if empty),
    at least ``min_items`` of them (as many as there are, if fewer) and at most ``max_items``.

    ``evidence`` also moves up to follow ``status``/``verdict``: decoding writes properties in
    schema order, and a small model that has written its findings first tends to leave the
    evidence empty; right after the locations listed in the prompt, it cites them.
    """
    out = json_copy(schema)
    props = out.get("properties", {})
    evidence = props.get("evidence")
    if evidence is None:
        return out
    lead = [k for k in ("status", "verdict") if k in props]
    order = [*lead, "evidence", *(k for k in props if k not in (*lead, "evidence"))]
    out["properties"] = {k: props[k] for k in order}
    # Required, so the grammar cannot skip it (an optional property may be left out entirely).
    out["required"] = [k for k in order if k in {*out.get("required", []), "evidence"}]
    if choices:
        evidence["items"] = {"type": "string", "enum": choices}
        if min_items:
            evidence["minItems"] = min(min_items, len(choices))
        if max_items is not None:
            # No more slots than choices: a grammar cannot ask for unique items, and a small
            # model fills every slot, so extra slots would only repeat a location.
            evidence["maxItems"] = max(min(max_items, len(choices)), evidence.get("minItems", 0))
    else:
        evidence["items"] = {"type": "string"}
        evidence.pop("minItems", None)  # a schema constrained before (the absence check empties it)
        evidence["maxItems"] = 0
    return out


def bounded_answer(schema: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """A copy of a contract schema whose strings and lists fit in ``max_tokens`` output tokens.

    A final answer cut at its output cap is unterminated JSON, and a repair costs a whole call:
    the grammar instead keeps top-level strings to ~1/9 and list items to ~1/24 of the cap
    (at ~3 characters a token), and lists to 4 items, so a complete answer fits. Short answers are
    also fast ones: on a CPU every output token of the answer is ~0.1 s of a run's wall time.
    """
    out = json_copy(schema)
    text, item, items = max(max_tokens // 3, 40), max(max_tokens // 8, 20), 4
    for prop in out.get("properties", {}).values():
        if prop.get("type") == "string" and "enum" not in prop:
            prop["maxLength"] = min(prop.get("maxLength", text), text)
        elif prop.get("type") == "array":
            prop["maxItems"] = min(prop.get("maxItems", items), items)
            sub = prop.get("items", {})
            if sub.get("type") == "string" and "enum" not in sub:
                cap = 80 if "pattern" in sub else item  # a patterned item is a location, path:line
                sub["maxLength"] = min(sub.get("maxLength", cap), cap)
    return out
