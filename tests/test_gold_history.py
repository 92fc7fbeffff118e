"""The history gold warnings (issue 48): a comment-only gold unit and an sdist whose gold code is
not the parent's, read back from a written task on a small git history built here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from subagent_lab.bench.gold_history import History, history_warnings
from subagent_lab.bench.mine import is_source
from tests.test_mine_gold import Repo

CODE = '''def area(w, h):
    """The area."""
    return w * h  # plain


def side(w):
    return w
'''


def _task(repo: Repo, parent: str, commit: str, start: int, end: int, unit: str) -> dict[str, Any]:
    return {
        "gold": [{"path": "pkg/shapes.py", "start": start, "end": end, "anchor": f"def {unit}("}],
        "meta": {"parent": parent, "commit": commit, "units": [f"pkg.shapes.{unit}"]},
    }


def test_comment_and_docstring_changes_are_read_back_as_comment_only(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    parent = repo.commit("Initial import", {"pkg/__init__.py": "", "pkg/shapes.py": CODE})
    text = CODE.replace("# plain", "# type: ignore").replace("The area.", "The area, in units.")
    only_comments = repo.commit("Fix area comments", {"pkg/shapes.py": text})
    real = repo.commit("Fix side", {"pkg/shapes.py": text.replace("return w\n", "return abs(w)\n")})
    history = History(repo.root, is_source)
    assert history_warnings(_task(repo, parent, only_comments, 1, 3, "area"), None, history) == [
        "comment-only"
    ]
    assert history_warnings(_task(repo, only_comments, real, 6, 7, "side"), None, history) == []


def test_an_sdist_with_other_code_than_the_parent_is_read_back(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    parent = repo.commit("Initial import", {"pkg/__init__.py": "", "pkg/shapes.py": CODE})
    commit = repo.commit("Fix side", {"pkg/shapes.py": CODE.replace("return w\n", "return abs(w)\n")})
    task = _task(repo, parent, commit, 6, 7, "side")
    same, other = tmp_path / "same", tmp_path / "other"
    (same / "pkg").mkdir(parents=True)
    (same / "pkg" / "shapes.py").write_text(CODE, encoding="utf-8")
    (other / "pkg").mkdir(parents=True)
    (other / "pkg" / "shapes.py").write_text(CODE.replace("return w\n", "return int(w)\n"), encoding="utf-8")
    history = History(repo.root, is_source)
    assert history_warnings(task, same, history) == []
    assert history_warnings(task, other, history) == ["sdist!=parent"]


def test_a_changed_setter_is_not_read_as_its_unchanged_getter(tmp_path: Path) -> None:
    code = "class Box:\n    @property\n    def w(self):\n        return 1\n\n"
    code += "    @w.setter\n    def w(self, v):\n        pass\n"
    repo = Repo(tmp_path / "r")
    parent = repo.commit("Initial import", {"pkg/__init__.py": "", "pkg/shapes.py": code})
    commit = repo.commit("Fix the Box w setter", {"pkg/shapes.py": code.replace("pass", "self.v = v")})
    task = _task(repo, parent, commit, 6, 8, "Box.w")
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "shapes.py").write_text(code, encoding="utf-8")
    history = History(repo.root, is_source)
    assert history_warnings(task, tree, history) == [] and history_warnings(task, None, history) == []
    getter = _task(repo, parent, commit, 2, 4, "Box.w")  # the getter is the same at the commit
    assert history_warnings(getter, tree, history) == ["comment-only"]
