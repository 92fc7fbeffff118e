"""The run's token budget: limits, what was charged, and admission of the next model call.

A call is admitted only when its counted prompt fits the context budget and the prompt plus the
call's output cap fits what is left of the total budget, so a started call can never overshoot.
With an exact counter (the model's own tokenizer) that is a guarantee; with an estimate the
counter adds a safety margin and the trace says the figure was estimated.

The budget does not take the server's word for what a call cost: ``charge`` is given the
harness's own count of the call (``count_call``) next to the reported usage, and charges the
count wherever the report is missing, zero, or below an exact count (a server reporting 0/0
tokens cannot carry a run past its budget); both figures are kept (``reported``, ``counted``).
Figures beyond ``MAX_FIGURE`` are clamped, so no reported number can overflow what is done
with the totals later (``float(10**400)``).

A cost cap (``CostAccount``, USD at the model's per-million-token prices) is admitted the same
way: a call starts only when its counted prompt and its output cap, priced, fit what is left of
the cap, and an action call must also leave the price of one final answer (this prompt again and
the final output cap), so a run stopped by its cost cap can still give its findings in the grace
turn. Every charged token is charged to the account; an account may be shared (a parent's, which
its children's spend is charged to as well).
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from subagent_lab.core.context import estimate_text
from subagent_lab.core.types import LimitReached, ModelResponse, Usage

MIN_OUTPUT_TOKENS = 48
"""A call that could not produce at least this many tokens is not worth starting."""
MAX_FIGURE = 10**12
"""The most tokens one figure may say (far above any budget): larger reports are clamped."""
MAX_PRICE_PER_MTOK = 1e6
"""The highest price a configuration may give a million tokens, in USD (far above any model's)."""
MIN_PRICE_PER_MTOK = 1e-6
"""The lowest price other than 0 a configuration may give a million tokens, in USD: smaller is a
typo or a denormal (``5e-324``), whose reciprocal overflows."""
MAX_COST_USD = 1e9
"""The highest cost cap a configuration may set, in USD."""
MAX_USD_FIGURE = 1e18
"""The most a cost figure may say, in USD (far above any cap): larger ones are clamped."""


def _price(value: float) -> float:
    if 0 < value < MIN_PRICE_PER_MTOK:
        raise ValueError(
            f"{value!r} USD per million tokens is below {MIN_PRICE_PER_MTOK:g} (a denormal or a typo); "
            "write 0 for a free model"
        )
    return value


PricePerMtok = Annotated[
    float, Field(ge=0.0, le=MAX_PRICE_PER_MTOK, allow_inf_nan=False), AfterValidator(_price)
]
"""A configured price in USD per million tokens: 0, or finite within [``MIN_PRICE_PER_MTOK``,
``MAX_PRICE_PER_MTOK``]."""
CostCapUsd = Annotated[float, Field(gt=0.0, le=MAX_COST_USD, allow_inf_nan=False)]
"""A configured cost cap in USD: positive and finite, at most ``MAX_COST_USD``."""


def whole(value: float) -> int:
    """``floor(value)`` clamped to ``±MAX_FIGURE`` for any float (NaN: 0; infinities: the
    bounds), so no price or cap makes the budget's arithmetic raise."""
    if math.isnan(value):
        return 0
    return math.floor(min(max(value, -MAX_FIGURE), MAX_FIGURE))


@dataclass(frozen=True)
class Counted:
    """The harness's own count of one call: its prompt (exact or estimated) and its reply (estimated)."""

    prompt_tokens: int
    prompt_exact: bool
    completion_tokens: int


def count_call(
    prompt_tokens: int, prompt_exact: bool, response: ModelResponse, max_tokens: int | None = None
) -> Counted:
    """``Counted`` for a call whose prompt was counted as ``prompt_tokens`` and which returned
    ``response``; the reply's estimate is capped at ``max_tokens`` when given."""
    body = response.text + "".join(c.name + json.dumps(c.arguments, default=str) for c in response.tool_calls)
    reply = estimate_text(body) if body else 0
    return Counted(
        max(prompt_tokens, 0), prompt_exact, reply if max_tokens is None else min(reply, max_tokens)
    )


@dataclass(frozen=True)
class Prices:
    """A model's prices in USD per million tokens (``ModelConfig.price_per_mtok_*``)."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int = 0) -> float:
        """What ``prompt_tokens`` in and ``completion_tokens`` out cost, in USD, at most
        ``MAX_USD_FIGURE`` (prices set in code skip the config's bounds: an infinite or a 1e308 price
        gives that figure, not an infinity that JSON cannot hold and arithmetic turns into NaN)."""
        usd = (
            (prompt_tokens * self.input_per_mtok if prompt_tokens else 0.0)  # 0 x inf is NaN
            + (completion_tokens * self.output_per_mtok if completion_tokens else 0.0)
        ) / 1e6
        return usd if usd <= MAX_USD_FIGURE else MAX_USD_FIGURE  # NaN too


class BudgetSpent(Exception):
    """A scope of the budget tree has too little left to grant a sub-scope."""

    def __init__(self, scope: BudgetNode, resource: str, free: float) -> None:
        super().__init__(f"{scope.name}: {resource} spent ({free} left)")
        self.scope, self.resource, self.free = scope, resource, free


@dataclass(eq=False)
class BudgetNode:
    """One scope of a run's budget tree (inspect_ai's limit scopes): caps on tokens and USD and a
    deadline, what was charged in the scope, and what open sub-scopes hold of it.

    ``charge`` records a spend in the node and in every scope it counts against (its ``parent``
    chain, and ``also``'s: a verification child counts against the parent's own total and the
    children's cap alike); ``grant`` opens a sub-scope that holds what it was granted in those
    scopes until it ``close``s, checking each of them from the root down, so parallel siblings
    never promise the same tokens twice. A sub-scope's spend is taken off its hold as it is
    charged: a scope's free amount is its cap less what was spent and what is still promised.
    """

    name: str
    tokens: int | None = None
    usd: float | None = None
    deadline: float | None = None
    """``time.monotonic()`` at which the scope's time is up (None: no limit of its own)."""
    parent: BudgetNode | None = None
    also: BudgetNode | None = None
    spent_tokens: int = 0
    spent_usd: float = 0.0
    held_tokens: int = 0
    held_usd: float = 0.0
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    """One lock for the whole tree (a sub-scope takes its parent's)."""
    _holding: tuple[int, float] = (0, 0.0)
    """What this node still holds in the scopes above it (granted, less spent)."""
    _closed: bool = False

    def scope(self, name: str, *, tokens: int | None = None, usd: float | None = None) -> BudgetNode:
        """A declared sub-scope with caps of its own and no hold on this one (a parent's own
        calls, its children's cap)."""
        return BudgetNode(name, tokens=tokens, usd=usd, parent=self, lock=self.lock)

    def scopes(self) -> list[BudgetNode]:
        """This node and every scope it counts against, root first, each once."""
        out: list[BudgetNode] = []

        def walk(node: BudgetNode | None) -> None:
            if node is None or any(node is seen for seen in out):
                return
            walk(node.parent)
            walk(node.also)
            out.append(node)

        walk(self)
        return out

    def free_tokens(self) -> int | None:
        """The tokens this scope may still spend (the tightest scope's); None: no cap anywhere."""
        free = self._free(0)
        return None if free is None else int(free)

    def free_usd(self) -> float | None:
        """The USD this scope may still spend (the tightest scope's); None: no cap anywhere."""
        return self._free(1)

    def _free(self, resource: int) -> float | None:
        """The tightest scope's free amount (``_free_per_scope``); None: no cap anywhere."""
        frees = [free for _, free in self._free_per_scope(resource)]
        return min(frees) if frees else None

    def _free_per_scope(self, resource: int) -> list[tuple[BudgetNode, float]]:
        """Each capped scope's cap (0: tokens, 1: USD) less its spend and what is promised in it,
        except to this node and the scopes between (what they hold there is theirs to spend)."""
        with self.lock:
            scopes = self.scopes()
            out = []
            for scope in scopes:
                cap = scope.tokens if resource == 0 else scope.usd
                if cap is None:
                    continue
                spent = scope.spent_tokens if resource == 0 else scope.spent_usd
                held = scope.held_tokens if resource == 0 else scope.held_usd
                mine = sum(
                    n._holding[resource]
                    for n in scopes
                    if n is not scope and any(above is scope for above in n.scopes()[:-1])
                )
                out.append((scope, cap - spent - held + mine))
        return out

    def capping_usd(self) -> BudgetNode | None:
        """The nearest scope (this one first) with a USD cap."""
        return next((n for n in reversed(self.scopes()) if n.usd is not None), None)

    def seconds_left(self) -> float | None:
        """Seconds until the earliest deadline of the scopes; None: no deadline anywhere."""
        deadlines = [n.deadline for n in self.scopes() if n.deadline is not None]
        return min(deadlines) - time.monotonic() if deadlines else None

    def grant(
        self,
        name: str,
        *,
        tokens: int | None = None,
        usd: float | None = None,
        also: BudgetNode | None = None,
        min_tokens: int = 1,
    ) -> BudgetNode:
        """A sub-scope capped at ``tokens``/``usd`` (None: whatever is free) and at what every scope
        it counts against has free, held there until it closes. Raises ``BudgetSpent`` naming the
        first scope, from the root down, with USD spent or fewer than ``min_tokens`` tokens free."""
        child = BudgetNode(name, parent=self, also=also, lock=self.lock)
        with self.lock:
            above = child.scopes()[:-1]
            usd_free = dict((id(n), free) for n, free in child._free_per_scope(1))
            token_free = dict((id(n), free) for n, free in child._free_per_scope(0))
            for node in above:  # root first: the refusal names the outermost scope that ran out
                if id(node) in usd_free and usd_free[id(node)] <= 0:
                    raise BudgetSpent(node, "usd", usd_free[id(node)])
                if id(node) in token_free and token_free[id(node)] < min_tokens:
                    raise BudgetSpent(node, "tokens", token_free[id(node)])
            free_tokens, free_usd = child.free_tokens(), child.free_usd()
            child.tokens = _tighter(tokens, free_tokens)
            child.usd = _tighter(usd, free_usd)
            deadlines = [n.deadline for n in above if n.deadline is not None]
            child.deadline = min(deadlines) if deadlines else None
            child._holding = (child.tokens or 0, child.usd or 0.0)
            for node in above:
                node.held_tokens += child._holding[0]
                node.held_usd += child._holding[1]
        return child

    def charge(self, tokens: int = 0, usd: float = 0.0) -> None:
        """Record a spend here and in every scope this one counts against; the part of it that was
        held for this node above is no longer held."""
        with self.lock:
            usd = usd if usd > 0.0 else 0.0  # NaN too
            for node in self.scopes():
                node.spent_tokens = min(node.spent_tokens + tokens, MAX_FIGURE)
                node.spent_usd = min(node.spent_usd + usd, MAX_USD_FIGURE)
            for node in self.scopes():
                held_tokens, held_usd = node._holding
                if held_tokens or held_usd:
                    take_tokens, take_usd = min(held_tokens, tokens), min(held_usd, usd)
                    node._holding = (held_tokens - take_tokens, held_usd - take_usd)
                    for above in node.scopes()[:-1]:
                        above.held_tokens -= take_tokens
                        above.held_usd -= take_usd

    def close(self) -> None:
        """End the scope: what it still held above is free again (its spend stays charged)."""
        with self.lock:
            if self._closed:
                return
            self._closed = True
            held_tokens, held_usd = self._holding
            for node in self.scopes()[:-1]:
                node.held_tokens -= held_tokens
                node.held_usd -= held_usd
            self._holding = (0, 0.0)


def _tighter(wanted: float | None, free: float | None) -> Any:
    if wanted is None:
        return free
    return wanted if free is None else min(wanted, free)


class CostAccount:
    """A cost cap in USD and the prices of the model whose calls are admitted against it: a view of
    a budget scope (``scope``), which every charge is recorded in and whose tightest USD cap is
    what is left (a parent's scope holds its children's spend too). Thread-safe through the
    tree's lock, since parallel children charge the same parent."""

    def __init__(
        self,
        limit_usd: float,
        prices: Prices | None = None,
        spent_usd: float = 0.0,
        scope: BudgetNode | None = None,
    ) -> None:
        """``scope`` None: a scope of its own, capped at ``limit_usd`` with ``spent_usd`` spent."""
        self.prices = prices or Prices()
        self.scope = scope or BudgetNode("cost", usd=limit_usd, spent_usd=spent_usd)

    @property
    def _capping(self) -> BudgetNode:
        node = self.scope.capping_usd()
        assert node is not None  # a cost account's scope has a USD cap above it
        return node

    @property
    def limit_usd(self) -> float:
        cap = self._capping.usd
        assert cap is not None
        return cap

    @property
    def spent_usd(self) -> float:
        return self._capping.spent_usd

    @property
    def left_usd(self) -> float:
        free = self.scope.free_usd()
        return 0.0 if free is None else free

    def charge(self, usd: float) -> None:
        self.scope.charge(usd=usd)


def _clamp(usage: Usage) -> Usage:
    def one(value: int) -> int:
        return min(max(int(value), 0), MAX_FIGURE)

    prompt = one(usage.prompt_tokens)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=one(usage.completion_tokens),
        cached_tokens=min(one(usage.cached_tokens), prompt),
        estimated=usage.estimated,
    )


