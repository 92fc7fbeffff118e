"""The harness's prompts live in one registry (``core.prompts``), and the scorer's harness wording
reads it: a prompt defined anywhere else could be sent to a model without being harness wording."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

from subagent_lab.bench.wording import harness_prompts
from subagent_lab.core import prompts

PACKAGE = REPO / "subagent_lab"
TASK_TEXTS = {"subagent_lab/bench/commit_text.py: PROMPT_TEMPLATE"}
"""Not the harness's words to a model but a task's own: a mined task's prompt is its request in this
template, and the task is what the model is asked."""


def _prompt_constants(path: Path) -> list[str]:
    """The module-level ``*PROMPT*`` constants ``path`` assigns (imports are not assignments)."""
    names = []
    for node in ast.parse(path.read_text()).body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        names += [t.id for t in targets if isinstance(t, ast.Name) and "PROMPT" in t.id and t.id.isupper()]
    return names


def test_every_prompt_constant_is_defined_in_the_registry_only() -> None:
    elsewhere = {
        f"{path.relative_to(REPO)}: {name}"
        for path in PACKAGE.rglob("*.py")
        if path != PACKAGE / "core" / "prompts.py"
        for name in _prompt_constants(path)
    }
    outside = sorted(elsewhere - TASK_TEXTS)
    assert not outside, f"prompt texts outside core/prompts.py: {outside}"
    assert len(_prompt_constants(PACKAGE / "core" / "prompts.py")) >= 10


def test_the_harness_wording_holds_every_registered_prompt() -> None:
    wording = harness_prompts()
    texts = prompts.harness_prompts()
    assert len(texts) == 9  # the set at 02b8914 and e57b61a: the loop's, the contracts', the policies'
    for text in texts:
        assert any(piece.strip() in " ".join(wording) for piece in text.split("{") if len(piece) > 20)
    assert prompts.GRACE_PROMPT in texts and prompts.NUDGE_PROMPT in texts and prompts.CHECK_PROMPT in texts


def test_the_judges_texts_are_registered_but_are_not_answer_wording() -> None:
    """The judge's conversation is its own: its texts live in the registry, and an answer (written
    in another conversation) is never credited or blamed for restating them."""
    from subagent_lab.scaffold import rank_judge

    [system, user] = rank_judge.judge_messages("Fix the parser", "a.py:1-2 function parse")
    assert system.content == prompts.JUDGE_SYSTEM and str(user.content).endswith(prompts.JUDGE_QUESTION)
    assert rank_judge.JUDGE_SYSTEM is prompts.JUDGE_SYSTEM  # imported, not a copy
    wording = " ".join(harness_prompts())
    assert prompts.JUDGE_QUESTION not in wording and "code search results" not in wording
