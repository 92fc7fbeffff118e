"""Size tricks: giant, sparse, binary, numerous and deep files. Every call is bounded in time and size.

The tree is built once per module (100,000 files take ~8 s to create on a 2-core runner; the
time is printed with ``-s``). Each trick goes through the loop, so the caps are the ones the
model actually sees, and each call's duration comes from its ``tool_finished`` event.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from redteam.support import GOOD, finished_calls
from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.tool import MAX_OBSERVATION_CHARS
from subagent_lab.core.types import ModelResponse, ToolCall
from subagent_lab.models.scripted import ScriptedModel, final

N_FILES = 100_000
DEPTH = 300
PER_CALL_S = 15.0
"""Wall-time bound asserted per tool call (the tools' own limits are 5-10 s)."""


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def giant(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("giant")
    big = root / "big"
    big.mkdir()
    # 2 GB sparse file: 16 KiB of text lines, a 2 GB hole of NUL bytes, a text tail
    with open(big / "sparse.log", "wb") as fh:
        fh.write(b"".join(b"log line %d\n" % i for i in range(1500)))
        fh.seek(2 * 1024**3)
        fh.write(b"tail_marker\n")
    # one 50 MB line (over Grep's 20 MB cap) and one 19 MB line (under it), needles in the middle
    with open(big / "oneline.py", "wb") as fh:
        fh.write(b"x = '" + b"a" * (25 * 1024**2) + b"needle_long" + b"a" * (25 * 1024**2) + b"'")
    with open(big / "line19.txt", "wb") as fh:
        fh.write(b"b" * (9 * 1024**2) + b"needle19" + b"b" * (10 * 1024**2) + b"\n")
    # binary content with a text extension
    _write(big / "blob.py", os.urandom(4096) + b"\x00needle_bin\x00" + os.urandom(4096))
    # 100,000 small files
    started = time.monotonic()
    many = root / "many"
    for d in range(N_FILES // 1000):
        sub = many / f"d{d:03d}"
        sub.mkdir(parents=True)
        for f in range(1000):
            _write(sub / f"f{f:04d}.txt", b"needle_many\n" if (d, f) == (42, 420) else b"hay\n")
    print(f"\ncreated {N_FILES} files in {time.monotonic() - started:.1f}s")
    # a 300-level deep tree, and one whose paths exceed PATH_MAX (300 x 20 chars)
    deep = root / "deep"
    deep.mkdir()
    fd = os.open(deep, os.O_RDONLY)
    for name in (b"d",) * DEPTH:
        os.mkdir(name, dir_fd=fd)
        nxt = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    leaf = os.open("leaf.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(leaf, b"needle_deep = 1\n")
    os.close(leaf)
    os.close(fd)
    fd = os.open(root, os.O_RDONLY)
    for name in (b"deeper" if i == 0 else b"x" * 19 for i in range(DEPTH)):
        os.mkdir(name, dir_fd=fd)
        nxt = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    leaf = os.open("leaf.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(leaf, b"needle_deeper = 1\n")
    os.close(leaf)
    os.close(fd)
    yield root
    shutil.rmtree(root, ignore_errors=True)  # 100,000 files should not outlive the module


DEEP_LEAF = "deep/" + "d/" * DEPTH + "leaf.py"
CALLS: list[tuple[str, dict[str, object], str, str | None]] = [
    # (tool, arguments, expected status, text the observation must contain)
    ("Read", {"path": "big/sparse.log"}, "ok", "log line 0"),
    ("Read", {"path": "big/sparse.log", "start": 1_000_000}, "error", "could not reach line"),
    ("Grep", {"pattern": "tail_marker", "path": "big/sparse.log"}, "error", "over Grep's 20 MB limit"),
    ("Read", {"path": "big/oneline.py"}, "ok", "line truncated"),
    ("Read", {"path": "big/oneline.py", "start": 2}, "error", "past the end"),
    ("Grep", {"pattern": "needle_long", "path": "big/oneline.py"}, "error", "20 MB limit"),
    ("Grep", {"pattern": "needle_long|needle19|tail_marker", "path": "big"}, "ok", "needle19"),
    ("Read", {"path": "big/line19.txt"}, "ok", "line truncated"),
    ("Grep", {"pattern": "needle19", "path": "big/line19.txt"}, "ok", "[line of"),
    ("Read", {"path": "big/blob.py"}, "error", "looks binary"),
    ("Grep", {"pattern": "needle_bin", "path": "big"}, "ok", None),
    ("Glob", {"pattern": "**/*.txt", "path": "many"}, "ok", "narrow the pattern"),
    ("Glob", {"pattern": "**", "max_results": 1000}, "ok", None),
    ("Grep", {"pattern": "needle_many", "path": "many"}, "ok", "many/d042/f0420.txt:1:"),
    ("Grep", {"pattern": "hay", "path": "many", "files_only": True, "max_results": 500}, "ok", "capped"),
    ("Grep", {"pattern": "hay", "path": "many", "context": 10, "max_results": 500}, "ok", "capped"),
    ("Glob", {"pattern": "**/leaf.py", "path": "deep"}, "ok", "leaf.py"),
    ("Grep", {"pattern": "needle_deep\\b", "path": "deep"}, "ok", "leaf.py:1:"),
    ("Read", {"path": DEEP_LEAF}, "ok", "needle_deep"),
    ("Glob", {"pattern": "**/*", "path": "deeper"}, "ok", None),
    ("Grep", {"pattern": "needle_deeper", "path": "deeper"}, "ok", None),
]


def test_each_tool_answers_within_caps_and_time(giant: Path, config: LabConfig, tmp_path: Path) -> None:
    turns: list[ModelResponse] = [
        ModelResponse(tool_calls=[ToolCall(id=f"s{i}", name=name, arguments=args)])
        for i, (name, args, _, _) in enumerate(CALLS)
    ]
    model = ScriptedModel([*turns, final(GOOD)])
    launcher = SubagentLauncher(config, giant, model_factory=lambda c, m: model, trace_dir=tmp_path / "runs")
    overrides = {
        "max_steps": len(CALLS) + 2,
        "total_token_budget": 2_000_000,
        "context_token_budget": 1_000_000,
    }
    result = launcher.launch(SubagentRequest(task="probe sizes", overrides=overrides))
    assert result.terminal_reason == "completed", result.detail
    finished = finished_calls(result.trace_path)
    problems: dict[str, tuple[object, ...]] = {}
    for i, (name, args, status, needle) in enumerate(CALLS):
        event = finished[f"s{i}"]
        label = f"{name} {args}"
        if event.status != status or (needle is not None and needle not in event.text):
            problems[label] = (status, event.status, event.text[:300])
        if event.duration_s >= PER_CALL_S:
            problems[label] = ("slow", event.duration_s)
        if len(event.text) > MAX_OBSERVATION_CHARS + 200:
            problems[label] = ("long", len(event.text))
    assert not problems
    assert "blob.py" not in finished["s10"].text  # binary files are skipped by a directory search
    assert result.elapsed_s < 120
