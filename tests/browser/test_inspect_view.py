"""A sweep's ``.eval`` export (``sl.to_inspect``) as a person sees it in Inspect's own log viewer.

The sweep is the delegation study on the no-model baseline (one dev task, the ``alone`` and
``forced-delegation`` arms: real runs and traces, no model server, under a second); its
``results.jsonl`` is exported and ``inspect view start`` serves it to headless Chromium.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import subagent_lab as sl
from subagent_lab.experiments.delegation import Cell, DelegationSpec, run_study
from subagent_lab.experiments.delegation.ledger import answer_evidence
from subagent_lab.experiments.rows import ResultLog

from .conftest import inspect_view, require_inspect_ai

pytestmark = pytest.mark.browser

STUDY = DelegationSpec(
    name="inspect-view",
    splits=("dev",),
    tasks_per_split=1,
    cells=(Cell(arm="alone"), Cell(arm="forced-delegation")),
    baseline=True,
    scaffold="aided",  # the child's own Grep and Read calls are what the viewer is checked for
)
VIEW_S = 60_000
"""Playwright's wait (ms) for each thing the viewer draws: it loads the log over HTTP first."""


def kilo(tokens: int) -> str:
    """A token count as the viewer's cards print it (``11396`` -> ``11.4k``)."""
    return f"{tokens / 1000:.1f}k"


def card(page: Any, title: str) -> Any:
    """The transcript's card of a child span (``Sub-agent: <span name>``)."""
    return page.get_by_text(re.compile(rf"^sub-agent: {re.escape(title)}$", re.IGNORECASE))


def test_inspect_view_shows_the_child_span_and_scores(
    browser_context: Any, artifacts: Path, tmp_path: Path
) -> None:
    require_inspect_ai()
    from playwright.sync_api import expect

    study = run_study(STUDY, out_dir=tmp_path / "sweeps")
    rows = {row["run_key"]: row for row in ResultLog(Path(study.attrs["study_dir"]) / "results.jsonl").rows()}
    (key,) = [k for k, row in rows.items() if row["cell"] == "forced-delegation"]
    row = rows[key]
    assert row["sub_agents"] == 1 and row["children_tokens"] > 0 and row["error"] is None
    sl.to_inspect(study.attrs["study_dir"], tmp_path / "logs" / "study.eval")
    parent, child = f"main ({row['parent_model']})", f"explore ({row['child_model']})"
    quality = f"{row['quality']:g}"

    page = browser_context.new_page()
    try:
        with inspect_view(tmp_path / "logs", tmp_path, artifacts / "inspect-view.log") as url:
            page.goto(url + "/")
            # The only log opens on its samples, one per run of the sweep.
            sample = page.get_by_text(key, exact=True)
            expect(sample).to_be_visible(timeout=VIEW_S)
            for other in rows:
                expect(page.get_by_text(other, exact=True)).to_be_visible()
            expect(page.get_by_text("quality", exact=True).first).to_be_visible()
            page.screenshot(path=artifacts / "inspect-view-samples.png")

            sample.click()
            expect(page.get_by_text(f"Sample {key} (Epoch 1)")).to_be_visible(timeout=VIEW_S)
            # The sample's header: each score by name with its value.
            expect(page.locator("[title='quality']").first).to_contain_text(quality, timeout=VIEW_S)
            # The parent's span, then inside it the child's. No model ran: the token count the
            # harness estimated for its budgets (the row's) is shown nowhere.
            card(page, parent).click()
            child_card = card(page, child)
            expect(child_card).to_be_visible(timeout=VIEW_S)
            expect(page.get_by_text(f"{kilo(row['children_tokens'])} ·")).to_have_count(0)
            child_card.click()
            # Inside the child: its own tool calls (the baseline child greps, then reads).
            expect(page.get_by_text(re.compile(r"^Grep$")).first).to_be_visible(timeout=VIEW_S)
            expect(page.get_by_text(re.compile(r"^Read$")).first).to_be_visible()
            page.screenshot(path=artifacts / "inspect-view-child.png")

            page.get_by_role("tab", name=re.compile("^scoring$", re.IGNORECASE)).click()
            # The scorer table (a grid of cells: scorer, answer, score, explanation) and the
            # quality score's parts as its metadata.
            grid = page.locator("xpath=//div[div[normalize-space()='Explanation']]")
            expect(grid).to_be_visible(timeout=VIEW_S)
            after = "following-sibling::div[position() <= 3]"  # its answer, score and explanation
            cells = grid.locator(f"xpath=./div[normalize-space()='quality']/{after}")
            expect(cells.nth(1)).to_have_text(quality)
            expect(cells.nth(2)).to_have_text(row["terminal_reason"])
            # The answer scored: the path:line items of the parent's answer.
            for item in answer_evidence(row["answer"]):
                expect(cells.nth(0)).to_contain_text(item)
            cells = grid.locator(f"xpath=./div[normalize-space()='contract_valid']/{after}")
            expect(cells.nth(1)).to_have_text("1")
            expect(grid).to_contain_text("gold_recall_file")
            page.screenshot(path=artifacts / "inspect-view-scoring.png")
    finally:
        page.close()
