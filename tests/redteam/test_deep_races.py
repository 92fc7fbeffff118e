"""Issue 39: every read goes through what was checked, at every level of a path.

A concurrent swapper replaces one directory of ``a/b/c/f.py`` (``a``, ``a/b`` or ``a/b/c``) with
a symlink to a host directory of the same shape whose files hold a canary, and back, in a loop,
while Grep (a directory search, the default ``.``), Glob, Read and the citable-lines listing run.
On ``c66a494`` ripgrep walked below the top directory by name: a swapped subdirectory made Grep
show the host file; the listing reopened cited files by name. The canary must never appear.
A FIFO swapped in where a cited file was must not block the listing.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from redteam.swapping import race
from subagent_lab.core.tool import ToolError
from subagent_lab.scaffold.ranking import line_texts
from subagent_lab.tools.glob import find_paths
from subagent_lab.tools.read import read
from subagent_lab.tools.rg.search import search
from subagent_lab.workspace.sandbox import Workspace

CANARY = "HOST-CANARY-39c1"
LEVELS = ("a", "a/b", "a/b/c")
CALLS = 40
"""Calls per tool and level, racing the swapper."""
RACE_S = 20.0
"""How long a race goes on past CALLS calls, waiting for one answer from inside the workspace."""


def _tree(root: Path, text: str, name: str = "f.py") -> None:
    (root / "a" / "b" / "c").mkdir(parents=True)
    for level in ("a", "a/b", "a/b/c"):
        (root / level / name).write_text(f"{text} = 1\nvalue = 2\n")


@pytest.fixture
def scene(tmp_path: Path) -> tuple[Path, Path]:
    root, host = tmp_path / "ws", tmp_path / "host"
    _tree(root, "inside")
    _tree(host, CANARY)
    (host / "a" / "b" / "c" / f"{CANARY}.py").write_text("x = 1\n")  # a name Glob would list
    return root, host


def _text(call: Callable[[], object]) -> str:
    try:
        return str(call())
    except ToolError as exc:  # denials and "changed while it was resolved" are observations
        return f"Error: {exc}"


def _grep(ws: Workspace) -> str:
    run = search(ws, ["= 1"], ".")
    return "\n".join(f"{h.path}:{h.line}: {h.text}" for h in run.hits)


def _glob(ws: Workspace) -> str:
    return "\n".join(find_paths(ws, "**/*").paths)


def _listing(root: Path) -> str:
    return repr(line_texts([f"{lv}/f.py:1" for lv in LEVELS], root))


TOOLS: dict[str, Callable[[Path, Workspace, str], str]] = {
    "grep": lambda root, ws, level: _grep(ws),
    "glob": lambda root, ws, level: _glob(ws),
    "read": lambda root, ws, level: read(ws, "a/b/c/f.py"),
    "listing": lambda root, ws, level: _listing(root),
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_the_canary_never_appears(scene: tuple[Path, Path], tool: str, level: str) -> None:
    root, host = scene
    ws = Workspace(root)
    inside = race(
        root, host, level, lambda: _text(lambda: TOOLS[tool](root, ws, level)), CANARY,
        lambda t: "inside" in t or "f.py" in t, calls=CALLS, race_s=RACE_S,
    )  # fmt: skip
    assert inside > 0  # the race did not only ever refuse


def test_a_fifo_swapped_in_for_a_cited_file_does_not_block_the_listing(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "a").mkdir(parents=True)
    os.mkfifo(root / "a" / "f.py")  # a cited file replaced by a FIFO nobody writes to
    (root / "a" / "g.py").write_text("def g():\n    return 1\n")
    result: dict[str, str] = {}
    worker = threading.Thread(target=lambda: result.update(line_texts(["a/f.py:1", "a/g.py:1"], root)))
    started = time.monotonic()
    worker.start()
    worker.join(5)
    assert not worker.is_alive(), "the listing blocked on a FIFO"
    assert time.monotonic() - started < 5
    assert result == {"a/g.py:1": "def g():"}


def test_a_device_or_a_link_outside_is_not_listed(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "host.py").write_text(f"{CANARY}\n")
    os.symlink(tmp_path / "host.py", root / "out.py")
    os.symlink("/dev/zero", root / "zero.py")
    assert line_texts(["out.py:1", "zero.py:1"], root) == {}


def test_lines_fed_through_descriptors_keep_their_files_and_numbers(tmp_path: Path) -> None:
    """Every hit and context line a directory Grep shows is that file's line at that number."""
    root = tmp_path / "ws"
    (root / "p").mkdir(parents=True)
    (root / "p" / "a.py").write_text("needle first\nsecond\nthird\n")
    (root / "p" / "b.py").write_text("one\ntwo\nneedle three")  # no final newline
    (root / "p" / "c.py").write_text("\x00binary needle\n")  # skipped as binary
    (root / "z.py").write_text("needle\n" + "x\n" * 50 + "needle again\n")
    ws = Workspace(root)
    run = search(ws, ["needle"], ".", context=2)
    assert run.files == ["p/a.py", "p/b.py", "z.py"]
    for hit in run.hits:
        lines = (root / hit.path).read_text().splitlines()
        assert lines[hit.line - 1] == hit.text, hit
    assert [(h.path, h.line) for h in run.hits if h.is_match] == [
        ("p/a.py", 1), ("p/b.py", 3), ("z.py", 1), ("z.py", 52)
    ]  # fmt: skip
    # files only, with a glob relative to the searched directory
    assert search(ws, ["needle"], "p", glob="*.py", files_only=True).files == ["p/a.py", "p/b.py"]
