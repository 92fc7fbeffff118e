"""A resolved profile as the loop runs it: its settings (``LoopSpec``), its ordered policies and
its tools.

A child's and a parent's scaffold alike are policy specs and observation sizes
(``config.scaffolds``; a parent's is the built-in ``parent`` preset unless it names another). The
precedence is ``scaffold.specs.ORDER``.
"""

from __future__ import annotations

import warnings

from subagent_lab.config.agent_profile import AgentProfile
from subagent_lab.config.endpoints import ModelConfig
from subagent_lab.config.limits import Limits
from subagent_lab.config.runtime_profile import RuntimeProfile
from subagent_lab.config.scaffolds import Scaffold
from subagent_lab.core.budget import BudgetNode, CostAccount, Prices
from subagent_lab.core.loop_state import GrammarCaps, LoopSpec, RunLimits, Sampling
from subagent_lab.core.policy import Policy
from subagent_lab.scaffold.specs import build_policies

Profile = RuntimeProfile | AgentProfile


def loop_spec(
    profile: Profile, model: ModelConfig, *, seed: int | None = None, temperature: float | None = None
) -> LoopSpec:
    """The loop's limits, sampling and grammar caps for a child's or a parent's profile, and its
    answer's contract (a parent's None: a free-text answer)."""
    return LoopSpec(
        limits=run_limits(profile, model),
        contract=profile.contract,
        sampling=sampling(model, seed=seed, temperature=temperature),
        caps=grammar_caps(profile.scaffold),
    )


def run_limits(limits: Limits, model: ModelConfig) -> RunLimits:
    """A profile's limits as the loop keeps them: the output cap falls back to the model's."""
    return RunLimits(
        max_steps=limits.max_steps,
        context_token_budget=limits.context_token_budget,
        total_token_budget=limits.total_token_budget,
        timeout_s=limits.timeout_s,
        max_output_tokens=limits.max_output_tokens or model.max_output_tokens,
        max_repairs=limits.max_repairs,
        max_tool_calls_per_step=limits.max_tool_calls_per_step,
        max_stale_turns=limits.max_stale_turns,
        max_parallel_tools=limits.max_parallel_tools,
    )


def sampling(model: ModelConfig, *, seed: int | None = None, temperature: float | None = None) -> Sampling:
    """The model's temperature and seed; ``seed`` and ``temperature`` replace them when given (a
    sweep's independent repeats)."""
    return Sampling(
        temperature=model.temperature if temperature is None else temperature,
        seed=model.seed if seed is None else seed,
    )


def grammar_caps(scaffold: Scaffold) -> GrammarCaps:
    """The caps a scaffold's observation sizes put on an action: its output tokens, its thought
    and each string argument."""
    sizes = scaffold.observation
    return GrammarCaps(
        action_max_tokens=sizes.action_max_tokens,
        thought_max_chars=sizes.thought_max_chars,
        arg_max_chars=sizes.arg_max_chars,
    )


def policies(profile: Profile) -> tuple[Policy, ...]:
    """The policies of a profile's scaffold, in ``ORDER``."""
    return build_policies(profile.scaffold.specs(), contract=bool(profile.contract))


class CostCapInert(UserWarning):
    """A cost cap on a run whose model is priced $0: its own calls never count against it."""


def cost_account(profile: Profile, model: ModelConfig, scope: BudgetNode) -> CostAccount | None:
    """The run's cost cap at its model's prices (``LoopDeps.cost``), a view of its budget scope
    (``scope``, which holds the cap); None without one.

    A cap on a model priced $0 per token (the no-model floors, an endpoint without prices in
    ``profiles.yaml``) could never stop the run's own calls: that is said with a
    ``CostCapInert`` warning rather than left silently inert (a parent's cap still covers
    children on priced models)."""
    if profile.cost_budget_usd is None:
        return None
    prices = Prices(model.price_per_mtok_input, model.price_per_mtok_output)
    if prices.input_per_mtok <= 0 and prices.output_per_mtok <= 0:
        who = f"profile {profile.name!r}" if isinstance(profile, RuntimeProfile) else "the main agent"
        warnings.warn(
            f"{who}: cost_budget_usd {profile.cost_budget_usd:g} has no effect on "
            f"model {model.model!r}, which is priced $0 per token; set its price_per_mtok_input and "
            "price_per_mtok_output in profiles.yaml (models.<choice>) for the cap to count its calls",
            CostCapInert,
            stacklevel=2,
        )
    return CostAccount(profile.cost_budget_usd, prices, scope=scope)


def tool_names(profile: RuntimeProfile) -> tuple[str, ...]:
    """The tools a child gets, in order: its profile's ``tools``, then those its scaffold's
    policies add (``SymbolTools``) that it does not list already."""
    return tuple(dict.fromkeys((*profile.tools, *profile.scaffold.tools())))


def build(
    profile: Profile, model: ModelConfig, *, seed: int | None = None, temperature: float | None = None
) -> tuple[LoopSpec, tuple[Policy, ...]]:
    """The loop's settings and the ordered policy tuple a resolved profile implies."""
    return loop_spec(profile, model, seed=seed, temperature=temperature), policies(profile)
