"""Before the final answer, one yes/no question: does the code the tools showed hold what the task
looks for? "no" makes the answer cite nothing and say so (an absent task's right answer).

Small models cite what they saw whether or not it answers the task; asked this on its own, with a
yes/no grammar, the 1.5B model can say the thing is absent, and the answer's grammar follows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from subagent_lab.core.evidence import constrain_evidence
from subagent_lab.core.policy import Policy, RunView
from subagent_lab.core.prompts import ABSENT_PROMPT, CHECK_PROMPT

CHECK_TASK_CHARS = 600
CHECK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"found": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["found"],
    "additionalProperties": False,
}


@dataclass
class AbsenceCheck(Policy):
    """A yes/no check before the answer; ordered after ``CiteFromSeen``, whose listing and choices
    it replaces (and whose ``constrain`` says whether "no" empties the evidence)."""

    empty_evidence: bool = True
    """On "no", the grammar allows no evidence item (with ``CiteFromSeen.constrain``)."""
    name = "absence_check"
    needs_contract = True
    shared: ClassVar[dict[str, str]] = {"empty_evidence": "CiteFromSeen.constrain"}
    _absent: bool = field(default=False, init=False)

    def before_final(self, run: RunView) -> None:
        if not run.contract or not run.executed():  # a run that searched nothing has nothing to judge
            return
        run.add_prompt("check", CHECK_PROMPT.format(task=run.task_message[:CHECK_TASK_CHARS]))
        # Greedy: sampled, the one-token verdict follows the request's seed, which a sweep repeat shares
        # across its tasks; at temperature 0.3 one seed made main answer "no" on all six smoke tasks.
        text = run.ask("check", CHECK_SCHEMA, 12)
        self._absent = '"no"' in text.replace(" ", "")

    def final_prompt(self, run: RunView, lead: str, prompt: str) -> str:
        return lead + ABSENT_PROMPT if self._absent else prompt

    def answer_schema(self, run: RunView, schema: dict[str, Any]) -> dict[str, Any]:
        return constrain_evidence(schema, []) if self._absent and self.empty_evidence else schema
