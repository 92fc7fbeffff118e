"""The JSON action protocol: one flat action object per turn, checkable by a grammar.

An action is ``{"thought": "...", "tool": "Grep", "pattern": "..."}``: a brief reasoning field
first, then the tool and its arguments at the top level (small models nest and fill optional
fields poorly). ``{"thought": "...", "tool": "finish"}`` ends the working phase. The grammar is
derived per turn from the tool schemas: string arguments are bounded (``maxLength``), and an
argument may be limited to given values (a Read ``path`` to files the run has seen). The protocol
text in the system prompt lists every tool and never changes during a run, so the prompt's cached
prefix stays valid; only the grammar narrows from turn to turn.
"""

from __future__ import annotations

import json
from typing import Any

from subagent_lab.core.types import ModelRequest

PROTOCOL = """
## How to act
Each turn, reply with one JSON object: a brief thought (one sentence), then one action.
To call a tool, put its name in "tool" and its arguments next to it, as listed below.
When you have found what the task asks for (or found that it does not exist), reply with the
action "finish"; you will then be asked for your final answer.
Tools:
"""
_DROP = {"title", "default", "examples", "description"}


def decoding_schema(schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """A self-contained, simplified copy of ``schema`` for constrained decoding: its ``$ref``s
    inlined (from ``defs``, by default the schema's own ``$defs``) and annotation keywords dropped
    (they stay in the prompt).

    Keys of a ``properties`` map are property names, not keywords: a property called
    ``description`` must survive.
    """
    if defs is None:
        defs = schema.get("$defs", {}) if isinstance(schema, dict) else {}
    if isinstance(schema, dict):
        if "$ref" in schema:
            return decoding_schema(defs[schema["$ref"].split("/")[-1]], defs)
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in _DROP or key == "$defs":
                continue
            if key == "properties" and isinstance(value, dict):
                out[key] = {name: decoding_schema(sub, defs) for name, sub in value.items()}
            else:
                out[key] = decoding_schema(value, defs)
        return out
    if isinstance(schema, list):
        return [decoding_schema(v, defs) for v in schema]
    return schema


def _argument(spec: dict[str, Any], choices: list[str] | None, max_chars: int) -> dict[str, Any]:
    if choices:
        return {"type": "string", "enum": choices}
    kinds = spec.get("anyOf") or [spec]
    kind = next((k for k in kinds if k.get("type") != "null"), spec)
    if kind.get("type") == "string":
        return {
            "type": "string",
            "minLength": 1,
            "maxLength": min(kind.get("maxLength", max_chars), max_chars),
        }
    if kind.get("type") == "integer":
        bounded = {k: kind[k] for k in ("minimum", "maximum") if k in kind}
        return {"type": "integer", **bounded}
    return decoding_schema(kind)


def action_schema(request: ModelRequest) -> dict[str, Any]:
    """The grammar's schema for one act-phase turn: one of the allowed actions."""
    allowed = request.allowed_tools
    thought = {"type": "string", "maxLength": request.thought_max_chars}
    options: list[dict[str, Any]] = []
    for tool in request.tools:
        fn = tool["function"]
        if allowed is not None and fn["name"] not in allowed:
            continue
        params = fn.get("parameters", {})
        choices = request.arg_choices.get(fn["name"], {})
        props = {
            name: _argument(spec, choices.get(name), request.arg_max_chars)
            for name, spec in params.get("properties", {}).items()
        }
        options.append(
            {
                "type": "object",
                "properties": {"thought": thought, "tool": {"const": fn["name"]}, **props},
                "required": ["thought", "tool", *params.get("required", [])],
            }
        )
    if not options:
        raise ValueError("no action is allowed this turn")
    return options[0] if len(options) == 1 else {"anyOf": options}


def tool_lines(tools: list[dict[str, Any]]) -> str:
    """One line per tool for the protocol text: name, description, arguments."""
    lines = []
    for tool in tools:
        fn = tool["function"]
        params = fn["parameters"].get("properties", {})
        required = set(fn["parameters"].get("required", []))
        args = ", ".join(
            f'"{name}"' + ("" if name in required else " (optional)")
            + (f": {spec['description']}" if spec.get("description") else "")
            for name, spec in params.items()
        )  # fmt: skip
        lines.append(f'- "{fn["name"]}": {fn["description"]}' + (f" Arguments: {args}" if args else ""))
    return "\n".join(lines)


def render_action(name: str, arguments: dict[str, Any], thought: str) -> str:
    """How an earlier action appears in the conversation: the flat object the model produced."""
    return json.dumps({"thought": thought, "tool": name, **arguments}, ensure_ascii=False)


def parse_action(value: dict[str, Any]) -> tuple[str, dict[str, Any], str] | None:
    """(tool, arguments, thought) from an action object, or None when it is no action.

    Accepts the flat form, the nested ``{"tool", "arguments"}`` form and Qwen's native habit
    ``{"name", "arguments"}``.
    """
    body = dict(value)
    thought = body.pop("thought", "")
    name = body.pop("tool", None)
    if name is None and isinstance(body.get("name"), str) and "arguments" in body:
        name = body.pop("name")
    if not isinstance(name, str):
        return None
    if set(body) == {"arguments"} and isinstance(body["arguments"], dict):
        body = body["arguments"]
    return name, body, thought if isinstance(thought, str) else str(thought)
