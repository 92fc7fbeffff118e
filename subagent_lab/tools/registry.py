"""The read-only tool sets a sub-agent gets: Read, Grep and Glob over a ``Workspace``.

Two interfaces share one implementation of every safety check:

* ``simple`` (the child's default, ``tools/simple.py``): Grep takes a pattern and a path, Read a
  path and a line, Glob a pattern and a path; observations are sized by ``ObservationLimits``
  and end with a ``Next:`` line.
* ``full`` (``READONLY_TOOLS``; the main agent's Grep and Glob): every option of the tools
  (regex, globs, context, start/limit, result counts).

Both return ``Span``s with each observation (``ToolOutcome.spans``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from subagent_lab.core.tool import Tool
from subagent_lab.tools.glob import glob
from subagent_lab.tools.grep import grep
from subagent_lab.tools.read import read_observed
from subagent_lab.tools.simple import ObservationLimits, simple_glob, simple_grep, simple_read
from subagent_lab.tools.symbols.tools import symbol_tools

Interface = Literal["simple", "full"]
"""Which tool interface a child gets: see the module docstring."""

READ = Tool("Read", read_observed)
GREP = Tool("Grep", grep)
GLOB = Tool("Glob", glob)

READONLY_TOOLS: dict[str, Tool] = {tool.name: tool for tool in (READ, GREP, GLOB)}
"""Every read-only tool of the full interface, by name."""


def simple_tools(limits: ObservationLimits | None = None) -> dict[str, Tool]:
    """Every read-only tool of the small-model interface, by name, sized by ``limits``."""
    limits = limits or ObservationLimits()
    return {
        "Read": Tool(
            "Read", simple_read, bound={"window": limits.read_window, "outline": limits.read_outline}
        ),
        "Grep": Tool("Grep", simple_grep, bound={"max_matches": limits.grep_max_matches}),
        "Glob": Tool("Glob", simple_glob, bound={"max_results": limits.glob_max_results}),
    }


def build_tools(
    names: Iterable[str], interface: Interface = "simple", limits: ObservationLimits | None = None
) -> dict[str, Tool]:
    """The named read-only tools of ``interface``, in the order given; ValueError for an unknown name.

    ``limits`` sizes the simple interface's observations (default ``ObservationLimits()``); the
    full interface has its own caps and ignores it.
    """
    if interface == "simple":
        # Find, Refs, Outline and Search (tools/symbols) join only when a profile names them.
        available = {**simple_tools(limits), **symbol_tools()}
    elif interface == "full":
        available = READONLY_TOOLS
    else:
        raise ValueError(f"unknown tool interface {interface!r}; known: simple, full")
    tools: dict[str, Tool] = {}
    for name in names:
        if name not in available:
            known = ", ".join(sorted(available))
            raise ValueError(f"unknown tool {name!r}; known read-only tools: {known}")
        tools[name] = available[name]
    return tools
