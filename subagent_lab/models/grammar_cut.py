"""A final answer decoded without a grammar, cut where the answer's grammar would have cut it.

A grammar-constrained endpoint cannot produce a value its schema forbids: it ends a string once
the string is a whole allowed value and the model goes on with prose, and it closes a list at its
``maxItems``. An endpoint without one (a vLLM or hosted server, or llama-server asked for native
tool calls) lets the model go on, and small models do: they copy a listing line whole as an
evidence item (``error.py:45  class YAMLError (lines 45-46): …``) or list seven findings where four
fit; at temperature 0 a repair turn then repeats the same answer. ``cut_answer`` makes the cuts the
grammar makes, and only those that are unambiguous:

- a string with an ``enum`` that is not one of its values but begins with one, followed by a
  character that ends a location (not a letter, digit, ``.``, ``_`` or ``/``: ``a.py:87`` is not
  ``a.py:8``), becomes that value (the longest such);
- a string with a ``pattern`` that does not match but whose first word does becomes that word;
- a list longer than its ``maxItems`` keeps its first ``maxItems`` items;
- an object or list where a plain string is asked for becomes its scalar values joined by spaces
  (a grammar would have made the model write them as text).

Everything else (a missing field, a value of no allowed shape) is left for the contract check and
its repair message. Each cut is returned as a note; the reply as sent is kept beside it.
"""

from __future__ import annotations

import re
from typing import Any

MAX_CUT_CHARS = 512
"""A string longer than this is not cut (locations are short; a pattern is tried on no more)."""
_LOCATION_CHARS = re.compile(r"[\w./]")


def cut_answer(value: Any, schema: dict[str, Any]) -> tuple[Any, list[str]]:
    """``value`` with the grammar's cuts made (see the module doc), and one note per cut."""
    notes: list[str] = []
    return _cut(value, schema, "answer", notes), notes


def _cut(value: Any, schema: Any, where: str, notes: list[str]) -> Any:
    if not isinstance(schema, dict):
        return value
    if schema.get("type") == "string" or "enum" in schema or "pattern" in schema:
        return _cut_string(value, schema, where, notes)
    if isinstance(value, list):
        cap = schema.get("maxItems")
        if isinstance(cap, int) and len(value) > cap:
            notes.append(f"{where}: kept the first {cap} of {len(value)} items")
            value = value[:cap]
        items = schema.get("items")
        return [_cut(item, items, f"{where}[{i}]", notes) for i, item in enumerate(value)]
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        return {key: _cut(item, props.get(key), f"{where}.{key}", notes) for key, item in value.items()}
    return value


def _cut_string(value: Any, schema: dict[str, Any], where: str, notes: list[str]) -> Any:
    if isinstance(value, dict | list) and schema.get("type") == "string" and not schema.get("enum"):
        given = "an object" if isinstance(value, dict) else "a list"
        notes.append(f"{where}: {given} given for a string, its values joined")
        value = " ".join(_scalars(value))
    if not isinstance(value, str) or len(value) > MAX_CUT_CHARS:
        return value
    cut = _allowed_prefix(value, schema)
    if cut is not None and cut != value:
        notes.append(f"{where}: kept {cut!r} of {value!r}")
        return cut
    return value


def _allowed_prefix(value: str, schema: dict[str, Any]) -> str | None:
    """The allowed value ``value`` begins with, where the grammar would have ended the string."""
    enum = schema.get("enum")
    if isinstance(enum, list):
        if value in enum:
            return value
        starts = [
            e for e in enum
            if isinstance(e, str) and e and value.startswith(e) and not _LOCATION_CHARS.match(value[len(e)])
        ]  # fmt: skip
        return max(starts, key=len) if starts else None
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        word = value.strip().split(maxsplit=1)[0] if value.strip() else ""
        try:
            if word and re.search(pattern, word) and not re.search(pattern, value):
                return word
        except re.error:  # a pattern Python cannot read: leave the value to the contract check
            return None
    return None


def _scalars(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for item in value.values() for s in _scalars(item)]
    if isinstance(value, list):
        return [s for item in value for s in _scalars(item)]
    return [] if value is None else [str(value)]
