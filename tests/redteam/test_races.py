"""Issue 24: time-of-check races. A concurrent renamer swaps a directory of the workspace for a
symlink to a directory outside it (and back, and renames a link in and out) while the tools
resolve, read, search and write through that directory.

Whatever the interleaving, Read and Grep show only workspace content, Edit writes only inside
the workspace (and names what it wrote), and every call ends as an observation (ok, error or
denied): a path that changes under resolution is never a crash. The renamer runs a bounded
number of iterations; each tool runs a bounded number of calls.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from redteam.support import tree_digest
from subagent_lab.core.tool import ToolDeniedError, ToolError
from subagent_lab.tools.edit import ReadStamps, edit, tracked_read
from subagent_lab.tools.read import read
from subagent_lab.tools.rg.search import search
from subagent_lab.workspace.sandbox import Workspace

CALLS = 300
"""Tool calls per test, racing the renamer."""
SWAPS = 20_000
"""The renamer's bound: it stops after this many swaps or when the calls are done."""
OUTSIDE_TOKEN = "OUTSIDE-CANARY-7d1f"
INSIDE = "inside = 1\n"


@dataclass
class Scene:
    root: Path
    outside: Path
    ws: Workspace


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    root = tmp_path / "ws"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.py").write_text(INSIDE)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.py").write_text(f"{OUTSIDE_TOKEN} = 1\n")
    return Scene(root, outside, Workspace(root))


@contextlib.contextmanager
def renamer(scene: Scene) -> Iterator[threading.Event]:
    """Swap ``d`` for a link to the outside directory and back, as fast as it can (bounded)."""
    done = threading.Event()
    d, real, link = scene.root / "d", scene.root / "d.real", scene.root / "d.link"

    def run() -> None:
        for n in range(SWAPS):
            if done.is_set():
                return
            with contextlib.suppress(OSError):
                os.rename(d, real)
                os.symlink(scene.outside, link)
                os.rename(link, d)  # d is now a link leading outside
                done.wait(0.0002)
                os.unlink(d)
                os.rename(real, d)  # and a directory again
                # Both states last long enough to be met mid-call; every fourth directory state
                # is long enough for a whole read-then-edit on a loaded machine.
                done.wait(0.01 if n % 4 == 0 else 0.0002)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield done
    finally:
        done.set()
        thread.join(30)
        # Leave the scene as it was built (the renamer may have stopped mid-swap).
        if not d.is_dir() or d.is_symlink():
            with contextlib.suppress(OSError):
                os.unlink(d)
            with contextlib.suppress(OSError):
                os.rename(real, d)


def _observe(call: object) -> str:
    """Run one tool call the way dispatch does: an error or a denial is an observation."""
    try:
        return str(call() if callable(call) else call)
    except (ToolError, ToolDeniedError) as exc:  # ToolDeniedError is a ToolError; both are fine
        return f"Error: {exc}"


def test_read_never_shows_a_file_outside(scene: Scene) -> None:
    seen_inside = 0
    with renamer(scene):
        for _ in range(CALLS):
            text = _observe(lambda: read(scene.ws, "d/f.py"))
            assert OUTSIDE_TOKEN not in text
            seen_inside += "inside = 1" in text
    assert seen_inside > 0  # the race did not only ever refuse


def test_resolve_never_raises_anything_but_a_tool_error(scene: Scene) -> None:
    with renamer(scene):
        for _ in range(CALLS):
            try:
                real = scene.ws.resolve("d/f.py")
            except ToolError:
                continue
            assert str(real).startswith(str(scene.root) + "/")


def test_grep_never_searches_outside(scene: Scene) -> None:
    with renamer(scene):
        for _ in range(CALLS // 3):
            try:
                run = search(scene.ws, ["= 1"], "d")
            except ToolError:
                continue
            assert all(OUTSIDE_TOKEN not in hit.text for hit in run.hits)
            assert all(f.startswith("d/") for f in run.files)


@dataclass
class _Ctx:
    workspace: Workspace
    stamps: ReadStamps


def test_edit_never_writes_outside(scene: Scene) -> None:
    outside_before = tree_digest(scene.outside)
    ctx = _Ctx(scene.ws, ReadStamps())
    edited = 0
    with renamer(scene):
        for i in range(CALLS):
            _observe(lambda: tracked_read(ctx, "d/f.py"))
            new = f"inside = 1  # edit {i}"
            result = _observe(lambda new=new: edit(ctx, "d/f.py", "inside = 1", new))
            if result.startswith("Edited"):
                edited += 1
                assert result.startswith("Edited d/f.py")  # the file written, by its workspace place
            # Put the text back so the next edit finds it, through a descriptor of the real
            # directory: a check-then-write by name here would itself race the renamer and write
            # outside (the harness's own restore, not the Edit under test).
            with contextlib.suppress(OSError):
                dfd = os.open(scene.root / "d", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
                try:
                    fd = os.open("f.py", os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW, dir_fd=dfd)
                    with os.fdopen(fd, "w") as fh:
                        fh.write(INSIDE)
                finally:
                    os.close(dfd)
    assert tree_digest(scene.outside) == outside_before
    assert edited > 0
    # Nothing was created outside either (no temporary file left there).
    assert sorted(p.name for p in scene.outside.iterdir()) == ["f.py"]


def test_a_created_file_lands_inside(scene: Scene) -> None:
    ctx = _Ctx(scene.ws, ReadStamps())
    with renamer(scene):
        for i in range(CALLS // 3):
            _observe(lambda i=i: edit(ctx, f"d/new_{i}.py", "", "x = 1\n"))
    assert sorted(p.name for p in scene.outside.iterdir()) == ["f.py"]


def test_a_link_renamed_in_and_out_during_resolution(scene: Scene) -> None:
    # The case that crashed a run: a link appears and disappears at a name being resolved.
    (scene.root / "target.py").write_text(INSIDE)
    stop = threading.Event()

    def flip() -> None:
        link, name = scene.root / "tmp.link", scene.root / "flip.py"
        for _ in range(SWAPS):
            if stop.is_set():
                return
            with contextlib.suppress(OSError):
                os.symlink("target.py", link)
                os.rename(link, name)
                os.unlink(name)

    thread = threading.Thread(target=flip, daemon=True)
    thread.start()
    try:
        outcomes = {_observe(lambda: read(scene.ws, "flip.py"))[:6] for _ in range(CALLS)}
    finally:
        stop.set()
        thread.join(30)
    assert outcomes <= {"File: ", "Error:"}, outcomes


def test_glob_never_lists_a_directory_outside(scene: Scene) -> None:
    from subagent_lab.tools.glob import find_paths

    (scene.outside / f"{OUTSIDE_TOKEN}.py").write_text("x = 1\n")
    with renamer(scene):
        for _ in range(CALLS // 3):
            try:
                paths = find_paths(scene.ws, "**/*").paths
            except ToolError:
                continue
            assert not any(OUTSIDE_TOKEN in p for p in paths), paths
