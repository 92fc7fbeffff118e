"""The sweep report (``subagent-lab report``) as a person sees it: opened from disk in Chromium."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from . import scenario

pytestmark = pytest.mark.browser

GRID = [(model, variant) for model in ("light", "main") for variant in scenario.SWEEP_VARIANTS]
ENDED = {"light": "invalid_output", "main": "completed"}


def section(page: Any, heading: str) -> Any:
    """The first table after the ``<h2>`` titled ``heading``."""
    # The table follows the heading, possibly inside the box that scrolls it.
    after = f"//h2[normalize-space()='{heading}']/following-sibling::*[1]"
    return page.locator(f"xpath={after}/descendant-or-self::table[1]")


def cell(page: Any, text: str) -> Any:
    """A table cell holding exactly ``text``."""
    return page.locator("td", has_text=re.compile(rf"^{re.escape(text)}$"))


def test_report_in_the_browser(browser_context: Any, artifacts: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    df = scenario.sweep_runs(tmp_path, (scenario.SWEEP_TASK, scenario.SECOND_TASK))
    out = tmp_path / "report.html"
    cli = Path(sys.executable).with_name("subagent-lab")
    done = subprocess.run(
        [str(cli), "report", df.attrs["sweep_dir"], "-o", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert out.is_file()

    page = browser_context.new_page()
    try:
        page.goto(out.as_uri())
        expect(page.locator("h1")).to_have_text(re.compile(r"^Sweep browser-"))
        expect(page.get_by_text(re.compile(r"^8 runs · written"))).to_be_visible()

        # The page leads with the paired comparison, one sentence per variant, with its interval.
        leads = page.locator("p.sl-lead")
        expect(leads).to_have_count(2)
        number = r"[+−]?\d\.\d\d"
        for variant in scenario.SWEEP_VARIANTS:
            sentence = leads.filter(has_text=f"variant `{variant}`")
            expect(sentence).to_be_visible()
            expect(sentence).to_have_text(
                re.compile(rf"^main − light = {number} \[{number}, {number}\] on dev \(2 tasks")
            )
        lift = page.locator("xpath=//h2[normalize-space()='Comparisons']/following-sibling::div[1]//table")
        expect(lift.locator("thead")).to_contain_text("quality [95% CI]")
        expect(lift.locator("tbody tr")).to_have_count(4)  # model x variant

        summary = section(page, "Summary by model, scaffold and variant")
        expect(summary).to_be_visible()
        expect(summary.locator("thead")).to_contain_text("completion_rate")
        expect(summary.locator("tbody")).to_contain_text("light")
        expect(summary.locator("tbody")).to_contain_text("main")

        runs = section(page, "Runs")  # the headline table, one row per run
        expect(runs).to_be_visible()
        expect(runs.locator("thead")).to_contain_text("terminal_reason")
        rows = runs.locator("tbody tr")
        expect(rows).to_have_count(8)
        for model, variant in GRID:  # one row per cell of the grid and task, ended as scripted
            row = rows.filter(has=cell(page, model)).filter(has=cell(page, variant))
            row = row.filter(has=cell(page, scenario.SWEEP_TASK))
            expect(row).to_have_count(1)
            expect(row.filter(has=cell(page, ENDED[model]))).to_have_count(1)

        plots = page.locator("img[alt='plot']")
        assert plots.count() >= 3
        for i in range(plots.count()):  # the inlined PNGs decoded and drawn
            assert plots.nth(i).evaluate("img => img.complete && img.naturalWidth > 0")

        drill = page.locator("details.sl-run")
        expect(drill).to_have_count(8)
        main = drill.filter(has_text=f"{scenario.SWEEP_TASK}|main|{scenario.SCRIPTED_SCAFFOLD}|default|0")
        expect(main.locator(".sl-step").first).to_be_hidden()  # closed until clicked
        main.locator(":scope > summary").click()
        expect(main.locator(".sl-step").first).to_be_visible()
        expect(main.locator(".sl-header")).to_contain_text("completed")
        expect(main).to_contain_text('Grep({"pattern": "def safe_load"})')
        expect(main.locator(".sl-contract")).to_contain_text("final contract")
        expect(main.locator(".sl-contract .sl-grounded").first).to_be_visible()
        light = drill.filter(has_text=f"{scenario.SWEEP_TASK}|light|{scenario.SCRIPTED_SCAFFOLD}|default|0")
        light.locator(":scope > summary").click()
        expect(light.locator(".sl-header .sl-reason")).to_have_text("invalid_output")
        page.screenshot(path=artifacts / "report.png", full_page=True)
        main.scroll_into_view_if_needed()
        page.screenshot(path=artifacts / "report-drilldown.png")
    finally:
        page.close()
