"""The run-time budget tree: a scope per run, per attempt's spender and per child, each with caps
on tokens and USD and a deadline; a charge is recorded in every scope above, a grant checks every
scope from the root down and holds what it gave until it closes (inspect_ai's limit scopes).

A parent's tree (``agents.plan``)::

    main (USD: the parent's cost cap)
    ├── own (tokens: the parent's total)        its attempts charge here
    │   └── verification-k (also: children)     a grant: counts against own and children
    └── children (tokens: the children's cap)
        └── task-k                              a grant: one Task child
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

MAX_FIGURE = 10**12
"""The most tokens one figure may say (far above any budget): larger reports are clamped."""
MAX_USD_FIGURE = 1e18
"""The most a cost figure may say, in USD (far above any cap): larger ones are clamped."""


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
