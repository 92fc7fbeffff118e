"""The scaffold as configuration: an ordered list of policy specs and the observation sizes.

A comparison of models holds the scaffold fixed; a preset is how it says which. A preset in
``profiles.yaml`` (``scaffolds:``) lists its policies by class name with their parameters
(``scaffold.specs``), may ``extends:`` another preset (its entries then add a policy, set some of
an inherited policy's parameters, or remove one with ``false``), and sizes the observations in a
block of its own. A profile names its scaffold (a preset, or a list written in place). Applying a
preset replaces whatever scaffold a profile carried: the same preset is the same scaffold for every
model. ``plain`` (the seed article's mechanism: free actions, the contract check and its repairs,
budgets), ``base`` (a child profile's scaffold when it names none) and ``parent`` (a main agent's)
are built in.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from subagent_lab.scaffold.specs import added_tools, check_params, order_key, policy_class
from subagent_lab.tools.symbols import SYMBOL_TOOLS


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PolicySpec(_Frozen):
    """One policy of a scaffold: its class name and every settable parameter (defaults filled in).
    Written in YAML as ``Name`` or ``Name: {param: value}``."""

    policy: str
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"policy": value}
        if isinstance(value, Mapping) and len(value) == 1 and "policy" not in value:
            ((name, params),) = value.items()
            return {"policy": name, "params": {} if params is None or params is True else params}
        return value

    @model_validator(mode="after")
    def _checked(self) -> PolicySpec:
        object.__setattr__(self, "params", check_params(self.policy, self.params))
        return self


class Observation(_Frozen):
    """What an action costs and what an observation shows: the same for every preset unless it
    says otherwise (no thought before an action, 30-line Read windows: every token shown is prompt
    a CPU evaluates)."""

    tool_interface: Literal["simple", "full"] = "simple"
    """``simple``: Grep(pattern, path), Read(path, line), guided observations; ``full``: every option."""
    action_max_tokens: int = Field(default=160, ge=16)
    """Output cap of an action call (a brief thought and one tool call)."""
    thought_max_chars: int = Field(default=0, ge=0, le=2000)
    arg_max_chars: int = Field(default=160, ge=8, le=4000)
    """The grammar's cap on each string argument of an action."""
    grep_max_matches: int = Field(default=15, gt=0, le=200)
    read_window: int = Field(default=30, gt=0, le=400)
    glob_max_results: int = Field(default=50, gt=0, le=500)
    read_outline: int = Field(default=0, ge=0, le=200)
    """A Read also lists up to this many ``class``/``def`` lines of the rest of the file, each one
    citable (0: none). Small models stop after one window; the outline shows the file's shape."""


class Scaffold(_Frozen):
    """A resolved scaffold: its policies (one spec each, in ``scaffold.specs.ORDER``) and the
    observation sizes."""

    policies: tuple[PolicySpec, ...] = ()
    observation: Observation = Observation()

    @field_validator("policies")
    @classmethod
    def _in_order(cls, policies: tuple[PolicySpec, ...]) -> tuple[PolicySpec, ...]:
        names = [p.policy for p in policies]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"policy {twice[0]} listed twice")
        return tuple(sorted(policies, key=lambda p: order_key(p.policy)))

    def specs(self) -> list[tuple[str, dict[str, Any]]]:
        """The policies as (name, params), in order."""
        return [(p.policy, p.params) for p in self.policies]

    def has(self, policy: str) -> bool:
        return any(p.policy == policy for p in self.policies)

    def param(self, policy: str, param: str, absent: Any = None) -> Any:
        """A policy's parameter, ``absent`` when the scaffold does not hold the policy."""
        return next((p.params[param] for p in self.policies if p.policy == policy), absent)

    def tools(self) -> tuple[str, ...]:
        """The tools its policies add to a profile's own (``SymbolTools``)."""
        return added_tools(self.specs())

    def labels(self) -> list[str]:
        """Each policy and parameter as ``Policy`` / ``Policy.param=value``, and each observation
        size as ``observation.name=value``: what a table or a diff of two scaffolds shows."""
        out = []
        for spec in self.policies:
            out.append(spec.policy)
            out += [f"{spec.policy}.{k}={v}" for k, v in spec.params.items()]
        out += [f"observation.{k}={v}" for k, v in self.observation.model_dump().items()]
        return out

    def grammar_aids(self) -> list[str]:
        """The aids on that only a grammar can enforce (``Policy.grammar_only``), sorted."""
        aids = []
        for spec in self.policies:
            for part in policy_class(spec.policy).grammar_only:
                if part == "*":
                    aids.append(spec.policy)
                elif spec.params.get(part):
                    aids.append(f"{spec.policy}.{part}")
        return sorted(aids)


