"""Flags outside, objects inside: a resolved profile's flat fields become the loop's settings and
the ordered policy tuple.

``profiles.yaml`` and sweep variants keep their flat fields (the sweep vocabulary, each documented
with its measurement); this is the one place that reads them as a scaffold, and ``ORDER`` is the
one place the precedence is written.
"""

from __future__ import annotations

from typing import Any

from subagent_lab.config.agent_profile import AgentProfile
from subagent_lab.config.profiles import SYMBOL_TOOLS, ModelConfig, RuntimeProfile
from subagent_lab.core.budget import CostAccount, Prices
from subagent_lab.core.loop_state import LoopSpec
from subagent_lab.core.policy import Policy
from subagent_lab.scaffold.absence_check import AbsenceCheck
from subagent_lab.scaffold.cite_from_seen import CiteFromSeen
from subagent_lab.scaffold.finish_when import FinishWhen
from subagent_lab.scaffold.first_search import FirstSearch
from subagent_lab.scaffold.grace import Grace
from subagent_lab.scaffold.paths_from_seen import PathsFromSeen
from subagent_lab.scaffold.read_after_hits import ReadAfterHits
from subagent_lab.scaffold.read_on import ReadOn
from subagent_lab.scaffold.repo_map import RepoMap
from subagent_lab.scaffold.require_evidence import RequireEvidence
from subagent_lab.scaffold.require_tool_first import RequireToolFirst
from subagent_lab.scaffold.retrieval_start import RetrievalStart
from subagent_lab.scaffold.skip_repeated import SkipRepeated
from subagent_lab.scaffold.task_shaping import TaskShaping
from subagent_lab.scaffold.tool_guide import ToolGuide

Profile = RuntimeProfile | AgentProfile

ORDER: tuple[type[Policy], ...] = (
    # The action menu, narrowed in this order (each sees what the one before left):
    RequireToolFirst,  # no finish before the first executed call
    PathsFromSeen,  # no Read before a file was shown; paths only from what was shown
    SkipRepeated,  # a tool that repeated sits out (unless nothing else is left)
    FinishWhen,  # only finish after stale turns or enough Reads ...
    ReadAfterHits,  # ... else only Read and finish after a search hit
    FirstSearch,  # step 0: a Grep for one of the task's names, whatever the rules above said
    ReadOn,  # a repeated Read shows the next window
    TaskShaping,  # the first message's layout line and named files
    RepoMap,  # ... then the repo map, its units counted as shown
    ToolGuide,  # ... then what the structure tools show and when to use them
    # The final answer: the listing and evidence choices first, the absence verdict over them.
    CiteFromSeen,
    RetrievalStart,  # the harness's retrieval before the first action; its candidates lead the answer
    AbsenceCheck,
    RequireEvidence,
    Grace,
)
"""The precedence, written once: the builder returns policies in this order, and the loop calls
each hook on them in tuple order."""

PARENT_FIELDS: dict[str, Any] = {
    "constrain_paths": False, "evidence_from_seen": False, "min_evidence": 0, "max_evidence": 6,
    "cite_anchors": False, "cite_margin": None, "cite_units": False, "absence_check": False,
    "finish_after_stale": 0, "finish_after_reads": 0, "read_after_hits": False, "read_on": 0,
    "first_search": 0,
    "require_seen": False, "require_grounded_evidence": False, "show_layout": False, "task_paths": False,
    "symbol_tools": False, "repo_map_tokens": 0, "tool_guide": False, "retrieval_start": 0,
}  # fmt: skip
"""The scaffold fields a parent profile does not hold: all off (its ``min_tool_calls`` and
``grace_turn`` are its own)."""
POLICY_FIELDS = frozenset({*PARENT_FIELDS, "min_tool_calls", "grace_turn"})
"""Every profile field ``policies`` (or ``tool_names``) reads."""
SPEC_RENAMED = {"max_contract_repairs": "max_repairs"}
"""A child profile's name for a ``LoopSpec`` field (a parent profile uses the LoopSpec name)."""


