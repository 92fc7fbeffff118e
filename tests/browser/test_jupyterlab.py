"""The widgets as a person sees them: a notebook run in JupyterLab, in Debian's Chromium.

The notebook's cells make real runs with the harness (scripted models over a small real folder
and over an installed benchmark package, see ``scenario.py``) and display ``sl.inspect(run)``
and ``sl.inspect(df)``. The test runs all cells from JupyterLab's Run menu, then clicks through
the widgets and asserts on what is visible: the inspector's steps, the denied call marked denied,
an evidence citation opening its lines, the sweep explorer's filter reducing the rows. Screenshots
go to the artifacts directory (``$SUBAGENT_LAB_ARTIFACTS`` or ``tests/browser/artifacts``).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from . import scenario
from .conftest import JupyterLab

pytestmark = pytest.mark.browser

NOTEBOOK = "browser_widgets.ipynb"
KERNEL_S = 120_000
"""Milliseconds for the kernel to start and all cells to run (a cold kernel on two busy cores)."""
STEP_MS = 30_000
"""Milliseconds for one widget to react to a click (a comm round trip to the kernel)."""
CELLS = [
    (
        "markdown",
        "# Widgets in the browser\n\nReal runs with scripted models (see `scenario.py`): an explore "
        "run with a denied call, then a small light-vs-main sweep.",
    ),
    (
        "code",
        "import subagent_lab as sl\nimport scenario\n\n"
        "run = scenario.explore_run('.')\nprint(run.terminal_reason, run.trace_path)",
    ),
    ("code", "sl.inspect(run)"),
    ("code", "df = scenario.sweep_runs('.')\nprint(len(df), 'runs in', df.attrs['sweep_dir'])"),
    ("code", "sl.inspect(df)"),
]
DENIED_BACKGROUND = "rgb(255, 235, 233)"
"""``#ffebe9``, the red tint of a denied tool call."""
CITED_BACKGROUND = "fff8c5"
"""The yellow of the cited lines (in the line's inline style)."""


def write_notebook(root: Path) -> Path:
    """The test notebook and the scenario it imports, in JupyterLab's root directory."""
    shutil.copy(Path(__file__).with_name("scenario.py"), root / "scenario.py")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_markdown_cell(src) if kind == "markdown" else nbformat.v4.new_code_cell(src)
        for kind, src in CELLS
    ]
    path = root / NOTEBOOK
    nbformat.write(nb, path)
    return path


@pytest.fixture
def page(browser_context: Any, artifacts: Path) -> Iterator[Any]:
    """A fresh tab; the browser console of the test is kept as ``jupyterlab-console.log``."""
    from playwright.sync_api import expect

    expect.set_options(timeout=STEP_MS)
    tab = browser_context.new_page()
    tab.set_default_timeout(STEP_MS)
    messages: list[str] = []
    tab.on("console", lambda m: messages.append(f"{m.type}: {m.text}"))
    tab.on("pageerror", lambda e: messages.append(f"pageerror: {e}"))
    try:
        yield tab
    finally:
        (artifacts / "jupyterlab-console.log").write_text("\n".join(messages) + "\n", encoding="utf-8")
        tab.close()


def run_all_cells(page: Any, first_prompt: Any) -> None:
    """Run > Run All Cells, from JupyterLab's menu bar; again if no cell was queued (a click that
    landed while the notebook was still settling). A queued cell's prompt reads ``[*]``."""
    from playwright.sync_api import expect

    label = page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$"))
    for attempt in range(3):
        page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu:visible .lm-Menu-item", has=label).click()
        try:
            expect(first_prompt).not_to_have_text("[ ]:", timeout=10_000)
            return
        except AssertionError:
            if attempt == 2:
                raise
            page.keyboard.press("Escape")


