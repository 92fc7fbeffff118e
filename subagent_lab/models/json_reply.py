"""What a model wrote, read without letting it stall or crash a tool: bounded JSON decoding.

Numbers no tool could use (beyond 2**53, NaN, infinities: which would otherwise raise
``OverflowError`` in a tool) and nesting deeper than ``MAX_ARG_DEPTH`` arrive as marker strings,
so the tool's own argument check turns them into an error observation; the JSON object inside an
unconstrained model's fences or prose is found; text bound for a request body is made UTF-8-safe.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_ARG_INT = 2**53
"""Integers in tool arguments beyond this magnitude (JSON's exact range) arrive as a marker string."""
MAX_ARG_DEPTH = 64
"""Nesting of tool arguments kept; deeper parts arrive as a marker string."""


def _parse_int(text: str) -> int | str:
    # Called by the JSON decoder with the digits: never converts a 4,301-digit number.
    if len(text) > 17 or abs(int(text)) > MAX_ARG_INT:
        return f"<integer of {len(text.lstrip('-'))} digits: out of range>"
    return int(text)


def _parse_float(text: str) -> float | str:
    value = float(text)
    return (
        value if math.isfinite(value) and abs(value) <= MAX_ARG_INT else f"<number {text[:20]}: out of range>"
    )


def _parse_constant(text: str) -> str:
    return f"<{text}: not a number>"


_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)


def loads_bounded(text: str) -> Any:
    """``json.loads`` for what a model wrote: numbers no tool can use and nesting deeper than
    ``MAX_ARG_DEPTH`` become marker strings; ``ValueError`` when it is not JSON."""
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    return _flatten_deep(value)


def _flatten_deep(value: Any) -> Any:
    """``value`` with containers below ``MAX_ARG_DEPTH`` levels replaced by a marker (iterative)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in list(items):
            if isinstance(child, (dict, list)):
                if depth + 1 >= MAX_ARG_DEPTH:
                    node[key] = f"<nested deeper than {MAX_ARG_DEPTH} levels>"
                else:
                    stack.append((child, depth + 1))
    return value


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object in ``text``: the whole text, else the first object inside it.

    Unconstrained models wrap their JSON in fences or prose; grammar-constrained decoding costs
    several times the generation speed on llama.cpp, so the protocol also works without it.
    """
    try:
        value = loads_bounded(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    decoder = _DECODER
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return _flatten_deep(value)
        start = text.find("{", start + 1)
    return None


_FENCED = re.compile(r"\A```[\w+-]*[ \t]*\r?\n(.*?)\r?\n[ \t]*```\Z", re.S)


def sole_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object ``text`` is, whole (around it only whitespace, or one code fence), else None.

    Unlike ``extract_json_object`` this never finds an object inside prose: one a model quotes
    (from a README it read, say) is not one it sends.
    """
    body = text.strip()
    fenced = _FENCED.match(body)
    try:
        value = loads_bounded(fenced.group(1) if fenced else body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def utf8_safe(value: Any) -> Any:
    """``value`` with lone surrogates (a non-UTF-8 file name, a model's ``\\udce9`` escape echoed
    back in an observation) shown as ``\\udce9`` text: the request body must encode as UTF-8."""
    if isinstance(value, str):
        # ASCII holds no surrogate: the common case skips the copy through bytes.
        return value if value.isascii() else value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {k: utf8_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [utf8_safe(v) for v in value]
    return value
