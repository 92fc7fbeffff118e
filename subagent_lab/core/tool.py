"""A tool is a typed function; its JSON schema and argument validation are derived from it.

A tool function takes a context object first (the workspace, or for Task the launcher) and
keyword arguments after it. Its Google-style docstring gives the tool description (first
paragraph) and the parameter descriptions (``Args:`` section). Keyword arguments the harness
supplies itself (``Tool.bound``, e.g. observation sizes) are left out of the schema.

A tool function returns either plain text or an ``Observation``: the text plus the ``Span``s
(file locations) it shows, which ``Tool.invoke`` carries into the ``ToolOutcome``.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from subagent_lab.core.types import Span, ToolOutcome, json_copy

__all__ = [
    "MAX_OBSERVATION_CHARS", "READ_LEAD", "Observation", "ObservationBuilder", "Span", "Tool",
    "ToolDeniedError", "ToolError", "ToolKind", "ToolResult",
]  # fmt: skip

ToolKind = Literal["read", "write", "execute", "delegate"]
MAX_OBSERVATION_CHARS = 16_000
"""Cap on the text one tool call returns to the model (the tools apply tighter caps themselves)."""
READ_LEAD = 10
"""Lines a small-model Read window shows before the asked line (``scaffold/read_on.py`` asks for
the line this many past a window's end, so the next window starts right after it)."""


class ToolError(Exception):
    """A failure the model can act on (bad path, no match, invalid regex): becomes the observation."""


class ToolDeniedError(ToolError):
    """The call is refused by policy (outside the workspace, secret file, not allowed)."""


@dataclass(frozen=True)
class Observation:
    """What a tool shows the model: ``text``, and the file locations (``spans``) that text shows.

    Build one with ``ObservationBuilder`` so that a cut (``truncate``) keeps exactly the spans
    still shown; an Observation made without ``ends`` loses all its spans when cut.
    """

    text: str
    spans: list[Span] = field(default_factory=list)
    ends: list[int] | None = None
    """``ends[i]``: the offset in ``text`` just after the part that shows ``spans[i]``."""

    def truncate(self, limit: int) -> Observation:
        """The first ``limit`` characters, keeping only the spans shown in full within them."""
        if len(self.text) <= limit:
            return self
        if self.ends is None:
            return Observation(self.text[:limit])
        kept = [(span, end) for span, end in zip(self.spans, self.ends, strict=True) if end <= limit]
        return Observation(self.text[:limit], [s for s, _ in kept], [e for _, e in kept])


class ObservationBuilder:
    """Assembles an Observation line by line, recording where each span's text ends."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._size = -1  # length of "\n".join(self._lines)
        self._spans: list[Span] = []
        self._ends: list[int] = []

    def line(self, text: str, *spans: Span) -> None:
        """Append one line (it may contain newlines); ``spans`` are the locations it shows."""
        self._lines.append(text)
        self._size += len(text) + 1
        self.mark(*spans)

    def mark(self, *spans: Span) -> None:
        """Record ``spans`` as shown by the lines appended so far (e.g. a window of many lines)."""
        for span in spans:
            self._spans.append(span)
            self._ends.append(max(self._size, 0))

    @property
    def spans(self) -> list[Span]:
        """The spans recorded so far."""
        return list(self._spans)

    def build(self) -> Observation:
        return Observation("\n".join(self._lines), list(self._spans), list(self._ends))


ToolResult = str | Observation
"""What a tool function returns."""


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


def _args_model(name: str, fn: Callable[..., Any], bound: Mapping[str, Any]) -> type[BaseModel]:
    """The pydantic model of the tool's arguments, made once per (name, function, bound values)
    in a process: the registries build their tools for every run."""
    try:
        return _cached_args_model(name, fn, tuple(sorted(bound.items())))
    except TypeError:  # a bound value that cannot be a cache key
        return _make_args_model(name, fn, bound)


@functools.lru_cache(maxsize=256)
def _cached_args_model(
    name: str, fn: Callable[..., Any], bound: tuple[tuple[str, Any], ...]
) -> type[BaseModel]:
    return _make_args_model(name, fn, dict(bound))


@functools.lru_cache(maxsize=256)
def _parameters_schema(args_model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of an arguments model, titles left out (callers get a copy)."""
    params = args_model.model_json_schema()
    params.pop("title", None)
    for prop in params.get("properties", {}).values():
        prop.pop("title", None)
    return params


def _make_args_model(name: str, fn: Callable[..., Any], bound: Mapping[str, Any]) -> type[BaseModel]:
    signature = inspect.signature(fn, eval_str=True)
    _, docs = _param_docs(fn.__doc__ or "")
    fields: dict[str, Any] = {}
    parameters = list(signature.parameters)[1:]
    unknown = sorted(set(bound) - set(parameters))
    if unknown:
        raise TypeError(f"tool {name}: bound arguments {unknown} are not parameters of {fn.__name__}")
    for index, (pname, param) in enumerate(signature.parameters.items()):
        if index == 0 or pname in bound:
            continue  # the context argument and the bound ones are supplied by the harness
        if param.annotation is inspect.Parameter.empty:
            raise TypeError(f"tool {name}: parameter {pname!r} needs a type annotation")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (param.annotation, Field(default, description=docs.get(pname)))
    return create_model(f"{name}Args", __config__=ConfigDict(extra="forbid", strict=False), **fields)


@dataclass(frozen=True)
class Tool:
    """A named, typed function the model can call.

    ``bound`` holds keyword arguments the harness supplies at every call (observation sizes,
    say): they are not in the schema, the model cannot set them, and ``invoke`` merges them in.
    """

    name: str
    fn: Callable[..., ToolResult]
    kind: ToolKind = "read"
    bound: Mapping[str, Any] = field(default_factory=dict, hash=False)
    args_model: type[BaseModel] = field(init=False)
    description: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "bound", MappingProxyType(dict(self.bound)))
        object.__setattr__(self, "args_model", _args_model(self.name, self.fn, self.bound))
        object.__setattr__(self, "description", _param_docs(self.fn.__doc__ or "")[0])

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools=`` entry for this tool (a fresh copy: the caller may change it)."""
        params = json_copy(_parameters_schema(self.args_model))
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
        """Run the tool. ToolError becomes an observation; any other exception propagates (a bug).

        An observation over MAX_OBSERVATION_CHARS is cut, and the spans it no longer shows dropped.
        """
        try:
            result = self.fn(context, **self.validate(arguments), **self.bound)
        except ToolDeniedError as exc:
            return ToolOutcome(status="denied", text=f"Denied: {exc}")
        except ToolError as exc:
            return ToolOutcome(status="error", text=f"Error: {exc}")
        observation = result if isinstance(result, Observation) else Observation(result)
        if len(observation.text) > MAX_OBSERVATION_CHARS:
            cut = observation.truncate(MAX_OBSERVATION_CHARS)
            note = f"\n[output truncated at {MAX_OBSERVATION_CHARS} characters; narrow the request]"
            return ToolOutcome(status="ok", text=cut.text + note, spans=cut.spans, truncated=True)
        return ToolOutcome(status="ok", text=observation.text, spans=list(observation.spans))