def scaffold_hash(scaffold: Scaffold) -> str:
    """A short, stable hash of a resolved scaffold (the same policies, parameters and sizes, the
    same hash)."""
    blob = json.dumps(scaffold.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


def _entry(item: Any) -> tuple[str, dict[str, Any] | None]:
    """A preset entry as (policy, params to set), params None for a removal."""
    if isinstance(item, str):
        return item, {}
    if isinstance(item, Mapping) and len(item) == 1:
        ((name, params),) = item.items()
        if params is False:
            return str(name), None
        if params is None or params is True:
            return str(name), {}
        if isinstance(params, Mapping):
            return str(name), dict(params)
    raise ValueError(f"an entry is a policy name or `Name: {{param: value}}` or `Name: false`, got {item!r}")


def extend(base: Scaffold, entries: list[Any], observation: Mapping[str, Any]) -> Scaffold:
    """``base`` with a preset's entries and sizes over it."""
    specs = {p.policy: dict(p.params) for p in base.policies}
    for item in entries:
        name, params = _entry(item)
        if params is None:
            specs.pop(name, None)
        else:
            specs[name] = {**specs.get(name, {}), **params}
    sizes = {**base.observation.model_dump(), **observation}
    return Scaffold.model_validate(
        {"policies": [{"policy": n, "params": p} for n, p in specs.items()], "observation": sizes}
    )


PLAIN = Scaffold.model_validate(
    {"policies": ["SkipRepeated", {"CiteFromSeen": {"constrain": False}}, "Grace"]}
)
"""The built-in ``plain`` preset: free actions (a repeated tool sits out), the seen locations
listed for the answer, a grace turn after a limit; nothing chosen, forced or ranked."""
BASE = Scaffold.model_validate(
    {
        "policies": [
            {"RequireToolFirst": {"n": 1}},
            "PathsFromSeen",
            "SkipRepeated",
            {"FinishWhen": {"stale": 1}},
            "ReadAfterHits",
            "CiteFromSeen",
            "Grace",
        ],
        "observation": {"read_window": 50, "thought_max_chars": 80},
    }
)
"""The built-in ``base`` preset: a child profile's scaffold when it names none (the verification
and plan profiles): a tool before the answer, paths and evidence from what the tools showed."""

PARENT = Scaffold.model_validate(
    {
        "policies": ["SkipRepeated", "Grace"],
        "observation": {"action_max_tokens": 400, "arg_max_chars": 4000, "thought_max_chars": 80},
    }
)
"""The built-in ``parent`` preset: a main agent's scaffold when it names none: a repeated tool sits
out, a grace turn after a limit; an action may be long (an Edit's text, a Task's prompt). Its tools
are its own (``agents.tools``): the sizes of Read, Grep and Glob observations are a child's."""


def symbol_tools_allowed(scaffold: Scaffold, tools: tuple[str, ...]) -> list[str]:
    """What a scaffold's tool set and interface get wrong together (empty: nothing)."""
    held = {*tools, *scaffold.tools()}
    problems = []
    if held & set(SYMBOL_TOOLS) and scaffold.observation.tool_interface != "simple":
        problems.append("tools: Find, Refs, Outline and Search exist in tool_interface 'simple' only")
    for aid in ("RetrievalStart", "RankStart"):
        if scaffold.has(aid) and not {"Find", "Search"} <= held:
            problems.append(f"{aid}: the retrieval calls Find and Search; add SymbolTools")
    if scaffold.has("RetrievalStart") and scaffold.has("RankStart"):
        problems.append("RankStart: it runs RetrievalStart's retrieval itself; remove RetrievalStart")
    return problems
