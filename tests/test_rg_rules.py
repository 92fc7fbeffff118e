"""A directory Grep's listing taken from its own descriptor walk (``tools.rg_rules``,
``rg_listing.walk_listing``) is rg's listing whenever it is used: checked against ``rg --files``
on generated trees, ignore files and globs, and on the shapes real packages ship."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from subagent_lab.tools import rg, rg_listing, rg_rules
from subagent_lab.tools.rg import search
from subagent_lab.workspace.sandbox import Workspace


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    rg_listing.clear_cache()
    yield
    rg_listing.clear_cache()


def _both(root: Path, glob: str | None = None, *, honour: bool = True) -> tuple[list[str] | None, list[str]]:
    """(the walk's listing or None, rg's listing) of ``root``."""
    ws = Workspace(root, honour_gitignore=honour)
    args = [rg._rg_binary(), "--files", "--null", "--no-config", "--no-follow", "--hidden"]
    args += [*rg.walk_filters(ws, glob, secrets=False), "--", "."]
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        listed, complete = rg_listing._rg_list(args, fd, time.monotonic() + 10)
        assert complete or listed == []  # rg exits 1 when it lists nothing
        _, tree = rg_listing._walk(fd)
        passes = rg_rules.glob_filter(glob)
        walked = None if passes is None else rg_listing.walk_listing(tree, passes, honour)
    finally:
        os.close(fd)
    return walked, listed


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


PACKAGE = {
    "README.md": "x\n",
    "src/pkg/__init__.py": "x\n",
    "src/pkg/core.py": "x\n",
    "src/pkg/py.typed": "",
    "tests/test_core.py": "x\n",
    "tests/data/cmd/toml-test/main.go": "x\n",
    "tests/data/.git": "gitdir: ../../.git/modules/data\n",
}


@pytest.mark.parametrize(
    ("ignore", "used"),
    [
        ("/dist\n/toml-test\n", True),  # anchored: tests/data/cmd/toml-test is deeper
        ("__pycache__/\n*.py[cod]\n*$py.class\n*.so\n.Python\nbuild/\n*.egg-info/\n", True),
        ("# comment\n\n!keep.py\n   \n\\#hash\n", True),
        ("toml-test\n", False),  # unanchored: matches the nested directory
        ("*.md\n", False),
        ("src/pkg/core.py\n", False),
        ("/src/*/core.py\n", False),
        ("core.p?\n", False),
        ("[!x]ore.py\n", False),  # a negated class is not parsed: anything
        ("*.{md,txt}\n", False),
        ("**/core.py\n", False),
        ("src/**\n", False),
        ("py.typed   \n", False),  # trailing blanks are trimmed
        ("\ufeffREADME.md\n", False),  # a byte-order mark is not part of the first line
        ("README.MD\n", False),  # widened: case-folded
    ],
)
def test_the_walk_gives_rgs_listing_or_leaves_it_to_rg(tmp_path: Path, ignore: str, used: bool) -> None:
    root = _write(tmp_path / "ws", {**PACKAGE, "tests/data/.gitignore": "", ".gitignore": ignore})
    walked, listed = _both(root)
    assert (walked is not None) == used
    if walked is not None:
        assert walked == listed
    assert _both(root, honour=False)[0] == _both(root, honour=False)[1]  # --no-ignore: always the walk's


def test_an_ignore_file_that_is_not_utf8_is_left_to_rg(tmp_path: Path) -> None:
    root = _write(tmp_path / "ws", PACKAGE)
    (root / ".ignore").write_bytes(b"\xffnothing\n")
    assert _both(root)[0] is None


def test_git_exclude_rules_are_checked(tmp_path: Path) -> None:
    root = _write(tmp_path / "ws", PACKAGE)
    (root / ".git" / "info").mkdir(parents=True)
    (root / ".git" / "info" / "exclude").write_text("nothing-here\n")
    assert _both(root)[0] == _both(root)[1]
    (root / ".git" / "info" / "exclude").write_text("core.py\n")
    assert _both(root)[0] is None


@pytest.mark.parametrize(
    "glob", ["*.py", "test_*", "*core*", "README.md", "*.p*y", "*", "**/*.py", "*.{py,md}"]
)
def test_a_plain_glob_is_applied_as_rg_applies_it(tmp_path: Path, glob: str) -> None:
    root = _write(tmp_path / "ws", {**PACKAGE, "src/pkg/py.copy.py": "x\n", "build.py/x.txt": "x\n"})
    walked, listed = _both(root, glob)
    assert (walked is not None) == (rg_rules.glob_filter(glob) is not None)
    if walked is not None:
        assert walked == listed


def test_non_ascii_names_come_in_rgs_order(tmp_path: Path) -> None:
    names = ["é.py", "z.py", "e.py", "\U0001f600.py", "ﬀ.py", "a/é.py", "a.py"]
    root = _write(tmp_path / "ws", dict.fromkeys(names, "x\n"))
    os.close(os.open(os.fsencode(root) + b"/\xff\xfe.py", os.O_CREAT | os.O_WRONLY))  # not UTF-8
    walked, listed = _both(root)
    assert walked == listed


def test_a_first_search_on_a_tree_whose_ignore_files_exclude_nothing_starts_no_listing_rg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _write(tmp_path / "ws", {**PACKAGE, ".gitignore": "*.log\n"})
    calls: list[object] = []
    real = rg_listing._rg_list

    def counted(*args: Any) -> tuple[list[str], bool]:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(rg_listing, "_rg_list", counted)
    ws = Workspace(root)
    found = search(ws, ["x"], ".", files_only=True, max_results=500).files
    assert found == [
        "README.md", "src/pkg/__init__.py", "src/pkg/core.py", "tests/data/cmd/toml-test/main.go",
        "tests/test_core.py",
    ]  # fmt: skip
    assert calls == []
    (root / "debug.log").write_text("x\n")  # now the ignore file excludes something: rg lists
    assert search(ws, ["x"], ".", files_only=True, max_results=500).files == found
    assert len(calls) == 1


# --- generated trees against rg -------------------------------------------------------------

DIRS = ["a", "ab", "A", "d.egg-info", "x y", ".h", "é"]
FILES = ["b.py", "B.PY", "c.txt", "a.pyc", "ab.py", "x y.txt", "é.txt", ".hf", "a1"]
LINES = [
    "a", "/a", "a/", "/a/", "*.py", "*.PY", "b.*", "a*", "*b*", "?.py", "[ab]", "[ab]*", "*.py[cod]", "[!a]*",
    "a/b.py", "/a/ab", "**/a", "a/**", "d/**/b.py", "!b.py", "#a", "\\#a", "a\\ ", "ab   ", "*.egg-info/",
    "x y", "x\\ y.txt", "é", "é.txt", "{a,ab}", "[z-a]", "c.t?t", "/*.txt", "ab/", "", "a/ab", "/ab/a/",
    "*/b.py",
]  # fmt: skip


@st.composite
def trees(draw: Any) -> dict[str, str]:
    files: dict[str, str] = {}
    for _ in range(draw(st.integers(1, 12))):
        parts = [draw(st.sampled_from(DIRS)) for _ in range(draw(st.integers(0, 2)))]
        files["/".join([*parts, draw(st.sampled_from(FILES))])] = "x\n"
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.sampled_from(["", "a/", "d.egg-info/", "ab/a/"]))
        lines = draw(st.lists(st.sampled_from(LINES), max_size=4))
        files[where + draw(st.sampled_from([".gitignore", ".ignore", ".rgignore"]))] = "\n".join(lines) + "\n"
    return files


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=trees(), glob=st.sampled_from([None, "*.py", "a*", "*b*", "ab"]))
def test_whenever_the_walk_lists_it_lists_what_rg_lists(
    tmp_path: Path, files: dict[str, str], glob: str | None
) -> None:
    root = tmp_path / f"ws{time.monotonic_ns()}"
    _write(root, files)
    walked, listed = _both(root, glob)
    event("the walk's listing" if walked is not None else "rg's listing")
    if walked is not None:
        assert walked == listed, files
