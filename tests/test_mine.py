"""The miner on a small git history built here: which commits become tasks, and their gold."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from subagent_lab.bench import mine
from subagent_lab.bench.units import parse_units
from subagent_lab.cli.main import main

CORE = '''"""Core."""


def greet(name):
    """Say hello."""
    if name is None:
        return "hello"
    return "hello " + name


class Clock:
    """A clock."""

    def __init__(self):
        self.t = 0

    @property
    def now(self):
        return self.t

    def tick(self):
        self.t += 1
        return self.t
'''


class Repo:
    """A throw-away git repository with fixed identities and dates (same history, same shas)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.clock = 1_700_000_000
        root.mkdir()
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str, author: str = "Ann Dev <ann@example.org>") -> str:
        self.clock += 60
        name, email = author[:-1].split(" <")
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
            "GIT_AUTHOR_DATE": f"{self.clock} +0000",
            "GIT_COMMITTER_DATE": f"{self.clock} +0000",
        }
        cmd = ["git", "-c", "commit.gpgsign=false", "-C", str(self.root), *args]
        return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout.strip()

    def write(self, files: dict[str, str]) -> None:
        for path, text in files.items():
            (self.root / path).parent.mkdir(parents=True, exist_ok=True)
            (self.root / path).write_text(text, encoding="utf-8")

    def commit(self, message: str, files: dict[str, str], **kw: str) -> str:
        self.write(files)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message, **kw)
        return self.git("rev-parse", "HEAD")

    def edit(self, path: str, old: str, new: str) -> dict[str, str]:
        text = (self.root / path).read_text(encoding="utf-8")
        assert old in text
        return {path: text.replace(old, new, 1)}


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Repo, dict[str, str]]:
    repo = Repo(tmp_path_factory.mktemp("mine") / "pkg")
    c: dict[str, str] = {}
    c["init"] = repo.commit(
        "Initial import",
        {"pkg/__init__.py": '__version__ = "1.0"\n', "pkg/core.py": CORE, "setup.py": "x = 1\n",
         "docs/index.md": "# pkg\n", "pkg/extra.py": "def extra():\n    return 1\n",
         "tests/test_core.py": "def test_x():\n    pass\n"},
    )  # fmt: skip
    fix = repo.edit("pkg/core.py", 'return "hello"\n', 'return "hello, stranger"\n')
    fix.update(repo.edit("tests/test_core.py", "pass", "assert True"))
    c["fix"] = repo.commit("Fix greet for a missing name (#12)\n\nFixes #11", fix)
    c["bot"] = repo.commit(
        "Fix tick overflow", repo.edit("pkg/core.py", "+= 1", "+= 2"), author="dependabot[bot] <bot@x.org>"
    )
    c["bump"] = repo.commit("Bump version to 1.1", repo.edit("pkg/__init__.py", "1.0", "1.1"))
    c["docs"] = repo.commit("Add a usage page", {"docs/usage.md": "use it\n"})
    c["format"] = repo.commit(
        "Make the layout consistent", repo.edit("pkg/core.py", "self.t = 0", "self.t  =  0")
    )
    c["docstring"] = repo.commit(
        "Improve the docstring of greet", repo.edit("pkg/core.py", "Say hello.", "Say hello to someone.")
    )
    repo.git("revert", "--no-edit", c["fix"])
    c["revert"] = repo.git("rev-parse", "HEAD")
    c["insert"] = repo.commit(
        "Add a step counter to the clock",
        repo.edit("pkg/core.py", "        self.t += 2\n", "        self.t += 2\n        self.ticks = 1\n"),
    )
    c["new-def"] = repo.commit(
        "Add a farewell helper",
        repo.edit("pkg/core.py", "name\n\n\nclass", 'name\n\n\ndef bye():\n    return "bye"\n\n\nclass'),
    )
    c["property"] = repo.commit(
        "Use the property in tick", repo.edit("pkg/core.py", "return self.t\n", "return self.now\n")
    )
    repo.git("mv", "pkg/extra.py", "pkg/more.py")
    c["rename"] = repo.commit("Rename the extra module", {})
    repo.git("checkout", "-q", "-b", "side")
    c["side"] = repo.commit("Add notes on the side branch", {"docs/notes.md": "notes\n"})
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "side", "-m", "Merge branch side")
    c["merge"] = repo.git("rev-parse", "HEAD")
    return repo, c


