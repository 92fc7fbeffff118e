"""The no-model parent (``model="none"`` for a main agent): the delegation study's floor.

The child baseline (``models.baseline``) answers from a contract's schema; a parent has no
contract, only free text, so that baseline would answer with the task's own words and no
evidence whatever its arm. This policy takes every offer a parent's arm makes, without a language
model, and cites what its tools (or its children) showed:

- **act phase**, first rule that applies: (1) Task is offered and not called yet: delegate the task
  verbatim to an explore child (the question as its ``description`` and ``prompt``, the workspace
  paths seen so far as its ``context``); (2) no call made yet and Grep is offered: Grep for the
  task's first code-like name (``baseline.task_name``); (3) nothing read yet, a result names a file
  and Read is offered: Read the first; (4) otherwise finish.
- **final phase**: a short text naming the first ``MAX_CITED`` ``path:line`` locations the
  conversation's tool results (or the forced delegation's envelope) hold, each on its own line;
  under an answer contract with an ``evidence`` field (``AnswerResult``) the same locations are
  that field too.

Usage is the harness's estimate, flagged ``estimated``, as for the child baseline.
"""

from __future__ import annotations

import json
import re

from subagent_lab.core.types import Message, ModelRequest, ModelResponse, ToolCall
from subagent_lab.models.baseline import (
    BASELINE_MODEL_ID,
    LOCATION,
    action_response,
    task_name,
    task_text,
    text_response,
)

MAX_CITED = 4
"""Locations the no-model parent cites (the explore contract's evidence lists are about as long)."""
_FILE = re.compile(r"(?<![\w/.-])([\w./-]+\.\w+):\d+")


def _results(messages: list[Message]) -> list[str]:
    """The texts of tool results, and of what the harness added after the task (a forced
    delegation's envelope), in order."""
    users = [m for m in messages if m.role == "user"]
    added = [str(m.content or "") for m in users[1:]]
    return [*(str(m.content or "") for m in messages if m.role == "tool"), *added]


def _made(messages: list[Message]) -> list[ToolCall]:
    return [c for m in messages if m.role == "assistant" for c in m.tool_calls]


def cited(messages: list[Message], limit: int = MAX_CITED) -> list[str]:
    """The first ``limit`` distinct ``path:line`` locations the tool results hold."""
    found = [loc for text in _results(messages) for loc in LOCATION.findall(text)]
    return list(dict.fromkeys(found))[:limit]


def parent_action(request: ModelRequest) -> tuple[str, dict[str, object]]:
    """The no-model parent's action (the rules of the module docstring)."""
    names = [t["function"]["name"] for t in request.tools if isinstance(t.get("function"), dict)]
    allowed = request.allowed_tools or [*names, "finish"]
    made = _made(request.messages)
    task = task_text(request.messages)
    if "Task" in allowed and not any(c.name == "Task" for c in made):
        files = sorted({m for text in _results(request.messages) for m in _FILE.findall(text)})
        context = {"files_seen": files} if files else None
        # The description leads the child's task: the question itself, so that the child baseline
        # (it searches for the first paragraph's first code-like name) searches for the question's.
        args: dict[str, object] = {
            "description": task,
            "prompt": task,
            "subagent_type": "explore",
        }
        return "Task", {**args, **({"context": context} if context else {})}
    if not made and "Grep" in allowed and task_name(task):
        return "Grep", {"pattern": task_name(task)}
    if "Read" in allowed and not any(c.name == "Read" for c in made):
        for text in _results(request.messages):
            for path in _FILE.findall(text):
                return "Read", {"path": path}
    return "finish", {}


class ParentBaseline:
    """A parent's no-model policy: delegates or searches as its arm allows, cites what it was shown."""

    model_id = BASELINE_MODEL_ID

    def complete(self, request: ModelRequest) -> ModelResponse:
        if request.phase == "act":
            return action_response(request, *parent_action(request), prefix="none-parent")
        locations = cited(request.messages)
        lines = "\n".join(f"- {loc}" for loc in locations)
        text = f"The places that answer the task:\n{lines}" if locations else "No location found."
        payload: dict[str, object] = {"answer": text}
        if "evidence" in (request.final_schema or {}).get("properties", {}):
            payload["evidence"] = locations
        return text_response(request, json.dumps(payload))
