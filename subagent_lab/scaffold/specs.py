"""Policies by name: the one precedence order, the spec vocabulary and the builder.

A scaffold is written as policy specs: a policy's class name and its parameters (the dataclass's
init fields), e.g. ``CiteFromSeen: {anchors: true, margin: 2}``. ``ORDER`` is the one place the
precedence is written: the builder returns policies in this order whatever order a spec list has,
and the loop calls each hook on them in tuple order. Adding an aid is one file (a ``Policy``
dataclass) and one place in ``ORDER``.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

from subagent_lab.core.policy import Policy
from subagent_lab.scaffold.absence_check import AbsenceCheck
from subagent_lab.scaffold.cite_from_seen import CiteFromSeen
from subagent_lab.scaffold.finish_when import FinishWhen
from subagent_lab.scaffold.first_search import FirstSearch
from subagent_lab.scaffold.grace import Grace
from subagent_lab.scaffold.paths_from_seen import PathsFromSeen
from subagent_lab.scaffold.rank_start import RankStart
from subagent_lab.scaffold.read_after_hits import ReadAfterHits
from subagent_lab.scaffold.read_on import ReadOn
from subagent_lab.scaffold.repo_map import RepoMap
from subagent_lab.scaffold.require_evidence import RequireEvidence
from subagent_lab.scaffold.require_tool_first import RequireToolFirst
from subagent_lab.scaffold.retrieval_start import RetrievalStart
from subagent_lab.scaffold.skip_repeated import SkipRepeated
from subagent_lab.scaffold.symbol_tools import SymbolTools
from subagent_lab.scaffold.task_shaping import TaskShaping
from subagent_lab.scaffold.tool_guide import ToolGuide

ORDER: list[type[Policy]] = [
    SymbolTools,  # the tool set (no hooks)
    # The action menu, narrowed in this order (each sees what the one before left):
    RequireToolFirst,  # no finish before the first executed call
    PathsFromSeen,  # no Read before a file was shown; paths only from what was shown
    SkipRepeated,  # a tool that repeated sits out (unless nothing else is left)
    FinishWhen,  # only finish after stale turns or enough Reads ...
    ReadAfterHits,  # ... else only Read and finish after a search hit
    FirstSearch,  # step 0: a Grep for one of the task's names, whatever the rules above said
    ReadOn,  # a repeated Read shows the next window
    TaskShaping,  # the first message's layout line and named files
    RepoMap,  # ... then the repo map, its units counted as shown
    ToolGuide,  # ... then what the structure tools show and when to use them
    # The final answer: the listing and evidence choices first, the absence verdict over them.
    CiteFromSeen,
    RetrievalStart,  # the harness's retrieval before the first action; its candidates lead the answer
    RankStart,  # ... or the same retrieval's pool scored by the model, the fused best leading it
    AbsenceCheck,
    RequireEvidence,
    Grace,
]
"""The precedence, written once (a list, so a test can add an aid in its place)."""

Spec = tuple[str, Mapping[str, Any]]
"""A policy's class name and its parameters (every settable one: ``settable``)."""


_Made = tuple[list[type[Policy]], int, dict[str, type[Policy]], dict[str, int]]
_MADE: list[_Made] = []
"""The registry and positions made for ``ORDER`` as it was then (the list and its length)."""


def _made() -> tuple[dict[str, type[Policy]], dict[str, int]]:
    if not _MADE or _MADE[0][0] is not ORDER or _MADE[0][1] != len(ORDER):
        names = {cls.__name__: cls for cls in ORDER}
        _MADE[:] = [(ORDER, len(ORDER), names, {name: i for i, name in enumerate(names)})]
    return _MADE[0][2], _MADE[0][3]


def registry() -> dict[str, type[Policy]]:
    """Every policy by its spec name (its class name), in ``ORDER`` (made once per order)."""
    return _made()[0]


def policy_class(name: str) -> type[Policy]:
    """The policy called ``name``; a ValueError lists the known ones."""
    known = registry()
    if name not in known:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(known)}")
    return known[name]


def settable(cls: type[Policy]) -> dict[str, Any]:
    """A policy's parameters a spec may set, with their defaults (its init fields but the ones it
    takes from another policy, ``Policy.shared``)."""
    if not dataclasses.is_dataclass(cls):
        return {}
    return {
        f.name: f.default
        for f in dataclasses.fields(cls)
        if f.init and f.name not in cls.shared and f.default is not dataclasses.MISSING
    }


_ADAPTERS: dict[tuple[type[Policy], str], TypeAdapter[Any]] = {}


def _adapter(cls: type[Policy], param: str) -> TypeAdapter[Any]:
    """The validator of one parameter's declared type (constraints included), made once."""
    key = (cls, param)
    if key not in _ADAPTERS:
        _ADAPTERS[key] = TypeAdapter(typing.get_type_hints(cls, include_extras=True)[param])
    return _ADAPTERS[key]


def check_params(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Every settable parameter of policy ``name``: ``params`` validated over the defaults. A
    ValueError names the policy and the parameter."""
    cls = policy_class(name)
    defaults = settable(cls)
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        taken = sorted(set(unknown) & set(cls.shared))
        if taken:
            raise ValueError(f"{name}.{taken[0]}: set in {cls.shared[taken[0]]} (one setting for both)")
        known = ", ".join(defaults) or "none"
        raise ValueError(f"{name}.{unknown[0]}: not a parameter of {name}; its parameters: {known}")
    checked = dict(defaults)
    for param, value in params.items():
        try:
            checked[param] = _adapter(cls, param).validate_python(value, strict=True)
        except ValidationError as exc:
            raise ValueError(f"{name}.{param}: {exc.errors()[0]['msg']} (got {value!r})") from None
    return checked


def order_key(name: str) -> int:
    """A policy's place in ``ORDER``."""
    return _made()[1][name]


def build_policies(specs: Sequence[Spec], *, contract: bool) -> tuple[Policy, ...]:
    """The policies of a spec list, in ``ORDER``; those that act on a contract only when the run
    has one. A shared parameter comes from the named policy's spec (its default when absent)."""
    given = {name: dict(params) for name, params in specs}
    built: list[Policy] = []
    for name in sorted(given, key=order_key):
        cls = policy_class(name)
        if cls.needs_contract and not contract:
            continue
        params = dict(given[name])
        for param, source in cls.shared.items():
            peer, peer_param = source.split(".")
            peer_params = given.get(peer) or settable(policy_class(peer))
            params[param] = peer_params[peer_param]
        built.append(cls(**params))
    return tuple(built)


def added_tools(specs: Sequence[Spec]) -> tuple[str, ...]:
    """The tools a spec list's policies add, in ``ORDER``."""
    names = sorted((name for name, _ in specs), key=order_key)
    return tuple(tool for name in names for tool in policy_class(name).adds_tools)
