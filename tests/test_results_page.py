"""docs/results.md is printed from the committed raw files (``benchmarks/results_page.py``): the page
committed must be the page they print now, and a row that changes changes the page."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pandas as pd
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import results_page


def test_the_committed_page_is_what_the_committed_rows_print() -> None:
    page = (REPO / "docs" / "results.md").read_text(encoding="utf-8")
    assert page == results_page.render(), (
        "docs/results.md and benchmarks/results/ disagree: run `python benchmarks/results_page.py --write`"
    )
    # Every claim is on the page with its figure, its target and whether it is met.
    for claim in results_page.CLAIMS:
        assert f"| {claim.claim} |" in page


def _copy(tmp_path: Path) -> Path:
    raw = tmp_path / "results"
    shutil.copytree(REPO / "benchmarks" / "results", raw)
    return raw


def test_a_row_that_disagrees_with_the_page_fails_the_check(tmp_path: Path) -> None:
    raw = _copy(tmp_path)
    assert results_page.main(["--results", str(raw), "--check"]) == 0
    # A slower main job, written into its row: the page would say otherwise, so the check fails.
    timings = pd.read_csv(raw / "timings.csv")
    timings.loc[timings["what"] == "main_job", "seconds"] = 700
    timings.to_csv(raw / "timings.csv", index=False)
    assert results_page.main(["--results", str(raw), "--check"]) == 1
    page = results_page.render(raw)
    assert "| 11 min 40 s (" in page and "| ≤ 10 min | missed by 1.7 min |" in page


def test_a_changed_run_row_changes_its_figures(tmp_path: Path) -> None:
    raw = _copy(tmp_path)
    rows = pd.read_csv(raw / results_page.MINED_TEST)
    main = rows["model_choice"] == "main"
    rows.loc[main, "elapsed_s"] = rows.loc[main, "elapsed_s"] + 20  # every main run 20 s slower
    rows.to_csv(raw / results_page.MINED_TEST, index=False)
    page = results_page.render(raw)
    assert "| 67.2 s (median of 60 runs) | ≤ 60 s | missed by 7.2 s |" in page
    assert page != results_page.render()
    # A scale output's figure too: the range is read from the files, not typed.
    first = raw / "scale39" / "after-1.txt"
    first.write_text(first.read_text().replace("13.730", "21.000"), encoding="utf-8")
    page = results_page.render(raw)
    assert (
        "| 12.8–21.0 ms (4 rounds, 1 and 2 workers) | ≤ 20 ms | met in some rounds, missed by up to 1.0 ms |"
        in page
    )
