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
turn. Every charged token is charged to the account; an account is a view of a scope of the
run-time budget tree (``core.budget_tree``), so a parent's holds its children's spend as well.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import AfterValidator, Field

from subagent_lab.core.budget_tree import MAX_FIGURE, MAX_USD_FIGURE, BudgetNode, BudgetSpent
from subagent_lab.core.context import estimate_text
from subagent_lab.core.types import LimitReached, ModelResponse, Usage

__all__ = [
    "MAX_FIGURE", "MAX_USD_FIGURE", "MIN_OUTPUT_TOKENS", "Budget", "BudgetNode", "BudgetSpent", "CostAccount",
    "Counted", "Prices", "count_call",
]  # fmt: skip

MIN_OUTPUT_TOKENS = 48
"""A call that could not produce at least this many tokens is not worth starting."""
MAX_PRICE_PER_MTOK = 1e6
"""The highest price a configuration may give a million tokens, in USD (far above any model's)."""
MIN_PRICE_PER_MTOK = 1e-6
"""The lowest price other than 0 a configuration may give a million tokens, in USD: smaller is a
typo or a denormal (``5e-324``), whose reciprocal overflows."""
MAX_COST_USD = 1e9
"""The highest cost cap a configuration may set, in USD."""


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
