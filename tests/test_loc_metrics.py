"""The field's localization metrics (issue 36, item 4): items merged and ranked, functions from the
code's structure, file / function Acc@k and hit@k, unit recall@4, unit precision, and ``quality``
of ``localize`` tasks. A synthetic workspace whose line numbers the tests name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from subagent_lab.bench.locmetrics import Cited, enclosing_unit, file_units, gold_of, merge_items
from subagent_lab.bench.score import LOC_COLUMNS, Score
from subagent_lab.bench.scoring import score_run
from subagent_lab.bench.suite import BenchTask, GoldSpan
from subagent_lab.experiments.rows import SCORE_COLUMNS

LONG_BODY = "".join(f"    v{i} = {i}\n" for i in range(70))
MODULE = (
    "import os\n"  # 1
    "LIMIT = 3\n"  # 2
    "\n"  # 3
    "class Loader:\n"  # 4
    "    kind = 'file'\n"  # 5
    "\n"  # 6
    "    def load(self, name):\n"  # 7
    "        path = os.path.join('.', name)\n"  # 8
    "        return open(path).read()\n"  # 9
    "\n"  # 10
    "    @staticmethod\n"  # 11
    "    def check(name):\n"  # 12
    "        return bool(name)\n"  # 13
    "\n"  # 14
    "def long_function():\n"  # 15
    f"{LONG_BODY}"  # 16-85
    "    return v0\n"  # 86
)
OTHER = "def helper(x):\n    return x + 1\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "loaders.py").write_text(MODULE, encoding="utf-8")
    (tmp_path / "pkg" / "util.py").write_text(OTHER, encoding="utf-8")
    (tmp_path / "README.md").write_text("# not code\n" * 10, encoding="utf-8")
    return tmp_path


def _task(
    gold: list[tuple[str, int, int]], kind: str = "localize", keywords: tuple[str, ...] = ()
) -> BenchTask:
    """A task as the scorer reads it (``model_construct``: the kinds and fields of the task file
    another module owns are not what this test is about)."""
    spans = tuple(GoldSpan(path=p, start=s, end=e, anchor="x") for p, s, e in gold)
    return BenchTask.model_construct(
        id="t", kind=kind, prompt="Change how templates are loaded from disk.", gold=spans, keywords=keywords
    )


def _answer(*evidence: str, status: str = "completed", summary: str = "done") -> dict[str, Any]:
    return {"status": status, "summary": summary, "evidence": list(evidence)}


# ---------------------------------------------------------------- items and functions


def test_items_merge_overlapping_and_adjacent_ranges_per_file_and_keep_rank(tmp_path: Path) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    cited = [
        Cited("b.py:40", b, 40, 40, True),
        Cited("a.py:10-12", a, 10, 12, True),
        Cited("a.py:13", a, 13, 13, True),  # touches 10-12: merged
        Cited("a.py:30", a, 30, 30, True),
        Cited("a.py:11", a, 11, 11, False),  # unseen: never merged into a seen item
        Cited("junk", None, 0, 0, False),
    ]
    items = merge_items(cited)
    assert [(i.label, i.rank, i.credited) for i in items] == [
        ("b.py:40", 0, True),
        ("a.py:10-13", 1, True),
        ("a.py:30", 3, True),
        ("a.py:11", 4, False),
        ("junk", 5, False),
    ]


def test_functions_come_from_the_code_structure(root: Path) -> None:
    path = root / "pkg" / "loaders.py"
    assert len(file_units(path)) == 4 and file_units(root / "README.md") == ()
    assert enclosing_unit(path, 8, 8) == (7, 9)  # a method
    assert enclosing_unit(path, 11, 11) == (11, 13)  # the decorator belongs to its function
    assert enclosing_unit(path, 5, 5) == (4, 13)  # a class attribute: the class
    assert enclosing_unit(path, 2, 2) is None  # module level
    method = gold_of(path, 8, 9)
    assert method.unit == (7, 9) and method.region == (7, 9) and not method.module_level
    long = gold_of(path, 40, 41)
    assert long.unit == (15, 86) and long.region == (40, 41)  # over 60 lines: the span alone
    constant = gold_of(path, 2, 2)
    assert constant.module_level and constant.region == (2, 2)


# ---------------------------------------------------------------- Acc@k and hit@k


def test_file_and_function_acc_and_hit_at_k(root: Path) -> None:
    task = _task([("pkg/loaders.py", 7, 9), ("pkg/util.py", 1, 2)])
    score = score_run(task, _answer("pkg/loaders.py:8", "README.md:1", "pkg/util.py:2"), root)
    assert (score.file_hit_at1, score.file_acc_at1, score.func_hit_at1, score.func_acc_at1) == (1, 0, 1, 0)
    assert (score.file_acc_at3, score.func_acc_at3, score.file_acc_at5, score.func_acc_at5) == (1, 1, 1, 1)
    wrong_function = score_run(task, _answer("pkg/loaders.py:4", "pkg/util.py:1"), root)  # the class header
    assert wrong_function.file_acc_at3 == 1.0 and wrong_function.func_acc_at3 == 0.0
    assert wrong_function.func_hit_at3 == 1.0  # helper is one of the two


def test_acc_at_k_counts_k_merged_items(root: Path) -> None:
    task = _task([("pkg/util.py", 1, 2)])
    # Three citations of one function are one item; util.py is then the second item, not the fourth.
    merged = score_run(
        task, _answer("pkg/loaders.py:7", "pkg/loaders.py:8", "pkg/loaders.py:9", "pkg/util.py:1"), root
    )
    assert merged.evidence_counted == 2 and merged.file_hit_at1 == 0.0 and merged.file_acc_at3 == 1.0
    late = [f"pkg/loaders.py:{n}" for n in (2, 5, 20, 40)] + ["pkg/util.py:1"]
    fifth = score_run(task, _answer(*late), root)
    # Acc@5 sees five items (before issue 48 it saw four: "Acc@5" was Acc@4); unit recall stays @4
    # and precision counts the first max_evidence items.
    assert fifth.file_acc_at5 == 1.0 and fifth.func_acc_at5 == 1.0 and fifth.file_acc_at3 == 0.0
    assert fifth.evidence_counted == 4 and fifth.unit_recall_at4 == 0.0 and fifth.unit_precision == 0.0
    sixth = score_run(task, _answer(*late[:4], "pkg/loaders.py:60", "pkg/util.py:1"), root)
    assert sixth.file_acc_at5 == 0.0 and sixth.file_hit_at5 == 0.0  # the sixth item is not seen


# ---------------------------------------------------------------- unit recall and precision


def test_unit_recall_credits_an_item_inside_a_short_enclosing_function(root: Path) -> None:
    task = _task([("pkg/loaders.py", 9, 9)], kind="locate")
    inside = score_run(task, _answer("pkg/loaders.py:7"), root)  # the method's header, not line 9
    assert inside.strict_line_recall == 0.0 and inside.unit_recall_at4 == 1.0 and inside.unit_precision == 1.0
    whole_class = score_run(task, _answer("pkg/loaders.py:1-13"), root)  # holds the method, 13 lines
    assert whole_class.unit_recall_at4 == 0.0
    long = _task([("pkg/loaders.py", 40, 41)], kind="locate")
    far = score_run(long, _answer("pkg/loaders.py:70"), root)  # same 72-line function, 30 lines away
    assert far.unit_recall_at4 == 0.0 and far.func_hit_at1 == 1.0
    near = score_run(long, _answer("pkg/loaders.py:41-45"), root)
    assert near.unit_recall_at4 == 1.0  # a strict hit still counts


def test_localize_quality_is_the_mean_of_unit_recall_and_unit_precision(root: Path) -> None:
    task = _task([("pkg/loaders.py", 7, 9), ("pkg/util.py", 1, 2)])
    score = score_run(task, _answer("pkg/loaders.py:7", "pkg/loaders.py:15", "README.md:3"), root)
    assert score.unit_recall_at4 == 0.5 and score.unit_precision == pytest.approx(1 / 3)
    assert score.quality == pytest.approx((0.5 + 1 / 3) / 2)
    perfect = score_run(task, _answer("pkg/loaders.py:7-9", "pkg/util.py:1-2"), root)
    assert perfect.quality == 1.0 and perfect.func_acc_at1 == 0.0 and perfect.func_acc_at3 == 1.0
    # Keywords are not part of it: the same evidence with and without them scores alike.
    worded = _task([("pkg/loaders.py", 7, 9), ("pkg/util.py", 1, 2)], keywords=("open",))
    assert score_run(worded, _answer("pkg/loaders.py:7-9", "pkg/util.py:1-2"), root).quality == 1.0


def test_legacy_quality_is_unchanged_by_the_unit_columns(root: Path) -> None:
    task = _task([("pkg/loaders.py", 9, 9)], kind="locate", keywords=("read",))
    score = score_run(task, _answer("pkg/loaders.py:7", summary="it calls read"), root)
    assert score.unit_recall_at4 == 1.0 and score.strict_line_recall == 0.0
    assert score.quality == pytest.approx((0.0 + 0.0 + 1.0) / 3)  # strict recall, precision, keywords


def test_tasks_without_gold_have_no_localization_and_unscored_ones_no_quality(root: Path) -> None:
    unscored = score_run(_task([]), _answer("pkg/loaders.py:7"), root)
    assert unscored.quality is None and all(getattr(unscored, c) is None for c in LOC_COLUMNS)
    absent = score_run(_task([], kind="absent"), _answer(summary="This package has no HTTP loader."), root)
    assert absent.quality == 1.0 and absent.unit_recall_at4 is None
    invalid = score_run(_task([("pkg/util.py", 1, 2)]), None, root)
    assert invalid.quality == 0.0 and invalid.unit_recall_at4 == 0.0


def test_the_localization_columns_are_row_columns() -> None:
    assert set(LOC_COLUMNS) <= set(SCORE_COLUMNS)
    assert {"evidence_counted", "keywords_tool_only"} <= set(SCORE_COLUMNS)
    assert set(SCORE_COLUMNS) <= set(Score.model_fields)
