"""Dependencies point one way: no module imports from a layer above its own.

Every module of the package must be placed in ``LAYERS``; a new module that is not fails the test,
so its place in the architecture is a decision, not an accident. Imports inside functions count too
(a lazy import that points up is still an upward dependency).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from subagent_lab.config.legacy import FLAT

PACKAGE = Path(__file__).resolve().parent.parent / "subagent_lab"

LAYERS: list[tuple[str, set[str]]] = [
    ("core", {"core"}),
    # The aids are policies over core's hooks and the tools; configuration names them by class.
    ("tools, workspace, scaffold", {"tools", "workspace", "scaffold"}),
    ("config", {"config"}),
    ("models", {"models"}),
    # The embedded engine above the adapters it serves (its factory makes them; the call cache's
    # namespace reads its weight specs): models/ never imports local_models/.
    ("local models", {"local_models"}),
    ("agents", {"agents"}),
    ("bench, analysis", {"bench", "analysis"}),
    ("experiments", {"experiments"}),
    ("faces", {"widgets", "api", "cli", ""}),
]  # fmt: skip
"""Bottom to top, one entry per folder of the package; a module belongs to its folder's layer.
``""`` is the package itself (``subagent_lab/__init__.py``, the public API)."""
FOLDER_LAYER = {folder: i for i, (_, folders) in enumerate(LAYERS) for folder in folders}


def layer_of(module: str) -> int | None:
    """The layer of a dotted module name below the package (``core.loop`` -> core's), or None."""
    return FOLDER_LAYER.get(module.split(".")[0] if module else "")


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The package modules a file imports, as dotted names below the package ("" for the package)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "subagent_lab":
            base = node.module.removeprefix("subagent_lab").lstrip(".")
            for alias in node.names:  # `from subagent_lab.tools import rg` imports the module rg
                named = f"{base}.{alias.name}" if base else alias.name
                found.add(named if named in NAMES else base)
        elif isinstance(node, ast.Import):
            found |= {
                a.name.removeprefix("subagent_lab").lstrip(".")
                for a in node.names
                if a.name.startswith("subagent_lab")
            }
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))
NAMES = frozenset(_module(p) for p in MODULES)


def test_every_module_has_a_layer() -> None:
    """Only the public API sits at the package root; every other module lives in a layer's folder."""
    assert sorted(_module(p) for p in MODULES if layer_of(_module(p)) is None) == []
    assert [p.name for p in PACKAGE.glob("*.py")] == ["__init__.py"]


@pytest.mark.parametrize("path", MODULES, ids=_module)
def test_no_import_points_up(path: Path) -> None:
    own = layer_of(_module(path))
    assert own is not None
    upward = sorted(m for m in _imports(path) if (layer_of(m) or 0) > own)
    assert upward == [], f"{_module(path)} ({LAYERS[own][0]}) imports from above: {upward}"


def test_the_check_sees_upward_imports(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from subagent_lab import api\nfrom subagent_lab.agents.launcher import SubagentLauncher\n"
        "def lazy():\n    import subagent_lab.experiments.sweep\n"
    )
    found = _imports(probe)
    assert {"api", "agents.launcher", "experiments.sweep"} <= found
    core = FOLDER_LAYER["core"]
    above = sorted(m for m in found if (layer_of(m) or 0) > core)
    assert above == ["agents.launcher", "api", "experiments.sweep"]


# --- the docs draw the same layers ----------------------------------------------------------------

ROOT = PACKAGE.parent


