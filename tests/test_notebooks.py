"""The notebooks need one import: ``import subagent_lab as sl``, and every ``sl.`` name they use exists.

Read from the committed ``.ipynb`` files (code cells parsed with ``ast``, nothing run: the notebooks
need a model server).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from conftest import REPO

import subagent_lab as sl

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def code_cells(path: Path) -> list[str]:
    """The notebook's code cells as Python: IPython magics and shell lines left out."""
    cells = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        if source.lstrip().startswith("%%"):  # a cell magic: the body is not Python
            continue
        lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
        cells.append("\n".join(lines))
    return cells


def internal_imports(source: str) -> list[str]:
    """The imports of ``source`` that reach past the package's public names into a submodule."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("subagent_lab.")]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module.startswith("subagent_lab."):
                found.append(node.module)
            elif node.module == "subagent_lab":
                found += [f"subagent_lab.{a.name}" for a in node.names if a.name not in sl.__all__]
    return found


def sl_names(source: str) -> set[str]:
    """The attributes read off ``sl`` in ``source``."""
    return {
        node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sl"
    }


def test_the_checks_see_what_they_look_for() -> None:
    cell = (
        "import subagent_lab as sl\nimport subagent_lab.api.runs\n"
        "from subagent_lab.experiments.delegation import run_study\n"
        "from subagent_lab import experiments, sweep\nsl.explore(sl.nope)"
    )
    assert internal_imports(cell) == [
        "subagent_lab.api.runs", "subagent_lab.experiments.delegation", "subagent_lab.experiments",
    ]  # fmt: skip
    assert sl_names(cell) == {"explore", "nope"}
    assert internal_imports("import subagent_lab as sl\nfrom subagent_lab import sweep") == []


def test_there_are_notebooks_with_code() -> None:
    assert len(NOTEBOOKS) >= 5 and all(code_cells(path) for path in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_notebook_imports_only_the_package(path: Path) -> None:
    found = [name for source in code_cells(path) for name in internal_imports(source)]
    assert found == [], f"{path.name} imports internal modules; export the names in subagent_lab/__init__.py"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_sl_name_a_notebook_uses_exists(path: Path) -> None:
    used = set().union(*(sl_names(source) for source in code_cells(path)))
    assert used - {*sl.__all__, "__file__"} == set()
