"""The retrieval searches the request, not the harness's template around it (issue 49, item 1):
the floor (``retrieval``), the no-model baseline (``none``), the whole-unit floor and the child's
``RetrievalStart`` alike, for any task file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, write_files

from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.bench.commit_text import PROMPT_TEMPLATE
from subagent_lab.config.profiles import load_config
from subagent_lab.models.baseline import BaselineModel
from subagent_lab.models.retrieval import RetrievalModel
from subagent_lab.tools.symbols.index import index_for
from subagent_lab.tools.symbols.query import request_of
from subagent_lab.tools.symbols.retrieve import retrieve
from subagent_lab.tools.symbols.search import retrieval_answer
from subagent_lab.workspace.sandbox import Workspace

REQUEST = "Fix the discount applied twice to a coupon"
PROMPT = PROMPT_TEMPLATE.format(request=REQUEST)
FILES = {
    "shop/coupons.py": '''def apply_coupon(order, coupon):
    """Apply a coupon's discount to an order once."""
    order.discount += coupon.discount
    return order
''',
    # Says every word of the harness's template and none of the request's: the template alone
    # ranks it first.
    "shop/codebase.py": '''class ChangeSet:
    """Which functions or classes would you change in this code base? Cite them to make this change."""

    def change_functions(self, base, code):
        """Change the functions and classes of the code base: make this change, cite them."""
        return base, code
''',
}


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return write_files(tmp_path / "ws", FILES)


def _launch(root: Path, tmp: Path, model: Any, choice: str, preset: str) -> tuple[Any, list[dict[str, Any]]]:
    config = load_config(REPO / "profiles.yaml", env={})
    launcher = SubagentLauncher(config, root, model_factory=lambda c, cfg: model, trace_dir=tmp / "runs")
    fields = config.scaffold(preset).resolved()
    result = launcher.launch(SubagentRequest(task=PROMPT, model=choice, overrides=fields))
    events = [json.loads(line) for line in Path(result.trace_path).read_text().splitlines()]
    return result, events


def test_the_request_is_what_the_template_wraps_else_the_prompt_itself() -> None:
    assert request_of(PROMPT) == REQUEST
    assert request_of("  " + PROMPT.replace(" ", "\n  ", 3) + "\n") == REQUEST  # wrapped by YAML
    other = "Where is the password of a user compared with its hash?"
    assert request_of(other) == other  # another task file's prompt: searched as it is
    # The template with more after it is no harness prompt: nothing is cut from it.
    longer = PROMPT + " Also say why."
    assert request_of(longer) == longer
    assert request_of(PROMPT_TEMPLATE.format(request="  ")) != ""


def test_every_floor_searches_the_request_not_the_template(shop: Path, tmp_path: Path) -> None:
    index = index_for(Workspace(shop))
    assert retrieve(PROMPT, index, 1)[0].unit.name == "apply_coupon"
    assert retrieval_answer(Workspace(shop), PROMPT, 1) == ["shop/coupons.py:1-4"]
    # The retrieval floor through the loop: its Search is the request.
    result, events = _launch(shop, tmp_path, RetrievalModel(), "retrieval", "plain")
    searches = [e["arguments"] for e in events if e["kind"] == "tool_started" and e["tool"] == "Search"]
    assert searches == [{"query": REQUEST}]
    assert result.contract["evidence"][0] == "shop/coupons.py:1"


def test_the_childs_retrieval_start_searches_the_request(shop: Path, tmp_path: Path) -> None:
    result, events = _launch(shop, tmp_path, BaselineModel(), "none", "retrieval-start")
    searches = [e["arguments"] for e in events if e["kind"] == "tool_started" and e["tool"] == "Search"]
    assert searches[0] == {"query": REQUEST}
    assert result.contract["evidence"][0] == "shop/coupons.py:1"


def test_the_no_model_baseline_greps_a_word_of_the_request(shop: Path, tmp_path: Path) -> None:
    _, events = _launch(shop, tmp_path, BaselineModel(), "none", "plain")
    first = next(e for e in events if e["kind"] == "tool_started")
    # The template's longest word ("functions") is no word of the task's request.
    assert first["tool"] == "Grep" and first["arguments"]["pattern"] in REQUEST
