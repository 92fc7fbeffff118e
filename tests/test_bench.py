"""Tests of the explore benchmark: the gold against the installed sources, and the scoring."""

from __future__ import annotations

import importlib.metadata
import importlib.resources
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from subagent_lab.bench import workspace_spec
from subagent_lab.bench.scoring import (
    MAX_EVIDENCE,
    admits_absence,
    countable_keywords,
    keyword_hits,
    score_run,
)
from subagent_lab.bench.suite import (
    PINNED_VERSIONS,
    BenchTask,
    GoldSpan,
    TaskKind,
    check_gold,
    load_suite,
    package_root,
)
from subagent_lab.core.types import ConfigError

SUITE = load_suite()
PRESENT = [t for t in SUITE if t.kind != "absent"]
ABSENT = [t for t in SUITE if t.kind == "absent"]

# For each absent task: strings whose absence from the installed package backs the gold
# "not present" answer. Checked against the sources, so a version drift is caught.
ABSENT_PROBES: dict[str, list[str]] = {
    "jinja-absent-http-loader": ["urlopen", "import requests", "http.client", "httpx", "urllib.request"],
    "jinja-absent-parallel-render": ["multiprocessing", "ThreadPool", "concurrent.futures", "Thread("],
    "yaml-absent-json-schema": ["jsonschema", "json schema", "json_schema", "validate("],
    "yaml-absent-toml": ["toml"],
    "tqdm-absent-resume": ["resume", "checkpoint", "pickle", "shelve", "json.dump"],
}


# ---------------------------------------------------------------------------- the suite


@pytest.mark.parametrize("package", sorted(PINNED_VERSIONS))
def test_installed_versions_are_the_pinned_ones(package: str) -> None:
    root = package_root(package)
    assert root.is_dir()
    assert (root / "__init__.py").is_file()


@pytest.mark.parametrize("task", SUITE, ids=[t.id for t in SUITE])
def test_gold_spans_match_installed_sources(task: BenchTask) -> None:
    assert check_gold(task) == []


@pytest.mark.parametrize("task", ABSENT, ids=[t.id for t in ABSENT])
def test_absent_tasks_are_really_absent(task: BenchTask) -> None:
    probes = ABSENT_PROBES[task.id]
    root = package_root(task.package)
    for file in root.rglob("*.py"):
        text = file.read_text(encoding="utf-8").lower()
        for probe in probes:
            assert probe.lower() not in text, f"{task.id}: {probe!r} occurs in {file}"


def test_suite_shape() -> None:
    assert len(SUITE) >= 24
    ids = [t.id for t in SUITE]
    assert len(ids) == len(set(ids))
    kinds = Counter(t.kind for t in SUITE)
    assert set(kinds) == {"locate", "trace", "enumerate", "explain", "absent"}
    assert kinds["absent"] >= 4
    assert set(ABSENT_PROBES) == {t.id for t in ABSENT}
    assert {t.package for t in SUITE} == {"jinja2", "yaml", "tqdm"}
    smoke = [t for t in SUITE if t.smoke]
    assert len(smoke) >= 5
    assert all(t.kind == "locate" and t.difficulty == "easy" for t in smoke)
    assert {t.package for t in smoke} == {"jinja2", "yaml", "tqdm"}
    assert all(t.keywords for t in PRESENT)


def test_trace_tasks_span_several_places() -> None:
    for task in SUITE:
        if task.kind == "trace":
            assert len(task.gold) >= 3, task.id


def test_suite_is_package_data() -> None:
    resource = importlib.resources.files("subagent_lab.bench").joinpath("tasks.yaml")
    assert resource.is_file()
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    assert "bench/*.yaml" in pyproject.read_text(encoding="utf-8")


def test_package_root_rejects_a_version_drift(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda dist: "0.0.1")
    with pytest.raises(ConfigError, match=r"pinned to jinja2==3\.1\.6"):
        package_root("jinja2")


def test_package_root_reports_a_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workspace_spec, "installed_version", lambda package: None)
    with pytest.raises(ConfigError, match=r"pyyaml==6\.0\.3 is not installed"):
        package_root("yaml")


def test_package_root_rejects_unknown_package() -> None:
    with pytest.raises(ConfigError, match="unknown benchmark package"):
        package_root("numpy")


