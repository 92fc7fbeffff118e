"""The ``no-narrowing-word`` filter (issue 48 item 2): a request with no token that narrows the
search in the code's own terms is dropped by the miner, on small git histories built here."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagent_lab.bench import mine
from subagent_lab.bench.narrowing import (
    TreeNames,
    code_shaped,
    dir_sources,
    git_sources,
    name_parts,
    narrowing_words,
)
from tests.test_mine_gold import Repo

SHAPES = '''"""Shapes."""


def area(width, height):
    size = width * height
    return size


def perimeter(width, height):
    return 2 * (width + height)


class Box:
    def grow(self, n):
        self.n = n
'''
# twelve definitions all named "draw_*": "draw" is the tree's common word and narrows nothing
DRAWING = "".join(f"def draw_{c}(x):\n    return x + {i}\n\n\n" for i, c in enumerate("abcdefghijkl"))


def _history(tmp_path: Path) -> tuple[Repo, dict[str, str]]:
    repo = Repo(tmp_path / "pkg")
    test = "def test_spelling_error():\n    pass\n"
    repo.commit("Initial import", {"pkg/__init__.py": "", "pkg/shapes.py": SHAPES, "pkg/drawing.py": DRAWING,
                                   "tests/test_spelling.py": test})  # fmt: skip
    shas = {}
    steps = [
        ("vague", "Correct spelling error in the code", "return size", "return int(size)"),
        ("vague2", "Improve optimizations further", "2 * (width + height)", "(width + height) * 2"),
        ("common", "Make draw calls faster", "return x + 0", "return 0 + x"),
        ("name", "Speed up area for large inputs", "size = width * height", "size = height * width"),
        ("class", "Fix Box growth", "self.n = n", "self.n = n + 0"),
        ("param", "Handle a negative width", "return int(size)", "return abs(int(size))"),
    ]
    for key, message, old, new in steps:
        path = "pkg/drawing.py" if key == "common" else "pkg/shapes.py"
        shas[key] = repo.commit(message, repo.edit(old, new, path))
    return repo, shas


def test_miner_drops_requests_with_no_narrowing_word(tmp_path: Path) -> None:
    repo, shas = _history(tmp_path)
    result = mine.mine(repo.root, "HEAD~6..HEAD", name="pkg")
    kept = {t.commit.sha for t in result.tasks}
    assert kept == {shas["name"], shas["class"], shas["param"]}
    # "spelling" and "error" are only in a test's name (not source); "draw" is a part of every
    # definition of drawing.py (and of its module's name): too common to narrow
    assert result.removed["no-narrowing-word"] == 3
    assert "no-narrowing-word" in mine.FILTERS


def test_git_and_directory_trees_give_the_same_names(tmp_path: Path) -> None:
    repo, _ = _history(tmp_path)
    at_git = TreeNames(git_sources(repo.root, "HEAD", mine.is_source))
    on_disk = TreeNames(dir_sources(repo.root, mine.is_source))
    assert at_git.counts == on_disk.counts and at_git.definitions == on_disk.definitions
    assert at_git.names >= {"area", "perimeter", "Box", "grow", "shapes", "drawing"}
    assert "spelling" not in at_git.counts  # tests/ is not source


@pytest.mark.parametrize(
    ("request_", "tokens"),
    [
        ("Fix `gettz` caching", ["gettz"]),
        ("Make to_string faster", ["to_string"]),
        ("Handle HTTPError in getValue", ["HTTPError", "getValue"]),
        ("Use tz.gettz for names", ["tz.gettz"]),
        ("Fix the parser.py import", ["parser.py"]),
        ("Correct spelling error", []),
        ("Fix the thing. It was wrong.", []),
    ],
)
def test_code_shaped_tokens(request_: str, tokens: list[str]) -> None:
    assert code_shaped(request_) == tokens


def test_words_narrow_only_through_few_definitions() -> None:
    names = TreeNames([("pkg/shapes.py", SHAPES), ("pkg/drawing.py", DRAWING)])
    assert names.definitions == 2 + 4 + 12  # two modules, four defs, twelve draw_*
    assert narrowing_words("Speed up areas", names) == ["areas"]  # a stem of a definition
    assert narrowing_words("Fix heights", names) == ["heights"]  # a parameter's name
    assert narrowing_words("Fix Box", names) == ["Box"]  # a defined name, exactly
    assert narrowing_words("Improve draw speed", names) == []  # a part of 13 definitions of 18
    assert narrowing_words("Improve drawings", names) == ["drawings"]  # a module's name
    assert narrowing_words("Area is wrong", names) == []  # the first word is the verb's place
    assert narrowing_words("Fix it for the box with some more", names) == ["box"]  # function words skipped


def test_name_parts() -> None:
    assert name_parts("HTTPErrorHandler") == ["http", "error", "handler"]
    assert name_parts("get_tz_name2") == ["get", "tz", "name"]
