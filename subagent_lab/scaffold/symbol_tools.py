"""The child also holds the symbol index's tools: Find, Refs, Outline and Search."""

from __future__ import annotations

from dataclasses import dataclass

from subagent_lab.core.policy import Policy
from subagent_lab.tools.symbols import SYMBOL_TOOLS


@dataclass
class SymbolTools(Policy):
    """Find, Refs, Outline and Search after the profile's own tools (the simple interface only): a
    preset names the tool set this way, which a profile's ``tools`` list cannot."""

    name = "symbol_tools"
    adds_tools = SYMBOL_TOOLS
