"""The symbol index, its tools (Find, Refs, Outline, Search), the repo map and the retrieval floor."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subagent_lab.core.context import estimate_text
from subagent_lab.core.evidence import seen_check
from subagent_lab.tools.registry import build_tools
from subagent_lab.tools.symbols.index import clear_cache, file_role, index_for
from subagent_lab.tools.symbols.repo_map import repo_map, repo_map_observation
from subagent_lab.tools.symbols.search import retrieval_answer
from subagent_lab.tools.symbols.tools import find, outline, refs, search
from subagent_lab.workspace.sandbox import Workspace

LOADERS = '''"""Loaders find template sources."""

CACHE_SIZE = 400


class BaseLoader:
    """Base class of every loader."""

    def load(self, name):
        """Load a template by name."""
        source = self.get_source(name)
        return compile_source(source)

    def get_source(self, name):
        raise NotImplementedError


class FileLoader(BaseLoader):
    """Load templates from a directory on disk."""

    def __init__(self, path):
        self.path = path

    def get_source(self, name):
        """Read the template file under the search path."""
        with open(self.path + "/" + name) as handle:
            return handle.read()


@staticmethod
def compile_source(
    source,
    strict=False,
):
    """Turn template source into code."""
    def inner():
        return source
    return inner
'''

CONFIG = '''from pkg.loaders import FileLoader, BaseLoader


def parse_config_file(path):
    """Parse the configuration file and return its settings as a dictionary."""
    settings = {}
    for line in open(path):
        key, value = line.split("=")
        settings[key.strip()] = value.strip()
    return settings


def make_loader(settings):
    """Build the loader the settings ask for."""
    loader = FileLoader(settings["path"])
    loader.load("index.html")
    return loader


class CachedLoader(BaseLoader):
    def load(self, name):
        return BaseLoader.load(self, name)
'''

TEST_LOADERS = """from pkg.loaders import FileLoader


def test_load():
    loader = FileLoader("templates")
    assert loader.load("a.html")
    assert loader.load("b.html")
