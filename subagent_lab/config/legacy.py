"""The one legacy mapper: the flat scaffold fields of older profiles, sweeps, rows and traces.

Some fields were renamed when parent and child came to share their limits (``RENAMED``:
``max_contract_repairs`` is ``max_repairs``); the old names load through ``renamed``.

Before scaffolds were policy specs, a profile carried each aid as a field of its own
(``cite_margin: 2``, ``absence_check: true``) and the observation sizes beside them. Those names
still load: a profile, an override or a trace's recorded fields that hold them are folded into
the scaffold here, and nowhere else. Overrides may also address a policy's parameter directly
(``CiteFromSeen.margin``), add or remove a policy by name (``RetrievalStart: {k: 2}``,
``RetrievalStart: false``) or set a size (``observation.read_window``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from subagent_lab.config.scaffolds import Observation, Scaffold, extend
from subagent_lab.scaffold.specs import registry

FLAT: dict[str, tuple[str, str | None, Any]] = {
    "symbol_tools": ("SymbolTools", None, False),
    "min_tool_calls": ("RequireToolFirst", "n", 0),
    "constrain_paths": ("PathsFromSeen", None, False),
    "finish_after_stale": ("FinishWhen", "stale", 0),
    "finish_after_reads": ("FinishWhen", "reads", 0),
    "read_after_hits": ("ReadAfterHits", None, False),
    "first_search": ("FirstSearch", "n", 0),
    "read_on": ("ReadOn", "n", 0),
    "show_layout": ("TaskShaping", "layout", False),
    "task_paths": ("TaskShaping", "paths", False),
    "repo_map_tokens": ("RepoMap", "tokens", 0),
    "tool_guide": ("ToolGuide", None, False),
    "evidence_from_seen": ("CiteFromSeen", "constrain", None),
    "cite_anchors": ("CiteFromSeen", "anchors", None),
    "cite_margin": ("CiteFromSeen", "margin", None),
    "min_evidence": ("CiteFromSeen", "min_evidence", None),
    "max_evidence": ("CiteFromSeen", "max_evidence", None),
    "cite_units": ("CiteFromSeen", "units", None),
    "retrieval_start": ("RetrievalStart", "k", 0),
    "absence_check": ("AbsenceCheck", None, False),
    "require_grounded_evidence": ("RequireEvidence", "grounded", False),
    "require_seen": ("RequireEvidence", "seen", False),
    "grace_turn": ("Grace", None, False),
}
"""A flat field -> (policy, its parameter or None for the policy itself, the value that means
off: a policy all of whose flat fields are off is left out; None: never off, the policy stays)."""
SIZES = frozenset(Observation.model_fields)
"""Flat fields that are observation sizes."""
OLD_NEUTRAL: dict[str, Any] = {
    "symbol_tools": False, "repo_map_tokens": 0, "tool_guide": False, "cite_units": False,
    "retrieval_start": 0,
}  # fmt: skip
"""Flat fields added after rows were first recorded: the old hash leaves them out when off."""


RENAMED: dict[str, str] = {"max_contract_repairs": "max_repairs"}
"""Profile fields under an older name -> the name both profile kinds use now (``config.limits``)."""


def renamed(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """``raw`` (a profile's fields, an override) with older field names under today's; a
    ValueError names a field given under both."""
    if not any(key in RENAMED for key in raw):
        return raw
    out: dict[str, Any] = {}
    for key, value in raw.items():
        new = RENAMED.get(key, key) if isinstance(key, str) else key
        if new != key and new in raw:
            raise ValueError(f"{key}: the older name of {new}; give one of them")
        out[new] = value
    return out


def is_scaffold_key(key: object) -> bool:
    """A key that addresses the scaffold: a flat field, a size, ``Policy.param``, ``observation.x``
    or a policy's name."""
    if not isinstance(key, str):
        return False  # a wrong shape: validation reports it with the field
    head, dot, _ = key.partition(".")
    policy_like = bool(dot) and head[:1].isupper()  # ``Policy.param``: an unknown policy is named
    return key in FLAT or key in SIZES or head == "observation" or head in registry() or policy_like


def fold(raw: Mapping[str, Any], base: Scaffold) -> dict[str, Any]:
    """``raw`` (a profile's fields) with every scaffold key folded into its ``scaffold`` (``base``
    when it names none), applied in the order written."""
    keys = [k for k in raw if is_scaffold_key(k)]
    out = {k: v for k, v in raw.items() if k not in keys}
    given = raw.get("scaffold", base)
    scaffold = given if isinstance(given, Scaffold) else _validated(given)
    if keys:
        scaffold = apply_keys(scaffold, {k: raw[k] for k in keys})
    out["scaffold"] = scaffold
    return out


def _validated(given: Any) -> Scaffold:
    """A scaffold's fields validated, once per distinct value: a sweep's every run passes its
    preset's fields again, and a ``Scaffold`` is frozen, so one instance serves them all."""
    try:
        key = json.dumps(given, sort_keys=True)
    except (TypeError, ValueError):
        return Scaffold.model_validate(given)  # not plain JSON: validated (and its error raised) as is
    if key not in _SEEN:
        if len(_SEEN) >= 256:
            _SEEN.clear()
        _SEEN[key] = Scaffold.model_validate(given)
    return _SEEN[key]


_SEEN: dict[str, Scaffold] = {}


def apply_keys(scaffold: Scaffold, keys: Mapping[str, Any]) -> Scaffold:
    """``scaffold`` with flat, dotted, policy-name and size keys applied in order."""
    specs = {p.policy: dict(p.params) for p in scaffold.policies}
    sizes: dict[str, Any] = {}
    for key, value in keys.items():
        head, _, tail = key.partition(".")
        if key in SIZES or head == "observation":
            sizes[tail or key] = value
        elif key in FLAT:
            _flat(specs, key, value)
        elif tail:
            specs[head] = {**specs.get(head, {}), tail: value}
        elif value is False or value is None:
            specs.pop(head, None)
        elif value is True or isinstance(value, Mapping):
            specs[head] = {**specs.get(head, {}), **(value if isinstance(value, Mapping) else {})}
        else:
            raise ValueError(f"{head}: true, false or its parameters ({{name: value}}), got {value!r}")
    entries = [{name: params} for name, params in specs.items()]
    gone = [{p.policy: False} for p in scaffold.policies if p.policy not in specs]
    return extend(scaffold, [*gone, *entries], sizes)


def _flat(specs: dict[str, dict[str, Any]], key: str, value: Any) -> None:
    policy, param, off = FLAT[key]
    if param is None:
        if value in (False, 0, None):
            specs.pop(policy, None)
        else:
            specs.setdefault(policy, {})
        return
    specs[policy] = {**specs.get(policy, {}), param: value}
    if off is None:
        return
    flats = [(p, o) for k, (pol, p, o) in FLAT.items() if pol == policy and p is not None]
    if all(specs[policy].get(p, o) == o for p, o in flats):
        specs.pop(policy)


def flat_fields(scaffold: Scaffold) -> dict[str, Any]:
    """The flat fields that meant ``scaffold`` before specs (every one, sizes included)."""
    fields: dict[str, Any] = {}
    for key, (policy, param, off) in FLAT.items():
        held = scaffold.has(policy)
        if param is None:
            fields[key] = held
        else:
            fields[key] = scaffold.param(policy, param) if held else (off if off is not None else None)
    fields.pop("grace_turn")  # a profile field then, not a scaffold one
    return {**fields, **scaffold.observation.model_dump()}


def legacy_hash(scaffold: Scaffold) -> str:
    """The ``scaffold_hash`` rows recorded before specs carry for this scaffold."""
    fields = flat_fields(scaffold)
    kept = {k: v for k, v in fields.items() if k not in OLD_NEUTRAL or v != OLD_NEUTRAL[k]}
    blob = json.dumps(kept, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


def scaffold_of_fields(fields: Mapping[str, Any], base: Scaffold) -> Scaffold:
    """The scaffold a trace's recorded profile fields ran: a ``scaffold`` entry (specs), or the
    flat fields of an older trace folded over ``base``."""
    scaffold: Scaffold = fold(fields, base)["scaffold"]
    return scaffold


def upgrade_fields(fields: Mapping[str, Any], base: Scaffold) -> dict[str, Any]:
    """A trace's recorded profile fields with an older trace's flat scaffold fields folded into
    ``scaffold`` (as JSON) and older field names under today's; fields that name no scaffold key
    are returned as they are."""
    fields = renamed(fields)
    if not any(is_scaffold_key(k) for k in fields):
        return dict(fields)
    folded = fold(fields, base)
    return {**folded, "scaffold": folded["scaffold"].model_dump(mode="json")}
