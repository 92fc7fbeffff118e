"""The final answer as a native tool call: the ``final_answer`` tool whose parameters are the
answer's JSON schema, in the form OpenAI's structured outputs accept with ``strict: true``.

Strict mode (platform.openai.com/docs/guides/structured-outputs) takes a subset of JSON schema:
the root is an object, every object lists all its properties in ``required`` and sets
``additionalProperties: false`` (an optional property is a required one that may be ``null``), and
only some keywords are understood. ``strict_schema`` rewrites a schema into that form; keywords it
drops (``minLength``, ``maxLength``, ``default`` ...) are still checked when the answer is
validated against the contract, so they become checks. ``drop_nulls`` takes the ``null`` of an
optional property back out of an answer, so the contract sees it as absent.
"""

from __future__ import annotations

from typing import Any

ANSWER_TOOL = "final_answer"
STRICT_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "$ref",
    "$defs", "description", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
})  # fmt: skip
"""The keywords strict structured outputs understand; the rest are dropped (and checked after)."""


def answer_tool(schema: dict[str, Any], *, strict: bool) -> dict[str, Any]:
    """The ``final_answer`` function tool for an answer of ``schema`` (strict form when ``strict``)."""
    strict = strict and schema.get("type") == "object"  # strict mode wants an object at the root
    function: dict[str, Any] = {
        "name": ANSWER_TOOL,
        "description": "Give your final answer; its arguments are the answer.",
        "parameters": strict_schema(schema) if strict else schema,
    }
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def strict_schema(node: Any) -> Any:
    """``node`` (an object's schema at the root) in strict structured-output form (see the module's
    docstring)."""
    if isinstance(node, list):
        return [strict_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if k in STRICT_KEYWORDS}
    if "oneOf" in node:  # not understood; anyOf says as much for an answer
        out["anyOf"] = node["oneOf"]
    if "allOf" in node and len(node["allOf"]) == 1:  # pydantic's wrapper around a single $ref
        out.update(node["allOf"][0])
    for key in ("items", "anyOf"):
        if key in out:
            out[key] = strict_schema(out[key])
    if "$defs" in out:
        out["$defs"] = {name: strict_schema(sub) for name, sub in out["$defs"].items()}
    if out.get("type") == "object" or "properties" in out:
        props = out.get("properties") or {}
        required = set(node.get("required") or ())
        out["properties"] = {
            name: strict_schema(sub) if name in required else _nullable(strict_schema(sub))
            for name, sub in props.items()
        }
        out["required"] = list(props)
        out["additionalProperties"] = False
    return out


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` that may also be ``null`` (an optional property in strict form)."""
    kind = node.get("type")
    if isinstance(kind, str) and "enum" not in node:
        return {**node, "type": [kind, "null"]}
    return {"anyOf": [node, {"type": "null"}]}


def drop_nulls(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` without the ``null`` of each property ``schema`` does not require (strict form
    sends every optional property, as ``null`` when there is nothing to say)."""
    if not isinstance(value, dict) or not isinstance(schema, dict):
        return value
    required = set(schema.get("required") or ())
    props = schema.get("properties") or {}
    return {
        key: drop_nulls(item, props.get(key, {}))
        for key, item in value.items()
        if item is not None or key in required
    }
