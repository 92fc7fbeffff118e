"""The miner's gold rules, each on a small real git history built here (issue 48, item 1), and
the history it survives (issue 52: a token in a message, a nesting too deep for ``ast``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from subagent_lab.bench import mine
from subagent_lab.bench.mine_file import SdistTarget, mine_to_file

BASE = '''"""Shapes."""

LIMIT = 3


def area(w, h):
    """The area."""
    size = w * h
    return size


class Box:
    """A box."""

    kind = "box"
    sides = 4

    def __init__(self, w):
        self.w = w

    def grow(self, n):
        self.w += n

    def shrink(self, n):
        self.w -= n
        return self.w
'''


class Repo:
    """A throw-away git repository with fixed identities and dates."""

    def __init__(self, root: Path) -> None:
        self.root, self.clock = root, 1_700_000_000
        root.mkdir()
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        self.clock += 60
        when = f"{self.clock} +0000"
        env = {**os.environ, "GIT_AUTHOR_NAME": "Ann", "GIT_AUTHOR_EMAIL": "ann@example.org",
               "GIT_COMMITTER_NAME": "Ann", "GIT_COMMITTER_EMAIL": "ann@example.org",
               "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}  # fmt: skip
        cmd = ["git", "-c", "commit.gpgsign=false", "-C", str(self.root), *args]
        return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout.strip()

    def commit(self, message: str, files: dict[str, str]) -> str:
        for path, text in files.items():
            (self.root / path).parent.mkdir(parents=True, exist_ok=True)
            (self.root / path).write_text(text, encoding="utf-8")
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")

    def edit(self, old: str, new: str, path: str = "pkg/shapes.py") -> dict[str, str]:
        text = (self.root / path).read_text(encoding="utf-8")
        assert old in text, old
        return {path: text.replace(old, new, 1)}


def _repo(tmp_path: Path) -> Repo:
    repo = Repo(tmp_path / "pkg")
    repo.commit("Initial import", {"pkg/__init__.py": "", "pkg/shapes.py": BASE})
    return repo


def _gold(repo: Repo, sha: str) -> list[tuple[str, int, int]]:
    task = next(t for t in mine.mine(repo.root).tasks if t.commit.sha == sha)
    return [(g.unit.qualname, *g.lines) for g in task.units]


def _line(repo: Repo, sha: str, text: str) -> int:
    """The 1-based line of ``text`` in pkg/shapes.py at ``sha``'s parent."""
    lines = repo.git("show", f"{sha}^:pkg/shapes.py").splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip() == text)


