"""Verification of a main agent's final answer: the claim given to the ``verification`` child, the
gate's record of its verdict, and the feedback a rejected answer gets.

Only a verdict of a verification child that ended ``completed`` (no grace turn) counts; anything
else is UNVERIFIED. The child runs under the children's cap and within what is left of the
parent's total budget: both count it.
"""

from __future__ import annotations

from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.agents.result import SubagentResult, Verdict, VerificationRecord
from subagent_lab.agents.task_tool import MIN_CHILD_TOKENS, TaskContext
from subagent_lab.core.tool import ToolError


def check_claim(
    launcher: SubagentLauncher, task: TaskContext, task_text: str, answer: str, attempt: int, tokens_left: int
) -> tuple[VerificationRecord, SubagentResult | None]:
    """Launch the verification child on the claim, under the children's cap and within what is
    left of the parent's total budget (both count it); UNVERIFIED when neither leaves enough.

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
    budget = launcher.resolve_profile(request).total_token_budget
    try:
        if tokens_left < MIN_CHILD_TOKENS:
            raise ToolError(f"the main agent's total_token_budget leaves {max(tokens_left, 0)} tokens")
        if tokens_left < budget:
            request.overrides = {"total_token_budget": tokens_left, "context_token_budget": tokens_left}
        child = task.launch_capped(request, task=False)
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


def checked_tokens(checks: list[tuple[VerificationRecord, SubagentResult | None]]) -> int:
    """Tokens the verification children spent so far."""
    return sum(child.usage.total_tokens for _, child in checks if child is not None)


def feedback(record: VerificationRecord, retry: int, max_retries: int) -> str:
    reasons = "\n".join(f"- {r}" for r in record.reasons or ["(no reasons given)"])
    return (
        "A verification sub-agent checked your final answer against the workspace and did not accept "
        f"it (verdict {record.verdict}). Reasons:\n{reasons}\nFix what is wrong using your tools, then "
        f"give your final answer again (verification retry {retry} of {max_retries})."
    )
