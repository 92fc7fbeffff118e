"""Verification of a main agent's final answer, as the loop's review hook (``Verifier``): the claim
given to the ``verification`` child, the gate's record of its verdict, and the feedback a rejected
answer gets.

Only a verdict of a verification child that ended ``completed`` (no grace turn) counts; anything
else is UNVERIFIED. The child runs in a grant of the parent's own budget scope that counts against
the children's cap too: both count it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from subagent_lab.agents.launcher import SubagentRequest
from subagent_lab.agents.result import (
    SubagentResult,
    Verdict,
    VerificationRecord,
    gate_passes,
    unwrap_answer,
)
from subagent_lab.agents.task_tool import TaskContext
from subagent_lab.core.budget import BudgetNode
from subagent_lab.core.loop import LoopOutcome, Review
from subagent_lab.core.tool import ToolError


@dataclass
class Verifier:
    """The main agent's review hook (``LoopDeps.review``): each accepted answer goes to a
    verification child; a FAIL or PARTIAL verdict sends it back (``feedback``) while retries are
    left. UNVERIFIED names nothing the parent could fix, so it ends the run like a pass would
    (and the gate then decides whether the answer stands)."""

    task: TaskContext
    task_text: str
    max_retries: int
    accept_unverified: bool = False
    checks: list[tuple[VerificationRecord, SubagentResult | None]] = field(default_factory=list)
    """Every check so far: the gate's record and the verification child (None: not started)."""
    answer: str | None = None
    """The last answer checked."""

    def __call__(self, attempt: LoopOutcome, budget: BudgetNode) -> Review:
        self.answer = unwrap_answer(str((attempt.contract or {}).get("answer", "")))
        record, child = check_claim(self.task, self.task_text, self.answer, len(self.checks) + 1, budget)
        self.checks.append((record, child))
        retries_left = self.max_retries - (len(self.checks) - 1)
        if self.passes(record) or record.verdict == "UNVERIFIED" or retries_left <= 0:
            return Review(feedback=None)
        text = feedback(record, child, len(self.checks), self.max_retries)
        return Review(feedback=text, purpose="verification")

    def passes(self, record: VerificationRecord) -> bool:
        """Whether the gate lets the answer stand on this verdict."""
        return gate_passes(record.verdict, accept_unverified=self.accept_unverified)


def check_claim(
    task: TaskContext, task_text: str, answer: str, attempt: int, budget: BudgetNode
) -> tuple[VerificationRecord, SubagentResult | None]:
    """Launch the verification child on the claim in a grant of the parent's own scope
    (``budget``) that counts against the children's cap too; UNVERIFIED when either leaves too
    little (the refusal names which).

    Its verdict counts only when the child ended ``completed``: a child that hit a limit and
    answered in its grace turn (or gave no verdict at all) is UNVERIFIED, whatever it said.
    """
    claim = (
        "Check whether the main agent's claim below is true of the workspace.\n\n"
        f"The task the main agent was given:\n{task_text.strip()}\n\n"
        f"The main agent's final answer (the claim to check):\n{answer.strip() or '(empty)'}\n\n"
        "Answer PASS only if the files show that the claim holds; FAIL with reasons otherwise."
    )
    request = SubagentRequest(task=claim, profile="verification")
    try:
        child = task.launch_capped(request, task=False, within=budget)
    except ToolError as exc:
        why = f"no verification child was started: {exc}"
        return VerificationRecord(attempt=attempt, verdict="UNVERIFIED", reasons=[why], child_run_id="",
                                  child_status="not_started"), None  # fmt: skip
    return verdict_record(child, attempt), child


def verdict_record(child: SubagentResult, attempt: int) -> VerificationRecord:
    """The gate's record of a verification child: its verdict, which counts only when it ended
    ``completed`` without a grace turn."""
    contract = child.contract or {}
    given = contract.get("verdict")
    finished = child.terminal_reason == "completed" and not child.grace_used
    verdict: Verdict = given if finished and given in ("PASS", "FAIL", "PARTIAL") else "UNVERIFIED"
    reasons = [str(r) for r in contract.get("reasons") or []]
    if not child.contract:
        reasons = [child.summary]
    elif not finished:
        reasons.insert(
            0,
            f"the verification child ended {child.terminal_reason}; its verdict {given!r} was given "
            "in a grace turn after a limit and does not count",
        )
    record = VerificationRecord(
        attempt=attempt,
        verdict=verdict,
        reasons=reasons,
        child_run_id=child.run_id,
        child_status=child.status,
        child_terminal_reason=child.terminal_reason,
        child_verdict=given if isinstance(given, str) else None,
    )
    return record


FEEDBACK_FINDINGS = 5
"""The most of a verdict's findings the feedback repeats."""
FEEDBACK_EVIDENCE = 8
"""The most of a verdict's evidence locations the feedback repeats."""


def feedback(record: VerificationRecord, child: SubagentResult | None, retry: int, max_retries: int) -> str:
    """What a rejected answer is sent back with: the verdict's reasons, and what the verification
    child found and where (its findings and ``path:line`` evidence), which point at the code even
    when the verdict gives no reason."""
    contract = (child.contract if child is not None else None) or {}
    findings = [str(f) for f in contract.get("findings") or []][:FEEDBACK_FINDINGS]
    evidence = [str(e) for e in contract.get("evidence") or []][:FEEDBACK_EVIDENCE]
    lines = [
        "A verification sub-agent checked your final answer against the workspace and did not accept "
        f"it (verdict {record.verdict}). Reasons:",
        *(f"- {r}" for r in record.reasons or ["(no reasons given)"]),
    ]
    if findings:
        lines += ["What it found:", *(f"- {f}" for f in findings)]
    if evidence:
        lines.append(f"Its evidence: {', '.join(evidence)}")
    lines.append(
        "Fix what is wrong using your tools, then give your final answer again "
        f"(verification retry {retry} of {max_retries})."
    )
    return "\n".join(lines)
