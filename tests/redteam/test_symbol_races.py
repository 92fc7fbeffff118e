"""Issue 39: the symbol index and the tools on it (Find, Refs, Outline, Search) never show a host
file, whatever is swapped while they read.

A concurrent swapper replaces one level of ``a/b/c/f.py`` (the directory ``a``, ``a/b``,
``a/b/c``, or the file itself) with a symlink to the same place in a host tree, and back, in a
loop, while the index is rebuilt from nothing (its cache cleared before every call) and each tool
runs. The host files define the same function, with a canary in its docstring and body, and a
function named after the canary: neither may appear in the index or in any observation.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from redteam.swapping import race
from subagent_lab.core.tool import ToolError
from subagent_lab.tools.symbols import index as symbol_index
from subagent_lab.tools.symbols.tools import find, outline, refs, search
from subagent_lab.workspace.sandbox import Workspace

CANARY = "HOST_CANARY_39s"
LEVELS = ("a", "a/b", "a/b/c", "a/b/c/f.py")
CALLS = 40
"""Calls per tool and level, racing the swapper."""
RACE_S = 20.0
"""How long a race goes on past CALLS calls, waiting for one answer from inside the workspace."""

INSIDE = 'def inside():\n    """Inside the workspace."""\n    return 2\n\n\nvalue = inside()\n'
HOST = (
    f'def inside():\n    """{CANARY} docstring."""\n    return {CANARY}()\n\n\n'
    f"def {CANARY}():\n    return 1\n\n\nvalue = inside()  # {CANARY}\n"
)


def _tree(root: Path, text: str) -> None:
    (root / "a" / "b" / "c").mkdir(parents=True)
    for level in ("a", "a/b", "a/b/c"):
        (root / level / "f.py").write_text(text)


@pytest.fixture
def scene(tmp_path: Path) -> tuple[Path, Path]:
    root, host = tmp_path / "ws", tmp_path / "host"
    _tree(root, INSIDE)
    _tree(host, HOST)
    (host / "a" / "b" / "c" / f"{CANARY}.py").write_text(HOST)  # a file only the host tree has
    return root, host


def _index(ws: Workspace) -> str:
    index = symbol_index.index_for(ws)
    return (
        "\n".join(f"{rel}: {d.qualname} {d.signature} {d.doc}" for rel, d in index.units())
        + "\n"
        + " ".join(sorted(index.by_name))
    )


TOOLS: dict[str, Callable[[Workspace], object]] = {
    "index": _index,
    "find": lambda ws: find(ws, "inside"),
    "refs": lambda ws: refs(ws, "inside"),
    "outline file": lambda ws: outline(ws, "a/b/c/f.py"),
    "outline dir": lambda ws: outline(ws, "a"),
    "search": lambda ws: search(ws, "inside docstring"),
}


def _text(ws: Workspace, tool: str) -> str:
    symbol_index.clear_cache()  # every call reads every file afresh
    try:
        return str(TOOLS[tool](ws))
    except ToolError as exc:  # denials and "changed while it was resolved" are observations
        return f"Error: {exc}"


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_the_canary_never_appears(scene: tuple[Path, Path], tool: str, level: str) -> None:
    root, host = scene
    ws = Workspace(root)
    # an answer about the workspace's files, not a refusal
    inside = race(
        root, host, level, lambda: _text(ws, tool), CANARY, lambda t: "f.py" in t, calls=CALLS, race_s=RACE_S
    )
    assert inside > 0  # the race did not only ever refuse


def test_the_tools_show_the_inside_files_without_a_race(scene: tuple[Path, Path]) -> None:
    """The check above can fail: without a swapper every tool shows the workspace's own code."""
    root, _ = scene
    ws = Workspace(root)
    for tool in TOOLS:
        text = _text(ws, tool)
        assert "f.py" in text and "inside" in text, (tool, text)
