"""What a run returns: a child's ``SubagentResult``; a main agent's ``MainRunResult`` (the loop outcome
over its attempts, children, costs, verdicts); their base ``RunResult``; and the cost of usage."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from subagent_lab.config.profiles import ModelConfig
from subagent_lab.core.budget import Prices
from subagent_lab.core.loop import LoopOutcome
from subagent_lab.core.model import same_model
from subagent_lab.core.types import ModelChoice, Usage

Verdict = Literal["PASS", "FAIL", "PARTIAL", "UNVERIFIED"]
ACCEPTED_VERDICTS = frozenset({"PASS"})
"""Verification verdicts that let a final answer stand (UNVERIFIED only with ``accept_unverified``)."""


def gate_passes(verdict: Verdict, *, accept_unverified: bool = False) -> bool:
    """Whether the completion gate accepts ``verdict``: PASS, or UNVERIFIED when the profile allows."""
    return verdict in ACCEPTED_VERDICTS or (accept_unverified and verdict == "UNVERIFIED")


class ChildRecord(BaseModel):
    """One child of a main-agent run, for the usage roll-up."""

    run_id: str
    profile: str
    via: Literal["task", "verification"]
    status: str
    terminal_reason: str
    model_used: str
    model_id: str
    usage: Usage
    cost_usd: float
    result: dict[str, Any] | None = None
    trace_path: str


class VerificationRecord(BaseModel):
    """One verdict of the completion gate."""

    attempt: int
    verdict: Verdict
    reasons: list[str] = Field(default_factory=list)
    child_run_id: str
    child_status: str
    child_terminal_reason: str | None = None
    """How the verification child ended; only ``completed`` makes its verdict count."""
    child_verdict: str | None = None
    """What the child said, even when it did not count (then ``verdict`` is UNVERIFIED)."""


class RunResult(LoopOutcome):
    """One run of any agent: the loop's outcome plus who ran it, with which model, at what cost,
    and where its trace is. A child's run is a ``SubagentResult``; a main agent's, which adds its
    children, a ``MainRunResult``."""

    run_id: str
    session_id: str
    profile: str
    model_used: str
    model_id: str
    fallback: bool = False
    cost_usd: float = 0.0
    trace_path: str
    trace_error: str | None = None
    """Why the trace is missing or incomplete; None when every event was written."""


class SubagentResult(RunResult):
    """Everything about one child run (``RunResult``), with the model it asked for and how it was
    sampled. ``launch`` returns this for every runtime outcome.
    """

    model_choice: ModelChoice
    model_used: ModelChoice
    seed: int | None = None
    """The sampling seed every model call of the run was sent with."""
    temperature: float = 0.0
    """The sampling temperature every model call of the run was sent with."""
    rerun_of: str | None = None
    """Trace of the run this one re-ran; None for a fresh run."""
    policies: list[str] = Field(default_factory=list)
    """The scaffold's policies the run ran with, in precedence order (``core.policy.policy_names``)."""
    aids_grammar: list[str] = Field(default_factory=list)
    """Aids only a grammar enforces that the endpoint held by its grammar (``LabConfig.grammar_aids``)."""
    aids_checked: list[str] = Field(default_factory=list)
    """The same aids run as checks with a repair message: the endpoint decodes without a grammar."""
    retrieval: list[str] = Field(default_factory=list)
    """Under a scaffold that starts from retrieval (``retrieval_start``): the harness's own
    candidates, ``path:line`` best first, what Find and Search gave before the model chose. Marked
    apart from the answer: ``contract`` is the model's, which may keep, narrow, drop or add to
    them. Empty under any other scaffold."""
    candidate_scores: dict[str, float] = Field(default_factory=dict)
    """Under a scaffold whose ``RetrievalStart`` has the model judge its pool (``rank``,
    ``rank-explore``): each judged unit's P(yes), by ``path:line``, in retrieval order. Empty
    otherwise."""

    @property
    def summary(self) -> str:
        """The text the parent's model reads."""
        if self.contract and isinstance(self.contract.get("summary"), str):
            return str(self.contract["summary"])
        if self.contract and "verdict" in self.contract:
            return f"{self.contract['verdict']}: " + "; ".join(self.contract.get("reasons", []))
        return f"Sub-agent ended without a result ({self.terminal_reason}): {self.detail[:300]}"


