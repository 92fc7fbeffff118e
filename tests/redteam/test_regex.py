"""Regex tricks: catastrophic backtracking and invalid patterns in Grep, Glob and .gitignore files."""

from __future__ import annotations

import os

import pytest
from conftest import LauncherFactory

from redteam.support import GOOD, finished_calls, timed
from subagent_lab.agents.launcher import SubagentRequest
from subagent_lab.core.tool import MAX_OBSERVATION_CHARS
from subagent_lab.core.types import ModelResponse, ToolCall
from subagent_lab.models.scripted import final
from subagent_lab.tools.registry import GLOB, GREP
from subagent_lab.workspace.sandbox import Workspace

BOUND_S = 12.0
"""Per call: Grep's rg limit is 10 s, Glob's walk limit 5 s (+ one entry)."""


@pytest.fixture(scope="module")
def evil(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    root = tmp_path_factory.mktemp("evil")
    (root / "a.txt").write_text(("a" * 5000 + "!\n") * 50)
    (root / ("a" * 250 + ".txt")).write_text("x\n")
    fd = os.open(root, os.O_RDONLY)
    for _ in range(300):  # a 300-level tree of 'd' directories (deeper would break rmtree)
        os.mkdir("d", dir_fd=fd)
        nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    leaf = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(leaf, b"needle_leaf\n")
    os.close(leaf)
    os.close(fd)
    # A hostile .gitignore: patterns whose regexes backtrack catastrophically on the names above,
    # many costly lines, and a megabyte of cheap ones.
    hostile = [
        "*a*a*a*a*a*a*a*a*b",
        "**/*a*a*a*a*a*a*a*b",
        "**/d/**/d/**/d/**/d/**/x",
        "d/**/d/**/d/**/x",
        *[f"**/d/**/x{i}" for i in range(200)],
        *[f"*a*a{i}" for i in range(200)],
    ]
    cheap = [f"*.ext{i:06d}" for i in range(60_000)]
    (root / ".gitignore").write_text("\n".join([*hostile, *cheap]) + "\n")
    return Workspace(root)


CATASTROPHIC = [
    "(a+)+$",
    "(a|aa)+b",
    "(a*)*b",
    "(.*a){25}",
    "(\\w+\\s?)*$",
    "^(([a-z])+.)+[A-Z]([a-z])+$",
    "(a|a?)+$",
]
INVALID = [
    "(",
    "[a-",
    "*x",
    "a{2,1}",
    "(?<name",
    "(a)\\1",
    "(?=x)",
    "(?<!x)y",
    "\\",
    "\\p{Nope}",
    "a{1000}{1000}",
    "((a{100}){100}){100}",
]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_grep_catastrophic_patterns_run_in_linear_time(evil: Workspace, pattern: str) -> None:
    with timed() as clock:
        out = GREP.invoke(evil, {"pattern": pattern, "path": "a.txt"})
    assert out.status == "ok" and clock.elapsed < BOUND_S
    assert len(out.text) <= MAX_OBSERVATION_CHARS


@pytest.mark.parametrize("pattern", INVALID)
def test_grep_invalid_regex_is_a_clear_error(evil: Workspace, pattern: str) -> None:
    with timed() as clock:
        out = GREP.invoke(evil, {"pattern": pattern, "path": "a.txt"})
    assert out.status == "error" and clock.elapsed < BOUND_S
    assert out.text.startswith("Error: invalid or too large regex") and repr(pattern) in out.text


GLOB_TRICKS: list[tuple[str, str]] = [
    ("*a*a*a*a*a*a*a*a*a*a*a*a*b", "ok"),  # exponential with a backtracking translation
    ("**/*a*a*a*a*a*a*a*a*a*a*b", "ok"),
    ("**/d/**/d/**/d/**/d/**/x", "ok"),
    ("[z-a]*", "error"),  # an invalid range: was an unhandled re.error
    ("[[:alpha:]]*", "ok"),
    ("{a,b}" * 12, "error"),  # 4096 alternatives
    ("{a," * 249 + "b" + "}" * 249, "ok"),  # deep nesting within the length cap
    ("{a," * 400 + "b" + "}" * 400, "error"),  # was a RecursionError
    ("[" * 20_000, "error"),  # was quadratic to compile
    ("../*", "error"),
]


@pytest.mark.parametrize(("pattern", "status"), GLOB_TRICKS, ids=[p[:24] for p, _ in GLOB_TRICKS])
def test_glob_pattern_tricks_are_bounded(evil: Workspace, pattern: str, status: str) -> None:
    with timed() as clock:
        out = GLOB.invoke(evil, {"pattern": pattern})
    assert out.status == status, out.text[:300]
    assert clock.elapsed < BOUND_S
    assert len(out.text) <= MAX_OBSERVATION_CHARS + 200


def test_hostile_gitignore_does_not_hang_glob(evil: Workspace) -> None:
    with timed() as clock:
        out = GLOB.invoke(evil, {"pattern": "**/*", "max_results": 1000})
    assert out.status == "ok" and clock.elapsed < BOUND_S, (clock.elapsed, out.text[-300:])
    with timed() as clock:
        out = GLOB.invoke(evil, {"pattern": "**/leaf.txt"})
    assert out.status == "ok" and clock.elapsed < BOUND_S
    with timed() as clock:
        out = GREP.invoke(evil, {"pattern": "needle_leaf"})
    assert out.status == "ok" and clock.elapsed < BOUND_S
    assert "leaf.txt:1:" in out.text


def test_regex_tricks_through_the_loop(make_launcher: LauncherFactory) -> None:
    """The model sees an error it can act on; the run goes on and completes."""
    calls = [
        ("Grep", {"pattern": "("}),
        ("Grep", {"pattern": "(a+)+$"}),
        ("Glob", {"pattern": "[z-a]"}),
        ("Glob", {"pattern": "*a*a*a*a*a*a*a*a*a*a*b"}),
        ("Grep", {"pattern": "(a)\\1"}),
    ]
    turns = [
        ModelResponse(tool_calls=[ToolCall(id=f"x{i}", name=n, arguments=a)])
        for i, (n, a) in enumerate(calls)
    ]
    launcher, _ = make_launcher([*turns, final(GOOD)])
    result = launcher.launch(SubagentRequest(task="probe"))
    assert result.terminal_reason == "completed", result.detail
    finished = finished_calls(result.trace_path)
    assert [finished[f"x{i}"].status for i in range(5)] == ["error", "ok", "error", "ok", "error"]
    assert "backreferences are not supported" in finished["x4"].text