def test_exactly_the_request_commits_become_tasks(history: tuple[Repo, dict[str, str]]) -> None:
    repo, c = history
    result = mine.mine(repo.root)
    assert [t.commit.sha for t in result.tasks] == [c["fix"], c["insert"], c["property"]]
    assert [t.id for t in result.tasks] == [f"pkg-{c[k][:7]}" for k in ("fix", "insert", "property")]
    assert result.commits == 14
    assert dict(result.removed) == {
        "root": 1, "bot": 1, "version": 1, "no-source": 2, "formatting-only": 1,
        "docstring-only": 1, "revert": 1, "added-only": 1, "rename-only": 1, "merge": 1,
    }  # fmt: skip


def test_gold_is_the_innermost_unit_at_the_parent(history: tuple[Repo, dict[str, str]]) -> None:
    repo, c = history
    tasks = {t.commit.sha: t for t in mine.mine(repo.root).tasks}
    fix = tasks[c["fix"]]
    assert [(g.path, g.unit.qualname, g.unit.start, g.unit.end) for g in fix.units] == [
        ("pkg/core.py", "greet", 4, 8)
    ]
    assert fix.request == "Fix greet for a missing name"
    assert fix.prompt == mine.PROMPT_TEMPLATE.format(request="Fix greet for a missing name")
    assert fix.names_gold_symbol
    insert = tasks[c["insert"]]  # a pure insertion inside tick: tick, not the class
    parent_src = repo.git("show", f"{c['insert']}^:pkg/core.py")
    tick = next(u for u in parse_units(parent_src) or [] if u.qualname == "Clock.tick")
    assert [(g.unit.qualname, g.unit.start, g.unit.end) for g in insert.units] == [
        ("Clock.tick", tick.start, tick.end)
    ]
    assert not insert.names_gold_symbol
    assert [g.qualified for g in tasks[c["property"]].units] == ["pkg.core.Clock.now"]
    now = tasks[c["property"]].units[0].unit
    property_parent = repo.git("show", f"{c['property']}^:pkg/core.py").splitlines()
    assert property_parent[now.start - 1].strip() == "@property"  # decorators belong to it


def test_cli_writes_a_deterministic_task_file(history: tuple[Repo, dict[str, str]], tmp_path: Path) -> None:
    repo, c = history
    out = [tmp_path / "a" / "tasks.yaml", tmp_path / "b" / "tasks.yaml"]
    for path in out:
        assert main(["mine", str(repo.root), "--revs", f"{c['init']}..HEAD", "--out", str(path)]) == 0
    assert out[0].read_bytes() == out[1].read_bytes()
    data = yaml.safe_load(out[0].read_text(encoding="utf-8"))
    tasks = {t["id"]: t for t in data["tasks"]}
    fix = tasks[f"pkg-{c['fix'][:7]}"]
    assert fix["kind"] == "localize"
    # the clone's path relative to the task file, though neither folder holds the other
    rel = os.path.relpath(repo.root.resolve(), out[0].resolve().parent)
    assert fix["workspace"] == {"git": rel, "rev": c["init"]} and rel.startswith("..")
    assert str(repo.root.resolve()) not in out[0].read_text(encoding="utf-8")
    assert fix["gold"] == [{"path": "pkg/core.py", "start": 4, "end": 8, "anchor": "def greet("}]
    assert fix["meta"]["units"] == ["pkg.core.greet"] and fix["meta"]["parent"] == c["init"]
    assert list(tasks) == sorted(tasks)
    inside = repo.root / "bench" / "tasks.yaml"  # a task file inside the repository: relative
    assert main(["mine", str(repo.root), "--out", str(inside)]) == 0
    assert {t["workspace"]["git"] for t in yaml.safe_load(inside.read_text(encoding="utf-8"))["tasks"]} == {
        ".."
    }
    inside.unlink()


