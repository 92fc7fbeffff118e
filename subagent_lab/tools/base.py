"""A tool is a typed function; its JSON schema and argument validation are derived from it.

A tool function takes a context object first (the workspace, or for Task the launcher) and
keyword arguments after it. Its Google-style docstring gives the tool description (first
paragraph) and the parameter descriptions (``Args:`` section).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from subagent_lab.types import ToolOutcome

ToolKind = Literal["read", "write", "execute", "delegate"]
MAX_OBSERVATION_CHARS = 16_000
"""Cap on the text one tool call returns to the model (the tools apply tighter caps themselves)."""


class ToolError(Exception):
    """A failure the model can act on (bad path, no match, invalid regex): becomes the observation."""


class ToolDeniedError(ToolError):
    """The call is refused by policy (outside the workspace, secret file, not allowed)."""


def _param_docs(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google docstring into (description, {param: description})."""
    doc = inspect.cleandoc(doc or "")
    head, _, rest = doc.partition("\nArgs:\n")
    params: dict[str, str] = {}
    current: str | None = None
    for line in rest.splitlines():
        if re.match(r"^\S", line):  # a new section (Returns:, Raises:) ends Args
            break
        match = re.match(r"^\s{2,8}(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
        if match:
            current = match.group(1)
            params[current] = match.group(2).strip()
        elif current and line.strip():
            params[current] += " " + line.strip()
    return head.strip(), params


def _args_model(name: str, fn: Callable[..., Any]) -> type[BaseModel]:
    signature = inspect.signature(fn, eval_str=True)
    _, docs = _param_docs(fn.__doc__ or "")
    fields: dict[str, Any] = {}
    for index, (pname, param) in enumerate(signature.parameters.items()):
        if index == 0:
            continue  # the context argument, supplied by the harness
        if param.annotation is inspect.Parameter.empty:
            raise TypeError(f"tool {name}: parameter {pname!r} needs a type annotation")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (param.annotation, Field(default, description=docs.get(pname)))
    return create_model(
        f"{name}Args", __config__=ConfigDict(extra="forbid", strict=False), **fields
    )


@dataclass(frozen=True)
class Tool:
    """A named, typed function the model can call."""

    name: str
    fn: Callable[..., str]
    kind: ToolKind = "read"
    args_model: type[BaseModel] = field(init=False)
    description: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "args_model", _args_model(self.name, self.fn))
        object.__setattr__(self, "description", _param_docs(self.fn.__doc__ or "")[0])

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools=`` entry for this tool."""
        params = self.args_model.model_json_schema()
        params.pop("title", None)
        for prop in params.get("properties", {}).values():
            prop.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": params},
        }

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments, or ToolError with messages the model can act on."""
        try:
            model = self.args_model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}" for e in exc.errors()
            )
            raise ToolError(f"invalid arguments for {self.name}: {problems}") from None
        return {k: getattr(model, k) for k in type(model).model_fields}

    def invoke(self, context: Any, arguments: dict[str, Any]) -> ToolOutcome:
        """Run the tool. ToolError becomes an observation; any other exception propagates (a bug)."""
        try:
            text = self.fn(context, **self.validate(arguments))
        except ToolDeniedError as exc:
            return ToolOutcome(status="denied", text=f"Denied: {exc}")
        except ToolError as exc:
            return ToolOutcome(status="error", text=f"Error: {exc}")
        if len(text) > MAX_OBSERVATION_CHARS:
            cut = text[:MAX_OBSERVATION_CHARS]
            note = f"\n[output truncated at {MAX_OBSERVATION_CHARS} characters; narrow the request]"
            return ToolOutcome(status="ok", text=cut + note, truncated=True)
        return ToolOutcome(status="ok", text=text)
