"""The ``retrieval_start`` aid (issue 37): the harness runs the task's retrieval before the model's
first action, the answer starts from its best units, and each evidence item's origin is measured.

Whole launches on a small workspace with scripted models and the no-model policy; no real model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import REPO, SHOP_FILES, SHOP_TASK, write_files
from pydantic import ValidationError

from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest, SubagentResult
from subagent_lab.analysis.evidence_origin import evidence_origin
from subagent_lab.bench.scoring import context_from_trace
from subagent_lab.config import build
from subagent_lab.config.profiles import LabConfig, RuntimeProfile, load_config
from subagent_lab.config.scaffolds import scaffold_hash
from subagent_lab.core.policy import FINISH, HARNESS_CALL, policy_names
from subagent_lab.core.trace import ModelCalled, PromptAdded, RunEnded, ToolFinished, ToolStarted, read_trace
from subagent_lab.experiments.rows import ORIGIN_COLUMNS, origin_columns
from subagent_lab.models.baseline import BaselineModel
from subagent_lab.models.scripted import ScriptedModel, final, tool_call, tool_calls
from subagent_lab.scaffold.retrieval_start import PURPOSE, RetrievalStart, parse_candidates
from subagent_lab.tools.symbols.index import index_for
from subagent_lab.tools.symbols.retrieve import RetrievedUnit, code_names, retrieve
from subagent_lab.widgets.records import evidence_records, run_view
from subagent_lab.widgets.render import contract_html
from subagent_lab.workspace.sandbox import Workspace

FILES = {
    **SHOP_FILES,
    "app/colors.py": """def paint_wall(color):
    return color.upper()
