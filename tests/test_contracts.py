"""Contracts parse strictly; evidence is grounded against the workspace."""

from __future__ import annotations

import json
from pathlib import Path

from subagent_lab.core.contracts import ground_evidence, grounded_ratio, parse_contract

OK = {
    "status": "completed",
    "summary": "s",
    "findings": [],
    "evidence": ["a.py:1"],
    "unresolved_questions": [],
}


def test_valid_explore_result() -> None:
    check = parse_contract(json.dumps(OK), "ExploreResult")
    assert check.valid and check.payload == OK


def test_strictness() -> None:
    assert "fences" in parse_contract("```json\n{}\n```", "ExploreResult").errors[0]
    assert "not a single JSON object" in parse_contract('{"a": 1} trailing', "ExploreResult").errors[0]
    extra = parse_contract(json.dumps({**OK, "confidence": 0.9}), "ExploreResult")
    assert not extra.valid and any("confidence" in e for e in extra.errors)
    failed = parse_contract(json.dumps({**OK, "status": "failed"}), "ExploreResult")
    assert not failed.valid and failed.errors[0].startswith("status")
    bad_ev = parse_contract(json.dumps({**OK, "evidence": ["see auth module"]}), "ExploreResult")
    assert not bad_ev.valid and "path/file.py:12" in bad_ev.errors[0]


def test_verification_verdicts() -> None:
    for verdict in ("PASS", "FAIL", "PARTIAL", "UNVERIFIED"):
        assert parse_contract(json.dumps({"verdict": verdict}), "VerificationResult").valid
    assert not parse_contract(json.dumps({"verdict": "MAYBE"}), "VerificationResult").valid


def test_grounding(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("one\ntwo\nthree\n")
    (tmp_path.parent / "outside.py").write_text("x\n")
    checks = ground_evidence(
        ["a.py:2", "a.py:2-3", "a.py:4", "b.py:1", "../outside.py:1", "a.py:3-2"], tmp_path
    )
    assert [c.grounded for c in checks] == [True, True, False, False, False, False]
    assert [c.reason for c in checks[2:]] == [
        "line beyond end of file",
        "no such file",
        "outside the workspace",
        "bad line range",
    ]
    assert grounded_ratio(checks) == 2 / 6
    assert grounded_ratio([]) is None
