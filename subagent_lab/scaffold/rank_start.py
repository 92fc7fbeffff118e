"""The model scores the retrieval's candidates instead of rewriting them (issue 49): ``RankStart``
is ``RetrievalStart`` whose pool (the retrieval's best ``pool`` units) the model judges one at a
time, a one-token yes/no read as P(yes) (``core.judge``), fused with the retrieval's rank; the
fused best ``k`` are the candidates. With ``answer`` the harness cites them and the model makes no
action call (the ``rank`` preset); without it the ReAct loop goes on from them (``rank-explore``).

A policy of its own, not parameters of ``RetrievalStart``, so the shipped ``retrieval-start``
preset keeps its scaffold hash. docs/design.md, "Scoring candidates"; the rules that choose
``pool`` and ``mix``: docs/evaluation.md §7.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from subagent_lab.core.contracts import contract_schema
from subagent_lab.core.judge import fused_order
from subagent_lab.core.policy import FINISH, HARNESS_CALL, ActionMenu, RunView
from subagent_lab.core.types import ToolCall
from subagent_lab.scaffold.rank_judge import judge_messages, unit_view, written_answer
from subagent_lab.scaffold.retrieval_start import RetrievalStart
from subagent_lab.tools.symbols.index import module_name
from subagent_lab.tools.symbols.query import request_of
from subagent_lab.tools.symbols.retrieve import RetrievedUnit


@dataclass
class RankStart(RetrievalStart):
    """``RetrievalStart`` whose pool the model judges; the fused best ``k`` are the candidates."""

    pool: Annotated[int, Field(ge=1, le=40)] = 10
    """Units of the retrieval the model judges, one yes/no call each (10: docs/evaluation.md §7,
    the rule applied to ``benchmarks/bench_pool.py`` on mined dev)."""
    mix: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5
    """The fusion rule's weight of P(yes): ``mix · P(yes) + (1 − mix) / rank`` (``core.judge``);
    provisional until dev runs choose it (docs/evaluation.md §7)."""
    answer: bool = False
    """The harness writes the answer from the fused best ``k`` and the model makes no action call."""
    name = "rank_start"

    def pool_size(self) -> int:
        return self.pool

    def reranked(self, run: RunView, shown: int) -> list[RetrievedUnit]:
        """The pool judged one unit at a time, re-ranked by the fusion rule (ties: the retrieval's
        order). The best ``k`` that Find and Search did not list are looked up by their full names
        (a harness Find each), so what the answer cites was shown."""
        request = request_of(run.task)
        units = {unit.item: unit for unit in self._candidates[: self.pool]}
        judged = [
            (item, rank, run.judge(judge_messages(request, unit_view(run.workspace_root, unit)), item, rank))
            for rank, (item, unit) in enumerate(units.items(), start=1)
        ]
        # Units past the pool (k > pool) keep their retrieval order after the judged ones.
        order = [units[item] for item in fused_order(judged, self.mix)] + self._candidates[self.pool :]
        listed = {u.item for u in self._candidates[:shown]}
        unseen = [u for u in order[: self.k] if u.item not in listed]
        run.call_tools([
            ToolCall(id=f"{HARNESS_CALL}pick-{n}", name="Find",
                     arguments={"name": f"{module_name(u.rel)}.{u.unit.qualname}"})
            for n, u in enumerate(unseen)
        ])  # fmt: skip
        return order

    def narrow(self, run: RunView, menu: ActionMenu) -> None:
        if self.answer and self._candidates:  # the harness answers: no action to choose
            menu.allowed = [FINISH]

    def write_answer(self, run: RunView) -> dict[str, Any] | None:
        if not self.answer or not self._candidates or run.contract is None:
            return None
        return written_answer(self.answer_schema(run, contract_schema(run.contract)), self._candidates)