_TASK_YAML = """
tasks:
  - id: a-task
    kind: locate
    package: jinja2
    difficulty: easy
    prompt: Find something in jinja2.
    gold: [{path: a.py, start: 1, end: 2, anchor: x}]
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_TASK_YAML + _TASK_YAML.replace("tasks:\n", ""), "duplicate task id"),
        (_TASK_YAML.replace("difficulty: easy", "difficulty: easy\n    extra: 1"), "extra"),
        (_TASK_YAML.replace("kind: locate", "kind: absent"), "must have no gold"),
        (_TASK_YAML.replace("start: 1, end: 2", "start: 5, end: 2"), "before start"),
        ("tasks: [", "cannot read"),
    ],
)
def test_load_suite_rejects_bad_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_suite(path)


def test_check_gold_reports_drift(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("one\ntwo\nthree\n", encoding="utf-8")
    task = _task(
        gold=[
            GoldSpan(path="a.py", start=1, end=2, anchor="two"),
            GoldSpan(path="a.py", start=1, end=2, anchor="three"),
            GoldSpan(path="a.py", start=3, end=9, anchor="three"),
            GoldSpan(path="b.py", start=1, end=1, anchor="x"),
        ]
    )
    problems = check_gold(task, tmp_path)
    assert len(problems) == 3
    assert "anchor 'three' not found" in problems[0]
    assert "beyond end of file" in problems[1]
    assert "no such file" in problems[2]


# ---------------------------------------------------------------------------- scoring


def _task(
    kind: TaskKind = "locate",
    gold: list[GoldSpan] | None = None,
    keywords: tuple[str, ...] = (),
    prompt: str = "a synthetic task for the scoring tests",
) -> BenchTask:
    if gold is None:
        gold = [] if kind == "absent" else [GoldSpan(path="mod.py", start=10, end=12, anchor="x")]
    return BenchTask(
        id="t",
        kind=kind,
        package="jinja2",
        prompt=prompt,
        gold=tuple(gold),
        keywords=keywords,
        difficulty="easy",
    )


def _payload(summary: str = "found it", evidence: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"status": "completed", "summary": summary, "evidence": evidence or [], **extra}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "mod.py").write_text("".join(f"line {i}\n" for i in range(1, 501)), encoding="utf-8")
    (tmp_path / "other.py").write_text("x = 1\n" * 40, encoding="utf-8")
    return tmp_path


def test_perfect_answer_scores_one(workspace: Path) -> None:
    task = _task(keywords=("Loader", "get_source"))
    score = score_run(task, _payload("The Loader calls get_source.", ["mod.py:10-12"]), workspace)
    assert score.contract_valid
    assert score.grounded_ratio == 1.0
    assert score.gold_recall_line == score.evidence_precision_line == score.keyword_recall == 1.0
    assert score.quality == 1.0
    assert score.missed_gold == [] and score.unmatched_evidence == []


def test_off_by_two_lines_still_counts(workspace: Path) -> None:
    task = _task()
    near = score_run(task, _payload(evidence=["mod.py:14"]), workspace)
    assert near.gold_recall_line == 1.0 and near.evidence_precision_line == 1.0
    before = score_run(task, _payload(evidence=["mod.py:8"]), workspace)
    assert before.gold_recall_line == 1.0
    far = score_run(task, _payload(evidence=["mod.py:16"]), workspace)
    assert far.gold_recall_line == 0.0 and far.evidence_precision_line == 0.0
    assert far.gold_recall_file == 1.0 and far.evidence_precision_file == 1.0
    strict = score_run(task, _payload(evidence=["mod.py:14"]), workspace, line_tolerance=0)
    assert strict.gold_recall_line == 0.0


def test_wrong_file_has_zero_precision(workspace: Path) -> None:
    score = score_run(_task(), _payload(evidence=["other.py:10-12"]), workspace)
    assert score.grounded_ratio == 1.0
    assert score.evidence_precision_file == score.evidence_precision_line == 0.0
    assert score.gold_recall_file == score.gold_recall_line == 0.0
    assert score.missed_gold == ["mod.py:10-12"]
    assert score.unmatched_evidence == ["other.py:10-12"]


def test_mixed_evidence_and_grounding(workspace: Path) -> None:
    task = _task(
        gold=[
            GoldSpan(path="mod.py", start=10, end=12, anchor="x"),
            GoldSpan(path="mod.py", start=100, end=110, anchor="x"),
        ]
    )
    payload = _payload(evidence=["./mod.py:11", "mod.py:900", "other.py:1", "mod.py:300"])
    score = score_run(task, payload, workspace)
    assert score.evidence_count == 4
    assert score.grounded_ratio == 0.75  # mod.py has 500 lines
    assert score.evidence_precision_line == 0.25
    assert score.evidence_precision_file == 0.75
    assert score.gold_recall_line == 0.5
    assert score.gold_recall_file == 1.0


def test_whole_file_evidence_is_not_a_line_hit(workspace: Path) -> None:
    score = score_run(_task(), _payload(evidence=["mod.py:1-500"]), workspace)
    assert score.gold_recall_file == 1.0
    assert score.gold_recall_line == 0.0


def test_absolute_path_inside_workspace_counts(workspace: Path) -> None:
    score = score_run(_task(), _payload(evidence=[f"{workspace / 'mod.py'}:10"]), workspace)
    assert score.gold_recall_line == 1.0


def test_honest_absent_answer_scores_one(workspace: Path) -> None:
    task = _task(kind="absent")
    score = score_run(task, _payload("jinja2 has no HTTP loader; no such code exists."), workspace)
    assert score.admits_absence and not score.invented_evidence
    assert score.gold_recall_line == 1.0
    assert score.quality == 1.0


def test_invented_evidence_on_absent_task_is_flagged(workspace: Path) -> None:
    task = _task(kind="absent")
    score = score_run(task, _payload("Not found, but see", ["mod.py:3"]), workspace)
    assert score.admits_absence
    assert score.invented_evidence
    assert score.quality == 0.0
    claimed = score_run(task, _payload("The HTTP loader lives in mod.py.", ["mod.py:3"]), workspace)
    assert claimed.invented_evidence and not claimed.admits_absence and claimed.quality == 0.0


def test_absent_task_without_admission_scores_zero(workspace: Path) -> None:
    score = score_run(_task(kind="absent"), _payload("I looked at the loaders."), workspace)
    assert not score.admits_absence and score.quality == 0.0


def test_keyword_recall(workspace: Path) -> None:
    task = _task(keywords=("safe_load", "SafeLoader", "int", "timestamp"))
    payload = _payload("SAFE_LOAD uses safeloader.", findings=["it will print things"])
    score = score_run(task, payload, workspace)
    assert score.keyword_recall == 0.5
    assert keyword_hits(("loader",), "the loaders") == ["loader"]
    assert keyword_hits(("int",), "print(x)") == []
    # No keyword to count: recall is undefined (was 1.0), and quality leaves it out.
    none = score_run(_task(), _payload(evidence=["mod.py:11"]), workspace)
    assert none.keyword_recall is None and none.quality == 1.0


def test_keywords_from_the_task_text_earn_nothing(workspace: Path) -> None:
    task = _task(
        keywords=("FileSystemLoader", "get_source", "loaders.py"),
        prompt="Find where the FileSystemLoader class reads a template from disk.",
    )
    assert countable_keywords(task) == ("get_source", "loaders.py")
    parrot = score_run(task, _payload("The FileSystemLoader class reads templates."), workspace)
    assert parrot.keyword_recall == 0.0
    assert parrot.keywords_in_task == ["FileSystemLoader"]
    found = score_run(task, _payload("FileSystemLoader.get_source in loaders.py"), workspace)
    assert found.keyword_recall == 1.0
    half = score_run(task, _payload("get_source reads it"), workspace)
    assert half.keyword_recall == 0.5


def test_all_keywords_in_the_task_text_leave_recall_out_of_quality(workspace: Path) -> None:
    task = _task(keywords=("Loader", "cache"), prompt="Explain how the Loaders use the cache.")
    assert countable_keywords(task) == ()
    score = score_run(task, _payload("The loader uses the cache.", ["mod.py:11", "other.py:1"]), workspace)
    assert score.keyword_recall is None
    assert score.keywords_in_task == ["Loader", "cache"]
    assert score.quality == pytest.approx((1.0 + 0.5) / 2)  # gold recall and precision only


def test_the_suite_keeps_keywords_that_count() -> None:
    # Every present task must reward something beyond restating its prompt.
    for task in PRESENT:
        assert countable_keywords(task), task.id


@pytest.mark.parametrize(
    "text",
    [
        "Not found.",
        "There is no such loader.",
        "PyYAML does not support TOML.",
        "It is absent.",
        "No code in tqdm saves progress.",
    ],
)
def test_absence_phrases(text: str) -> None:
    assert admits_absence(text)


def test_absence_phrases_do_not_fire_on_plain_answers() -> None:
    assert not admits_absence("FileSystemLoader.get_source reads the file and returns its contents.")
    # Issue 36: how far the search went is no claim about the code (this one passed before).
    assert not admits_absence("I could not find any code for that.")


@pytest.mark.parametrize(
    "payload",
    [
        None,
        {"status": "completed"},
        {"status": "done", "summary": "x"},
        {"status": "completed", "summary": "x", "evidence": ["no line number"]},
        {"status": "completed", "summary": "x", "bogus": 1},
        "not a dict",
    ],
)
def test_malformed_or_missing_payload_scores_zero(workspace: Path, payload: Any) -> None:
    score = score_run(_task(keywords=("x",)), payload, workspace)
    assert not score.contract_valid
    assert score.errors
    assert score.quality == 0.0
    assert score.evidence_count == 0 and score.keyword_recall == 0.0 and score.gold_recall_line == 0.0


@pytest.mark.parametrize("task", SUITE, ids=[t.id for t in SUITE])
def test_gold_answer_scores_one_on_the_real_suite(task: BenchTask) -> None:
    root = package_root(task.package)
    if task.kind == "absent":
        payload = _payload("Not found: there is no such code in this package.")
    else:
        payload = _payload("Answer: " + ", ".join(task.keywords), evidence=[span.label for span in task.gold])
    # Every span cited: more items than the models' four where the task has more spans.
    score = score_run(task, payload, root, max_evidence=max(MAX_EVIDENCE, len(task.gold)))
    assert score.grounded_ratio == (1.0 if task.gold else 0.0)
    assert score.quality == 1.0, score
