"""The retrieval floor (``model="retrieval"``) through the real loop, and the strongest floor in
every lift table."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import write_files

from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.analysis.headline import floor_sentences, lift_table, readable_lift, strongest_floor
from subagent_lab.analysis.stats import paired_difference
from subagent_lab.api.runs import as_choice
from subagent_lab.config.profiles import load_config
from subagent_lab.core.contracts import ExploreResult
from subagent_lab.models.retrieval import ABSENT_SUMMARY, RetrievalModel, code_names, search_query
from subagent_lab.tools.symbols.index import index_for
from subagent_lab.tools.symbols.search import ranked_units
from subagent_lab.workspace.sandbox import Workspace

REPO = Path(__file__).resolve().parents[1]
FILES = {
    "shop/auth.py": '''"""Passwords and sessions."""


def check_password(user, password):
    """Compare a password with the user's stored hash."""
    return hash_password(password, user.salt) == user.password_hash


def hash_password(password, salt):
    """Hash a password with the user's salt."""
    return salt + password[::-1]


class Session:
    """A logged-in user's session."""

    def __init__(self, user):
        self.user = user

    def expire(self):
        """End the user's session now."""
        self.user = None
''',
    "shop/views.py": '''from shop.auth import Session, check_password


def login(request, user):
    """Log a user in when the password matches its stored hash."""
    if check_password(user, request.password):
        return Session(user)
    return None


def logout(session):
    """Log the user out: the session expires."""
    session.expire()
''',
    "shop/cart.py": '''def add_item(cart, item):
    """Put an item in the cart."""
    cart.append(item)


def total(cart):
    """The cart's total price."""
    return sum(i.price for i in cart)