def test_remap_finds_units_by_qualified_name_in_another_tree(
    history: tuple[Repo, dict[str, str]], tmp_path: Path
) -> None:
    repo, c = history
    task = next(t for t in mine.mine(repo.root).tasks if t.commit.sha == c["insert"])
    tree = tmp_path / "pkg-1.0"
    (tree / "src" / "pkg").mkdir(parents=True)
    (tree / "src" / "pkg" / "core.py").write_text("import os\n\n" + CORE, encoding="utf-8")
    mapped = mine.remap(task, tree)
    assert mapped is not None
    gold = mapped.units[0]
    assert (gold.path, gold.unit.qualname) == ("src/pkg/core.py", "Clock.tick")
    lines = (tree / gold.path).read_text(encoding="utf-8").splitlines()
    assert (
        lines[gold.unit.start - 1].strip() == "def tick(self):"
        and lines[gold.unit.end - 1].strip() == "return self.t"
    )
    (tree / "src" / "pkg" / "core.py").write_text(CORE.replace("def tick", "def step"), encoding="utf-8")
    assert mine.remap(task, tree) is None


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Fix crash on negative delta (#123)", "Fix crash on negative delta"),
        ("time: handle tz-aware datetimes\n\nCloses #4.", "handle tz-aware datetimes"),
        ("[core] Add `foo` option. Fixes gh-9\n\nIt was missing.", "Add `foo` option. It was missing"),
        ("Fix it\n\nSigned-off-by: A <a@b>", "Fix it"),
    ],
)
def test_request_text_strips_references_and_prefixes(message: str, expected: str) -> None:
    assert mine.request_text(message) == expected


def test_subject_rule() -> None:
    assert mine.reads_as_request("Fixes rounding of large sizes")
    assert mine.reads_as_request("Added support for sizes")
    assert not mine.reads_as_request("Rounding of large sizes fixed")
    assert not mine.reads_as_request("Fix typo")  # fewer than three words


def test_cli_maps_gold_into_an_sdist_tree(
    history: tuple[Repo, dict[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, c = history
    tree = tmp_path / "pkg-1.0"
    (tree / "src" / "pkg").mkdir(parents=True)
    no_property = CORE.replace("    @property\n    def now(self):\n        return self.t\n\n", "")
    (tree / "src" / "pkg" / "core.py").write_text("import os\n" + no_property, encoding="utf-8")
    out, sha = tmp_path / "t.yaml", "ab" * 32
    argv = ["mine", str(repo.root), "--out", str(out), "--workspace-sdist", "pkg==1.0", "--tree", str(tree)]
    assert main(argv) == 2  # no --sha256
    assert main([*argv, "--sha256", sha]) == 0
    tasks = yaml.safe_load(out.read_text(encoding="utf-8"))["tasks"]
    # insert's parent has tick's `+= 2` (the bot's commit), this tree `+= 1`: not the parent's code
    assert [t["meta"]["commit"] for t in tasks] == [c["fix"]]
    assert "1 sdist-differs" in capsys.readouterr().out
    assert all(t["workspace"] == {"sdist": "pkg==1.0", "sha256": sha} for t in tasks)
    greet = next(t for t in tasks if t["meta"]["commit"] == c["fix"])["gold"]
    assert greet == [{"path": "src/pkg/core.py", "start": 5, "end": 9, "anchor": "def greet("}]


def test_mine_then_sweep_prints_the_lift_table(
    history: tuple[Repo, dict[str, str]], tmp_path: Path, config_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end as a user runs it: `subagent-lab mine` then `subagent-lab sweep --tasks`, the two
    floors (no model), the lift table with the strongest floor named."""
    repo, c = history
    config = config_path
    tasks = tmp_path / "mined.yaml"
    assert main(["mine", str(repo.root), "--revs", f"{c['init']}..HEAD", "--out", str(tasks)]) == 0
    assert "tasks written to" in capsys.readouterr().out
    argv = ["--config", str(config), "sweep", "--tasks", str(tasks), "--models", "none,retrieval"]
    assert main([*argv, "--out", str(tmp_path / "sw")]) == 0
    out = capsys.readouterr().out
    assert "Quality, lift over" in out and "strongest floor" in out
    results = next((tmp_path / "sw").rglob("results.csv"))
    df = pd.read_csv(results)
    n_tasks = len(yaml.safe_load(tasks.read_text(encoding="utf-8"))["tasks"])
    assert len(df) == 2 * n_tasks and set(df["model_choice"]) == {"none", "retrieval"}
    assert df["func_acc_at5"].notna().all() and (df["terminal_reason"] == "completed").all()
