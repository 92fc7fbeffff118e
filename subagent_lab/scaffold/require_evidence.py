"""Evidence no file holds, or no tool showed, sends the answer back for a repair."""

from __future__ import annotations

from dataclasses import dataclass

from subagent_lab.core.policy import AnswerCheck, Policy, RunView


@dataclass
class RequireEvidence(Policy):
    """Ungrounded (``grounded``) or unseen (``seen``) evidence triggers a contract repair."""

    grounded: bool = False
    seen: bool = False
    name = "require_evidence"

    def check_answer(self, run: RunView, check: AnswerCheck) -> list[str]:
        errors = []
        if check.ungrounded and self.grounded:
            errors.append(
                f"evidence not found in the workspace: {check.ungrounded}; cite only lines you have seen"
            )
        if check.unseen and self.seen:
            errors.append(
                f"evidence no tool showed you: {check.unseen}; cite only lines a tool result showed"
            )
        return errors
