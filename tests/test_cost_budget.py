"""Cost caps (USD at profiles.yaml's prices): admitted before each call like the token budgets, a
run that would pass its cap ends ``cost_budget`` with its findings, a parent's cap covers its children."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import LOGIN_ANSWER, LauncherFactory, task_call

from subagent_lab.agents.launcher import SubagentRequest
from subagent_lab.agents.parent import MainAgent
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.budget import Budget, CostAccount, Prices
from subagent_lab.core.trace import BudgetDecision, RunEnded, RunStarted, read_trace
from subagent_lab.core.types import LimitReached
from subagent_lab.models.scripted import ScriptedModel, final, tool_call, tool_calls

PER_TOKEN = 1_000_000.0
"""A price per million tokens that makes one token cost one dollar: the figures stay readable."""
FINAL_CAP = 200
"""The final answer's output cap in these tests (a smaller reserve than the model's 768)."""


def _priced(config: LabConfig, price_in: float = PER_TOKEN, price_out: float = 2 * PER_TOKEN) -> LabConfig:
    models = {
        name: cfg.model_copy(update={"price_per_mtok_input": price_in, "price_per_mtok_output": price_out})
        for name, cfg in config.models.items()
        if cfg is not None
    }
    return config.model_copy(update={"models": models})


def test_budget_admits_a_call_only_when_prompt_and_output_cap_fit_the_money_left() -> None:
    account = CostAccount(limit_usd=1000.0, prices=Prices(PER_TOKEN, 2 * PER_TOKEN), spent_usd=700.0)
    budget = Budget(total=10**6, context=10**5, cost=account)
    assert budget.admit(100, 500) == 100  # $300 left - $100 prompt = $200: 100 output tokens at $2
    assert budget.admit(100, 50) == 50
    with pytest.raises(LimitReached) as refused:
        budget.admit(250, 100)  # $50 left after the prompt: 25 tokens < the 48 a call needs
    assert refused.value.reason == "cost_budget" and "cost cap" in refused.value.detail
    with pytest.raises(LimitReached) as reserved:
        budget.admit(100, 500, reserve_output=60)  # keeping a final answer ($220) leaves too little
    # The refusal says what was kept back: the call alone ($196) would fit in the $300 left.
    detail = reserved.value.detail
    assert (
        "$300.000000 left" in detail and "(100 prompt tokens + 48 output tokens) costs $196.000000" in detail
    )
    assert (
        "final answer's reserve" in detail and "(100 prompt tokens + 60 output tokens) $220.000000" in detail
    )
    assert "$416.000000 in all" in detail
    budget.charge(budget.used.model_copy(update={"prompt_tokens": 10, "completion_tokens": 5}))
    assert account.spent_usd == pytest.approx(720.0)  # charged tokens, at the model's prices


def test_second_call_too_expensive_ends_cost_budget_with_partial_findings(
    config: LabConfig, make_launcher: LauncherFactory
) -> None:
    priced = _priced(config)
    script = [tool_call("Grep", pattern="def login"), final(LOGIN_ANSWER)]
    overrides: dict[str, Any] = {"max_output_tokens": FINAL_CAP}
    # Uncapped, the same script measures the first call's charge and the second call's prompt.
    launcher, _ = make_launcher(list(script), priced)
    free = launcher.launch(SubagentRequest(task="Where is login?", overrides=overrides))
    assert free.terminal_reason == "completed"
    prompts = [e.prompt_tokens_est for e in read_trace(free.trace_path) if isinstance(e, BudgetDecision)]
    first_cost = free.usage_by_call[0].prompt_tokens + 2 * free.usage_by_call[0].completion_tokens
    # The cap leaves, after call 1, the second prompt + $400: too little for that call (its prompt,
    # 48 output tokens and the price of a final answer after it), enough for a final answer alone.
    cap = first_cost + prompts[1] + 400
    assert cap >= 2 * prompts[0] + 2 * FINAL_CAP + 96  # so the first call is admitted

    grace_answer = {**LOGIN_ANSWER, "status": "partial"}
    launcher, model = make_launcher([script[0], final(grace_answer)], priced)
    result = launcher.launch(
        SubagentRequest(task="Where is login?", overrides={**overrides, "cost_budget_usd": cap})
    )
    assert result.terminal_reason == "cost_budget", result.detail
    assert result.status == "partial" and result.grace_used
    assert result.contract is not None and result.contract["findings"] == LOGIN_ANSWER["findings"]
    assert result.tool_usage == {"Grep": {"executed": 1}}  # one action ran, then the grace turn
    assert len(model.requests) == 2 and model.requests[1].phase == "final"
    assert result.cost_usd <= cap
    events = read_trace(result.trace_path)
    refused = [e for e in events if isinstance(e, BudgetDecision) and not e.allowed]
    assert len(refused) == 1 and refused[0].purpose == "step" and "cost cap" in refused[0].detail
    assert refused[0].cost_budget_usd == cap and refused[0].cost_spent_usd == pytest.approx(first_cost)
    started = next(e for e in events if isinstance(e, RunStarted))
    assert started.budgets["cost_budget_usd"] == cap
    ended = next(e for e in events if isinstance(e, RunEnded))
    assert ended.terminal_reason == "cost_budget"


def test_no_cost_cap_changes_nothing(config: LabConfig, make_launcher: LauncherFactory) -> None:
    script = [tool_call("Grep", pattern="def login"), final(LOGIN_ANSWER)]
    launcher, _ = make_launcher(script, _priced(config))
    result = launcher.launch(SubagentRequest(task="Where is login?"))
    assert result.terminal_reason == "completed"
    events = read_trace(result.trace_path)
    assert all(e.cost_budget_usd is None for e in events if isinstance(e, BudgetDecision))


def test_parent_cap_covers_its_children(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    priced = _priced(config, price_out=PER_TOKEN)
    # The child greps forever: only the money left of the parent's cap stops it.
    child_turns = [tool_call("Grep", _id=f"g{i}", pattern=f"word{i}") for i in range(40)]
    parent = ScriptedModel([tool_calls(task_call("where is login?")), final("login is in app/auth.py")])
    light = ScriptedModel([*child_turns, final(LOGIN_ANSWER)])
    cap = 12_000.0
    main = priced.agents["main"].model_copy(update={"cost_budget_usd": cap, "max_output_tokens": FINAL_CAP})
    priced = priced.model_copy(update={"agents": {**priced.agents, "main": main}})
    agent = MainAgent(
        priced,
        workspace,
        model_factory=lambda choice, cfg: parent if choice == "main" else light,
        scratch_dir=tmp_path,
    )
    result = agent.run("Where is login?")
    assert len(result.children) == 1
    child = result.children[0]
    child_events = read_trace(child.trace_path)
    child_cap = next(e for e in child_events if isinstance(e, RunStarted)).budgets["cost_budget_usd"]
    parent_first = result.usage_by_call[0]
    # The child's cap is what the parent's first call left of the parent's cap.
    assert child_cap == pytest.approx(cap - parent_first.prompt_tokens - parent_first.completion_tokens)
    assert child.terminal_reason == "cost_budget" and 0 < child.cost_usd <= child_cap
    # The child's spend is charged to the parent: the run as a whole stays under the parent's cap.
    assert result.total_cost_usd <= cap
    assert result.terminal_reason == "cost_budget"
    # The parent's next call was judged on its own spend and the child's together, and refused.
    after_child = [e for e in read_trace(result.trace_path) if isinstance(e, BudgetDecision)][1]
    assert not after_child.allowed
    assert after_child.cost_spent_usd == pytest.approx(result.cost_usd + child.cost_usd)
    assert result.model_calls == 1


def test_parent_cap_covers_its_verification_child(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    priced = _priced(config, price_out=PER_TOKEN)
    cap = 100_000.0
    main = priced.agents["main"].model_copy(update={"cost_budget_usd": cap, "verify": True})
    priced = priced.model_copy(update={"agents": {**priced.agents, "main": main}})
    verdict = {"verdict": "PASS", "reasons": ["app/auth.py:4 defines login"], "findings": [],
               "evidence": ["app/auth.py:4"]}  # fmt: skip
    # Parent and verification child both run on main: one script, in the order the calls happen.
    model = ScriptedModel(
        [final("login is in app/auth.py"), tool_call("Grep", pattern="def login"), final(verdict)]
    )
    agent = MainAgent(priced, workspace, model_factory=lambda c, cfg: model, scratch_dir=tmp_path)
    result = agent.run("Where is login?")
    (child,) = [c for c in result.children if c.via == "verification"]
    child_cap = next(e for e in read_trace(child.trace_path) if isinstance(e, RunStarted)).budgets[
        "cost_budget_usd"
    ]
    assert child_cap == pytest.approx(cap - result.cost_usd)  # what the parent's own call left
    assert child.cost_usd > 0 and result.total_cost_usd == pytest.approx(result.cost_usd + child.cost_usd)
    assert result.verdict == "PASS"


def test_a_cap_on_a_model_priced_zero_says_it_cannot_bind(
    config: LabConfig, make_launcher: LauncherFactory
) -> None:
    """A model priced $0 (an endpoint configured without prices, the no-model floors): a cap there
    never stops a call, and says so instead of running silently as if capped."""
    from subagent_lab.config.build import CostCapInert

    script = [tool_call("Grep", pattern="def login"), final(LOGIN_ANSWER)]
    launcher, _ = make_launcher(script, _priced(config, 0.0, 0.0))
    with pytest.warns(CostCapInert, match=r"cost_budget_usd 0\.01 has no effect on model .* priced \$0"):
        result = launcher.launch(SubagentRequest(task="Where is login?", overrides={"cost_budget_usd": 0.01}))
    assert result.terminal_reason == "completed"
    # A priced model's cap binds, and says nothing of the kind.
    launcher, _ = make_launcher(list(script), _priced(config))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", CostCapInert)
        launcher.launch(SubagentRequest(task="Where is login?", overrides={"cost_budget_usd": 1e9}))


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("price_per_mtok_input", "5.0e-324"),  # a denormal: its reciprocal overflows
        ("price_per_mtok_output", ".inf"),
        ("price_per_mtok_output", "1.0e+308"),
        ("price_per_mtok_input", ".nan"),
        ("cost_budget_usd", ".inf"),
        ("cost_budget_usd", "1.0e+308"),
    ],
)
def test_a_price_or_cap_out_of_bounds_is_a_config_error_naming_file_and_field(
    config_path: str, where: str, value: str
) -> None:
    import yaml

    from subagent_lab.config.profiles import load_config
    from subagent_lab.core.types import ConfigError

    path = Path(config_path)
    raw = yaml.safe_load(path.read_text())
    if where == "cost_budget_usd":
        raw["profiles"]["explore"][where] = "@"
    else:
        raw["models"]["light"][where] = "@"
    path.write_text(yaml.safe_dump(raw).replace("'@'", value))
    with pytest.raises(ConfigError) as refused:
        load_config(path, env={})
    message = str(refused.value)  # the YAML reader refuses .inf and .nan itself, the model the rest
    assert message.startswith(f"{path}:") and f".{where}:" in message, message


@pytest.mark.parametrize(
    ("limit", "price_in", "price_out"),
    [
        (1.0, 0.0, 5e-324),  # a denormal output price: its reciprocal is infinite
        (float("inf"), 1.0, 1.0),  # an infinite cap
        (1.0, 1e308, 1e308),  # a price whose product with any count overflows
        (float("inf"), float("inf"), float("inf")),
        (1e308, 5e-324, 5e-324),
    ],
)
def test_budget_arithmetic_never_raises_but_to_refuse_a_call(
    limit: float, price_in: float, price_out: float
) -> None:
    """Prices and caps built in code skip the config's bounds: admission still answers a cap or
    refuses the call (``LimitReached``), never ``OverflowError`` / ``ValueError``."""
    budget = Budget(total=10**6, context=10**5, cost=CostAccount(limit, Prices(price_in, price_out)))
    try:
        cap = budget.admit(100, 500, reserve_output=200)
    except LimitReached as refused:
        assert refused.reason == "cost_budget"
    else:
        assert 48 <= cap <= 500
    budget.charge(budget.used.model_copy(update={"prompt_tokens": 10, "completion_tokens": 5}))


@pytest.mark.parametrize("price", [5e-324, 1e308, float("inf")])
@pytest.mark.parametrize("cap", [None, 1.0])
def test_a_run_with_extreme_prices_set_in_code_ends_with_a_result(
    config: LabConfig, make_launcher: LauncherFactory, price: float, cap: float | None
) -> None:
    """``sl.run``'s path (the launcher) with prices that skipped validation: the run ends with a
    result (completed, or refused by its cost cap) and a finite cost, it does not raise."""
    launcher, _ = make_launcher([tool_call("Grep", pattern="def login"), final(LOGIN_ANSWER)],
                                _priced(config, price, price))  # fmt: skip
    overrides = {} if cap is None else {"cost_budget_usd": cap}
    result = launcher.launch(SubagentRequest(task="Where is login?", overrides=overrides))
    assert result.terminal_reason in ("completed", "cost_budget"), result.detail
    assert 0 <= result.cost_usd < float("inf")
