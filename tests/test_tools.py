"""Read, Grep and Glob, exercised through ``Tool.invoke`` exactly as the agent loop calls them."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from subagent_lab.core.tool import MAX_OBSERVATION_CHARS, Tool
from subagent_lab.core.types import ToolOutcome
from subagent_lab.tools import rg as rg_module
from subagent_lab.tools.registry import GLOB, GREP, READ, READONLY_TOOLS, build_tools, simple_tools
from subagent_lab.workspace.sandbox import Workspace


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "repo"
    outside = tmp_path / "outside"
    (root / "src" / "app").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "build").mkdir()
    (root / "node_modules" / "lib").mkdir(parents=True)
    outside.mkdir()
    (outside / "leak.txt").write_text("needle from outside\n")
    (root / "src" / "app" / "main.py").write_text(
        "import os\n\n\ndef main():\n    return find_needle()\n\n\ndef find_needle():\n    return 42\n"
    )
    (root / "src" / "app" / "util.py").write_text("# Needle in caps\nVALUE = 'needle'\n")
    (root / "src" / "a.txt").write_text("alpha\n")
    (root / "src" / "b.txt").write_text("beta\n")
    (root / "src" / "c.txt").write_text("gamma\n")
    (root / "src" / "types.pyi").write_text("x: int\n")
    (root / "docs" / "guide.md").write_text("# Guide\nsee needle\n")
    (root / "build" / "out.py").write_text("needle = 'built'\n")
    (root / "node_modules" / "lib" / "index.js").write_text("needle\n")
    (root / "debug.log").write_text("needle in a log\n")
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    (root / ".env").write_text("API_KEY=needle-secret\n")
    (root / "id_rsa").write_text("-----BEGIN needle KEY-----\n")
    (root / ".hidden.cfg").write_text("needle = hidden\n")
    (root / "leak_link.txt").symlink_to(outside / "leak.txt")
    (root / "outside_dir").symlink_to(outside)
    (root / "loop").symlink_to("loop")
    (root / "main_link.py").symlink_to("src/app/main.py")
    return Workspace(root)


def call(tool: Tool, ws: Workspace, **arguments: Any) -> ToolOutcome:
    return tool.invoke(ws, arguments)


# --- Read ------------------------------------------------------------------------------------


def test_read_happy_path(ws: Workspace) -> None:
    out = call(READ, ws, path="src/app/main.py")
    assert out.status == "ok"
    lines = out.text.splitlines()
    assert lines[0] == "File: src/app/main.py — lines 1-9 of 9"
    assert lines[1] == "     1\timport os"
    assert lines[4] == "     4\tdef main():"
    assert lines[9] == "     9\t    return 42"
    assert len(lines) == 10


def test_read_window_and_continuation(ws: Workspace) -> None:
    (ws.root / "long.py").write_text("".join(f"line {i}\n" for i in range(1, 1001)))
    out = call(READ, ws, path="long.py", start=10, limit=3)
    assert out.status == "ok"
    assert out.text.splitlines() == [
        "File: long.py — lines 10-12 of 1000",
        "    10\tline 10",
        "    11\tline 11",
        "    12\tline 12",
        "[988 more lines; call Read with start=13 to continue]",
    ]
    past = call(READ, ws, path="long.py", start=1001)
    assert past.status == "error" and "past the end" in past.text and "1000 lines" in past.text
    bad = call(READ, ws, path="long.py", start=0)
    assert bad.status == "error"


def test_read_caps_limit_and_output_size(ws: Workspace) -> None:
    (ws.root / "wide.txt").write_text("".join(f"{i:05d} " + "w" * 90 + "\n" for i in range(5000)))
    out = call(READ, ws, path="wide.txt", limit=5000)
    assert out.status == "ok" and not out.truncated  # the tool stops itself, the harness never cuts
    assert len(out.text) <= MAX_OBSERVATION_CHARS
    assert "limit lowered from 5000 to the maximum of 2000" in out.text
    last_shown = int(out.text.splitlines()[-3].split("\t")[0])
    assert f"call Read with start={last_shown + 1} to continue" in out.text


def test_read_long_line_is_cut(ws: Workspace) -> None:
    (ws.root / "min.js").write_text("a" * 5000 + "\nshort\n")
    out = call(READ, ws, path="min.js")
    first, second = out.text.splitlines()[1:3]
    assert first.startswith("     1\t" + "a" * 2000 + " … [line truncated: 4.9 KB long]")
    assert second == "     2\tshort"


def test_read_50mb_single_line_is_fast(ws: Workspace) -> None:
    with open(ws.root / "one_line.txt", "wb") as handle:
        handle.write(b"z" * (50 * 1024 * 1024))
    started = time.monotonic()
    out = call(READ, ws, path="one_line.txt")
    assert time.monotonic() - started < 2.0
    assert out.status == "ok" and len(out.text) < 2200
    assert "[line truncated: 50.0 MB long]" in out.text


def test_read_sparse_2gb_file(ws: Workspace) -> None:
    with open(ws.root / "sparse.bin", "wb") as handle:
        handle.truncate(2 * 1024**3)
    with open(ws.root / "sparse_tail.log", "wb") as handle:
        handle.write(b"".join(b"row %d\n" % i for i in range(3000)))
        handle.truncate(2 * 1024**3)
    started = time.monotonic()
    binary = call(READ, ws, path="sparse.bin")
    text = call(READ, ws, path="sparse_tail.log", limit=5)
    far = call(READ, ws, path="sparse_tail.log", start=5000)
    assert time.monotonic() - started < 3.0
    assert binary.status == "error" and "binary" in binary.text
    assert text.status == "ok" and "     5\trow 4" in text.text
    assert "uncounted total (2.0 GB file)" in text.text and "start=6" in text.text
    assert far.status == "error" and "could not reach line 5000" in far.text


def test_read_binary_and_encoding(ws: Workspace) -> None:
    (ws.root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert call(READ, ws, path="image.png").status == "error"
    (ws.root / "latin1.txt").write_bytes(b"caf\xe9 au lait\r\nsecond\n")
    out = call(READ, ws, path="latin1.txt")
    assert out.status == "ok"
    assert "     1\tcaf\ufffd au lait" in out.text and "     2\tsecond" in out.text
    assert "not valid UTF-8" in out.text
    (ws.root / "empty.txt").write_text("")
    assert "empty" in call(READ, ws, path="empty.txt").text


def test_read_directory_points_to_glob(ws: Workspace) -> None:
    out = call(READ, ws, path="src")
    assert out.status == "error" and "directory" in out.text and "Glob" in out.text


def test_read_missing_file(ws: Workspace) -> None:
    out = call(READ, ws, path="src/nope.py")
    assert out.status == "error" and "does not exist" in out.text


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd", "../outside/leak.txt", "leak_link.txt", "outside_dir/leak.txt", "loop",
        "/dev/zero", "/proc/self/environ", ".env", "id_rsa",
    ],
)  # fmt: skip
def test_read_denied(ws: Workspace, path: str) -> None:
    out = call(READ, ws, path=path)
    assert out.status == "denied", out.text
    assert out.text.startswith("Denied: ")
    assert "needle" not in out.text


def test_read_fifo_does_not_hang(ws: Workspace) -> None:
    os.mkfifo(ws.root / "pipe")
    started = time.monotonic()
    out = call(READ, ws, path="pipe")
    assert out.status == "denied" and "FIFO" in out.text
    assert time.monotonic() - started < 1.0


def test_read_symlink_inside_is_followed(ws: Workspace) -> None:
    out = call(READ, ws, path="main_link.py", limit=1)
    assert out.status == "ok" and out.text.startswith("File: src/app/main.py")


# --- Grep ------------------------------------------------------------------------------------


def test_grep_happy_path(ws: Workspace) -> None:
    out = call(GREP, ws, pattern="needle")
    assert out.status == "ok"
    lines = out.text.splitlines()
    assert lines[:5] == [
        ".hidden.cfg:1: needle = hidden",
        "docs/guide.md:2: see needle",
        "src/app/main.py:5:     return find_needle()",
        "src/app/main.py:8: def find_needle():",
        "src/app/util.py:2: VALUE = 'needle'",
    ]
    assert lines[-2].startswith("[5 matching lines in 4 files") and "complete" in lines[-2]
    assert lines[-1] == (
        "[next: Read path='.hidden.cfg' start=1 limit=40 to see the code, or answer citing .hidden.cfg:1]"
    )
    # secrets, gitignored paths, default-ignored dirs and links leaving the root are not searched
    for hidden in (".env", "id_rsa", "debug.log", "build/", "node_modules", "leak", "outside"):
        assert hidden not in out.text


def test_grep_options(ws: Workspace) -> None:
    insensitive = call(GREP, ws, pattern="NEEDLE", path="src", case_insensitive=True, glob="*.py")
    assert "src/app/util.py:1: # Needle in caps" in insensitive.text
    assert "docs/" not in insensitive.text
    files = call(GREP, ws, pattern="needle", files_only=True)
    expected = [".hidden.cfg", "docs/guide.md", "src/app/main.py", "src/app/util.py"]
    assert files.text.splitlines()[:4] == expected
    context = call(GREP, ws, pattern="def main", path="src/app/main.py", context=1)
    assert context.text.splitlines()[:3] == [
        "src/app/main.py-3- ",
        "src/app/main.py:4: def main():",
        "src/app/main.py-5-     return find_needle()",
    ]
    capped = call(GREP, ws, pattern="needle", max_results=2)
    assert len([line for line in capped.text.splitlines() if ": " in line and not line.startswith("[")]) == 2
    assert "capped at max_results=2" in capped.text


def test_grep_no_match_and_invalid_regex(ws: Workspace) -> None:
    none = call(GREP, ws, pattern="zzz_not_here")
    assert none.status == "ok" and none.text.startswith("No matches for 'zzz_not_here'")
    bad = call(GREP, ws, pattern="foo(")
    assert bad.status == "error" and "regex" in bad.text and "unclosed group" in bad.text
    huge = call(GREP, ws, pattern="a{1000}{1000}")
    assert huge.status == "error" and "size limit" in huge.text


def test_grep_catastrophic_pattern_is_fast(ws: Workspace) -> None:
    (ws.root / "aaa.txt").write_text("a" * 200_000 + "!\n")
    started = time.monotonic()
    out = call(GREP, ws, pattern="(a+)+$")
    also = call(GREP, ws, pattern="(x+x+)+y", path="aaa.txt")
    assert time.monotonic() - started < 3.0
    assert out.status == "ok" and also.status == "ok"
    assert "aaa.txt" not in out.text


def test_grep_non_utf8_content_and_names(ws: Workspace) -> None:
    (ws.root / "latin1.txt").write_bytes(b"caf\xe9 needle\n")
    (ws.root / os.fsdecode(b"n\xe9me.txt")).write_bytes(b"needle in odd name\n")
    out = call(GREP, ws, pattern="needle", glob="*.txt")
    assert out.status == "ok"
    assert "latin1.txt:1: caf\ufffd needle" in out.text
    assert "n\ufffdme.txt:1: needle in odd name" in out.text
    out.model_dump_json()  # the observation must be serialisable


def test_grep_long_line_window(ws: Workspace) -> None:
    (ws.root / "bundle.js").write_text("x" * 100_000 + "needle" + "y" * 100_000 + "\n")
    out = call(GREP, ws, pattern="needle", path="bundle.js")
    line = out.text.splitlines()[0]
    assert "needle" in line and len(line) < 400 and "[line of 200006 chars]" in line


def test_grep_denied_and_fifo(ws: Workspace) -> None:
    assert call(GREP, ws, pattern="needle", path="../outside").status == "denied"
    assert call(GREP, ws, pattern="needle", path="outside_dir").status == "denied"
    assert call(GREP, ws, pattern="needle", path=".env").status == "denied"
    os.mkfifo(ws.root / "src" / "pipe")
    started = time.monotonic()
    out = call(GREP, ws, pattern="needle", path="src")
    assert out.status == "ok" and time.monotonic() - started < 3.0


def test_grep_timeout_is_an_error(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rg_module, "TIMEOUT_S", 0.0)  # the runner's own limit
    out = call(GREP, ws, pattern="needle")
    assert out.status == "error" and "cut after" in out.text and "narrow" in out.text


def test_grep_big_file_named_directly(ws: Workspace) -> None:
    with open(ws.root / "huge.txt", "wb") as handle:
        handle.truncate(2 * 1024**3)
    out = call(GREP, ws, pattern="needle", path="huge.txt")
    assert out.status == "error" and "limit" in out.text
    assert call(GREP, ws, pattern="needle").status == "ok"  # skipped in a directory search


# --- Glob ------------------------------------------------------------------------------------


def test_glob_braces_ranges_and_dirs(ws: Workspace) -> None:
    ranged = call(GLOB, ws, pattern="src/[a-b].txt")
    assert ranged.text.splitlines()[:-1] == ["src/a.txt", "src/b.txt"]
    negated = call(GLOB, ws, pattern="[!ab].txt", path="src")
    assert negated.text.splitlines()[:-1] == ["src/c.txt"]
    braces = call(GLOB, ws, pattern="**/*.{py,pyi}")
    expected = ["main_link.py", "src/app/main.py", "src/app/util.py", "src/types.pyi"]
    assert braces.text.splitlines()[:-1] == expected
    listing = call(GLOB, ws, pattern="*")
    names = listing.text.splitlines()[:-1]
    assert "docs/" in names and "src/" in names and "main_link.py" in names and ".gitignore" in names
    skipped = (
        ".env",
        "id_rsa",
        "debug.log",
        "build/",
        "node_modules/",
        "leak_link.txt",
        "outside_dir/",
        "loop",
    )
    assert not set(skipped) & set(names)
    dirs_only = call(GLOB, ws, pattern="**/")
    assert dirs_only.text.splitlines()[:-1] == ["docs/", "src/", "src/app/"]


def test_glob_semantics(ws: Workspace) -> None:
    top = call(GLOB, ws, pattern="*.py")
    assert top.text.splitlines()[:-1] == ["main_link.py"]
    nothing = call(GLOB, ws, pattern="*.md")
    assert nothing.status == "ok" and "use '**/*.md' for any depth" in nothing.text
    under = call(GLOB, ws, pattern="*.py", path="src/app")
    assert under.text.splitlines()[:-1] == ["src/app/main.py", "src/app/util.py"]
    assert call(GLOB, ws, pattern="../*").status == "error"
    assert call(GLOB, ws, pattern="*", path="../outside").status == "denied"
    assert call(GLOB, ws, pattern="*", path="src/a.txt").status == "error"
    explicit = call(GLOB, ws, pattern="*", path="node_modules/lib")
    assert explicit.text.splitlines()[:-1] == ["node_modules/lib/index.js"]


def test_glob_many_files_and_deep_tree(tmp_path: Path) -> None:
    many = tmp_path / "big" / "many"
    many.mkdir(parents=True)
    for index in range(100_000):
        os.close(os.open(many / f"f{index:06d}.txt", os.O_CREAT | os.O_WRONLY, 0o644))
    deep = tmp_path / "big" / os.path.join(*["d"] * 300)
    deep.mkdir(parents=True)
    (deep / "bottom.py").write_text("x\n")
    ws = Workspace(tmp_path / "big")
    started = time.monotonic()
    out = call(GLOB, ws, pattern="**/*.txt", max_results=50)
    assert out.status == "ok" and not out.truncated
    assert out.text.splitlines()[0] == "many/f000000.txt"
    assert "[50 of 100000 paths" in out.text and "narrow" in out.text
    bottom = call(GLOB, ws, pattern="**/bottom.py")
    assert bottom.text.splitlines()[0].endswith("/d/bottom.py")
    assert bottom.text.splitlines()[0].count("/") == 300
    assert time.monotonic() - started < 8.0


# --- tool set --------------------------------------------------------------------------------


def test_schemas_carry_parameter_descriptions() -> None:
    for tool in (READ, GREP, GLOB):
        function = tool.schema()["function"]
        assert function["description"]
        properties = function["parameters"]["properties"]
        assert properties and all(prop.get("description") for prop in properties.values())
    assert READ.schema()["function"]["parameters"]["required"] == ["path"]
    assert "1-based" in READ.schema()["function"]["parameters"]["properties"]["start"]["description"]
    assert GREP.schema()["function"]["parameters"]["required"] == ["pattern"]


def test_invalid_arguments_become_observations(ws: Workspace) -> None:
    out = READ.invoke(ws, {"path": "src/a.txt", "bogus": 1})
    assert out.status == "error" and "bogus" in out.text
    assert READ.invoke(ws, {}).status == "error"


def test_build_tools() -> None:
    assert list(build_tools(["Grep", "Read"])) == ["Grep", "Read"]
    assert set(READONLY_TOOLS) == {"Read", "Grep", "Glob"}
    with pytest.raises(ValueError, match="Bash"):
        build_tools(["Read", "Bash"])


def test_a_tool_schema_is_built_once_and_handed_out_as_a_copy() -> None:
    first = simple_tools()["Grep"]
    again = simple_tools()["Grep"]  # the registries build their tools for every run
    assert again.args_model is first.args_model
    schema = first.schema()
    assert schema == again.schema() and schema["function"]["parameters"]["properties"]
    schema["function"]["parameters"]["properties"].clear()  # a caller changing its copy
    assert again.schema()["function"]["parameters"]["properties"]
