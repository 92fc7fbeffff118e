"""The small-model interface (Grep/Read/Glob from ``tools/simple.py``) and observation spans.

Exercised through ``Tool.invoke`` as the loop calls them, with the tool set ``build_tools`` gives
a child by default.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from subagent_lab.core.tool import MAX_OBSERVATION_CHARS, Observation, ObservationBuilder, Tool
from subagent_lab.core.types import Span, ToolOutcome
from subagent_lab.tools import simple_grep
from subagent_lab.tools.registry import GLOB, GREP, READ, build_tools
from subagent_lab.tools.simple import ObservationLimits
from subagent_lab.tools.simple_grep import LINE_CHARS
from subagent_lab.workspace.sandbox import Workspace

LOADERS = """\
import os


class BaseLoader:
    def get_source(self, environment, template):
        raise TemplateNotFound(template)

    def load(self, environment, name):
        source = self.get_source(environment, name)
        return source


class FileSystemLoader(BaseLoader):
    def get_source(self, environment, template):
        return open(template).read()
"""


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "loaders.py").write_text(LOADERS)
    (root / "pkg" / "env.py").write_text(
        "from pkg.loaders import FileSystemLoader\n\nLOADER = FileSystemLoader()\n"
        "def get_template(name):\n    return LOADER.get_source(None, name)\n"
    )
    (root / "pkg" / "many.py").write_text("".join(f"item_{i} = 'needle'\n" for i in range(40)))
    (root / "pkg" / "long.py").write_text("".join(f"value_{i} = {i}\n" for i in range(1, 201)))
    (root / "notes.md").write_text("# Notes\nThe loader reads a.b files.\n")
    (root / ".env").write_text("TOKEN=needle-secret\n")
    return Workspace(root)


@pytest.fixture
def tools() -> dict[str, Tool]:
    return build_tools(["Grep", "Read", "Glob"])


def call(tool: Tool, ws: Workspace, **arguments: Any) -> ToolOutcome:
    return tool.invoke(ws, arguments)


def next_line(text: str) -> str:
    last = text.splitlines()[-1]
    assert last.startswith("Next: "), text
    return last


def read_target(text: str) -> tuple[str, int]:
    """The path and line a ``Next: Read path="..." line=N`` proposes."""
    found = re.search(r'Read path="([^"]+)" line=(\d+)', next_line(text))
    assert found, text
    return found.group(1), int(found.group(2))


# --- observations and spans --------------------------------------------------------------------


def test_builder_records_where_each_span_ends() -> None:
    out = ObservationBuilder()
    out.line("header")
    out.line("a.py:1: x", Span("a.py", 1, 1))
    out.line("b.py:2: y", Span("b.py", 2, 2))
    observation = out.build()
    assert observation.text == "header\na.py:1: x\nb.py:2: y"
    assert observation.spans == [Span("a.py", 1, 1), Span("b.py", 2, 2)]
    cut = observation.truncate(len("header\na.py:1: x\nb.py"))
    assert cut.spans == [Span("a.py", 1, 1)]
    assert observation.truncate(10_000) is observation
    assert Observation("no ends", [Span("a.py", 1, 1)]).truncate(3).spans == []


def test_invoke_drops_the_spans_a_cut_removes(ws: Workspace) -> None:
    def big(ws: Workspace) -> Observation:
        out = ObservationBuilder()
        for i in range(1, 400):
            out.line(f"f.py:{i}: " + "x" * 100, Span("f.py", i, i))
        return out.build()

    outcome = Tool("Big", big).invoke(ws, {})
    assert outcome.truncated and len(outcome.spans) < 399
    shown = {int(m) for m in re.findall(r"^f\.py:(\d+): x{100}$", outcome.text, re.MULTILINE)}
    assert {s.start for s in outcome.spans} == shown  # exactly the complete lines left
    plain = Tool("Plain", lambda ws: "just text").invoke(ws, {})
    assert plain.text == "just text" and plain.spans == []


def test_span_covers() -> None:
    span = Span("a.py", 10, 20)
    assert span.covers("a.py", 10) and span.covers("a.py", 12, 20)
    assert not span.covers("a.py", 9) and not span.covers("a.py", 15, 21) and not span.covers("b.py", 12)
    assert not Span("a.py").covers("a.py", 1)  # a listed path shows no line


def test_bound_arguments_are_not_in_the_schema(ws: Workspace) -> None:
    def sized(ws: Workspace, pattern: str, size: int = 3) -> str:
        """Echo.

        Args:
            pattern: What to echo.
            size: How many times.
        """
        return pattern * size

    tool = Tool("Echo", sized, bound={"size": 2})
    assert list(tool.schema()["function"]["parameters"]["properties"]) == ["pattern"]
    assert tool.invoke(ws, {"pattern": "ab"}).text == "abab"
    refused = tool.invoke(ws, {"pattern": "ab", "size": 9})
    assert refused.status == "error" and "size" in refused.text
    with pytest.raises(TypeError, match="nope"):
        Tool("Echo", sized, bound={"nope": 1})


def test_full_tools_return_spans(ws: Workspace) -> None:
    grep = call(GREP, ws, pattern="get_source", path="pkg/loaders.py")
    assert grep.spans == [Span("pkg/loaders.py", n, n) for n in (5, 9, 14)]
    files = call(GREP, ws, pattern="FileSystemLoader", files_only=True)
    assert files.spans == [Span("pkg/env.py", 0, 0), Span("pkg/loaders.py", 0, 0)]
    read = call(READ, ws, path="pkg/long.py", start=5, limit=10)
    assert read.spans == [Span("pkg/long.py", 5, 14)]
    listing = call(GLOB, ws, pattern="**/*.md")
    assert listing.spans == [Span("notes.md", 0, 0)]
    assert call(READ, ws, path="nope.py").spans == [] and call(READ, ws, path=".env").spans == []


def test_full_read_span_ends_where_its_own_cap_stopped(ws: Workspace) -> None:
    (ws.root / "wide.txt").write_text("".join(f"{i:05d} " + "w" * 90 + "\n" for i in range(3000)))
    out = call(READ, ws, path="wide.txt", limit=2000)
    assert not out.truncated
    last_shown = int(out.text.splitlines()[-3].split("\t")[0])
    assert last_shown < 2000 and out.spans == [Span("wide.txt", 1, last_shown)]


# --- simple Grep -------------------------------------------------------------------------------


def test_simple_schemas_offer_only_what_a_small_model_needs(tools: dict[str, Tool]) -> None:
    params = {name: tool.schema()["function"]["parameters"] for name, tool in tools.items()}
    assert list(params["Grep"]["properties"]) == ["pattern", "path"] and params["Grep"]["required"] == [
        "pattern"
    ]
    assert list(params["Read"]["properties"]) == ["path", "line"] and params["Read"]["required"] == ["path"]
    assert list(params["Glob"]["properties"]) == ["pattern", "path"]
    for tool in tools.values():
        function = tool.schema()["function"]
        assert all(prop.get("description") for prop in function["parameters"]["properties"].values())
        docs = function["description"] + str(function["parameters"])
        assert not re.search(r"\b(src|app|foo|example)/", docs), docs  # no copyable placeholder paths


def test_grep_is_literal_and_case_insensitive(ws: Workspace, tools: dict[str, Tool]) -> None:
    out = call(tools["Grep"], ws, pattern="get_source(self")
    assert out.status == "ok" and "pkg/loaders.py" in out.text and "No match" not in out.text
    assert "  5: def get_source(self, environment, template):" in out.text
    upper = call(tools["Grep"], ws, pattern="FILESYSTEMLOADER")
    assert "No match" not in upper.text and "class FileSystemLoader(BaseLoader):" in upper.text
    dotted = call(tools["Grep"], ws, pattern="a.b", path="notes.md")  # '.' is no wildcard
    assert "reads a.b files" in dotted.text
    literal_only = call(tools["Grep"], ws, pattern="a.c", path="notes.md")
    assert "Nothing matched" in literal_only.text or "No match" in literal_only.text
    assert "reads a.b files" not in literal_only.text.split("instead.")[0]


def test_grep_groups_matches_by_file(ws: Workspace, tools: dict[str, Tool]) -> None:
    out = call(tools["Grep"], ws, pattern="get_source")
    lines = out.text.splitlines()
    assert lines[0] == '4 matches for "get_source" in 2 files:'
    # the file that defines the name comes first, then one "  line: text" row per match
    assert lines[1:5] == [
        "pkg/loaders.py",
        "  5: def get_source(self, environment, template):",
        "  9: source = self.get_source(environment, name)",
        "  14: def get_source(self, environment, template):",
    ]
    assert lines[5:7] == ["pkg/env.py", "  5: return LOADER.get_source(None, name)"]
    assert out.spans == [
        Span("pkg/loaders.py", 5, 5), Span("pkg/loaders.py", 9, 9), Span("pkg/loaders.py", 14, 14),
        Span("pkg/env.py", 5, 5),
    ]  # fmt: skip
    assert lines[-1] == 'Next: Read path="pkg/loaders.py" line=5 to see the code around the definition'


def test_grep_next_line_names_a_real_location(ws: Workspace, tools: dict[str, Tool]) -> None:
    for pattern in ("get_source", "FileSystemLoader", "needle", "reads"):
        out = call(tools["Grep"], ws, pattern=pattern)
        path, line = read_target(out.text)
        assert (ws.root / path).is_file()
        assert Span(path, line, line) in out.spans  # the proposed line is one the model saw
        assert "<" not in next_line(out.text)  # no placeholder


def test_grep_caps_and_counts_the_rest(ws: Workspace) -> None:
    grep = build_tools(["Grep"], limits=ObservationLimits(grep_max_matches=5))["Grep"]
    out = call(grep, ws, pattern="needle")
    lines = out.text.splitlines()
    assert lines[0] == '40 matches for "needle" in 1 file; the first 5:'
    assert len([line for line in lines if line.startswith("  ")]) == 5
    assert "Not shown: 35 more in pkg/many.py (35)." in out.text
    assert len([s for s in out.spans if s.start]) == 5
    assert "TOKEN" not in out.text and ".env" not in out.text  # secrets stay unsearched


def test_grep_lists_definitions_then_the_busiest_file_first(ws: Workspace) -> None:
    (ws.root / "pkg" / "z_last.py").write_text("def needle_maker():\n    pass\n")
    grep = build_tools(["Grep"], limits=ObservationLimits(grep_max_matches=2))["Grep"]
    out = call(grep, ws, pattern="needle")
    # z_last.py sorts last by path but defines a name with the word in it: it comes first
    assert out.text.splitlines()[1:3] == ["pkg/z_last.py", "  1: def needle_maker():"]
    assert read_target(out.text) == ("pkg/z_last.py", 1)
    (ws.root / "pkg" / "z_last.py").write_text("x = 'needle'\n")
    (ws.root / "pkg" / "a_first.py").write_text("y = 'needle'\n")
    out = call(grep, ws, pattern="needle")
    assert out.text.splitlines()[1] == "pkg/many.py"  # no definition: the busiest file first
    assert "Not shown: 40 more in pkg/many.py (38), pkg/a_first.py (1), pkg/z_last.py (1)." in out.text
    assert read_target(out.text) == ("pkg/many.py", 1)
    assert Span("pkg/a_first.py", 0, 0) in out.spans  # named in the counts: shown, without lines


def test_grep_trims_long_lines(ws: Workspace, tools: dict[str, Tool]) -> None:
    (ws.root / "bundle.js").write_text("x" * 5000 + "needle_in_bundle" + "y" * 5000 + "\n")
    out = call(tools["Grep"], ws, pattern="needle_in_bundle")
    row = next(line for line in out.text.splitlines() if line.startswith("  1: "))
    assert "needle_in_bundle" in row and len(row) < LINE_CHARS + 60


def test_grep_broadens_to_an_identifier_and_says_so(ws: Workspace, tools: dict[str, Tool]) -> None:
    out = call(tools["Grep"], ws, pattern="def get_template(name, globals=None)")
    first = out.text.splitlines()[0]
    assert first == (
        'No match for "def get_template(name, globals=None)"; showing matches for "get_template" instead.'
    )
    assert "  4: def get_template(name):" in out.text
    assert read_target(out.text) == ("pkg/env.py", 4)
    words = call(tools["Grep"], ws, pattern="yaml safe loader")
    assert words.text.startswith('No match for "yaml safe loader"; showing matches for "loader" instead.')
    regex = call(tools["Grep"], ws, pattern="def \\w+_source\\(")  # regex escapes are no names
    assert regex.text.startswith(
        'No match for "def \\\\w+_source\\\\("; showing matches for "_source" instead.'
    )
    assert read_target(regex.text) == ("pkg/loaders.py", 5)


def test_grep_total_miss_suggests_one_shorter_word(ws: Workspace, tools: dict[str, Tool]) -> None:
    out = call(tools["Grep"], ws, pattern="zzqv_frobnicator")
    lines = out.text.splitlines()
    assert lines[0].startswith('Nothing matched "zzqv_frobnicator" (also tried "frobnicator"')
    assert lines[-1] == 'Next: Grep pattern="frobnica" (one shorter word)'
    assert out.spans == []


def test_grep_narrowed_miss_falls_back_to_the_whole_workspace(ws: Workspace, tools: dict[str, Tool]) -> None:
    out = call(tools["Grep"], ws, pattern="get_template", path="pkg/loaders.py")
    assert out.text.startswith(
        'No match for "get_template" in "pkg/loaders.py"; showing its matches in the whole workspace instead.'
    )
    guessed = call(tools["Grep"], ws, pattern="get_template", path="src/jinja2")
    assert guessed.text.startswith('"src/jinja2" does not exist, so the whole workspace was searched.')
    assert "pkg/env.py" in guessed.text
    assert call(tools["Grep"], ws, pattern="needle", path=".env").status == "denied"
    assert call(tools["Grep"], ws, pattern="needle", path="../outside").status == "denied"


def test_grep_stops_broadening_when_its_time_is_spent(
    ws: Workspace, tools: dict[str, Tool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(simple_grep, "BROADEN_BUDGET_S", 0.0)
    out = call(tools["Grep"], ws, pattern="def get_template(name, globals=None)")
    assert out.text.splitlines()[0] == "Stopped broadening the search after 0 s."
    assert "get_template(name):" not in out.text and out.spans == []


def test_grep_bounds_runaway_patterns(ws: Workspace, tools: dict[str, Tool]) -> None:
    runaway = "get_template, " * 200
    out = call(tools["Grep"], ws, pattern=runaway)
    assert out.status == "ok" and "cut to its first 200 characters" in out.text
    assert "  4: def get_template(name):" in out.text
    multi = call(tools["Grep"], ws, pattern="class FileSystemLoader\n    def get_source")
    assert "Only the first line" in multi.text and "class FileSystemLoader(BaseLoader):" in multi.text
    assert call(tools["Grep"], ws, pattern="").status == "error"


# --- simple Read -------------------------------------------------------------------------------


def test_read_shows_a_window_around_the_line(ws: Workspace, tools: dict[str, Tool]) -> None:
    out = call(tools["Read"], ws, path="pkg/long.py", line=100)
    lines = out.text.splitlines()
    assert lines[0] == "File: pkg/long.py — lines 90-139 of 200"
    assert lines[1] == "    90\tvalue_90 = 90" and lines[50] == "   139\tvalue_139 = 139"
    # The window is seen; the asked line is also marked on its own, as the line worth citing.
    assert out.spans == [Span("pkg/long.py", 90, 139), Span("pkg/long.py", 100, 100)]
    assert lines[-1] == "Next: finish citing pkg/long.py:100"
    top = call(tools["Read"], ws, path="pkg/long.py", line=3)
    assert top.spans == [Span("pkg/long.py", 1, 50), Span("pkg/long.py", 3, 3)]
    assert call(tools["Read"], ws, path="pkg/long.py").spans == [Span("pkg/long.py", 1, 50)]


def test_read_window_size_is_the_harness_s(ws: Workspace) -> None:
    read = build_tools(["Read"], limits=ObservationLimits(read_window=20))["Read"]
    assert call(read, ws, path="pkg/long.py", line=50).spans[0] == Span("pkg/long.py", 40, 59)
    assert call(read, ws, path="pkg/long.py", line=50, window=400).status == "error"


def test_read_end_of_file(ws: Workspace, tools: dict[str, Tool]) -> None:
    out = call(tools["Read"], ws, path="pkg/loaders.py", line=14)
    assert out.spans[0] == Span("pkg/loaders.py", 4, 15)
    assert next_line(out.text) == "Next: finish citing pkg/loaders.py:14 (this is the end of the file)"
    past = call(tools["Read"], ws, path="pkg/long.py", line=5000)
    assert past.status == "ok" and "Line 5000 is past the end of the file (200 lines)" in past.text
    assert past.spans == [Span("pkg/long.py", 151, 200)]
    head = call(tools["Read"], ws, path="pkg/loaders.py")
    assert next_line(head.text) == "Next: finish citing pkg/loaders.py:4 (this is the end of the file)"


def test_read_finds_a_guessed_path(ws: Workspace, tools: dict[str, Tool]) -> None:
    out = call(tools["Read"], ws, path="src/pkg/loaders.py", line=5)
    assert out.status == "ok"
    assert out.text.startswith('"src/pkg/loaders.py" does not exist; showing "pkg/loaders.py".')
    assert out.spans[0] == Span("pkg/loaders.py", 1, 15)
    (ws.root / "other").mkdir()
    (ws.root / "other" / "loaders.py").write_text("x = 1\n")
    ambiguous = call(tools["Read"], ws, path="lib/loaders.py")
    assert ambiguous.status == "error" and "other/loaders.py, pkg/loaders.py" in ambiguous.text
    assert next_line(ambiguous.text) == 'Next: Read path="other/loaders.py" line=1'
    unknown = call(tools["Read"], ws, path="src/parser.py")
    assert (
        unknown.status == "error"
        and next_line(unknown.text) == 'Next: Glob pattern="**/*parser*" to find the file'
    )


def test_read_keeps_the_full_tools_safety(ws: Workspace, tools: dict[str, Tool]) -> None:
    (ws.root / "blob.bin").write_bytes(b"\x00\x01binary")
    assert call(tools["Read"], ws, path="blob.bin").status == "error"
    secret = call(tools["Read"], ws, path=".env")
    assert secret.status == "denied" and "needle" not in secret.text
    assert call(tools["Read"], ws, path="../outside.txt").status == "denied"
    directory = call(tools["Read"], ws, path="pkg")
    assert directory.status == "error" and "Glob" in directory.text
    (ws.root / "wide.txt").write_text("w" * 5000 + "\n")
    wide = call(tools["Read"], ws, path="wide.txt")
    assert "[line truncated" in wide.text and len(wide.text) < MAX_OBSERVATION_CHARS


# --- simple Glob -------------------------------------------------------------------------------


def test_glob_lists_paths_with_spans_and_a_next_step(ws: Workspace, tools: dict[str, Tool]) -> None:
    out = call(tools["Glob"], ws, pattern="**/*.py")
    lines = out.text.splitlines()
    assert lines[0] == '4 paths match "**/*.py" under ".":'
    assert lines[1:5] == ["pkg/env.py", "pkg/loaders.py", "pkg/long.py", "pkg/many.py"]
    assert out.spans == [Span(p, 0, 0) for p in lines[1:5]]
    assert lines[-1] == 'Next: Read path="pkg/env.py" line=1 to see the first file'


def test_glob_looks_deeper_and_narrows(ws: Workspace) -> None:
    glob = build_tools(["Glob"], limits=ObservationLimits(glob_max_results=2))["Glob"]
    deeper = call(glob, ws, pattern="loaders.py")
    assert deeper.text.startswith('No path matches "loaders.py" directly in "."; showing matches for')
    assert Span("pkg/loaders.py", 0, 0) in deeper.spans
    many = call(glob, ws, pattern="**/*")
    assert "the first 2:" in many.text.splitlines()[0]
    assert next_line(many.text).startswith('Next: narrow with Glob pattern="**/*" path="pkg"')
    none = call(glob, ws, pattern="**/*.rs")
    assert next_line(none.text) == 'Next: Glob pattern="*" path="." to list that directory'


# --- the registry ------------------------------------------------------------------------------


def test_build_tools_interfaces() -> None:
    simple = build_tools(["Grep", "Read"])
    assert list(simple) == ["Grep", "Read"] and "line" in str(simple["Read"].schema())
    full = build_tools(["Read", "Grep", "Glob"], interface="full")
    assert full == {"Read": READ, "Grep": GREP, "Glob": GLOB}
    with pytest.raises(ValueError, match="interface"):
        build_tools(["Read"], interface="fancy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Bash"):
        build_tools(["Bash"])


NASTY = [
    "", " ", "\x00", "a\x00b", "\ud800", "../", "/etc/passwd", ".env", "pkg", "pkg/", "(", "[a-", "\\",
    "*", "**/*", "{a,b}" * 12, "a|b|", "|||", "def (", "x" * 5000, "line one\nline two", "\r\n", "é",
    "pkg/../pkg/loaders.py", "~/.ssh/id_rsa",
]  # fmt: skip


def test_hostile_arguments_found_by_fuzzing(ws: Workspace, tools: dict[str, Tool]) -> None:
    long_name = call(tools["Read"], ws, path="x" * 5000)  # os.stat raises ENAMETOOLONG
    assert long_name.status == "error" and "does not exist" in long_name.text
    assert call(tools["Grep"], ws, pattern="get_source", path="x" * 5000).status == "ok"
    surrogate = call(tools["Glob"], ws, pattern="\ud800")  # echoed back: must stay valid UTF-8
    assert surrogate.status == "ok" and "\\ud800" in surrogate.text
    surrogate.model_dump_json()


@pytest.mark.parametrize("name", ["Grep", "Read", "Glob"])
def test_fuzzed_arguments_never_raise(ws: Workspace, tools: dict[str, Tool], name: str) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    text = st.one_of(st.sampled_from(NASTY), st.text(max_size=30))
    number = st.one_of(st.integers(-5, 500), st.sampled_from([0, 10**20, -(10**20)]))
    fields = tools[name].args_model.model_fields
    strategies = {field: number if field == "line" else text for field in fields}
    required = {f: s for f, s in strategies.items() if fields[f].is_required()}
    optional = {f: s for f, s in strategies.items() if not fields[f].is_required()}

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(arguments=st.fixed_dictionaries(required, optional=optional))
    def check(arguments: dict[str, Any]) -> None:
        outcome = tools[name].invoke(ws, arguments)  # any exception fails the test
        assert outcome.status in ("ok", "error", "denied")
        assert len(outcome.text) <= MAX_OBSERVATION_CHARS + 200
        assert "needle-secret" not in outcome.text
        if outcome.status == "ok":
            assert outcome.text.splitlines()[-1].startswith("Next: ")
        outcome.model_dump_json()

    check()
