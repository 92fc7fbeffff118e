"""The directory Grep's listing kept while the tree's signature is unchanged (``tools.rg.listing``):
every change that alters what rg would list is seen on the next search."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagent_lab.tools.rg import listing as rg_listing
from subagent_lab.tools.rg.search import search
from subagent_lab.workspace.sandbox import Workspace


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    rg_listing.clear_cache()
    yield
    rg_listing.clear_cache()


def _files(ws: Workspace, glob: str | None = None) -> list[str]:
    return search(ws, ["needle"], ".", glob=glob, files_only=True, max_results=500).files


def _uncached(ws: Workspace, glob: str | None = None) -> list[str]:
    rg_listing.clear_cache()
    return _files(ws, glob)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "pkg" / "empty").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("needle\n")
    (root / "b.txt").write_text("needle\n")
    return root


def test_a_second_search_is_served_from_the_kept_listing(tree: Path, rg_list_calls: list[object]) -> None:
    ws = Workspace(tree)
    (tree / ".gitignore").write_text("*.{log,tmp}\n")  # alternation: only rg evaluates it
    (tree / "debug.log").write_text("needle\n")  # and it excludes something: rg lists
    assert _files(ws) == ["b.txt", "pkg/a.py"]
    assert len(rg_list_calls) == 1
    assert _files(ws) == ["b.txt", "pkg/a.py"]
    assert len(rg_list_calls) == 1  # nothing changed: rg did not list again
    (tree / "pkg" / "c.py").write_text("needle\n")
    assert _files(ws) == ["b.txt", "pkg/a.py", "pkg/c.py"]
    assert len(rg_list_calls) == 2


@pytest.mark.parametrize(
    "change",
    [
        "new file in an empty directory",
        "new directory",
        "removed file",
        "renamed file",
        "gitignore added",
        "gitignore edited",
        "nested ignore file",
        "git exclude",
        "file swapped for a link",
    ],
)
@pytest.mark.parametrize("rules", ["*.log\n", "*.{log,tmp}\n"])  # the walk lists; rg lists
def test_every_change_that_alters_the_listing_is_seen(tree: Path, change: str, rules: str) -> None:
    ws = Workspace(tree)
    (tree / ".gitignore").write_text(rules)
    (tree / ".git" / "info").mkdir(parents=True)
    assert _files(ws) == ["b.txt", "pkg/a.py"]
    if change == "new file in an empty directory":
        (tree / "pkg" / "empty" / "d.py").write_text("needle\n")
    elif change == "new directory":
        (tree / "new").mkdir()
        (tree / "new" / "e.py").write_text("needle\n")
    elif change == "removed file":
        (tree / "b.txt").unlink()
    elif change == "renamed file":
        (tree / "b.txt").rename(tree / "pkg" / "b2.txt")
    elif change == "gitignore added":
        (tree / "pkg" / ".gitignore").write_text("a.py\n")
    elif change == "gitignore edited":
        (tree / ".gitignore").write_text("*.log\nb.txt\n")
    elif change == "nested ignore file":
        (tree / "pkg" / ".ignore").write_text("a.py\n")
    elif change == "git exclude":
        (tree / ".git" / "info" / "exclude").write_text("b.txt\n")
    elif change == "file swapped for a link":
        (tree / "pkg" / "a.py").unlink()
        os.symlink(tree / "b.txt", tree / "pkg" / "a.py")
    after = _files(ws)
    assert after == _uncached(ws)  # what rg lists afresh
    assert after != ["b.txt", "pkg/a.py"]


def test_a_glob_keeps_a_listing_of_its_own(tree: Path) -> None:
    ws = Workspace(tree)
    assert _files(ws, "*.py") == ["pkg/a.py"]
    assert _files(ws) == ["b.txt", "pkg/a.py"]
    assert _files(ws, "*.txt") == ["b.txt"]


def test_a_linked_ignore_file_or_a_large_tree_is_listed_by_rg_every_time(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = Workspace(tree)
    outside = tree.parent / "rules"
    outside.write_text("b.txt\n")
    os.symlink(outside, tree / ".ignore")  # its content can change with no change in the tree
    fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(rg_listing._Unsigned):
            rg_listing.signature(fd)
        os.unlink(tree / ".ignore")
        monkeypatch.setattr(rg_listing, "MAX_SIGNED_ENTRIES", 2)
        with pytest.raises(rg_listing._TooLarge):
            rg_listing.signature(fd)
    finally:
        os.close(fd)
    assert _files(ws) == ["b.txt", "pkg/a.py"]
    (tree / "pkg" / "c.py").write_text("needle\n")
    assert _files(ws) == ["b.txt", "pkg/a.py", "pkg/c.py"]
    assert rg_listing._listings == {}


def test_a_submodule_pointer_is_signed_and_a_linked_git_info_is_not(tree: Path) -> None:
    """With ``--no-require-git`` rg reads ``.git/info/exclude`` only through a real ``.git``
    directory: a ``.git`` file (a submodule's pointer) adds no rules, a linked ``info`` would."""
    (tree / "pkg" / ".git").write_text("gitdir: ../../elsewhere\n")
    fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert rg_listing.signature(fd)
        (tree / ".git").mkdir()
        os.symlink(tree.parent, tree / ".git" / "info")
        with pytest.raises(rg_listing._Unsigned):
            rg_listing.signature(fd)
    finally:
        os.close(fd)


def test_hostile_ignore_files_cannot_carry_a_directory_grep_past_its_time_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 52: nested ignore files of 250 wildcard rules each (within the exact subset, so the
    Python walk evaluates them for every entry) made the walk run on past the search's limit,
    which held for rg only, on every new glob. With the limit injected small, the call ends by it:
    the walk gives up at its share of the time and rg lists (or the search is cut, and says so);
    the next call, with a new glob, does not walk the directory again."""
    import time

    from subagent_lab.core.tool import ToolError
    from subagent_lab.tools import rg

    level = tmp_path / "ws"
    for depth in range(8):
        level.mkdir(parents=True)
        (level / ".gitignore").write_text("".join(f"*q{depth}x{i}*z*\n" for i in range(250)))
        for name in range(40):
            (level / f"file{name}.py").write_text("needle\n")
        level = level / "sub"
    walks: list[object] = []
    walk = rg_listing._walk
    monkeypatch.setattr(rg_listing, "_walk", lambda *a: walks.append(a) or walk(*a))
    limit = 0.3
    monkeypatch.setattr(rg, "TIMEOUT_S", limit)
    ws = Workspace(tmp_path / "ws")
    for glob in (None, "*.py"):
        started = time.monotonic()
        try:
            found = _files(ws, glob)
        except ToolError as cut:
            assert re.search(r"was cut after 0(\.3)? s .*narrow it", str(cut)), cut
        else:
            assert len(found) == 320  # rg's listing: no rule matches a file here
        assert time.monotonic() - started < limit + 0.7  # the walk alone takes seconds here
    assert len(walks) == 1  # the second glob went to rg at once