def test_a_line_appended_to_a_method_or_a_function_is_theirs(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    method = repo.commit(
        "Return the new width from grow", repo.edit("self.w += n\n", "self.w += n\n        return self.w\n")
    )
    appended = repo.edit("    return size\n", "    return size\n    print(size)\n")
    func = repo.commit("Show the area when computing it", appended)
    grow = _line(repo, method, "def grow(self, n):")
    assert _gold(repo, method) == [("Box.grow", grow, grow + 1)]  # not Box, whole
    area = _line(repo, func, "def area(w, h):")
    assert _gold(repo, func) == [("area", area, area + 3)]  # not "module-level"


def test_comments_type_ignores_and_docstrings_make_no_gold(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    change = repo.edit("    size = w * h\n", "    size = w * h  # type: ignore[operator]\n")
    repo.commit("Make the shapes module pass mypy", change)
    text = change["pkg/shapes.py"]
    text = text.replace("    def grow(self, n):\n", "    def grow(self, n):\n        # widen by n\n")
    text = text.replace('"""A box."""', '"""A box with sides."""')
    text = text.replace("self.w -= n", "self.w -= abs(n)")
    sha = repo.commit("Fix shrink for negative steps", {"pkg/shapes.py": text})
    assert [q for q, _, _ in _gold(repo, sha)] == ["Box.shrink"]  # not area, grow nor Box
    assert mine.mine(repo.root).removed["formatting-only"] == 1  # the type: ignore commit


def test_a_class_is_gold_by_its_own_statements_and_an_added_method_is_not_gold(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    attr = repo.commit("Rename the box kind to crate", repo.edit('kind = "box"', 'kind = "crate"'))
    line = _line(repo, attr, 'kind = "box"')
    task = next(t for t in mine.mine(repo.root).tasks if t.commit.sha == attr)
    assert [(g.unit.qualname, *g.lines, g.anchor) for g in task.units] == [
        ("Box", line, line, 'kind = "box"')
    ]
    added = repo.edit(
        "    def shrink(self, n):\n", "    def reset(self):\n        self.w = 0\n\n    def shrink(self, n):\n"
    )
    only_added = repo.commit("Add a reset method to the box", added)
    both = repo.edit("self.w = w\n", "self.w = max(w, 0)\n")
    both.update({"pkg/shapes.py": both["pkg/shapes.py"] + "\n    def double(self):\n        self.w *= 2\n"})
    mixed = repo.commit("Fix the box width clamp and add double", both)
    result = mine.mine(repo.root)
    assert only_added not in {t.commit.sha for t in result.tasks} and result.removed["added-only"] == 1
    task = next(t for t in result.tasks if t.commit.sha == mixed)
    assert [g.unit.qualname for g in task.units] == ["Box.__init__"] and task.added == (
        "pkg.shapes.Box.double",
    )
    out = tmp_path / "t.yaml"
    mine_to_file(repo.root, out)
    rows = {t["meta"]["commit"]: t for t in yaml.safe_load(out.read_text(encoding="utf-8"))["tasks"]}
    assert rows[attr]["gold"] == [
        {"path": "pkg/shapes.py", "start": line, "end": line, "anchor": 'kind = "box"'}
    ]
    assert rows[mixed]["meta"]["added"] == ["pkg.shapes.Box.double"]


def test_a_commit_leaving_a_file_unparsable_is_filtered(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    repo.commit("Fix the limit of the area helper", repo.edit("    size = w * h\n", "    size = (w * h\n"))
    result = mine.mine(repo.root)
    assert not result.tasks and result.removed["unparsable"] == 1


def test_a_request_naming_what_the_tree_lacks_is_filtered(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    gone = repo.commit("Fix area for small_primes input", repo.edit("w * h", "w * h * 1"))
    new = repo.commit("Add a scale_factor to area", repo.edit("w * h * 1", "w * h * scale_factor"))
    there = repo.commit("Fix shrink_by semantics in `shrink`", repo.edit("self.w -= n", "self.w -= n or 0"))
    result = mine.mine(repo.root)
    kept = {t.commit.sha for t in result.tasks}
    assert gone not in kept and result.removed["absent-name"] == 2  # small_primes: nowhere
    assert new in kept  # scale_factor: the commit introduces it
    assert there not in kept  # shrink_by is nowhere either; `shrink` alone would pass


def test_an_sdist_with_other_code_than_the_parent_is_not_the_workspace(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    repo.commit("Fix shrink for negative steps", repo.edit("self.w -= n", "self.w -= abs(n)"))
    repo.commit("Fix grow for negative steps", repo.edit("self.w += n", "self.w += abs(n)"))
    repo.commit("Add a minimum width setting", repo.edit("LIMIT = 3\n", "LIMIT = 3\nmin_width = 0\n"))
    repo.commit("Fix widths below min_width", repo.edit("self.w = w\n", "self.w = max(w, min_width)\n"))
    tree = tmp_path / "pkg-1.0"
    (tree / "pkg").mkdir(parents=True)
    # The release before both commits, but shrink already differs there (another branch's change).
    (tree / "pkg" / "shapes.py").write_text(
        BASE.replace("return self.w", "return int(self.w)"), encoding="utf-8"
    )
    out = tmp_path / "s.yaml"
    mined = mine_to_file(repo.root, out, sdist=SdistTarget("pkg==1.0", "ab" * 32, tree))
    tasks = yaml.safe_load(out.read_text(encoding="utf-8"))["tasks"]
    assert [t["meta"]["units"] for t in tasks] == [["pkg.shapes.Box.grow"]]  # grow: same code as the parent
    assert mined.dropped["sdist-differs"] == 1 and "1 sdist-differs" in mined.summary()
    assert mined.dropped["absent-name"] == 1  # min_width: at the parent, not in the release's tree


def test_a_token_in_a_commit_message_is_masked_in_the_prompt(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    token = "ghp_" + "a1B2c3D4e5" * 4  # a GitHub token's shape, made here
    sha = repo.commit(f"Fix area when the token {token} is set", repo.edit("w * h", "w * h * 1"))
    out = tmp_path / "t.yaml"
    mine_to_file(repo.root, out)
    text = out.read_text(encoding="utf-8")
    assert token not in text and "[REDACTED]" in text and sha in text


def test_a_nesting_too_deep_for_ast_skips_that_commit_and_writes_the_rest(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    ok = repo.commit("Fix shrink for negative steps", repo.edit("self.w -= n", "self.w -= abs(n)"))
    deep = "x = 1" + " + 1" * 60_000 + "\n"
    repo.commit(
        "Add a deep expression to area", repo.edit("    size = w * h\n", "    size = w * h\n    " + deep)
    )
    out = tmp_path / "t.yaml"
    mined = mine_to_file(repo.root, out)
    assert mined.removed["too-deep"] == 1 and "too-deep 1" in mined.summary()
    assert [t["meta"]["commit"] for t in yaml.safe_load(out.read_text(encoding="utf-8"))["tasks"]] == [ok]
