"""Result contracts a child must satisfy, strict parsing, and evidence grounding."""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from subagent_lab.core.prompts import FINAL_PROMPT, FINAL_PROMPT_FREE, FINAL_PROMPTS
from subagent_lab.core.secret_policy import is_secret_file
from subagent_lab.core.types import json_copy

MAX_LINE_DIGITS = 9
"""Line numbers longer than this are refused by the pattern itself, before ``int()``: Python's
int-from-str refuses 4,301+ digits with a ValueError (a 5,001-digit line ended runs ``crashed``)."""
EVIDENCE_RE = re.compile(
    rf"^(?P<path>[^\s:][^:]*?):(?P<start>[0-9]{{1,{MAX_LINE_DIGITS}}})(?:-(?P<end>[0-9]{{1,{MAX_LINE_DIGITS}}}))?$"
)
"""``path:line`` or ``path:start-end``, with a workspace-relative path (ASCII digits only)."""
_LONG_NUMBER = re.compile(rf":[0-9]{{{MAX_LINE_DIGITS + 1}}}|-[0-9]{{{MAX_LINE_DIGITS + 1}}}")


def _check_evidence_items(items: list[str]) -> list[str]:
    bad = [item for item in items if not EVIDENCE_RE.match(item.strip())]
    if any(_LONG_NUMBER.search(item) for item in bad):
        raise ValueError(
            f"a line number has more than {MAX_LINE_DIGITS} digits; cite real lines such as "
            "'path/file.py:12' or 'path/file.py:12-20'"
        )
    if bad:
        raise ValueError(
            f"evidence items must look like 'path/file.py:12' or 'path/file.py:12-20'; got {bad[:3]!r}"
        )
    return [item.strip() for item in items]


EVIDENCE_PATTERN = r"^[A-Za-z0-9_./-]+:[0-9]+(-[0-9]+)?$"
"""The evidence format for constrained decoding (a GBNF-friendly subset of ``EVIDENCE_RE``, which
is what validation uses): the grammar then cannot produce ``file:std.py:12`` or prose."""
EvidenceList = Annotated[
    list[str],
    Field(max_length=50, json_schema_extra={"items": {"type": "string", "pattern": EVIDENCE_PATTERN}}),
    AfterValidator(_check_evidence_items),
]


class ExploreResult(BaseModel):
    """What an explore child must return: one JSON object, nothing around it."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["completed", "partial"]
    """``partial`` when the child ran out of budget or could not finish."""
    summary: str = Field(min_length=1, max_length=4000)
    """A short answer to the task; this is what the parent's model reads."""
    findings: list[str] = Field(default_factory=list, max_length=50)
    """Individual facts established by the exploration."""
    evidence: EvidenceList = Field(default_factory=list)
    """``path:line`` or ``path:start-end`` locations backing the findings."""
    unresolved_questions: list[str] = Field(default_factory=list, max_length=20)


class VerificationResult(BaseModel):
    """What a verification child must return."""

    model_config = ConfigDict(extra="forbid")

    verdict: Literal["PASS", "FAIL", "PARTIAL", "UNVERIFIED"]
    reasons: list[str] = Field(default_factory=list, max_length=20)
    findings: list[str] = Field(default_factory=list, max_length=50)
    evidence: EvidenceList = Field(default_factory=list)


class PlanStep(BaseModel):
    """One step of a plan."""

    model_config = ConfigDict(extra="forbid")

    description: str = Field(min_length=1)
    files: list[str] = Field(default_factory=list)


class PlanResult(BaseModel):
    """What a plan child must return: ordered steps, each naming the files it touches."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["completed", "partial"]
    summary: str = Field(min_length=1, max_length=4000)
    steps: list[PlanStep] = Field(default_factory=list, max_length=30)
    evidence: EvidenceList = Field(default_factory=list)
    unresolved_questions: list[str] = Field(default_factory=list, max_length=20)


class AnswerResult(BaseModel):
    """A parent's final answer held to a contract (``AgentProfile.contract``): the answer and the
    ``path:line`` locations that back it, as separate fields, so the grammar of a constrained
    endpoint makes the locations a list of locations and not prose."""

    model_config = ConfigDict(extra="forbid")

    answer: str = Field(min_length=1, max_length=4000)
    evidence: EvidenceList = Field(default_factory=list)
    """``path:line`` or ``path:start-end`` locations backing the answer."""


CONTRACTS: dict[str, type[BaseModel]] = {
    "ExploreResult": ExploreResult,
    "AnswerResult": AnswerResult,
    "VerificationResult": VerificationResult,
    "PlanResult": PlanResult,
}


def final_prompt(contract: str | None) -> str:
    """The prompt that asks for the final answer under ``contract`` (None: free text)."""
    if contract is None:
        return FINAL_PROMPT_FREE
    return FINAL_PROMPTS.get(contract, FINAL_PROMPT)


_FENCED = re.compile(r"\A```[A-Za-z]*\s*(.*?)\s*```\Z", re.DOTALL)


def action_in_answer(text: str, tools: frozenset[str]) -> str | None:
    """The tool a free-text answer calls instead of answering, or None.

    A model that hits a limit mid-search often replies to the final prompt with its next action
    (``{"thought": ..., "tool": "Grep", ...}``, fenced or bare): that is not an answer. Only a reply
    that is, as a whole, one action object naming one of ``tools`` (or ``finish``) counts; prose that
    quotes JSON is an answer.
    """
    stripped = text.strip()
    fenced = _FENCED.match(stripped)
    body = fenced.group(1) if fenced else stripped
    if not body.startswith("{"):
        return None
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    name = data.get("tool", data.get("name"))
    if not isinstance(name, str) or (name not in tools and name != "finish"):
        return None
    return name if "tool" in data or isinstance(data.get("arguments"), dict) else None


def contract_schema(name: str) -> dict[str, Any]:
    """The JSON schema of a contract, for prompts and constrained decoding (a fresh copy)."""
    return json_copy(_contract_schema(CONTRACTS[name]))


@functools.lru_cache(maxsize=64)
def _contract_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A contract model's JSON schema, built by pydantic once per process (every call asks)."""
    return model.model_json_schema()


