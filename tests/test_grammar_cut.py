"""The cuts a grammar makes, made after the fact to an answer decoded without one."""

from __future__ import annotations

from typing import Any

from subagent_lab.core.contracts import EVIDENCE_PATTERN
from subagent_lab.models.grammar_cut import cut_answer

SEEN = ["error.py:45", "error.py:48-74", "a.py:8"]


def _schema(items: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "evidence": {"type": "array", "items": items, "maxItems": 2},
            "findings": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
        },
    }


def test_an_item_that_begins_with_an_allowed_location_is_cut_to_it() -> None:
    schema = _schema({"type": "string", "enum": SEEN})
    value = {"evidence": ["error.py:45  class YAMLError (lines 45-46): class YAMLError(Exception)"]}
    cut, notes = cut_answer(value, schema)
    assert cut == {"evidence": ["error.py:45"]} and len(notes) == 1
    # The longest allowed value wins, and a range's start is as far as the grammar lets it go.
    assert cut_answer({"evidence": ["error.py:48-74 class MarkedYAMLError"]}, schema)[0] == {
        "evidence": ["error.py:48-74"]
    }
    assert cut_answer({"evidence": ["error.py:45-46"]}, schema)[0] == {"evidence": ["error.py:45"]}


def test_a_location_is_not_cut_inside_a_number_or_a_name() -> None:
    schema = _schema({"type": "string", "enum": SEEN})
    for item in ["a.py:87", "a.py:8x", "error.py:455", "b.py:9"]:
        cut, notes = cut_answer({"evidence": [item]}, schema)
        assert cut == {"evidence": [item]} and notes == []  # left to the contract check


def test_without_an_enum_the_pattern_keeps_the_first_word() -> None:
    schema = _schema({"type": "string", "pattern": EVIDENCE_PATTERN})
    cut, _ = cut_answer({"evidence": ["loaders.py:152  class FileSystemLoader", "prose only"]}, schema)
    assert cut == {"evidence": ["loaders.py:152", "prose only"]}


def test_lists_are_closed_at_max_items_and_objects_in_strings_become_text() -> None:
    schema = _schema({"type": "string", "enum": SEEN})
    finding = {"path": "loaders.py", "line": 152, "definition": "class FileSystemLoader(BaseLoader)"}
    value = {"findings": [finding, "b", "c", "d", "e", "f"], "evidence": ["a.py:8", "a.py:8", "a.py:8"]}
    cut, notes = cut_answer(value, schema)
    assert cut["findings"] == ["loaders.py 152 class FileSystemLoader(BaseLoader)", "b", "c", "d"]
    assert cut["evidence"] == ["a.py:8", "a.py:8"]
    assert len(notes) == 3


def test_an_answer_that_fits_is_returned_unchanged_with_no_notes() -> None:
    schema = _schema({"type": "string", "enum": SEEN})
    value = {"evidence": ["a.py:8"], "findings": ["x"], "summary": "anything at all"}
    assert cut_answer(value, schema) == (value, [])