def test_widgets_in_jupyterlab(jupyter_lab: JupyterLab, page: Any, artifacts: Path) -> None:
    from playwright.sync_api import expect

    write_notebook(jupyter_lab.root)
    page.goto(jupyter_lab.lab_url(NOTEBOOK), timeout=KERNEL_S)
    panel = page.locator(".jp-NotebookPanel").filter(has=page.locator(".jp-Notebook"))
    expect(panel).to_be_visible(timeout=KERNEL_S)
    cells = panel.locator(".jp-Notebook .jp-CodeCell")
    expect(cells).to_have_count(len([c for c in CELLS if c[0] == "code"]), timeout=KERNEL_S)
    # The kernel has started and connected: the status bar reads "Python 3 (ipykernel) | Idle".
    kernel = page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"^Python 3 .*\| Idle$"))
    expect(kernel).to_have_count(1, timeout=KERNEL_S)

    prompts = cells.locator(".jp-InputArea-prompt")
    run_all_cells(page, prompts.first)
    for i in range(cells.count()):
        expect(prompts.nth(i)).to_have_text(re.compile(r"\[\d+\]"), timeout=KERNEL_S)  # not [*] or [ ]
    expect(panel.get_by_text("Traceback")).to_have_count(0)
    page.screenshot(path=artifacts / "jupyterlab-notebook.png")

    # --- the run inspector: its steps, one at a time --------------------------------------------
    inspector = cells.nth(1).locator(".jp-OutputArea-output").first  # (the plot nests another)
    header = inspector.locator(".sl-header")
    expect(header).to_be_visible()
    expect(header).to_contain_text("explore")
    expect(header.locator(".sl-reason")).to_have_text("completed")
    expect(header).to_contain_text("status completed after")
    step = inspector.locator(".sl-step")
    readout = inspector.locator(".widget-slider .widget-readout")
    expect(step).to_contain_text("Step 1 / 4")
    expect(readout).to_have_text("0")
    expect(step).to_contain_text("Where is login implemented?")  # the task opens the run
    expect(step.locator(".sl-tool")).to_contain_text('Grep({"pattern": "def login"})')
    expect(step.locator(".sl-tool")).to_contain_text("app/auth.py")  # Grep's real hit
    expect(step.locator(".sl-denied")).to_have_count(0)
    inspector.scroll_into_view_if_needed()
    inspector.screenshot(path=artifacts / "inspector-step1.png")

    next_step = inspector.get_by_role("button", name="▶")
    next_step.click()
    expect(step).to_contain_text("Step 2 / 4")
    expect(readout).to_have_text("1")
    denied = step.locator(".sl-tool.sl-denied")
    expect(denied).to_be_visible()
    expect(denied).to_contain_text("Edit(")
    expect(denied).to_contain_text("denied")
    expect(denied.get_by_text("DENIED", exact=True)).to_be_visible()  # the bold flag
    assert denied.evaluate("e => getComputedStyle(e).backgroundColor") == DENIED_BACKGROUND
    inspector.screenshot(path=artifacts / "inspector-step2-denied.png")

    next_step.click()
    expect(step).to_contain_text("Step 3 / 4")
    expect(step.locator(".sl-tool")).to_contain_text("Read(")
    expect(step.locator(".sl-tool")).to_contain_text("def check_password")  # the file's real text
    expect(step.locator(".sl-denied")).to_have_count(0)
    next_step.click()
    expect(step).to_contain_text("Step 4 / 4")
    expect(step).to_contain_text("contract check: valid")
    inspector.get_by_role("button", name="◀").click()
    expect(step).to_contain_text("Step 3 / 4")

    # --- the final contract and a citation opening its lines ------------------------------------
    contract = inspector.locator(".sl-contract")
    expect(contract).to_contain_text("login is defined in app/auth.py")
    expect(contract.locator(".sl-grounded")).to_have_count(1)
    expect(contract.locator(".sl-ungrounded")).to_contain_text("no such file")
    citation = inspector.locator(".sl-citation")
    expect(citation).to_have_count(0)
    inspector.locator("button", has_text="app/auth.py:4-5").click()
    expect(citation).to_be_visible()
    expect(citation).to_contain_text("app/auth.py:4-5")
    cited = citation.locator(f"div[style*='{CITED_BACKGROUND}']")
    expect(cited).to_have_count(2)
    expect(cited.nth(0)).to_contain_text("4")
    expect(cited.nth(0)).to_contain_text("def login(user, password):")
    expect(cited.nth(1)).to_contain_text("return check_password(user, password)")
    # Two lines of context either side of the cited span, numbered as in the file.
    expect(citation.locator("span")).to_have_text(["2", "3", "4", "5", "6", "7"])
    expect(citation).not_to_contain_text("import hashlib")  # line 1: outside the context
    citation.scroll_into_view_if_needed()
    inspector.screenshot(path=artifacts / "inspector-citation.png")
    inspector.locator("button", has_text="app/missing.py:3").click()
    expect(citation).to_contain_text("is not grounded: no such file")
    expect(citation).not_to_contain_text("def login")

    # The token plot draws into the inspector's own output area (matplotlib through the kernel).
    plot = inspector.locator(".widget-output img")
    expect(plot).to_have_count(0)
    inspector.get_by_role("button", name="plot tokens vs budget").click()
    expect(plot).to_be_visible()
    assert plot.evaluate("img => img.complete && img.naturalWidth > 0")
    inspector.screenshot(path=artifacts / "inspector-plot.png")

    # --- the sweep explorer: a filter reduces the rows shown ------------------------------------
    explorer = cells.nth(3).locator(".jp-OutputArea-output").first
    count = explorer.get_by_text(re.compile(r"\d+ of \d+ runs"))
    rows = explorer.locator(".widget-html table tbody tr")
    expect(count).to_have_text("4 of 4 runs")
    expect(rows).to_have_count(4)
    for model, variant in (("light", "s4"), ("light", "default"), ("main", "s4"), ("main", "default")):
        key = (
            f"yaml-safe-load|{model}|{scenario.SCRIPTED_SCAFFOLD}|{variant}|0"  # a named scaffold: in the key
        )
        expect(explorer.locator("table")).to_contain_text(key)
    explorer.scroll_into_view_if_needed()
    explorer.screenshot(path=artifacts / "explorer-all.png")

    reasons = labelled(explorer, ".widget-select-multiple", "terminal_reason").locator("select")
    reasons.select_option("invalid_output")
    expect(count).to_have_text("2 of 4 runs")
    expect(rows).to_have_count(2)
    for i in range(2):
        expect(rows.nth(i)).to_contain_text("light")
        expect(rows.nth(i)).to_contain_text("invalid_output")
    expect(explorer.locator("table")).not_to_contain_text("|main|")
    explorer.screenshot(path=artifacts / "explorer-filtered.png")

    reasons.select_option([])
    expect(count).to_have_text("4 of 4 runs")
    models = labelled(explorer, ".widget-select-multiple", "model_used").locator("select")
    models.select_option("main")
    expect(count).to_have_text("2 of 4 runs")
    expect(explorer.locator("table")).not_to_contain_text("|light|")

    # ... and selecting a run opens its inspector below the table
    labelled(explorer, ".widget-dropdown", "run").locator("select").select_option(
        label=f"yaml-safe-load|main|{scenario.SCRIPTED_SCAFFOLD}|default|0 — completed"
    )
    nested = explorer.locator(".sl-header")
    expect(nested).to_be_visible()
    expect(nested).to_contain_text("main")
    expect(explorer.locator(".sl-step")).to_contain_text('Grep({"pattern": "def safe_load"})')
    expect(explorer.locator(".sl-contract .sl-grounded").first).to_be_visible()
    expect(explorer.locator(".sl-contract .sl-ungrounded")).to_have_count(0)
    explorer.screenshot(path=artifacts / "explorer-opened-run.png")


def labelled(scope: Any, widget: str, label: str) -> Any:
    """The ipywidget of class ``widget`` whose description label is exactly ``label``."""
    return scope.locator(widget).filter(
        has=scope.page.locator(".widget-label", has_text=re.compile(rf"^{re.escape(label)}$"))
    )