@dataclass
class Budget:
    """Limits, usage charged so far, and the admission rule for the next call."""

    total: int
    """``total_token_budget``: prompt + completion tokens over the whole run."""
    context: int
    """``context_token_budget``: the prompt tokens of any one call."""
    used: Usage = field(default_factory=Usage)
    """What was charged: the larger of the report and the harness's count, figure by figure."""
    reported: Usage = field(default_factory=Usage)
    """What the model server said the counted calls cost (clamped)."""
    counted: Usage = field(default_factory=Usage)
    """The harness's own count of the same calls."""
    cost: CostAccount | None = None
    """The cost cap this run's calls are admitted against and charged to (None: no cost cap)."""
    node: BudgetNode | None = None
    """The run's scope in the budget tree: every charged token is recorded there too."""

    @property
    def remaining(self) -> int:
        return self.total - self.used.total_tokens

    def output_cap(self, prompt_tokens: int, wanted: int) -> int:
        """The output cap a call with this prompt would get (may be below ``MIN_OUTPUT_TOKENS``)."""
        return min(wanted, self.remaining - prompt_tokens)

    def affordable_output(self, prompt_tokens: int, reserve_output: int = 0) -> int | None:
        """The most output tokens a call with ``prompt_tokens`` may be given under the cost cap,
        after keeping the price of a later call of ``prompt_tokens`` + ``reserve_output``; None
        without a cost cap (or with free output, when the prompt fits)."""
        if self.cost is None:
            return None
        prices = self.cost.prices
        reserve = prices.cost(prompt_tokens, reserve_output) if reserve_output else 0.0
        left = self.cost.left_usd - prices.cost(prompt_tokens) - reserve
        if not left >= 0:  # NaN too: an infinite price against an infinite cap affords nothing
            return -1
        if prices.output_per_mtok <= 0:
            return None
        return whole(left * 1e6 / prices.output_per_mtok)

    def admit(self, prompt_tokens: int, wanted: int, reserve_output: int = 0) -> int:
        """The output cap for a call with ``prompt_tokens``; raises ``LimitReached`` if it may not
        start. With a cost cap the cap is also what the money left affords, after keeping the price
        of one more call of this prompt and ``reserve_output`` tokens (a final answer)."""
        if prompt_tokens > self.context:
            raise LimitReached(
                "context_budget", f"prompt needs {prompt_tokens} tokens > context budget {self.context}"
            )
        cap = self.output_cap(prompt_tokens, wanted)
        if cap < min(MIN_OUTPUT_TOKENS, wanted):  # a short question needs only its own cap
            raise LimitReached(
                "token_budget", f"{self.remaining} tokens left, next call needs {prompt_tokens} + output"
            )
        affordable = self.affordable_output(prompt_tokens, reserve_output)
        if affordable is not None and affordable < min(MIN_OUTPUT_TOKENS, wanted):
            assert self.cost is not None  # affordable is None without a cost cap
            raise LimitReached(
                "cost_budget", self._refusal(prompt_tokens, min(wanted, MIN_OUTPUT_TOKENS), reserve_output)
            )
        return cap if affordable is None else min(cap, affordable)

    def _refusal(self, prompt_tokens: int, output: int, reserve_output: int) -> str:
        """Why a call is refused under the cost cap: what is left, and what the call and the final
        answer kept after it (the reserve ``affordable_output`` holds back) would cost."""
        assert self.cost is not None
        prices, account = self.cost.prices, self.cost
        call = prices.cost(prompt_tokens, output)
        text = (
            f"${account.spent_usd:.6f} of the ${account.limit_usd:.6f} cost cap spent, "
            f"${max(account.left_usd, 0.0):.6f} left; the next call ({prompt_tokens} prompt tokens + "
            f"{output} output tokens) costs ${call:.6f}"
        )
        if not reserve_output:
            return text
        reserve = prices.cost(prompt_tokens, reserve_output)
        return (
            f"{text}, and the final answer's reserve kept after it ({prompt_tokens} prompt tokens + "
            f"{reserve_output} output tokens) ${reserve:.6f}: ${call + reserve:.6f} in all"
        )

    def charge(self, usage: Usage, counted: Counted | None = None) -> Usage:
        """Add what a call (or a failed attempt) spent and return what was charged.

        Without ``counted`` the (clamped) report is charged. With it, each figure is the
        report's unless the report is missing or zero while the count is not, or (for an exact
        prompt count) below the count: then the count is charged and the usage is flagged
        ``estimated``. An estimate never replaces a non-zero report: it carries a safety margin
        and would overcharge an honest server.
        """
        usage = _clamp(usage)
        charged = usage
        if counted is not None:
            mine = Usage(prompt_tokens=counted.prompt_tokens, completion_tokens=counted.completion_tokens)
            mine = _clamp(mine)
            low_prompt = usage.prompt_tokens == 0 or (
                counted.prompt_exact and usage.prompt_tokens < mine.prompt_tokens
            )
            prompt = mine.prompt_tokens if low_prompt else usage.prompt_tokens
            low_completion = usage.completion_tokens == 0 and mine.completion_tokens > 0
            charged = Usage(
                prompt_tokens=max(prompt, usage.prompt_tokens),
                completion_tokens=mine.completion_tokens if low_completion else usage.completion_tokens,
                cached_tokens=min(usage.cached_tokens, max(prompt, usage.prompt_tokens)),
                # An exact count replacing a report is exact; an estimate replacing one is not.
                estimated=usage.estimated or (low_prompt and not counted.prompt_exact) or low_completion,
            )
            self.reported = self.reported + usage
            self.counted = self.counted + mine
        self.used = self.used + charged
        if self.node is not None:
            self.node.charge(tokens=charged.total_tokens)
        if self.cost is not None:
            self.cost.charge(self.cost.prices.cost(charged.prompt_tokens, charged.completion_tokens))
        return charged

    def share(self, wanted: int) -> int:
        """How much of the remaining budget a child asking for ``wanted`` may get."""
        return max(0, min(wanted, self.remaining))