""",
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write_files(tmp_path / "shop", FILES)


@pytest.fixture
def preset() -> dict[str, Any]:
    return load_config(REPO / "profiles.yaml", env={}).scaffold("retrieval-start").resolved()


def _line(rel: str, text: str) -> int:
    """The 1-based line of ``rel`` that starts with ``text`` (after indentation)."""
    return next(n for n, line in enumerate(FILES[rel].splitlines(), 1) if line.strip().startswith(text))


def _candidates(root: Path, k: int = 4) -> list[RetrievedUnit]:
    return retrieve(SHOP_TASK, index_for(Workspace(root)), k)


def _launch(config: LabConfig, root: Path, model: Any, overrides: dict[str, Any]) -> SubagentResult:
    trace_dir = root.parent / "runs"
    launcher = SubagentLauncher(config, root, model_factory=lambda choice, cfg: model, trace_dir=trace_dir)
    return launcher.launch(SubagentRequest(task=SHOP_TASK, overrides=overrides))


# --- the ranking, a pure function ---------------------------------------------------------------


def test_retrieve_takes_the_tasks_defined_names_first_then_what_search_ranks(root: Path) -> None:
    assert code_names("Is `Environment.get_template` like load_file or FileLoader? See a.py") == [
        "Environment.get_template", "load_file", "FileLoader", "a.py",
    ]  # fmt: skip
    units = _candidates(root)
    assert len(units) == 4 and len({u.item for u in units}) == 4
    first = units[0]
    assert (first.via, first.item) == ("find", f"app/auth.py:{_line('app/auth.py', 'def check_password')}")
    assert first.label == f"{first.item}-{first.unit.end}" and first.unit.end > first.unit.start
    assert all(u.via == "search" for u in units[1:])
    assert "paint_wall" not in {u.unit.name for u in units}  # no word of the task
    assert _candidates(root, 2) == units[:2]  # the same ranking, cut


# --- a launch under the preset ------------------------------------------------------------------


def _scripted(root: Path, answer: dict[str, Any]) -> ScriptedModel:
    """Read a line inside the second candidate, Find a unit no candidate holds, finish, answer."""
    second = _candidates(root)[1]
    turns = [
        tool_call("Read", path=second.rel, line=second.unit.start + 1),
        tool_calls(("Find", {"name": "paint_wall"})),  # ``name`` is tool_call's own
        tool_call(FINISH),
        final({"found": "yes"}),  # the absence check
        final(answer),
    ]
    return ScriptedModel(turns)


def test_the_retrieval_runs_as_harness_calls_before_the_first_model_call(
    config: LabConfig, root: Path, preset: dict[str, Any]
) -> None:
    candidates = _candidates(root)
    empty = {"status": "completed", "summary": "s", "findings": [], "evidence": []}
    model = ScriptedModel([tool_call(FINISH), final({"found": "yes"}), final(empty)])
    result = _launch(config, root, model, preset)
    assert result.status == "completed", result.detail
    assert "retrieval_start" in result.policies
    events = read_trace(result.trace_path)
    first_call = next(i for i, e in enumerate(events) if isinstance(e, ModelCalled))
    started = [e for e in events if isinstance(e, ToolStarted)]
    assert [(e.tool, e.arguments) for e in started] == [
        ("Find", {"name": "check_password"}),
        ("Search", {"query": SHOP_TASK}),
    ]
    assert all(e.call_id.startswith(HARNESS_CALL) for e in started)
    assert all(events.index(e) < first_call for e in started)
    assert result.tool_usage["Find"]["executed"] == 1 and result.tool_usage["Search"]["executed"] == 1
    # The model's first context: the task, each harness call and its result, then the numbered note.
    first = model.requests[0].messages
    calls = [m.tool_calls[0].name for m in first if m.role == "assistant"]
    assert calls == ["Find", "Search"] and [m.name for m in first if m.role == "tool"] == calls
    note = str(first[-1].content)
    assert first[-1].role == "user" and [c for c, _ in parse_candidates(note)] == [c.item for c in candidates]
    assert "1. " + candidates[0].item + "  function check_password (lines" in note
    assert "def check_password(user, password)" in note  # its signature
    [added] = [e for e in events if isinstance(e, PromptAdded) and e.purpose == PURPOSE]
    assert added.content == note
    # What the harness's calls printed counts as seen, for the scorer as for the loop: each
    # candidate's header line, not its whole body (seen means printed).
    seen = context_from_trace(result.trace_path).seen or ()
    assert all(any(s.covers(c.rel, c.unit.start, c.unit.start) for s in seen) for c in candidates)
    long_units = [c for c in candidates if c.unit.end > c.unit.start + 3]
    assert not any(any(s.covers(c.rel, c.unit.start, c.unit.end) for s in seen) for c in long_units)
    # Empty evidence stays empty: the harness fills nothing in; every candidate is dropped.
    assert result.contract is not None and result.contract["evidence"] == []
    # ... and the result still carries the retrieval's answer, marked as the harness's, not the model's.
    assert result.retrieval == [c.item for c in candidates]
    origin = evidence_origin(events)
    assert origin is not None and origin.items == [] and origin.dropped == [1, 2, 3, 4]


def test_candidates_lead_the_final_prompt_and_the_grammar_and_each_item_has_its_origin(
    config: LabConfig, root: Path, preset: dict[str, Any]
) -> None:
    candidates = _candidates(root)
    wall = "app/colors.py:1"  # the header line the model's Find printed (seen means printed)
    rel = candidates[1].rel
    inside = candidates[1].unit.start + 1
    answer = {
        "status": "completed",
        "summary": "check_password compares the hash; login calls it.",
        "findings": ["login calls check_password"],
        "evidence": [candidates[0].item, f"{rel}:{inside}", wall],
        "unresolved_questions": [],
    }
    model = _scripted(root, answer)
    result = _launch(config, root, model, preset)
    assert result.status == "completed" and result.contract is not None, result.detail
    assert result.contract["evidence"] == answer["evidence"]
    last = model.requests[-1]
    assert last.final_schema is not None
    enum = last.final_schema["properties"]["evidence"]["items"]["enum"]
    assert enum[:4] == [c.item for c in candidates]  # the candidates first, in their order
    assert f"{rel}:{inside}" in enum[4:] and wall in enum[4:]  # then the model's own calls
    assert not {c.label for c in candidates} & set(enum)  # a candidate is offered once
    prompt = str(last.messages[-1].content)
    numbered = [c for c, _ in parse_candidates(prompt)]
    assert numbered == [c.item for c in candidates]
    assert prompt.index("4. ") < prompt.index(f"- {wall}")

    events = read_trace(result.trace_path)
    origin = evidence_origin(events)
    assert origin is not None
    assert [(i.source, i.action, i.candidate) for i in origin.items] == [
        ("retrieval", "kept", 1),
        ("model", "narrowed", 2),
        ("model", "added", None),
    ]
    assert origin.dropped == [3, 4]
    row = origin_columns(events)
    assert set(row) == set(ORIGIN_COLUMNS)
    assert (row["candidates_given"], row["candidates_dropped"]) == (4, 2)
    assert (row["evidence_kept"], row["evidence_narrowed"], row["evidence_added"]) == (1, 1, 1)
    assert (row["evidence_from_retrieval"], row["evidence_from_model"]) == (1, 2)
    assert [i["action"] for i in json.loads(row["evidence_origin"])] == ["kept", "narrowed", "added"]
    # The run inspector shows the same, per item and for the dropped candidates.
    view = run_view(result.trace_path)
    assert [r.origin for r in evidence_records(view)] == [
        "retrieval · kept #1",
        "model · narrowed #2",
        "model · added",
    ]
    html = contract_html(view, evidence_records(view))
    assert "candidates dropped" in html and f"#3 {candidates[2].item}" in html


def test_the_no_model_policy_answers_the_candidates_as_given(
    config: LabConfig, root: Path, preset: dict[str, Any]
) -> None:
    """The preset's own floor: lift over it is exactly what a model adds to the retrieval."""
    result = _launch(config, root, BaselineModel(), preset)
    assert result.status == "completed" and result.contract is not None, result.detail
    assert result.contract["evidence"] == [c.item for c in _candidates(root)]
    origin = evidence_origin(read_trace(result.trace_path))
    assert origin is not None and origin.dropped == []
    assert {(i.source, i.action) for i in origin.items} == {("retrieval", "kept")}