def table_layers(readme: str) -> list[set[str]]:
    """The package folders named by each row of README's "What is where" table whose first cell
    names one, in order (``subagent_lab/`` dropped, ``__init__.py`` as ``""``); rows of the
    repository's other folders (``notebooks/``, ``docs/``) are left out."""
    section = readme.split("## What is where\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = line.split(" | ")
        if not line.startswith("| `") or len(cells) < 2:
            continue
        names = {
            "" if n.endswith("__init__.py") else n.removeprefix("subagent_lab/").rstrip("/")
            for n in re.findall(r"`([^`]+)`", cells[0])
        }
        if names & FOLDER_LAYER.keys():
            rows.append(names)
    return rows


def chain_layers(design: str) -> list[set[str]]:
    """The folders of design.md's ``core → ... → widgets, api, cli`` line, one set a layer."""
    chain = re.search(r"`(core →[^`]*)`", design)
    assert chain is not None, "docs/design.md lost its `core → ...` line"
    return [{f.strip() for f in step.split(",")} for step in chain.group(1).split("→")]


def test_readme_table_and_design_chain_follow_the_layers() -> None:
    """README's table has one row a layer, in ``LAYERS``' order, each naming its layer's folders;
    design.md's chain says the same (it leaves the package's ``__init__.py`` out)."""
    expected = [folders for _, folders in LAYERS]
    assert table_layers((ROOT / "README.md").read_text(encoding="utf-8")) == expected
    assert chain_layers((ROOT / "docs" / "design.md").read_text(encoding="utf-8")) == [
        folders - {""} for folders in expected
    ]


def test_the_check_sees_a_table_that_lumps_or_swaps_layers() -> None:
    rows = {
        "core": "| `subagent_lab/core/` | the loop |",
        "tools": "| `subagent_lab/tools/`, `workspace/`, `scaffold/` | tools |",
        "config": "| `subagent_lab/config/` | profiles |",
        "models": "| `subagent_lab/models/` | adapters |",
        "local": "| `subagent_lab/local_models/` | the engine |",
        "agents": "| `subagent_lab/agents/` | the launcher |",
        "bench": "| `subagent_lab/bench/`, `analysis/` | tasks |",
        "experiments": "| `subagent_lab/experiments/` | grids |",
        "faces": "| `subagent_lab/widgets/`, `api/`, `cli/`, `__init__.py` | faces |",
        "docs": "| `docs/` | notes |",
    }

    def readme(*names: str) -> str:
        return "\n".join(
            [
                "## What is where",
                "",
                "| folder | what |",
                "|---|---|",
                *(rows[n] for n in names),
                "",
                "## Next",
            ]
        )

    expected = [folders for _, folders in LAYERS]
    good = list(rows)
    assert table_layers(readme(*good)) == expected
    swapped = [*good[:3], "local", "models", *good[5:]]
    assert table_layers(readme(*swapped)) != expected
    rows["models"] = "| `subagent_lab/models/`, `local_models/` | adapters and the engine |"
    assert table_layers(readme(*[n for n in good if n != "local"])) != expected
    assert chain_layers("`core → tools, workspace → scaffold → config`") == [
        {"core"},
        {"tools", "workspace"},
        {"scaffold"},
        {"config"},
    ]


# --- no import circle, within a layer too -------------------------------------------------------

KNOWN_CIRCLES: list[list[str]] = []
"""Circles not cut yet, each with why it exists, in sorted order; a new circle fails the test, and
so does a listed one that is gone (take it off the list)."""


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The module sets that import each other round a circle (the strongly connected components of
    more than one module, Tarjan's algorithm), each sorted, in sorted order."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            component = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return sorted(found)


def test_no_import_circle() -> None:
    """Every import counts, lazy and type-only ones too: the layer test cannot see a circle between
    modules of one layer (``models/`` and ``local_models/`` shared one until they were cut)."""
    graph = {_module(p): (_imports(p) & NAMES) - {_module(p)} for p in MODULES}
    found = circles(graph)
    edges = [f"{a} -> {b}" for c in found for a in c for b in sorted(graph[a]) if b in c]
    assert found == KNOWN_CIRCLES, f"import circles: {found}; their imports: {edges}"


def test_the_check_sees_a_circle_within_a_layer(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def lazy():\n    from subagent_lab.tools import rg, grep\n")
    assert _imports(probe) == {"tools.rg", "tools.grep"}
    graph = {
        "tools.a": {"tools.b"},
        "tools.b": {"tools.c", "core.x"},
        "tools.c": {"tools.a"},
        "core.x": set(),
    }
    assert circles(graph) == [["tools.a", "tools.b", "tools.c"]]
    assert circles({**graph, "tools.c": set()}) == []


# --- the core knows no scaffold ------------------------------------------------------------------

CORE = sorted((PACKAGE / "core").glob("*.py"))
TOOL_NAMES = re.compile(r"\b(Read|Grep|Glob)\b")
TOOL_ARGUMENTS = {"path", "line", "pattern"}
SCHEMA_WORDS = {("contracts", "path"), ("contracts", "pattern"), ("evidence", "pattern")}
"""Where core spells an argument name for another reason: the ``path:line`` evidence format's regex
group and the JSON schema keyword ``pattern``."""
SCAFFOLD_FLAGS = {*FLAT, "require_grounded", "search_words", "scaffold", "policy"}
"""The aids' old flat names (``config.legacy.FLAT``, one table), the scaffold itself and a policy's
spec name: core may test none of them (it sees policies only through their hooks)."""


def _code_strings(tree: ast.AST) -> list[str]:
    """String constants that are not docstrings (a docstring may say what a tool does)."""
    docs = {
        id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
    }
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


def test_core_names_no_tool_and_tests_no_scaffold_flag() -> None:
    named, arguments, flags, word_lists = [], set(), [], []
    for path in CORE:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        strings = _code_strings(tree)
        named += [f"{path.stem}: {s[:40]!r}" for s in strings if TOOL_NAMES.search(s)]
        arguments |= {(path.stem, s) for s in strings if s in TOOL_ARGUMENTS}
        flags += [
            f"{path.stem}:{n.lineno} .{n.attr}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr in SCAFFOLD_FLAGS
        ]
        flags += [
            f"{path.stem}:{n.lineno} {n.arg}="
            for n in ast.walk(tree)
            if isinstance(n, ast.keyword) and n.arg in SCAFFOLD_FLAGS
        ]
        word_lists += [
            f"{path.stem}:{n.lineno}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and getattr(n.func, "id", "") in ("frozenset", "set") and n.args
            and isinstance(n.args[0], ast.List | ast.Set) and len(n.args[0].elts) >= 10
        ]  # fmt: skip
    assert named == [] and flags == [] and word_lists == []
    assert arguments <= SCHEMA_WORDS


def test_the_check_sees_a_tool_name_and_a_flag(tmp_path: Path) -> None:
    tree = ast.parse('"""Read a file."""\nif spec.read_on:\n    allowed = ["Read", "finish"]\n')
    assert [s for s in _code_strings(tree) if TOOL_NAMES.search(s)] == ["Read"]
    assert [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)] == ["read_on"]


def test_loop_spec_holds_limits_sampling_grammar_caps_and_the_contract_only() -> None:
    from subagent_lab.core.loop_state import GrammarCaps, LoopSpec, RunLimits, Sampling

    assert set(LoopSpec.__dataclass_fields__) == {"limits", "sampling", "caps", "contract"}
    names = {
        *RunLimits.__dataclass_fields__,
        *Sampling.__dataclass_fields__,
        *GrammarCaps.__dataclass_fields__,
    }
    assert len(names) <= 15 and not names & SCAFFOLD_FLAGS
