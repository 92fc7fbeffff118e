"""A miner that sizes and shares (issue 48, item 4): --since, --max, --sample, the summary's
counts, ``tasks merge`` and several ``sweep --tasks`` files, on a small real history."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from subagent_lab.bench.suite import load_suite
from subagent_lab.cli.main import main

SRC = """def area(w, h):
    size = w * h
    return size


def perimeter(w, h):
    return 2 * (w + h)


def volume(w, h, d):
    return w * h * d
"""
DAY = 86_400
START = 1_700_000_000  # 2023-11-14


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Four request commits: one on day 0, three from day 10 on (one leaks its unit's name)."""
    root = tmp_path_factory.mktemp("share") / "geo"
    root.mkdir()
    clock = START
    shas: dict[str, str] = {}

    def git(*args: str) -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": "Ann", "GIT_AUTHOR_EMAIL": "a@example.org",
               "GIT_COMMITTER_NAME": "Ann", "GIT_COMMITTER_EMAIL": "a@example.org",
               "GIT_AUTHOR_DATE": f"{clock} +0000", "GIT_COMMITTER_DATE": f"{clock} +0000"}  # fmt: skip
        cmd = ["git", "-c", "commit.gpgsign=false", "-C", str(root), *args]
        return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout.strip()

    def commit(key: str, message: str, old: str, new: str, at: int) -> None:
        nonlocal clock
        clock = at
        path = root / "geo" / "shapes.py"
        text = path.read_text(encoding="utf-8") if path.exists() else SRC
        path.parent.mkdir(exist_ok=True)
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        git("add", "-A")
        git("commit", "-q", "-m", message)
        shas[key] = git("rev-parse", "HEAD")

    git("init", "-q", "-b", "main")
    commit("init", "Initial import", "", "", START)
    commit("a", "Fix the area of empty shapes", "w * h\n", "w * h or 0\n", START + 60)
    commit("b", "Fix perimeter for negative sides", "2 * (w + h)", "2 * (abs(w) + abs(h))", START + 10 * DAY)
    commit("c", "Handle a zero depth in the volume", "w * h * d", "w * h * (d or 1)", START + 11 * DAY)
    commit("d", "Return an int from area", "return size", "return int(size)", START + 12 * DAY)
    return root, shas


def _tasks(path: Path) -> list[dict[str, object]]:
    return list(yaml.safe_load(path.read_text(encoding="utf-8"))["tasks"])


def test_since_max_and_a_seeded_sample(
    history: tuple[Path, dict[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, c = history
    out = tmp_path / "all.yaml"
    assert main(["mine", str(repo), "--out", str(out)]) == 0
    summary = capsys.readouterr().out
    assert len(_tasks(out)) == 4 and "gold warnings: leak 4, class-whole 0, long 0" in summary
    assert main(["mine", str(repo), "--out", str(out), "--since", "2023-11-20"]) == 0
    assert {t["meta"]["commit"] for t in _tasks(out)} == {c["b"], c["c"], c["d"]}  # type: ignore[index]
    assert capsys.readouterr().out.startswith("3 commits;")
    assert main(["mine", str(repo), "--out", str(out), "--max", "2"]) == 0
    assert {t["meta"]["commit"] for t in _tasks(out)} == {c["c"], c["d"]}  # type: ignore[index]
    picks = []
    for _ in range(2):
        assert main(["mine", str(repo), "--out", str(out), "--sample", "2", "--seed", "7"]) == 0
        picks.append(out.read_bytes())
        assert "2 tasks written" in capsys.readouterr().out and len(_tasks(out)) == 2
    assert picks[0] == picks[1]  # seeded: the same draw
    assert main(["mine", str(repo), "--out", str(out), "--since", "last week"]) == 2
    assert "--since must be a date" in capsys.readouterr().err


def test_tasks_merge_dedups_and_rebases_workspaces(
    history: tuple[Path, dict[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, c = history
    first, second, merged = (
        tmp_path / "a" / "one.yaml",
        tmp_path / "b" / "deep" / "two.yaml",
        tmp_path / "m.yaml",
    )
    assert main(["mine", str(repo), "--out", str(first), "--revs", f"{c['init']}..{c['c']}"]) == 0
    assert (
        main(["mine", str(repo), "--out", str(second), "--revs", f"{c['a']}..HEAD", "--name", "other"]) == 0
    )
    capsys.readouterr()
    assert main(["tasks", "merge", str(first), str(second), "-o", str(merged)]) == 0
    assert "4 tasks from 2 files" in capsys.readouterr().out  # b and c were in both (other ids, same commits)
    tasks = load_suite(merged)
    assert sorted(t.meta["commit"] for t in tasks) == sorted(c[k] for k in "abcd")
    assert {getattr(t.workspace, "git", None) for t in tasks} == {str(repo.resolve())}  # rebased to m.yaml
    assert str(repo.resolve()) not in merged.read_text(encoding="utf-8")
    assert main(["tasks", "merge", str(first)]) == 2
    assert "needs -o FILE" in capsys.readouterr().err


def test_sweep_takes_several_task_files(
    history: tuple[Path, dict[str, str]], tmp_path: Path, config_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, c = history
    one, two = tmp_path / "one.yaml", tmp_path / "x" / "two.yaml"
    assert main(["mine", str(repo), "--out", str(one), "--revs", f"{c['init']}..{c['b']}"]) == 0
    assert main(["mine", str(repo), "--out", str(two), "--revs", f"{c['a']}..HEAD"]) == 0
    argv = ["--config", config_path, "sweep", "--tasks", str(one), str(two), "--models", "none"]
    assert main([*argv, "--out", str(tmp_path / "sw")]) == 0
    assert "4 tasks from 2 files" in capsys.readouterr().out
    df = pd.read_csv(next((tmp_path / "sw").rglob("results.csv")))
    assert len(df) == 4 and df["func_acc_at5"].notna().all()


def test_a_new_user_mines_merges_samples_checks_and_sweeps_the_floors(
    history: tuple[Path, dict[str, str]], tmp_path: Path, config_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 48's scripted new user, end to end by the command line, in a folder of their own: two
    ranges mined into two files, merged, a seeded sample drawn, the files checked, the floors swept;
    an estimate first, Acc@k with intervals and the leak split, and no absolute path left behind."""
    repo, c = history
    work = tmp_path / "mine-here"
    one, two = work / "a" / "one.yaml", work / "b" / "two.yaml"
    merged, pick = work / "all.yaml", work / "pick.yaml"
    assert main(["mine", str(repo), "--out", str(one), "--revs", f"{c['init']}..{c['c']}"]) == 0
    assert main(["mine", str(repo), "--out", str(two), "--revs", f"{c['a']}..HEAD", "--name", "later"]) == 0
    assert main(["tasks", "merge", str(one), str(two), "-o", str(merged)]) == 0
    assert main(["mine", str(repo), "--out", str(pick), "--sample", "2", "--seed", "20"]) == 0
    assert main(["tasks", str(merged)]) == 0 and main(["tasks", str(pick)]) == 0
    capsys.readouterr()
    sweep = ["--config", config_path, "sweep", "--tasks", str(merged), "--models", "none,retrieval"]
    assert main([*sweep, "--out", str(work / "sweeps")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("estimate: 8 runs"), out[:200]
    table = out[out.index("Localization (Acc@k") :]
    assert "func Acc@5" in table and "leaks" in table and "[" in table  # intervals beside the means
    files = [p for p in work.rglob("*") if p.suffix in (".yaml", ".jsonl", ".csv", ".json")]
    assert len(files) >= 6
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert str(tmp_path) not in text and str(repo.resolve()) not in text, path
