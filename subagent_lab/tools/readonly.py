"""The read-only tool set a sub-agent gets: Read, Grep and Glob over a ``Workspace``."""

from __future__ import annotations

from collections.abc import Iterable

from subagent_lab.tools.base import Tool
from subagent_lab.tools.glob import glob
from subagent_lab.tools.grep import grep
from subagent_lab.tools.read import read

READ = Tool("Read", read)
GREP = Tool("Grep", grep)
GLOB = Tool("Glob", glob)

READONLY_TOOLS: dict[str, Tool] = {tool.name: tool for tool in (READ, GREP, GLOB)}
"""Every read-only tool by name."""


def build_tools(names: Iterable[str]) -> dict[str, Tool]:
    """The named read-only tools, in the order given; ValueError for an unknown name."""
    tools: dict[str, Tool] = {}
    for name in names:
        if name not in READONLY_TOOLS:
            known = ", ".join(sorted(READONLY_TOOLS))
            raise ValueError(f"unknown tool {name!r}; known read-only tools: {known}")
        tools[name] = READONLY_TOOLS[name]
    return tools
