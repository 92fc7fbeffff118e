"""Issue 39, linear text work in the small-model Grep (``tools/simple_grep.py``): however long the
pattern a model sends (1 KB to 4 MB, shaped against each regex there), no regex in that module
looks at more than a bounded prefix of it, so the work is the same at 4 MB as at 1 KB.

Work is counted, not timed: every regex of the module is replaced by a recorder of the length of
each text it is applied to. On the code before, the backslash-dropping ``re.sub`` ran over the
whole first line and the quoting ``re.search`` over the whole pattern.
"""

from __future__ import annotations

import contextlib
import re
import types
from pathlib import Path
from typing import Any

import pytest

from subagent_lab.core.tool import ToolError
from subagent_lab.tools import simple_grep
from subagent_lab.workspace.sandbox import Workspace

SIZES = (1 << 10, 1 << 16, 1 << 22)
SHAPES = {
    "dotted": "a.",  # DOTTED.fullmatch, the dotted-name note
    "escaped": "\\.",  # the backslash-dropping substitution
    "location": "a/",  # LOCATION.fullmatch: a path that never reaches its `.ext:line`
    "names": "aB_c ",  # _identifiers, _parts, the broadening
    "word": "x",
    "surrogate": "\ud800a",  # quote()'s escaping of a lone surrogate
}


class _Recorded:
    """A compiled regex that records the length of every text it is applied to."""

    def __init__(self, pattern: re.Pattern[str], seen: list[int]) -> None:
        self._pattern, self._seen = pattern, seen

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._pattern, name)

        def recorded(text: str, *args: Any, **kwargs: Any) -> Any:
            self._seen.append(len(text))
            return method(text, *args, **kwargs)

        return recorded


def _shim(seen: list[int]) -> types.SimpleNamespace:
    """The ``re`` module as simple_grep calls it (``re.sub(p, repl, text)``, ``re.findall(p, text)``,
    ``re.search(p, text)``), recording each text's length."""

    def sub(pattern: str, repl: str, text: str, **kwargs: Any) -> str:
        seen.append(len(text))
        return re.sub(pattern, repl, text, **kwargs)

    def one(name: str) -> Any:
        def call(pattern: str, text: str, *args: Any) -> Any:
            seen.append(len(text))
            return getattr(re, name)(pattern, text, *args)

        return call

    return types.SimpleNamespace(
        sub=sub, findall=one("findall"), search=one("search"), match=one("match"),
        fullmatch=one("fullmatch"), compile=re.compile, escape=re.escape,
    )  # fmt: skip


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seen: list[int] = []
    monkeypatch.setattr(simple_grep, "re", _shim(seen))
    for name, value in vars(simple_grep).copy().items():
        if isinstance(value, re.Pattern):
            monkeypatch.setattr(simple_grep, name, _Recorded(value, seen))
    return seen


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(
        "def target():\n    return 1\n\n" + "a." * 50_000 + "\nxxx = 'aB_c a/b'\n"
    )
    return Workspace(tmp_path)


def _work(ws: Workspace, seen: list[int], unit: str, size: int) -> tuple[int, int]:
    """(characters the module's regexes looked at, the longest text one looked at) for one call."""
    seen.clear()
    with contextlib.suppress(ToolError):  # a refusal is an answer too: the work before it counts
        simple_grep.simple_grep(ws, (unit * (size // len(unit) + 1))[:size])
    return sum(seen), max(seen, default=0)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_no_regex_looks_past_a_bounded_prefix_of_the_pattern(
    ws: Workspace, recorded: list[int], shape: str
) -> None:
    work = [_work(ws, recorded, SHAPES[shape], size) for size in SIZES]
    for total, longest in work:
        assert longest <= simple_grep.MAX_SCANNED_CHARS, (shape, work)
        assert total > 0  # the recorders saw the calls
    assert work[-1] == work[0], f"{shape}: the work grows with the pattern's length: {work}"


def test_the_cut_changes_nothing_within_the_bound(ws: Workspace) -> None:
    """Backslashes dropped before the cut: the first MAX_PATTERN_CHARS characters searched are
    those of the whole line with its escapes dropped."""
    line = "\\." * 2_000
    out = simple_grep.simple_grep(ws, line)
    assert f"cut to its first {simple_grep.MAX_PATTERN_CHARS} characters" in str(out)
    assert simple_grep.quote("a\ud800") == '"a\\ud800"'  # a lone surrogate is escaped
    assert simple_grep.quote("é") == '"é"'
