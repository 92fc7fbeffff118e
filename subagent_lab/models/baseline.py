"""The no-model baseline (``model="none"``): a policy with no language model.

It answers every ``ModelRequest`` from what the harness put in it and nothing else, so its score
is the floor a model's score must be read against: whatever it reaches, the scaffold reached.

Act phase, first rule that applies:

1. The grammar leaves one tool and no finish, with offered argument values (``arg_choices``,
   e.g. a forced first search): that tool with the first offered values not called before.
2. The last observation's ``Next:`` line names an allowed call not made before (its constrained
   arguments among the offered values): make it.
3. No tool call made yet: Grep for the request's first code-like name (a backticked word, a
   dotted, snake_case or CamelCase name, else its longest word) — structure of the text, no word
   list. The request is the task without a harness template around it
   (``tools.symbols.query.request_of``): the template's own longest word is no name of the task.
4. Otherwise finish when the grammar allows it, else the first offered call not made before.

Final phase (the answer, a repair, or a harness question): one JSON value built from the schema
alone. The first value of every enum (``status: completed``, a yes/no check: ``yes``), the first
offered evidence items (else the ``path:line`` locations listed in the prompt), the task text as
every free string, the prompt's listed lines as list items.

Usage is the harness's own estimate of the prompt and the reply, flagged ``estimated``: budgets
then act on the baseline as on a model, and its tokens are what the same scaffold would feed one.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from subagent_lab.core.context import estimate_messages, estimate_text
from subagent_lab.core.types import Message, ModelRequest, ModelResponse, ToolCall, Usage
from subagent_lab.tools.symbols.query import request_of

BASELINE_MODEL_ID = "none"
FINISH = "finish"
NEXT_LINE = re.compile(r"^Next:\s*(?P<tool>[A-Z]\w*)\b(?P<args>.*)$", re.MULTILINE)
NEXT_FINISH = re.compile(r"^Next:\s*finish\b", re.MULTILINE)
ARG = re.compile(r'(?P<key>[a-z_]+)=(?P<value>"(?:[^"\\]|\\.)*"|\S+)')
LOCATION = re.compile(r"(?<![\w/.-])([\w./-]+\.\w+:\d+(?:-\d+)?)(?![\w-])")
LISTED_LINE = re.compile(r"^- (?P<item>\S+:\d+(?:-\d+)?)\s*(?P<text>.*)$", re.MULTILINE)
CODE_WORDS = (
    re.compile(r"`([^`\s]{2,80})`"),  # written as code
    re.compile(r"\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\b"),  # dotted
    re.compile(r"\b([a-z]\w*_\w+)\b"),  # snake_case
    re.compile(r"\b([A-Z][a-z0-9]+[A-Z]\w*)\b"),  # CamelCase
)


def task_text(messages: list[Message]) -> str:
    """The first paragraph of the first user message: the task as the user wrote it."""
    first = next((str(m.content or "") for m in messages if m.role == "user"), "")
    return first.strip().split("\n\n", 1)[0].strip()


def task_name(task: str) -> str:
    """The task's first code-like name, else its longest word (``""`` for an empty task)."""
    for pattern in CODE_WORDS:
        found = pattern.search(task)
        if found:
            return found.group(1).strip(".")
    words = re.findall(r"[A-Za-z_]\w+", task)
    return max(words, key=len) if words else ""


def parse_next(text: str) -> tuple[str, dict[str, Any]] | None:
    """The last ``Next:`` line of an observation as ``(tool, arguments)``; ``("finish", {})`` for
    a finish suggestion; None when there is none or it names no call."""
    finish = list(NEXT_FINISH.finditer(text))
    calls = list(NEXT_LINE.finditer(text))
    last_finish = finish[-1].start() if finish else -1
    if not calls or last_finish > calls[-1].start():
        return (FINISH, {}) if finish else None
    found = calls[-1]
    args: dict[str, Any] = {}
    for arg in ARG.finditer(found.group("args")):
        value = arg.group("value")
        if value.startswith('"'):
            try:
                args[arg.group("key")] = json.loads(value)
            except ValueError:
                args[arg.group("key")] = shlex.split(value)[0] if value.count('"') % 2 == 0 else value
        elif value.isdigit():
            args[arg.group("key")] = int(value)
        else:
            args[arg.group("key")] = value
    return (found.group("tool"), args) if args else None


def _made_calls(messages: list[Message]) -> list[tuple[str, str]]:
    return [
        (call.name, json.dumps(call.arguments, sort_keys=True))
        for m in messages
        if m.role == "assistant"
        for call in (m.tool_calls or [])
    ]


def _last_observation(messages: list[Message]) -> str:
    for message in reversed(messages):
        if message.role == "tool":
            return str(message.content or "")
        if message.role == "assistant":
            break
    return ""


def _fits(args: dict[str, Any], choices: dict[str, list[str]]) -> bool:
    """The call's constrained arguments take offered values (a grammar would allow it)."""
    return all(str(args.get(name)) in {str(v) for v in values} for name, values in choices.items() if values)