def served_identity(asked: str, fallback: bool, served: list[str], terminal_reason: str) -> tuple[str, bool]:
    """The run's ``model_id`` and ``fallback``: the model the endpoint reported serving when it was
    another than ``asked`` (the configured id), and whether the run went on with it. A run ended
    ``model_mismatch`` did not fall back: it stopped (``fallback`` then only says the choice itself
    fell back, e.g. light to main)."""
    other = [model for model in served if not same_model(asked, model)]
    went_on = bool(other) and terminal_reason != "model_mismatch"
    return (other[-1] if other else asked), fallback or went_on


def cost_usd(usage: Usage, model: ModelConfig) -> float:
    """What ``usage`` costs at the model's (notional) prices (finite: ``Prices.cost``)."""
    return Prices(model.price_per_mtok_input, model.price_per_mtok_output).cost(
        usage.prompt_tokens, usage.completion_tokens
    )


class MainRunResult(RunResult):
    """A main-agent run: the loop outcome (summed over its attempts) plus children, costs and places.

    ``usage`` is the parent's own; ``children_usage`` the children's; ``total_usage`` the sum.
    """

    profile: str = "main"
    task: str
    answer: str | None = None
    children: list[ChildRecord] = Field(default_factory=list)
    children_usage: Usage = Field(default_factory=Usage)
    total_usage: Usage = Field(default_factory=Usage)
    usage_by_model: dict[str, Usage] = Field(default_factory=dict)
    cost_by_model: dict[str, float] = Field(default_factory=dict)
    total_cost_usd: float = 0.0
    verifications: list[VerificationRecord] = Field(default_factory=list)
    verdict: str | None = None
    """The last verification verdict; None when the gate is off or never ran."""
    target: str
    workspace: str
    scratch_path: str | None = None
    changed_files: list[str] = Field(default_factory=list)
    """Workspace files that differ from the target (scratch runs only)."""
    scratch_notes: list[str] = Field(default_factory=list)
    """What the scratch copy left out or rewrote, and why (FIFOs, secrets, links leading out)."""
    bash_sandbox: str = ""
    """How Bash ran: ``bwrap``, ``disabled: <why>`` or ``none: unsandboxed (...)``."""


def child_record(result: SubagentResult, via: Literal["task", "verification"]) -> ChildRecord:
    """The roll-up entry of one child."""
    return ChildRecord(
        run_id=result.run_id,
        profile=result.profile,
        via=via,
        status=result.status,
        terminal_reason=result.terminal_reason,
        model_used=result.model_used,
        model_id=result.model_id,
        usage=result.usage,
        cost_usd=result.cost_usd,
        result=result.contract,
        trace_path=result.trace_path,
    )


def roll_up(
    parent_model: str, parent_usage: Usage, parent_cost: float, children: list[ChildRecord]
) -> dict[str, Any]:
    """Usage and cost of the parent, of the children, their sums, and both per model used."""
    usage_by_model: dict[str, Usage] = {parent_model: parent_usage}
    cost_by_model: dict[str, float] = {parent_model: parent_cost}
    for child in children:
        usage_by_model[child.model_used] = usage_by_model.get(child.model_used, Usage()) + child.usage
        cost_by_model[child.model_used] = cost_by_model.get(child.model_used, 0.0) + child.cost_usd
    children_usage = sum((c.usage for c in children), Usage())
    return dict(
        cost_usd=parent_cost,
        children_usage=children_usage,
        total_usage=parent_usage + children_usage,
        usage_by_model=usage_by_model,
        cost_by_model=cost_by_model,
        total_cost_usd=parent_cost + sum(c.cost_usd for c in children),
    )


def unwrap_answer(text: str) -> str:
    """The answer text: ``{"answer": "..."}`` (how JSON-protocol models must answer) is unwrapped."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict) and set(data) == {"answer"} and isinstance(data["answer"], str):
        return data["answer"].strip()
    return text
