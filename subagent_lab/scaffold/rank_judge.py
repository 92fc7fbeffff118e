"""What the model judges of a candidate, and the answer the harness writes from the fused ranking
(issue 49; docs/design.md, "Scoring candidates").

Each candidate is shown compactly (path, qualified name, signature, docstring, first lines, under
``VIEW_TOKENS``) after the request, in a conversation of its own: the system prompt and the request
come first and are the same for every candidate of a task, so a server's prompt cache evaluates
them once. The model answers one token, yes or no; ``core.judge`` reads P(yes) from its
log-probabilities and fuses it with the retrieval's rank (``fused_score``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from subagent_lab.core.context import estimate_text
from subagent_lab.core.contracts import PLAIN_TYPES, plain_value
from subagent_lab.core.prompts import JUDGE_QUESTION, JUDGE_SYSTEM
from subagent_lab.core.types import Message
from subagent_lab.tools.symbols.retrieve import RetrievedUnit, names_by_file

VIEW_TOKENS = 160
"""The cap on one candidate's view (estimated tokens): ~180 prompt tokens a judged unit with the
question, ~2 s of a 0.5B model's prompt time on 2 cores (anchors-turn5 §1.6)."""


def unit_view(root: Path, unit: RetrievedUnit, lines: list[str] | None = None, cap: int = VIEW_TOKENS) -> str:
    """The candidate as the model sees it: ``path:start-end kind qualname``, the signature, the
    first docstring line, then the unit's first lines after its header, until ``cap`` tokens."""
    d = unit.unit
    head = [f"{unit.rel}:{d.start}-{d.end} {d.kind} {d.qualname}", " ".join(d.signature.split())]
    if d.doc:
        head.append(f'"""{d.doc.strip()}"""')
    text = "\n".join(head)
    if lines is None:
        try:
            lines = (root / unit.rel).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            lines = []
    for line in lines[d.start : min(d.end, len(lines))]:  # after the header (line d.start)
        longer = f"{text}\n{line.rstrip()}"
        if estimate_text(longer) > cap:
            break
        text = longer
    while estimate_text(text) > cap and len(text) > 40:  # a huge signature or docstring
        text = text[: int(len(text) * 0.8)]
    return text


def judge_messages(request: str, view: str) -> list[Message]:
    """The judging conversation: the shared part (system, request) first, then the candidate."""
    return [
        Message(role="system", content=JUDGE_SYSTEM),
        Message(role="user", content=f"Change request: {request}\n\nCode:\n{view}\n\n{JUDGE_QUESTION}"),
    ]


def _summary(units: list[RetrievedUnit], cap: int) -> str:
    """The units' names grouped by file (``a, B.c in x.py; d in y.py``), within ``cap`` characters."""
    text = names_by_file([(unit.rel, unit.unit.qualname) for unit in units], cap)
    return text or "The units the harness's search ranked best."[:cap]


def written_answer(schema: dict[str, Any], picks: list[RetrievedUnit]) -> dict[str, Any]:
    """The contract's answer the harness writes from the fused ranking's ``picks``: each pick's
    header line as evidence (within the schema's cap and its closed list, if any), their names as
    the summary, ``completed``/``yes`` for enums, empty lists, minimums."""
    answer: dict[str, Any] = {}
    for key, sub in schema.get("properties", {}).items():
        if "enum" in sub:
            values = list(sub["enum"])
            first = values[0] if values else None
            answer[key] = next((v for v in ("completed", "yes") if v in values), first)
        elif key == "evidence":
            offered = sub.get("items", {}).get("enum")
            items = [p.item for p in picks if offered is None or p.item in offered]
            answer[key] = items[: int(sub.get("maxItems", len(items)))]
        elif sub.get("type") == "string":
            answer[key] = _summary(picks, int(sub.get("maxLength", 256)))
        elif sub.get("type") in PLAIN_TYPES:
            answer[key] = plain_value(sub)
    return answer