def test_the_aid_needs_find_and_search_and_a_run_without_it_has_no_origin_columns(
    config: LabConfig, root: Path, preset: dict[str, Any]
) -> None:
    explore = config.profiles["explore"].model_dump()
    with pytest.raises(ValidationError, match="RetrievalStart: the retrieval calls Find and Search"):
        RuntimeProfile.model_validate({**explore, **preset, "symbol_tools": False})
    RuntimeProfile.model_validate(
        {**explore, **preset, "symbol_tools": False, "tools": ["Read", "Find", "Search"]}
    )
    result = _launch(config, root, BaselineModel(), {**preset, "retrieval_start": 0})
    assert result.status == "completed" and "retrieval_start" not in result.policies, result.detail
    assert result.retrieval == []
    events = read_trace(result.trace_path)
    assert not any(isinstance(e, ToolStarted) and e.call_id.startswith(HARNESS_CALL) for e in events)
    assert evidence_origin(events) is None
    assert origin_columns(events) == dict.fromkeys(ORIGIN_COLUMNS)


def test_the_preset_is_symbols_nomap_plus_the_aid_and_one_cited_item() -> None:
    lab = load_config(REPO / "profiles.yaml", env={})
    retrieval = lab.scaffold("retrieval-start").resolved()
    with_aid, without = lab.scaffold("retrieval-start").scaffold, lab.scaffold("symbols-nomap").scaffold
    # min_evidence 1: light left the evidence empty after its own "found: yes" (docs/benchmarks.md)
    assert set(with_aid.labels()) ^ set(without.labels()) == {
        "RetrievalStart", "RetrievalStart.k=4", "CiteFromSeen.min_evidence=1", "CiteFromSeen.min_evidence=0"
    }  # fmt: skip
    assert scaffold_hash(with_aid) != scaffold_hash(without)
    names = policy_names(build.policies(_profile(lab, retrieval)))
    assert names.index("retrieval_start") == names.index("cite_from_seen") + 1
    assert names.index("absence_check") == names.index("retrieval_start") + 1
    [aid] = [p for p in build.policies(_profile(lab, retrieval)) if isinstance(p, RetrievalStart)]
    assert aid.params() == {"k": 4, "constrain": True, "min_evidence": 1, "max_evidence": 4}


