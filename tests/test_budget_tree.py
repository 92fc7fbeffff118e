"""The run-time budget tree: a charge is recorded in every scope above, a grant checks every scope
from the root down and holds what it was given, and a verification counts against two scopes."""

from __future__ import annotations

import threading

import pytest

from subagent_lab.core.budget import BudgetNode, BudgetSpent, CostAccount, Prices


def _parent(
    total: int = 1000, cap: int = 600, usd: float | None = None
) -> tuple[BudgetNode, BudgetNode, BudgetNode]:
    root = BudgetNode("main", usd=usd)
    return root, root.scope("own", tokens=total), root.scope("children", tokens=cap)


def test_a_charge_is_recorded_in_every_scope_above() -> None:
    root, own, children = _parent(usd=1.0)
    child = children.grant("task-1", tokens=400)
    child.charge(tokens=150, usd=0.25)
    assert (child.spent_tokens, children.spent_tokens, root.spent_tokens) == (150, 150, 150)
    assert (children.spent_usd, root.spent_usd) == (0.25, 0.25)
    assert own.spent_tokens == 0  # a Task child does not count against the parent's own total


def test_a_grant_holds_its_share_so_siblings_cannot_promise_it_twice() -> None:
    _, _, children = _parent(cap=600)
    first = children.grant("task-1", tokens=400)
    second = children.grant("task-2", tokens=400)
    assert (first.tokens, second.tokens) == (400, 200)  # the cap less what the first holds
    with pytest.raises(BudgetSpent) as refused:
        children.grant("task-3", tokens=400, min_tokens=1)
    assert refused.value.scope is children and refused.value.resource == "tokens"
    first.charge(tokens=100)
    assert children.held_tokens == 300 + 200  # the spend is no longer held, it is spent
    first.close()
    assert children.held_tokens == 200 and children.free_tokens() == 600 - 100 - 200
    assert first.free_tokens() == 300  # its own hold is its own to spend, not a sibling's


def test_a_grant_checks_root_to_leaf_and_names_the_scope_that_ran_out() -> None:
    root, _, children = _parent(total=1000, cap=600, usd=0.5)
    root.charge(usd=0.5)
    with pytest.raises(BudgetSpent) as refused:
        children.grant("task-1", tokens=100)
    assert refused.value.scope is root and refused.value.resource == "usd"


def test_a_verification_counts_against_the_parents_own_total_and_the_childrens_cap() -> None:
    _, own, children = _parent(total=1000, cap=600)
    own.charge(tokens=700)  # the parent's own attempts
    check = own.grant("verification-1", tokens=500, also=children)
    assert check.tokens == 300  # the tighter of the two scopes it counts against
    check.charge(tokens=250)
    assert (own.spent_tokens, children.spent_tokens) == (950, 250)
    check.close()
    with pytest.raises(BudgetSpent) as refused:
        own.grant("verification-2", tokens=500, also=children, min_tokens=100)
    assert refused.value.scope is own


def test_a_cost_account_is_a_view_of_its_scope() -> None:
    root, own, children = _parent(usd=1.0)
    parent = CostAccount(1.0, Prices(1.0, 1.0), scope=own)
    parent.charge(0.25)
    child_scope = children.grant("task-1", usd=0.5)
    child = CostAccount(0.5, Prices(1.0, 1.0), scope=child_scope)
    assert (child.limit_usd, child.left_usd) == (0.5, 0.5)
    child.charge(0.2)
    assert (root.spent_usd, parent.spent_usd, parent.left_usd) == (0.45, 0.45, pytest.approx(0.25))
    child_scope.close()
    assert parent.left_usd == pytest.approx(0.55)


def test_parallel_grants_and_charges_keep_the_books() -> None:
    _, _, children = _parent(cap=10_000)
    grants: list[BudgetNode] = []

    def worker() -> None:
        for _ in range(50):
            grant = children.grant("task", tokens=20, min_tokens=0)
            grant.charge(tokens=7)
            grants.append(grant)
            grant.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert children.spent_tokens == 4 * 50 * 7 and children.held_tokens == 0