''',
}
TASK = "Where is the password of a user compared with the stored hash, and where does the user log in?"


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return write_files(tmp_path / "shop_ws", FILES)


def _launch(root: Path, tmp: Path, task: str, preset: str = "plain", **over: object) -> tuple:
    config = load_config(REPO / "profiles.yaml", env={})
    model = RetrievalModel()
    launcher = SubagentLauncher(config, root, model_factory=lambda c, cfg: model, trace_dir=tmp / "runs")
    fields = {**config.scaffold(preset).resolved(), **over}  # a preset's fields, as a sweep sends them
    result = launcher.launch(SubagentRequest(task=task, model="retrieval", overrides=fields))
    events = [json.loads(line) for line in Path(result.trace_path).read_text().splitlines()]
    return result, events


def test_code_names_come_from_the_text_s_structure_in_order() -> None:
    task = "Why does `Environment.get_template` call load_template before the FileSystemLoader? say so"
    assert code_names(task) == ["Environment.get_template", "load_template", "FileSystemLoader"]
    assert code_names("Where is the password checked?") == []
    # the same member is one lookup; a longer name holding a shorter one is another
    task = "Is `Loader` the base of FileSystemLoader, and does Loader.get_source call `get_source`?"
    assert code_names(task) == ["Loader", "FileSystemLoader", "Loader.get_source"]
    assert search_query("a " * 100, 11) == "a a a a a a"


def test_the_floor_cites_the_header_lines_of_the_units_search_ranks_through_the_loop(
    shop: Path, tmp_path: Path
) -> None:
    result, events = _launch(shop, tmp_path, TASK)
    assert result.terminal_reason == "completed", result.detail
    assert result.model_choice == "retrieval" and result.model_id == "retrieval"
    answer = ExploreResult.model_validate(result.contract)
    ranked = ranked_units(index_for(Workspace(shop)), TASK, 8)
    assert len(ranked) > 4  # the cap, not the ranking, bounds the evidence
    assert answer.evidence == [f"{h.rel}:{h.unit.start}" for h in ranked[:4]]
    lines = {rel: text.splitlines() for rel, text in FILES.items()}
    for item in answer.evidence:  # each is a def/class line
        rel, line = item.rsplit(":", 1)
        assert lines[rel][int(line) - 1].lstrip().startswith(("def ", "class "))
    assert ranked[0].unit.qualname in answer.summary and len(answer.summary) <= 256
    assert answer.status == "completed"
    tools = [e["tool"] for e in events if e["kind"] == "tool_started"]
    assert tools == ["Search"]  # no code-like name in the task: no Find
    called = [e for e in events if e["kind"] == "model_called"]
    assert called and all(e["model_id"] == "retrieval" for e in called)
    assert result.usage.total_tokens > 0 and events[-1]["kind"] == "run_ended"


def test_find_comes_first_and_the_grammar_s_cap_holds(shop: Path, tmp_path: Path) -> None:
    task = "How does `Session` end when the user logs out?"
    result, events = _launch(shop, tmp_path, task)
    assert result.terminal_reason == "completed", result.detail
    assert result.contract["evidence"][0] == "shop/auth.py:14"  # Find's definition of the named class
    assert len(result.contract["evidence"]) == 4  # plain: the answer grammar's four items
    assert [e["tool"] for e in events if e["kind"] == "tool_started"] == ["Find", "Search"]
    capped, _ = _launch(shop, tmp_path, task, preset="aided", max_evidence=2)
    assert capped.terminal_reason == "completed", capped.detail
    assert 1 <= len(capped.contract["evidence"]) <= 2  # the profile's max_evidence, in the grammar


def test_a_preset_without_symbol_tools_still_runs_find_and_search(shop: Path, tmp_path: Path) -> None:
    result, _ = _launch(shop, tmp_path, TASK, preset="aided")
    assert result.terminal_reason == "completed", result.detail
    assert "Search" in result.tool_usage
    offered_ok = result.contract["evidence"]
    assert offered_ok and all(item.startswith("shop/") for item in offered_ok)


def test_a_menu_that_never_offers_search_leaves_none_s_answer(shop: Path, tmp_path: Path) -> None:
    # light-tuned: a forced first Grep, then Read or finish only: no Search ever; the floor is none
    result, _ = _launch(
        shop, tmp_path, "Where is `check_password` compared with the hash?", preset="light-tuned"
    )
    assert result.terminal_reason == "completed", result.detail
    assert "Search" not in result.tool_usage and "Find" not in result.tool_usage
    assert result.contract["evidence"] and result.contract["summary"] != ABSENT_SUMMARY


def test_absent_tasks_are_answered_from_retrieval_not_from_the_wording(shop: Path, tmp_path: Path) -> None:
    plain, _ = _launch(shop, tmp_path, "Where is the password of a user compared with the stored hash?")
    cue, _ = _launch(
        shop, tmp_path, "Where is the password of a user compared with the stored hash? If absent, say so."
    )
    assert plain.contract["evidence"] == cue.contract["evidence"] != []
    nothing, _ = _launch(shop, tmp_path, "Where are quaternions interpolated spherically?")
    assert nothing.contract["evidence"] == [] and nothing.contract["summary"] == ABSENT_SUMMARY


def test_retrieval_is_a_model_choice() -> None:
    assert as_choice("retrieval") == "retrieval"
    with pytest.raises(ValueError):
        as_choice("bm25")


def _rows(arm: str, scores: list[float], kinds: list[str]) -> pd.DataFrame:
    return pd.DataFrame({
        "split": "dev", "scaffold": "aided", "model_choice": arm, "repeat": 0,
        "task_id": [f"t{i}" for i in range(len(scores))], "kind": kinds, "quality": scores,
    })  # fmt: skip


KINDS = ["locate"] * 6 + ["absent"] * 3


def test_lift_table_names_the_strongest_floor_and_the_lift_over_it_present_and_absent_apart() -> None:
    df = pd.concat([
        _rows("none", [0.0, 0.1, 0.0, 0.2, 0.0, 0.1, 1.0, 1.0, 1.0], KINDS),
        _rows("retrieval", [0.9, 0.8, 0.7, 0.9, 0.8, 0.7, 0.0, 0.0, 0.0], KINDS),
        _rows("main", [0.6, 0.9, 0.8, 1.0, 0.7, 0.6, 0.0, 1.0, 0.0], KINDS),
    ])  # fmt: skip
    table = lift_table(df)
    # Issue 48: absent tasks never enter the headline (a give-up passes them): it is the present ones.
    assert list(table["tasks"].unique()) == ["present", "absent"]
    every = table[table["tasks"] == "present"].set_index("model_choice")
    assert set(every["floor"]) == {"retrieval"}
    main = every.loc["main"]
    d = paired_difference(df[df["kind"] != "absent"], "main", "retrieval")
    assert main["floor_lift"] == pytest.approx(d.diff.mean)
    assert main["floor_lift_ci_low"] < main["floor_lift"] < main["floor_lift_ci_high"]
    present_rows = df[df["kind"] != "absent"]
    assert main["lift"] == pytest.approx(paired_difference(present_rows, "main", "none").diff.mean)
    absent = table[table["tasks"] == "absent"].set_index("model_choice")
    assert set(absent["floor"]) == {"none"} and int(absent.loc["main", "n"]) == 3
    present = table[table["tasks"] == "present"].set_index("model_choice")
    assert set(present["floor"]) == {"retrieval"} and int(present.loc["main", "n"]) == 6
    assert pd.isna(present.loc["retrieval", "floor_lift"])  # the floor's own row
    shown = readable_lift(table)
    assert {"on", "strongest floor", "lift over floor [95% CI]", "W/L/T vs floor"} <= set(shown.columns)
    sentences = floor_sentences(df)
    assert len(sentences) == 1 and sentences[0].startswith("main − `retrieval` = ")
    assert "on dev (6 tasks" in sentences[0] and "absent (3):" in sentences[0] and "vs `none`" in sentences[0]


def test_the_strongest_floor_is_the_best_floor_arm_not_a_model() -> None:
    two = ["locate"] * 2
    df = pd.concat(
        [
            _rows("none", [0.1, 0.2], two),
            _rows("retrieval-4", [0.3, 0.3], two),
            _rows("main", [0.9, 0.9], two),
        ]
    )
    assert strongest_floor(df) == ("retrieval-4", pytest.approx(0.3))
    assert strongest_floor(df[df["model_choice"] == "main"]) is None
    assert list(lift_table(df, apart=False).columns[:3]) == ["split", "scaffold", "model_choice"]