def loop_spec(
    profile: Profile, model: ModelConfig, *, seed: int | None = None, temperature: float | None = None
) -> LoopSpec:
    """The loop's limits, sampling and grammar caps for a child's or a parent's profile. The output
    cap falls back to the model's; ``seed`` and ``temperature`` replace the model's when given (a
    sweep's independent repeats). A parent's contract is its own (None: a free-text answer)."""
    plain = LoopSpec(max_steps=1, context_token_budget=1, total_token_budget=1, timeout_s=1, contract=None)
    if isinstance(profile, RuntimeProfile):
        own: dict[str, Any] = {
            "contract": profile.contract,
            "max_repairs": profile.max_contract_repairs,
            "max_parallel_tools": plain.max_parallel_tools,
            "thought_max_chars": profile.thought_max_chars,
        }
    else:
        own = {
            "contract": profile.contract,
            "max_repairs": profile.max_repairs,
            "max_parallel_tools": profile.max_parallel_tools,
            "thought_max_chars": plain.thought_max_chars,
        }
    return LoopSpec(
        max_steps=profile.max_steps,
        context_token_budget=profile.context_token_budget,
        total_token_budget=profile.total_token_budget,
        timeout_s=profile.timeout_s,
        max_output_tokens=profile.max_output_tokens or model.max_output_tokens,
        action_max_tokens=profile.action_max_tokens,
        max_tool_calls_per_step=profile.max_tool_calls_per_step,
        max_stale_turns=profile.max_stale_turns,
        temperature=model.temperature if temperature is None else temperature,
        seed=model.seed if seed is None else seed,
        arg_max_chars=profile.arg_max_chars,
        **own,
    )


def policies(profile: Profile) -> tuple[Policy, ...]:
    """The policies a profile's fields switch on, in ``ORDER``."""
    f = {**PARENT_FIELDS, **profile.model_dump()}
    contract = isinstance(profile, RuntimeProfile) and bool(profile.contract)
    chosen: list[Policy | None] = [
        RequireToolFirst(f["min_tool_calls"]) if f["min_tool_calls"] else None,
        PathsFromSeen() if f["constrain_paths"] else None,
        SkipRepeated(),
        FinishWhen(f["finish_after_stale"], f["finish_after_reads"])
        if f["finish_after_stale"] or f["finish_after_reads"]
        else None,
        ReadAfterHits() if f["read_after_hits"] else None,
        FirstSearch(f["first_search"]) if f["first_search"] else None,
        ReadOn(f["read_on"]) if f["read_on"] else None,
        TaskShaping(f["show_layout"], f["task_paths"]) if f["show_layout"] or f["task_paths"] else None,
        RepoMap(f["repo_map_tokens"]) if f["repo_map_tokens"] else None,
        ToolGuide() if f["tool_guide"] else None,
        CiteFromSeen(
            f["evidence_from_seen"],
            f["cite_anchors"],
            f["cite_margin"],
            f["min_evidence"],
            f["max_evidence"],
            f["cite_units"],
        )
        if contract
        else None,
        RetrievalStart(f["retrieval_start"], f["evidence_from_seen"], f["min_evidence"], f["max_evidence"])
        if f["retrieval_start"] and contract
        else None,
        AbsenceCheck(f["evidence_from_seen"]) if f["absence_check"] and contract else None,
        RequireEvidence(f["require_grounded_evidence"], f["require_seen"])
        if f["require_grounded_evidence"] or f["require_seen"]
        else None,
        Grace() if f["grace_turn"] else None,
    ]
    built = tuple(p for p in chosen if p is not None)
    assert [type(p) for p in built] == sorted((type(p) for p in built), key=ORDER.index)
    return built


def cost_account(profile: Profile, model: ModelConfig) -> CostAccount | None:
    """The run's cost cap at its model's prices (``LoopDeps.cost``); None without one."""
    if profile.cost_budget_usd is None:
        return None
    prices = Prices(model.price_per_mtok_input, model.price_per_mtok_output)
    return CostAccount(profile.cost_budget_usd, prices)


def tool_names(profile: RuntimeProfile) -> tuple[str, ...]:
    """The tools a child gets, in order: its profile's ``tools``, then with ``symbol_tools`` the
    symbol tools it does not list already."""
    extra = SYMBOL_TOOLS if profile.symbol_tools else ()
    return tuple(dict.fromkeys((*profile.tools, *extra)))


def build(
    profile: Profile, model: ModelConfig, *, seed: int | None = None, temperature: float | None = None
) -> tuple[LoopSpec, tuple[Policy, ...]]:
    """The loop's settings and the ordered policy tuple a resolved profile implies."""
    return loop_spec(profile, model, seed=seed, temperature=temperature), policies(profile)
