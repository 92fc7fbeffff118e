"""The retrieval floor (``model="retrieval"``): the strongest no-model policy, run through the loop.

Like ``none`` (``models.baseline``) it answers every ``ModelRequest`` without a language model,
so its tokens, trace and terminal reason are the harness's own. Unlike ``none`` it uses the
structure tools the way a model that trusts them would (issue 36; docs/evaluation.md, "Floors"):

Act phase, in order, each call made once and only where the turn's menu allows it:

1. ``Find`` for each of the request's code-like names (backticked words, dotted, snake_case and
   CamelCase identifiers, in the order the request writes them, at most ``MAX_FINDS``): structure
   of the text, no word list.
2. ``Search`` with the request (cut to the grammar's argument cap, ``arg_max_chars``, at a word
   boundary: a model could pass no more). The request is the task without a harness template
   around it (``tools.symbols.query.request_of``): the template's words searched too cost the
   floor +0.06 function Acc@5 on mined dev (audit-validity turn 5 §6).
3. ``finish``. Where the menu leaves none of these (a forced first Grep, say), ``none``'s rules
   choose (``baseline.choose_action``); a run whose menu never allowed Find or Search (the
   ``light-tuned`` preset: a forced Grep, then Read or finish only) is answered by ``none``'s rules
   too (``baseline.build_answer``): the floor is then ``none``.

Final phase: the units the observations listed, in order (Find's definitions of the named
symbols first, then Search's ranking, which puts library code before tests), deduplicated:

* ``evidence``: each unit's header line (``path:start``, the ``def``/``class`` line), at most the
  schema's ``maxItems`` (``CiteFromSeen.max_evidence``). Where the grammar offers a closed list
  of items (``CiteFromSeen.constrain``), only offered items are cited: the header line if offered,
  else the unit whole (``path:start-end``, as ``CiteFromSeen.units`` offers a function), else it is
  skipped. A model under that grammar could cite nothing else.
* ``summary``: the listed units' qualified names and files, cut to the schema's ``maxLength`` (the
  models' cap, 256 characters under the shipped output cap).
* ``status``: ``completed``; ``findings`` and other lists: empty.
* The absence check (a yes/no question): ``yes`` when Find or Search listed any unit, else ``no``.
  The floor never reads the task's wording for a cue that the thing is absent: on an ``absent``
  task it answers from retrieval like on any other (it cites the top units), and says that nothing
  like it exists only when no tool listed a unit.

The floor holds Find and Search whatever the scaffold preset: the launcher adds the symbol tools
to a ``retrieval`` run whose preset lacks them (``SubagentLauncher.resolve_profile``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from subagent_lab.core.contracts import PLAIN_TYPES, plain_value
from subagent_lab.core.types import Message, ModelRequest, ModelResponse
from subagent_lab.models.baseline import (
    CODE_WORDS,
    FINISH,
    action_response,
    build_answer,
    choose_action,
    task_text,
    text_response,
)
from subagent_lab.tools.symbols.query import request_of
from subagent_lab.tools.symbols.retrieve import names_by_file

RETRIEVAL_MODEL_ID = "retrieval"
MAX_FINDS = 3
"""Names of the task looked up with Find, at most (each call is a step of the profile's budget)."""
ABSENT_SUMMARY = "Nothing like that exists in this code base: neither Find nor Search listed a unit for it."
UNIT_LINE = re.compile(
    r"^(?:\[(?P<role>\w+)\] )?(?P<path>\S+?):(?P<start>\d+)-(?P<end>\d+) (?P<kind>\w+) (?P<name>\S+)$",
    re.MULTILINE,
)
"""A unit as Find and Search list it: ``[test] path:start-end kind qualname`` (``tools.symbols``);
the indented ``calls`` lines of a Find are not units of the answer."""
NOT_FOUND = ("No definition named", "is not a name")
"""A Find observation holding these looked the name up and fell back to a word search: its units
are not the name's definitions (Search, made next, ranks the task's words anyway)."""


def code_names(task: str, limit: int = MAX_FINDS) -> list[str]:
    """The task's code-like names in the order written (every ``CODE_WORDS`` pattern), trailing
    dots and call parentheses dropped, deduplicated (a name whose last dotted part is that of one
    already taken is the same lookup), at most ``limit``."""
    found: list[tuple[int, str]] = []
    for pattern in CODE_WORDS:
        found += [(m.start(1), m.group(1)) for m in pattern.finditer(task)]
    names: dict[str, None] = {}
    for _, name in sorted(found):
        clean = name.strip(".").removesuffix("()")
        # one name once: `get_template` after `Environment.get_template` is the same lookup
        last = clean.rsplit(".", 1)[-1]
        if clean and not any(last == other.rsplit(".", 1)[-1] for other in names):
            names.setdefault(clean, None)
    return list(names)[:limit]


def search_query(task: str, cap: int) -> str:
    """``task`` on one line, cut to ``cap`` characters at a word boundary."""
    text = " ".join(task.split())
    if len(text) <= cap:
        return text
    cut = text[:cap]
    return cut if text[cap] == " " or " " not in cut else cut.rsplit(" ", 1)[0]


def _tool_observations(messages: list[Message]) -> list[tuple[str, dict[str, Any], str]]:
    """Each tool result with the call that made it: ``(tool, arguments, text)``, oldest first."""
    calls = {c.id: c for m in messages if m.role == "assistant" for c in (m.tool_calls or [])}
    out: list[tuple[str, dict[str, Any], str]] = []
    for message in messages:
        if message.role != "tool":
            continue
        call = calls.get(message.tool_call_id or "")
        name = call.name if call is not None else (message.name or "")
        out.append((name, call.arguments if call is not None else {}, str(message.content or "")))
    return out


def searched(messages: list[Message]) -> bool:
    """Whether a Search (or a Find, which falls back to one) ran: only then is "no unit" a finding."""
    return any(tool in ("Find", "Search") for tool, _, _ in _tool_observations(messages))


def listed_units(messages: list[Message]) -> list[tuple[str, int, int, str]]:
    """The units Find (a name it defines) and Search listed, in the order shown, deduplicated:
    ``(path, start, end, qualname)``."""
    units: dict[tuple[str, int], tuple[str, int, int, str]] = {}
    for tool, _, text in _tool_observations(messages):
        if tool not in ("Find", "Search") or (tool == "Find" and any(s in text for s in NOT_FOUND)):
            continue
        for m in UNIT_LINE.finditer(text):
            key = (m.group("path"), int(m.group("start")))
            units.setdefault(key, (key[0], key[1], int(m.group("end")), m.group("name")))
    return list(units.values())


def planned_calls(request: ModelRequest) -> list[tuple[str, dict[str, Any]]]:
    """The floor's calls for this task, in order: a Find per code-like name of the request, then a
    Search of the request."""
    task = request_of(task_text(request.messages))
    finds: list[tuple[str, dict[str, Any]]] = [("Find", {"name": n}) for n in code_names(task)]
    return [*finds, ("Search", {"query": search_query(task, request.arg_max_chars)})]


def choose_retrieval_action(request: ModelRequest) -> tuple[str, dict[str, Any]]:
    """The floor's action for an act-phase request (the rules of the module docstring)."""
    offered = [t["function"]["name"] for t in request.tools if isinstance(t.get("function"), dict)]
    allowed = request.allowed_tools or [*offered, FINISH]
    made = {
        (c.name, json.dumps(c.arguments, sort_keys=True))
        for m in request.messages
        if m.role == "assistant"
        for c in (m.tool_calls or [])
    }
    for tool, args in planned_calls(request):
        if (
            tool in allowed
            and (tool, json.dumps(args, sort_keys=True)) not in made
            and args.get("name", args.get("query"))
        ):
            return tool, args
    if FINISH in allowed:
        return FINISH, {}
    return choose_action(request)  # the menu leaves none of the floor's own moves: none's rules


def _cite(units: list[tuple[str, int, int, str]], evidence: dict[str, Any]) -> list[str]:
    """Header lines of ``units`` within the evidence schema's cap (and its closed list, if any)."""
    cap = int(evidence.get("maxItems", 4))
    offered = evidence.get("items", {}).get("enum")
    items: list[str] = []
    for path, start, end, _ in units:
        header, whole = f"{path}:{start}", f"{path}:{start}-{end}"
        pick = header if offered is None or header in offered else whole if whole in offered else None
        if pick is not None and pick not in items:
            items.append(pick)
    return items[:cap]


def summary_text(units: list[tuple[str, int, int, str]], cap: int) -> str:
    """The listed units' names, grouped by file in the order first listed (``a, B.c in x.py;
    d in y.py``), as ``retrieve.names_by_file`` writes them; with no unit, that
    nothing like it exists (Search ranked nothing)."""
    if not units:
        return ABSENT_SUMMARY[:cap]
    text = names_by_file([(path, name) for path, _, _, name in units], cap)
    return text or units[0][3][:cap]


def build_retrieval_answer(schema: dict[str, Any] | None, messages: list[Message]) -> Any:
    """The floor's JSON value for ``schema`` (the absence check, or the contract's answer)."""
    if not searched(messages):  # the menu never allowed Find or Search: none's answer
        return build_answer(schema, messages)
    units = listed_units(messages)
    props: dict[str, Any] = (schema or {}).get("properties", {})
    if not props:
        return summary_text(units, 256)
    answer: dict[str, Any] = {}
    for key, sub in props.items():
        if "enum" in sub:
            values = list(sub["enum"])
            verdict = "yes" if units else "no"
            answer[key] = (
                verdict if verdict in values else "completed" if "completed" in values else values[0]
            )
        elif key == "evidence":
            answer[key] = _cite(units, sub)
        elif key == "summary" or sub.get("type") == "string":
            answer[key] = summary_text(units, int(sub.get("maxLength", 256)))
        elif sub.get("type") in PLAIN_TYPES:
            answer[key] = plain_value(sub)
    return answer


class RetrievalModel:
    """The ``retrieval`` model: Find on the task's names, Search its text, cite the units' headers."""

    model_id = RETRIEVAL_MODEL_ID

    def complete(self, request: ModelRequest) -> ModelResponse:
        if request.phase == "act":
            response = action_response(request, *choose_retrieval_action(request), prefix="retrieval")
        else:
            answer = build_retrieval_answer(request.final_schema, request.messages)
            response = text_response(request, json.dumps(answer, ensure_ascii=False))
        return response.model_copy(update={"model_id": RETRIEVAL_MODEL_ID})