def _profile(lab: LabConfig, fields: dict[str, Any]) -> Any:
    return lab.profiles["explore"].model_copy(update=fields)


def test_origins_from_events_alone_whole_units_classes_and_unseen_items() -> None:
    """A pure function of the trace: a candidate cited whole is kept, a method of a candidate class
    is narrowed into it, an item no call showed is ``other``; the first candidate holding an item
    takes it."""
    note = "\n".join([
        "head",
        "1. a.py:10  class Loader (lines 10-40): class Loader:",
        "2. a.py:12  function Loader.load (lines 12-20): def load(self):",
        "3. b.py:5  function helper (lines 5-9): def helper():",
    ])  # fmt: skip
    shown = [["a.py", 10, 40], ["a.py", 10, 10], ["b.py", 5, 9], ["c.py", 1, 3]]
    harness = ToolFinished(
        run_id="r", call_id=HARNESS_CALL + "s", tool="Search", status="ok", text="", spans=shown
    )
    own = ToolFinished(
        run_id="r", call_id="c-Read", tool="Read", status="ok", text="", spans=[["a.py", 1, 30]]
    )
    evidence = ["b.py:5-9", "a.py:14", "c.py:1-3", "d.py:2", "a.py:50"]
    end = RunEnded(
        run_id="r", terminal_reason="completed", status="completed", contract={"evidence": evidence}
    )
    origin = evidence_origin([PromptAdded(run_id="r", purpose=PURPOSE, content=note), harness, own, end])
    assert origin is not None and origin.candidates == ["a.py:10", "a.py:12", "b.py:5"]
    assert [(i.source, i.action, i.candidate) for i in origin.items] == [
        ("retrieval", "kept", 3),  # the candidate's unit whole
        ("model", "narrowed", 1),  # inside the class (listed first) and its method: the Read showed it
        ("retrieval", "added", None),  # a unit only the harness's Search printed, no candidate
        ("other", "added", None),  # no call showed it
        ("other", "added", None),
    ]
    assert origin.dropped == [2]
    assert evidence_origin([own, end]) is None  # no candidates given: no origins


def test_a_sweep_row_of_the_no_model_policy_under_the_preset_keeps_every_candidate(tmp_path: Path) -> None:
    """The sweep's row carries the origin columns (``execute_run`` reads them from the trace)."""
    from subagent_lab.experiments.sweep import SweepSpec, run_sweep

    spec = SweepSpec(
        name="rs", tasks=("yaml-safe-load",), models=("none",), scaffolds=("retrieval-start", "plain")
    )
    df = run_sweep(spec, out_dir=tmp_path / "sw", model_factory=lambda c, m: BaselineModel(), progress=False)
    rows = {row["scaffold"]: row for row in df.to_dict("records")}
    given = rows["retrieval-start"]
    assert given["candidates_given"] >= 1 and given["candidates_dropped"] == 0
    assert given["evidence_kept"] == given["candidates_given"] == given["evidence_from_retrieval"]
    assert given["evidence_narrowed"] == given["evidence_added"] == given["evidence_from_model"] == 0
    assert json.loads(given["evidence"]) == [i["item"] for i in json.loads(given["evidence_origin"])]
    assert all(pd.isna(rows["plain"][c]) for c in ORIGIN_COLUMNS)  # no candidates: empty
