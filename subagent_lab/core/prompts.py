"""Every text the harness itself writes into a model's conversation, in one registry.

The loop's own prompts (grace, retry, repair, off-menu), the contracts' final prompts and the
scaffold policies' prompts live here and nowhere else: the modules that send them import them, and
the scorer's harness wording (``bench.wording.harness_prompts``) reads ``harness_prompts`` below, so
moving a prompt between the loop and a policy cannot drop it from the wording
(``tests/test_prompts.py`` fails on a ``*PROMPT*`` constant defined anywhere else).
"""

from __future__ import annotations

GRACE_PROMPT = (
    "You have reached a limit ({why}). You cannot call tools any more. Give your final answer now, "
    "reporting everything you found so far; say in it whether you finished."
)

RETRY_PROMPT = (
    "[Your last reply was not one complete action ({why}). Reply with one short action: a brief "
    "thought and one tool call, or finish.]"
)

REPAIR_PROMPT = "Your final answer was rejected:\n{errors}\nReply again with one corrected answer only."

OFF_MENU_PROMPT = "[That action was not run: {why}. Reply with one action that is offered.]"

FINAL_PROMPT = (
    "Now give your final answer as the JSON object described above, from what the tools showed you. "
    "In the summary and findings, name the functions, classes and files that answer the task."
)
"""The prompt that asks for the final answer under a contract (its schema is in the system prompt)."""

FINAL_PROMPT_FREE = "Now give your final answer, from what the tools showed you."
"""The same without a contract: a free-text answer."""

FINAL_PROMPTS = {
    "AnswerResult": (
        'Now give your final answer as a JSON object, from what the tools showed you: "answer" says '
        'what you found, "evidence" lists every place that shows it as path:line or path:start-end.'
    )
}
"""A contract's own final prompt where ``FINAL_PROMPT``'s field names are not its fields."""

CHECK_PROMPT = (
    'Before your final answer, one question. The task was: "{task}"\nLook at the code the tools '
    'showed you. Does it contain what the task looks for, or not? Reply {{"found": "yes"}} if it '
    'does, {{"found": "no"}} if the workspace has no such code.'
)
"""The task is restated: asked only whether the tools showed what the task asks for, a small model
says "yes" whatever the code holds (docs/design.md, ``AbsenceCheck``)."""

ABSENT_PROMPT = (
    " You found that it does not exist in the workspace: cite no evidence, and say in the summary "
    "that there is no such code."
)

NUDGE_PROMPT = (
    "You have not looked at the workspace yet. Do not guess: call a tool first (search for a name "
    "from the task), then answer from what you saw."
)

# The judge's texts (``scaffold/rank_judge.py``, issue 49) are registered here but are not harness
# wording: each judgment is a conversation of its own, never part of the one an answer is written
# in, so no answer can restate them (hence no ``PROMPT`` in their names).
JUDGE_SYSTEM = (
    "You check code search results. Given a change request and one piece of code from the code "
    "base, say whether that code is where the change would be made. Answer with one word: yes or no."
)
JUDGE_QUESTION = "Is this code where the change would be made? Answer yes or no."


def harness_prompts() -> tuple[str, ...]:
    """The registry's ``*PROMPT*`` text constants (the contracts' per-contract final prompts in
    ``FINAL_PROMPTS`` are not among them, as before the registry)."""
    return tuple(
        value
        for key, value in globals().items()
        if "PROMPT" in key and key.isupper() and isinstance(value, str)
    )