"""


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    clear_cache()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "docs").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "loaders.py").write_text(LOADERS)
    (root / "pkg" / "config.py").write_text(CONFIG)
    (root / "tests" / "test_loaders.py").write_text(TEST_LOADERS)
    (root / "docs" / "conf.py").write_text("from pkg.loaders import FileLoader\nFileLoader('x').load('y')\n")
    (root / "web").mkdir()
    (root / "web" / "app.ts").write_text(
        "// Render one page.\nexport function renderPage(name: string): string {\n  return name;\n}\n\n"
        "class Router {\n  route(path: string) {\n    return path;\n  }\n}\n"
    )
    (root / "web" / "util.js").write_text("const joinPath = (a, b) => a + b;\n")
    (root / "srv.go").write_text(
        "package srv\n\n// Server serves.\ntype Server struct{}\n\n"
        "func (s *Server) Start() error {\n\treturn nil\n}\n\nfunc New() *Server {\n\treturn &Server{}\n}\n"
    )
    return root


def _defs(ws: Workspace, rel: str) -> dict[str, tuple[str, int, int]]:
    return {d.qualname: (d.kind, d.start, d.end) for d in index_for(ws).files[rel].parse.definitions}


def test_python_definitions_have_kind_qualname_lines_signature_and_doc(tree: Path) -> None:
    ws = Workspace(tree)
    defs = _defs(ws, "pkg/loaders.py")
    assert defs["CACHE_SIZE"] == ("constant", 3, 3)
    assert defs["BaseLoader"] == ("class", 6, 15)
    assert defs["BaseLoader.load"] == ("method", 9, 12)
    assert defs["FileLoader.get_source"] == ("method", 24, 27)
    assert defs["compile_source"] == ("function", 30, 38)  # the decorator belongs to the unit
    assert defs["compile_source.inner"] == ("function", 36, 37)
    unit = next(
        d for d in index_for(ws).files["pkg/loaders.py"].parse.definitions if d.name == "compile_source"
    )
    assert unit.signature == "def compile_source(source, strict=False)"
    assert unit.doc == "Turn template source into code."


def test_javascript_typescript_and_go_definitions(tree: Path) -> None:
    ws = Workspace(tree)
    assert _defs(ws, "web/app.ts") == {
        "renderPage": ("function", 2, 4),
        "Router": ("class", 6, 10),
        "Router.route": ("method", 7, 9),
    }
    assert _defs(ws, "web/util.js") == {"joinPath": ("function", 1, 1)}
    assert _defs(ws, "srv.go") == {
        "Server": ("class", 4, 4),
        "Server.Start": ("method", 6, 8),
        "New": ("function", 10, 12),
    }
    ts = next(d for d in index_for(ws).files["web/app.ts"].parse.definitions if d.name == "renderPage")
    assert ts.doc == "Render one page." and ts.signature.startswith("function renderPage(name: string)")


@pytest.mark.parametrize(
    ("rel", "role"),
    [
        ("pkg/loaders.py", "library"),
        ("tests/test_x.py", "test"),
        ("pkg/tests/helpers.py", "test"),
        ("pkg/test_loader.py", "test"),
        ("conftest.py", "test"),
        ("srv/server_test.go", "test"),
        ("web/app.spec.ts", "test"),
        ("docs/conf.py", "doc"),
        ("examples/demo.py", "example"),
        ("pkg/testing_utils.py", "library"),  # a file name that starts with "test" but is not test_*
    ],
)
def test_file_role_is_read_from_the_path(rel: str, role: str) -> None:
    assert file_role(rel) == role


def test_find_resolves_a_dotted_name_to_its_member(tree: Path) -> None:
    ws = Workspace(tree)
    text = find(ws, "FileLoader.get_source").text
    assert "pkg/loaders.py:24-27 method FileLoader.get_source" in text
    assert "BaseLoader.get_source" not in text  # the class part picks one of the two
    assert "Read the template file under the search path." in text
    full = find(ws, "pkg.loaders.BaseLoader.load").text
    assert "pkg/loaders.py:9-12 method BaseLoader.load" in full and "CachedLoader" not in full
    skipped = find(ws, "repo.pkg.FileLoader.get_source").text  # the root's name, a module left out
    assert skipped.startswith("1 definition of") and "pkg/loaders.py:24-27" in skipped
    both = find(ws, "load").text
    assert both.index("pkg/config.py") < both.index("pkg/loaders.py:9-12")  # library, by path


def test_find_of_one_function_lists_what_it_calls_and_where_that_is_defined(tree: Path) -> None:
    observation = find(Workspace(tree), "BaseLoader.load")
    lines = observation.text.splitlines()
    assert "  calls get_source: pkg/loaders.py:14-15 method BaseLoader.get_source" in lines  # its own class
    assert "  calls compile_source: pkg/loaders.py:30-38 function compile_source" in lines
    # Seen means printed (issue 36): the callee's header line is named, its body is not shown.
    assert seen_check(["pkg/loaders.py:30"], observation.spans)[0] == 1.0
    assert seen_check(["pkg/loaders.py:30-38"], observation.spans)[0] == 0.0
    assert "calls" not in find(Workspace(tree), "FileLoader").text  # a class: its members, not calls


def test_find_does_not_take_another_packages_name_for_a_workspace_definition(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    ids = "class Symbols:\n    def ref(self, name):\n        return name\n"
    (tmp_path / "pkg" / "ids.py").write_text(ids)
    env = tmp_path / "pkg" / "env.py"
    env.write_text("import weakref\n\n\ndef cache_key(loader):\n    return weakref.ref(loader)\n")
    text = find(Workspace(tmp_path), "cache_key").text
    assert "calls ref" not in text  # the file's only `.ref` is weakref's, not Symbols.ref
    # A `.ref` on a local object may be the workspace's method: then the call stays listed.
    env.write_text(
        "import weakref\n\n\ndef load(loader, symbols):\n"
        "    key = weakref.ref(loader)\n    return symbols.ref(key)\n"
    )
    clear_cache()
    lines = find(Workspace(tmp_path), "load").text.splitlines()
    assert "  calls ref: pkg/ids.py:2-3 method Symbols.ref" in lines


def test_a_name_written_as_a_call_is_looked_up_as_the_name(tree: Path) -> None:
    """Models copy the call from the task (``Environment.get_template(name)``)."""
    ws = Workspace(tree)
    assert find(ws, "BaseLoader.load(name)").text == find(ws, "BaseLoader.load").text
    assert find(ws, "`compile_source(source, strict=False)`").text == find(ws, "compile_source").text
    assert refs(ws, "get_source(name").text == refs(ws, "get_source").text


def test_find_and_refs_given_words_show_what_search_ranks_for_them(tree: Path) -> None:
    """The 0.5B model passes the task's sentence to Find; cut at its last '.', it was looked up as
    the empty name ('No definition named ""'), an observation that shows no code."""
    ws = Workspace(tree)
    tools = build_tools(["Find", "Refs", "Search"])  # as a run holds them, with their bound limits
    sentence = "Find the code that reads a template file from a directory on disk. If none, say so."
    searched = tools["Search"].invoke(ws, {"query": sentence}).text
    for name in ("Find", "Refs"):
        outcome = tools[name].invoke(ws, {"name": sentence})
        head, ranked = outcome.text.split("\n", 1)
        assert head.startswith('"Find the code that reads') and "is not a name" in head
        assert ranked == searched
        assert "pkg/loaders.py:" in ranked and 'No definition named ""' not in outcome.text
        # Seen means printed (issue 36): the ranked units' first lines, not their bodies.
        assert any(span.path == "pkg/loaders.py" and span.start >= 1 for span in outcome.spans)
        assert all(span.end == span.start for span in outcome.spans)
    assert "is not a name" in find(ws, "get source").text  # two words are words, not a name


def test_search_says_which_words_of_the_query_no_unit_holds(tree: Path) -> None:
    """A ranking always ranks something; the words no code holds are what tells "not there"."""
    text = search(Workspace(tree), "HTTP loader that downloads templates").text
    assert "No unit's name, docstring or code holds: HTTP, downloads." in text.splitlines()[1]
    assert "class FileLoader" in text  # the ranking is still shown
    assert "holds:" not in search(Workspace(tree), "load template source").text


def test_names_stay_names_for_find_and_refs(tree: Path) -> None:
    ws = Workspace(tree)
    for name in ("BaseLoader", "BaseLoader.load", "`get_source`", "compile_source(source)", "Pkg::load"):
        assert "is not a name" not in find(ws, name).text, name
        assert "is not a name" not in refs(ws, name).text, name


def test_find_of_a_made_up_name_shows_the_units_its_words_rank(tree: Path) -> None:
    """main asked Find TemplateLoader for "the loader classes"; the spelling-close names it was
    offered (TemplateModule) led it to another file, the units its words rank name the loaders."""
    outcome = find(Workspace(tree), "DiskLoader")
    assert outcome.text.startswith('No definition named "DiskLoader"')
    assert "pkg/loaders.py:18-27 class FileLoader" in outcome.text
    assert any(span.path == "pkg/loaders.py" and span.start == 18 for span in outcome.spans)


def test_find_of_an_unknown_name_offers_close_defined_names(tree: Path) -> None:
    text = find(Workspace(tree), "get_sourc").text
    assert "No definition named" in text and "get_source" in text


def test_find_spans_are_the_printed_header_so_only_citing_it_counts_as_seen(tree: Path) -> None:
    """Seen means printed (issue 36): Find prints a unit's signature line, not its body, so citing
    the unit whole (13-17) is unseen; its header line (13) is seen. Before, the whole unit was."""
    tools = build_tools(["Find"])
    outcome = tools["Find"].invoke(Workspace(tree), {"name": "make_loader"})
    assert outcome.status == "ok"
    share, unseen = seen_check(["pkg/config.py:13-17", "pkg/config.py:13"], outcome.spans)
    assert share == 0.5 and unseen == ["pkg/config.py:13-17"]
    assert seen_check(["pkg/config.py:13-19"], outcome.spans)[0] == 0.0  # past the unit: not shown


def test_refs_are_grouped_by_file_library_first_tests_and_docs_marked(tree: Path) -> None:
    ws = Workspace(tree)
    text = refs(ws, "FileLoader").text
    lines = text.splitlines()
    headers = [line for line in lines if not line.startswith(" ") and "(" in line and ":" not in line]
    assert headers == ["pkg/config.py (2)", "[doc] docs/conf.py (2)", "[test] tests/test_loaders.py (2)"]
    assert "  1: import: from pkg.loaders import FileLoader, BaseLoader" in lines
    assert any(line.startswith("  15: call in make_loader (13-17):") for line in lines)
    assert any(line.startswith("  20: subclass") for line in refs(ws, "BaseLoader").text.splitlines())
    assignments = refs(ws, "path").text
    assert "22: assign in FileLoader.__init__ (21-22): self.path = path" in assignments


def test_refs_spans_cover_each_line_and_its_enclosing_units_header(tree: Path) -> None:
    outcome = build_tools(["Refs"])["Refs"].invoke(Workspace(tree), {"name": "make_loader"})
    assert outcome.status == "ok"
    assert "No reference" in outcome.text  # defined, never called
    used = build_tools(["Refs"])["Refs"].invoke(Workspace(tree), {"name": "compile_source"})
    assert seen_check(["pkg/loaders.py:12", "pkg/loaders.py:9"], used.spans)[0] == 1.0
    # Seen means printed (issue 36): the holder 9-12 is named, only its line 12 printed.
    assert seen_check(["pkg/loaders.py:9-12"], used.spans)[0] == 0.0


def test_outline_lists_definitions_with_line_ranges(tree: Path) -> None:
    ws = Workspace(tree)
    observation = outline(ws, "pkg/loaders.py")
    lines = observation.text.splitlines()
    assert lines[0] == "pkg/loaders.py — 38 lines, 9 definitions:"
    assert "6-15 class BaseLoader" in lines
    assert "  9-12 def load(self, name)" in lines
    # Seen means printed (issue 36): each signature line, not the bodies its ranges name.
    assert seen_check(["pkg/loaders.py:18"], observation.spans)[0] == 1.0
    assert seen_check(["pkg/loaders.py:18-27"], observation.spans)[0] == 0.0
    folder = outline(ws, "pkg").text
    assert "pkg/loaders.py: CACHE_SIZE, BaseLoader, FileLoader, compile_source" in folder


def test_outline_of_a_file_the_index_does_not_parse_is_an_error(tree: Path) -> None:
    (tree / "README.md").write_text("# hi\n")
    outcome = build_tools(["Outline"])["Outline"].invoke(Workspace(tree), {"path": "README.md"})
    assert outcome.status == "error" and "Read shows any text file" in outcome.text


def test_search_ranks_the_unit_the_query_describes_first(tree: Path) -> None:
    ws = Workspace(tree)
    text = search(ws, "parse the configuration file into settings").text
    first = text.splitlines()[1]
    assert first == "pkg/config.py:4-10 function parse_config_file"
    loader = search(ws, "read a template from disk").text.splitlines()[1]
    assert loader.startswith("pkg/loaders.py:18-27 class FileLoader") or loader.startswith(
        "pkg/loaders.py:24-27 method FileLoader.get_source"
    )
    assert retrieval_answer(ws, "parse the configuration file into settings", 2)[0] == "pkg/config.py:4-10"


def test_search_lists_library_units_before_tests(tree: Path) -> None:
    labels = retrieval_answer(Workspace(tree), "load a template", 20)
    roles = [file_role(label.split(":")[0]) for label in labels]
    assert "test" in roles and roles == sorted(roles, key=lambda role: role != "library")


def test_search_without_a_shared_word_says_so(tree: Path) -> None:
    assert "shares a word" in search(Workspace(tree), "zebra quantum").text


def test_unchanged_files_come_from_the_cache_and_a_change_is_rebuilt(tree: Path) -> None:
    ws = Workspace(tree)
    first = index_for(ws)
    assert first.stats.parsed == len(first.files) > 0
    assert index_for(ws) is first  # nothing changed: the very same index (and its search index)
    config = tree / "pkg" / "config.py"
    config.write_text(CONFIG + "\n\ndef added():\n    pass\n")
    os.utime(config, ns=(1, 1))  # a different mtime whatever the clock's resolution
    second = index_for(ws)
    assert second is not first and second.stats.parsed == 1 and second.stats.hashed == 1
    assert "added" in second.by_name
    os.utime(tree / "pkg" / "loaders.py", ns=(2, 2))  # touched, same bytes: hashed, not parsed
    third = index_for(ws)
    assert third.stats.hashed == 1 and third.stats.parsed == 0
    copy = Workspace(tree)  # another Workspace object on the same root shares the cache
    assert index_for(copy) is third


def test_repo_map_fits_its_budget_and_ranks_the_most_referenced_definition_first(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "core").mkdir(parents=True)
    (root / "core" / "base.py").write_text('def central(x):\n    """Used everywhere."""\n    return x\n')
    for number in range(6):
        body = "from core.base import central\n\n\n"
        body += "".join(f"def user_{number}_{k}():\n    return central({k})\n\n\n" for k in range(3))
        (root / "core" / f"user_{number}.py").write_text(body)
    (root / "tests").mkdir()
    (root / "tests" / "test_base.py").write_text(
        "from core.base import central\n\ndef test_c():\n    central(1)\n"
    )
    ws = Workspace(root)
    full = repo_map(ws, 10_000)
    lines = full.splitlines()
    assert lines[:2] == ["core/base.py:", "  1-3 def central(x)"]
    assert lines.index("[test] tests/test_base.py:") > max(
        i for i, line in enumerate(lines) if "user_5" in line
    )
    for budget in (5, 20, 60, 200):
        small = repo_map(ws, budget)
        assert estimate_text(small) <= budget
    assert repo_map(ws, 20).startswith("core/base.py:")
    shown = repo_map_observation(ws, 10_000)
    assert shown.text == full and seen_check(["core/base.py:1"], shown.spans)[0] == 1.0
    # Seen means printed (issue 36): the map prints a signature, not the body (685-3,429 lines per
    # package counted as seen before).
    assert seen_check(["core/base.py:1-3"], shown.spans)[0] == 0.0


def test_tools_go_through_workspace_containment_and_the_secret_policy(tree: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.py").write_text("def leaked_function():\n    pass\n")
    (tree / "pkg" / "linked.py").symlink_to(outside / "leak.py")
    (tree / "pkg" / "credentials.py").write_text("def secret_token():\n    return 'x'\n")
    (tree / "pkg" / "keys.py").write_text(
        "KEY = '''\n-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----\n'''\n"
        "def key_holder():\n    pass\n"
    )
    ws = Workspace(tree)
    index = index_for(ws)
    assert {"leaked_function", "secret_token", "key_holder"}.isdisjoint(index.by_name)
    assert not {"pkg/linked.py", "pkg/credentials.py", "pkg/keys.py"} & set(index.files)
    tools = build_tools(["Find", "Outline", "Search"])
    for path in ("pkg/linked.py", "pkg/credentials.py", "pkg/keys.py", "../outside/leak.py"):
        assert tools["Outline"].invoke(ws, {"path": path}).status == "denied"
    assert "No definition named" in tools["Find"].invoke(ws, {"name": "leaked_function"}).text
    assert "key_holder" not in tools["Search"].invoke(ws, {"query": "key holder"}).text


def test_build_tools_offers_the_symbol_tools_next_to_the_first_three() -> None:
    tools = build_tools(["Read", "Grep", "Find", "Refs", "Outline", "Search"])
    assert list(tools) == ["Read", "Grep", "Find", "Refs", "Outline", "Search"]
    for name in ("Find", "Refs", "Outline", "Search"):
        schema = tools[name].schema()["function"]
        assert len(schema["parameters"]["properties"]) == 1  # one argument a small model fills
    assert list(build_tools(["Read", "Grep", "Glob"])) == ["Read", "Grep", "Glob"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tool=st.sampled_from(["Find", "Refs", "Outline", "Search"]),
    text=st.one_of(
        st.text(max_size=300),
        st.sampled_from(["", ".", "..", "/", "/etc/passwd", "../x", "pkg/", "a" * 5000, "x.y.z.", "\x00"]),
    ),
)
def test_any_argument_gives_an_observation_never_an_exception(tree: Path, tool: str, text: str) -> None:
    tools = build_tools([tool])
    argument = {"Find": "name", "Refs": "name", "Outline": "path", "Search": "query"}[tool]
    outcome = tools[tool].invoke(Workspace(tree), {argument: text})  # any exception fails the test
    assert outcome.status in {"ok", "error", "denied"} and len(outcome.text) <= 16_200
