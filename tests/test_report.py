"""The sweep report: one self-contained HTML page (``subagent-lab report``), from a scripted sweep."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from conftest import copy_profiles

from subagent_lab.api.report import render_report, write_report
from subagent_lab.bench.suite import load_suite
from subagent_lab.cli.main import main as cli_main
from subagent_lab.experiments.sweep import SweepSpec, Variant, run_sweep, sweep_dir
from subagent_lab.models.scripted import ScriptedFactory, final, tool_call

TASK = next(t for t in load_suite() if t.id == "yaml-safe-load")
GOLD = [f"{g.path}:{g.start}-{g.end}" for g in TASK.gold]
ANSWER = {
    "status": "completed",
    "summary": "safe_load is defined in __init__.py and uses SafeLoader.",
    "findings": ["safe_load calls load with SafeLoader"],
    "evidence": GOLD,
    "unresolved_questions": [],
}
FACTORY = ScriptedFactory({"*": [tool_call("Grep", pattern="def safe_load"), final(ANSWER)]})
EXTERNAL = re.compile(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", re.IGNORECASE)


@pytest.fixture
def swept(tmp_path: Path) -> Path:
    """A finished sweep directory: one task x light/main x two budgets."""
    config = copy_profiles(tmp_path / "profiles.yaml", tmp_path / "runs")
    spec = SweepSpec(
        name="rep",
        tasks=(TASK.id,),
        models=("light", "main"),
        variants=(Variant(label="small", overrides={"total_token_budget": 15000}), Variant()),
    )
    out = tmp_path / "sweeps"
    run_sweep(spec, config_path=str(config), out_dir=out, model_factory=FACTORY, progress=False)
    return sweep_dir(spec, out)


def test_report_is_one_self_contained_page(swept: Path, tmp_path: Path) -> None:
    path = write_report(swept, tmp_path / "out" / "report.html")
    page = path.read_text(encoding="utf-8")
    rows = [json.loads(line) for line in (swept / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 4

    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<table" in page and "completion_rate" in page and "terminal_reason" in page  # summary + table
    assert "Localization (Acc@k" in page and "func Acc@5" in page  # issue 48: Acc@k in the report
    assert page.count('<img alt="plot" src="data:image/png;base64,') >= 3  # reasons, quality, budget
    assert "Quality vs total_token_budget" in page  # the budget the sweep varied
    assert page.count("<details class='sl-run'>") == 4
    for row in rows:
        assert row["run_key"] in page
    assert "Grep" in page and "final contract" in page and "grounded" in page  # drill-down steps
    assert not EXTERNAL.search(page) and "<script" not in page and "<link" not in page
    assert "expand tool results" not in page  # the widget's checkbox hint has no place here


def test_report_survives_a_crashed_run_and_an_empty_sweep(swept: Path) -> None:
    rows = [json.loads(line) for line in (swept / "results.jsonl").read_text().splitlines()]
    crashed = {
        "run_key": "x|light|default|0",
        "terminal_reason": "crashed",
        "status": "failed",
        "error": "Traceback: boom",
        "model_used": None,
    }
    page = render_report(pd.DataFrame([*rows, crashed]))
    assert page.count("<details class='sl-run'>") == 5 and "Traceback: boom" in page
    empty = render_report(pd.DataFrame())
    assert "(no rows)" in empty and "<details class='sl-run'>" not in empty


def test_cli_report(swept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    assert cli_main(["report", str(swept), "-o", str(out)]) == 0
    assert out.is_file() and str(out) in capsys.readouterr().out
    assert cli_main(["report", str(swept)]) == 0 and (swept / "report.html").is_file()
    assert cli_main(["report", str(tmp_path / "nothing-here")]) == 2
    assert "not a sweep directory" in capsys.readouterr().err


def _floor_rows(tasks_none: list[str], tasks_retrieval: list[str]) -> pd.DataFrame:
    rows = [
        {"run_key": f"{t}|{arm}", "task_id": t, "model_choice": arm, "split": "dev", "scaffold": "aided",
         "quality": q, "terminal_reason": "completed"}
        for arm, tasks, q in (("none", tasks_none, 0.25), ("retrieval", tasks_retrieval, 0.5))
        for t in tasks
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_a_no_model_sweep_is_compared_arm_against_arm() -> None:
    """``none`` and ``retrieval`` on the same tasks are two arms run on the same tasks: the lead
    compares them rather than saying that no two models did."""
    from subagent_lab.api.report import comparisons_html

    page = comparisons_html(_floor_rows(["a", "b", "c"], ["a", "b", "c"]))
    assert "No two models ran on the same tasks" not in page
    assert "retrieval − none = +0.25" in page and "(3 tasks" in page
    # Arms on different tasks are still no paired comparison.
    apart = comparisons_html(_floor_rows(["a", "b"], ["c", "d"]))
    assert "No two models ran on the same tasks" in apart
