"""A guide to the code-structure tools at the end of the child's first message.

The explore prompt says how to work with Grep and Read ("Search first: Grep for one distinctive
word"), whatever tools the child holds. Given Find, Refs, Outline and Search as well, a model
follows the prompt: it opens with Grep and leaves the structure tools unused (docs/benchmarks.md,
"Symbol tools and a repo map"). This policy says, for the structure tools the run holds, what each
shows (the first sentence of the tool's own description) and when to use it instead of Grep; it
names nothing of a task.
"""

from __future__ import annotations

from dataclasses import dataclass

from subagent_lab.core.policy import Policy, RunContext, TaskShape
from subagent_lab.tools.symbols.tools import symbol_tools

GUIDE_HEAD = "Code-structure tools (they know definitions and uses, not only text):"
GUIDE_TAIL = (
    "Start with Find when the task names a function, class, method or constant, or with Search in "
    "the task's own words; follow a call into the next file with Refs or Find. Grep is for text "
    "that is not a name."
)
"""The guide's first and last lines (harness wording, like the prompt)."""


def tool_lines(held: tuple[str, ...]) -> list[str]:
    """One line per structure tool the run holds, in ``held`` order: its name and the first
    sentence of its description."""
    tools = symbol_tools()
    lines = []
    for name in held:
        if name in tools:
            first = " ".join(tools[name].description.split()).split("; ")[0].rstrip(".")
            lines.append(f"- {name}: {first}.")
    return lines


@dataclass
class ToolGuide(Policy):
    """The guide, when the run holds at least one structure tool."""

    name = "tool_guide"

    def shape_task(self, ctx: RunContext, shape: TaskShape) -> None:
        lines = tool_lines(ctx.tools)
        if lines:
            shape.sections.append("\n".join([GUIDE_HEAD, *lines, GUIDE_TAIL]))
