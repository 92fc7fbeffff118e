"""Dependencies point one way: no module imports from a layer above its own.

Every module of the package must be placed in ``LAYERS``; a new module that is not fails the test,
so its place in the architecture is a decision, not an accident. Imports inside functions count too
(a lazy import that points up is still an upward dependency).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "subagent_lab"

LAYERS: list[tuple[str, set[str]]] = [
    ("leaves", {"types", "secret_policy", "yaml_load", "weights", "llama_server", "tools.bwrap"}),
    ("config", {"contracts", "agent_profile", "profiles", "redact"}),
    ("core", {"trace", "budget", "context", "provenance", "metrics"}),
    ("tools, workspace, models", {
        "tools", "tools.base", "tools.read", "tools.grep", "tools.glob", "tools.simple", "tools.simple_grep",
        "tools.readonly", "tools.edit", "tools.bash", "sandbox", "permissions", "scratch",
        "models", "models.base", "models.tokens", "models.actions", "models.openai_chat", "models.cache",
        "models.scripted", "server",
    }),
    ("loop", {"loop_state", "dispatch", "calls", "loop"}),
    ("agents", {"launch_io", "launcher", "task_tool", "agent_tools", "agent_result", "agent"}),
    ("experiments", {"bench", "bench.suite", "bench.scoring", "experiments", "experiments.sweep",
                     "experiments.analysis"}),
    ("faces", {"widgets", "widgets.records", "widgets.render", "widgets.run_inspector",
               "widgets.sweep_explorer", "report", "api", "api_views", "recorded", "cli", "cli_lab", ""}),
]  # fmt: skip
"""Bottom to top. ``""`` is the package itself (``subagent_lab/__init__.py``, the public API)."""
LAYER = {module: i for i, (_, modules) in enumerate(LAYERS) for module in modules}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "subagent_lab":
            base = node.module.removeprefix("subagent_lab").lstrip(".")
            for alias in node.names:  # `from subagent_lab import weights` imports the module weights
                name = f"{base}.{alias.name}" if base else alias.name
                found.add(name if name in LAYER else base)
        elif isinstance(node, ast.Import):
            found |= {
                a.name.removeprefix("subagent_lab").lstrip(".")
                for a in node.names
                if a.name.startswith("subagent_lab")
            }
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer() -> None:
    assert sorted(_module(p) for p in MODULES if _module(p) not in LAYER) == []


@pytest.mark.parametrize("path", MODULES, ids=_module)
def test_no_import_points_up(path: Path) -> None:
    own = LAYER[_module(path)]
    upward = sorted(m for m in _imports(path) if m in LAYER and LAYER[m] > own)
    assert upward == [], f"{_module(path)} ({LAYERS[own][0]}) imports from above: {upward}"


def test_the_check_sees_upward_imports(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from subagent_lab import weights\nfrom subagent_lab.launcher import SubagentLauncher\n"
        "def lazy():\n    import subagent_lab.experiments.sweep\n"
    )
    found = _imports(probe)
    assert {"weights", "launcher", "experiments.sweep"} <= found
    assert [m for m in found if LAYER[m] > LAYER["loop"]] != []  # placed in the loop layer, it would fail