PLAIN_TYPES = ("array", "integer", "number", "boolean")
"""The field types an answer the harness writes fills with ``plain_value``."""


def plain_value(schema: dict[str, Any]) -> Any:
    """The least a field of one of ``PLAIN_TYPES`` takes: an empty list, the schema's ``minimum``
    (0 without one), False."""
    kind = schema.get("type")
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    raise ValueError(f"not one of {PLAIN_TYPES}: {kind!r}")


class ContractCheck(BaseModel):
    """The outcome of parsing a model's final text against a contract."""

    valid: bool
    payload: dict[str, Any] | None = None
    errors: list[str] = Field(default_factory=list)


def parse_contract(text: str, contract: str) -> ContractCheck:
    """Parse ``text`` strictly as one JSON object satisfying ``contract``.

    No markdown fences, no prose around the object, no unknown keys. The errors are written
    for the model: they are fed back verbatim in a repair turn.
    """
    stripped = text.strip()
    if not stripped:
        return ContractCheck(valid=False, errors=["the reply was empty; reply with one JSON object"])
    if stripped.startswith("```"):
        return ContractCheck(
            valid=False, errors=["do not wrap the JSON in markdown fences; reply with the bare object"]
        )
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError as exc:
        return ContractCheck(valid=False, errors=[f"not a single JSON object: {exc.msg} at char {exc.pos}"])
    if not isinstance(data, dict):
        return ContractCheck(valid=False, errors=[f"expected a JSON object, got {type(data).__name__}"])
    try:
        model = CONTRACTS[contract].model_validate(data)
    except ValidationError as exc:
        errors = [f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors()]
        return ContractCheck(valid=False, errors=errors)
    return ContractCheck(valid=True, payload=model.model_dump(mode="json"))


class EvidenceCheck(BaseModel):
    """Whether one evidence item points at real lines inside the workspace."""

    item: str
    path: str | None = None
    start: int | None = None
    end: int | None = None
    grounded: bool = False
    reason: str = ""


def parse_evidence(item: str) -> tuple[str, int, int] | None:
    """Split ``path:line`` / ``path:start-end`` into its parts, or None if malformed."""
    match = EVIDENCE_RE.match(item.strip())
    if match is None:
        return None
    start = int(match["start"])
    end = int(match["end"]) if match["end"] else start
    return match["path"].strip(), start, end


def _line_count(path: Path) -> int:
    try:
        with path.open("rb") as fh:
            data = fh.read(32 * 1024 * 1024)
    except OSError:  # unreadable: no line can be shown to exist
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def ground_evidence(items: list[str], root: Path) -> list[EvidenceCheck]:
    """Check each evidence item against the workspace: inside it, a regular file, lines in range."""
    root = root.resolve()
    checks: list[EvidenceCheck] = []
    for item in items:
        parsed = parse_evidence(item)
        if parsed is None:
            checks.append(EvidenceCheck(item=item, reason="malformed"))
            continue
        rel, start, end = parsed
        check = EvidenceCheck(item=item, path=rel, start=start, end=end)
        try:
            candidate = (root / rel).resolve() if not os.path.isabs(rel) else Path(rel).resolve()
        except (ValueError, RuntimeError, OSError):  # a NUL byte, a symlink loop: not a real location
            check.reason = "not a valid path"
            checks.append(check)
            continue
        if not candidate.is_relative_to(root):
            check.reason = "outside the workspace"
        elif is_secret_file(root, rel, candidate):  # Read's policy: never confirm a secret's lines
            check.reason = "a secret file (not readable)"
        elif not candidate.is_file():
            check.reason = "no such file"
        elif start < 1 or end < start:
            check.reason = "bad line range"
        elif end > _line_count(candidate):
            check.reason = "line beyond end of file"
        else:
            check.grounded = True
        checks.append(check)
    return checks


def grounded_ratio(checks: list[EvidenceCheck]) -> float | None:
    """Share of grounded items; None when there is no evidence at all."""
    if not checks:
        return None
    return sum(c.grounded for c in checks) / len(checks)