def _offered(tool: str, choices: dict[str, list[str]], made: list[tuple[str, str]]) -> dict[str, Any] | None:
    """The first combination of offered values (in the grammar's order) not called before."""
    names = [n for n, values in choices.items() if values]
    if not names:
        return None
    first = {n: choices[n][0] for n in names}
    for name in names:  # vary one argument at a time, the others at their first value
        for value in choices[name]:
            args = {**first, name: value}
            if (tool, json.dumps(args, sort_keys=True)) not in made:
                return args
    return None


def choose_action(request: ModelRequest) -> tuple[str, dict[str, Any]]:
    """The baseline's action for an act-phase request (the rules of the module docstring)."""
    allowed = request.allowed_tools or [*(t["function"]["name"] for t in _schemas(request)), FINISH]
    made = _made_calls(request.messages)
    tools = [t for t in allowed if t != FINISH]
    forced = tools[0] if len(tools) == 1 and FINISH not in allowed else None
    if forced and request.arg_choices.get(forced):  # the grammar leaves one tool: take its first offer
        args = _offered(forced, request.arg_choices[forced], made)
        if args is not None:
            return forced, args
    suggested = parse_next(_last_observation(request.messages))
    if suggested is not None and suggested[0] in allowed:
        tool, args = suggested
        fresh = (tool, json.dumps(args, sort_keys=True)) not in made
        if tool == FINISH or (fresh and _fits(args, request.arg_choices.get(tool, {}))):
            return tool, args
    name = task_name(request_of(task_text(request.messages)))
    if not made and "Grep" in tools and name:
        return "Grep", {"pattern": name}
    if FINISH in allowed or not tools:
        return FINISH, {}
    for tool in tools:
        args = _offered(tool, request.arg_choices.get(tool, {}), made)
        if args is not None:
            return tool, args
    return tools[0], {"pattern": name or "*"}


def _schemas(request: ModelRequest) -> list[dict[str, Any]]:
    return [t for t in request.tools if isinstance(t.get("function"), dict) and "name" in t["function"]]


def build_answer(schema: dict[str, Any] | None, messages: list[Message]) -> Any:
    """A JSON value for ``schema`` from the prompt alone (see the module docstring)."""
    prompt = str(messages[-1].content or "") if messages else ""
    listed = [(m.group("item"), m.group("text").strip()) for m in LISTED_LINE.finditer(prompt)]
    locations = [item for item, _ in listed] or list(dict.fromkeys(LOCATION.findall(prompt)))
    context = {"task": task_text(messages), "locations": locations, "lines": [t for _, t in listed if t]}
    if not schema:
        return context["task"] or "no answer"
    return _instance(schema, "", context)


def _instance(schema: dict[str, Any], key: str, context: dict[str, Any]) -> Any:
    if "enum" in schema:
        return schema["enum"][0] if schema["enum"] else None
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props: dict[str, Any] = schema.get("properties", {})
        return {name: _instance(sub, name, context) for name, sub in props.items()}
    if kind == "array":
        return _array(schema, key, context)
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    text = context["task"] or "no answer"
    return text[: schema.get("maxLength", len(text))]


def _array(schema: dict[str, Any], key: str, context: dict[str, Any]) -> list[Any]:
    items: dict[str, Any] = schema.get("items", {})
    most = int(schema.get("maxItems", 4))
    least = int(schema.get("minItems", 0))
    if "enum" in items:
        return list(items["enum"][: max(least, min(most, len(items["enum"])))])
    if "pattern" in items or key == "evidence":
        return context["locations"][:most]
    if key == "findings":
        cap = int(items.get("maxLength", 200))
        return [line[:cap] for line in context["lines"][:most]]
    return [_instance(items, key, context) for _ in range(least)]


def action_response(
    request: ModelRequest, tool: str, args: dict[str, Any], prefix: str = "none"
) -> ModelResponse:
    """A no-model policy's action as a model's reply, its usage the harness's own estimate."""
    call = ToolCall(id=f"{prefix}-{len(request.messages)}", name=tool, arguments=args)
    body = json.dumps({"tool": tool, "args": args})
    prompt = estimate_messages(request.messages, request.tools)
    usage = Usage(prompt_tokens=prompt, completion_tokens=estimate_text(body), estimated=True)
    return ModelResponse(tool_calls=[call], usage=usage, model_id=BASELINE_MODEL_ID)


def text_response(request: ModelRequest, text: str) -> ModelResponse:
    """A no-model policy's answer as a model's reply, its usage the harness's own estimate."""
    prompt = estimate_messages(request.messages, request.tools)
    usage = Usage(prompt_tokens=prompt, completion_tokens=estimate_text(text), estimated=True)
    return ModelResponse(text=text, usage=usage, model_id=BASELINE_MODEL_ID)


class BaselineModel:
    """The ``none`` model: answers each request by the rules above, without a language model."""

    model_id = BASELINE_MODEL_ID

    def complete(self, request: ModelRequest) -> ModelResponse:
        if request.phase == "act":
            return action_response(request, *choose_action(request))
        return text_response(
            request, json.dumps(build_answer(request.final_schema, request.messages), ensure_ascii=False)
        )
