"""Budget invariants, proven over random runs (issue 10, point 2): not assumed from the code.

The scripted model's "tokenizer" reports ``prompt_scale`` (1.0 to 3.0) times the harness's raw byte
estimate, so every prompt costs more than any estimate the harness could make. Files of random size
are read with Read, budgets and scripts (tool calls, finish, answers that need repairs, cut-off and
unparseable actions, failed calls, grace turns) are random. With the model's own prompt counter
(the default) no run spends more than ``total_token_budget`` and no call's reported prompt exceeds
``context_token_budget``. The regression test shows the same checks failing for the old decision
(the byte estimate with its 10% margin, ``counts_prompts=False``): the property test can fail.

The scripted failures are HTTP errors (charged 0). Retries after attempts that cost tokens (a
timeout, an unusable reply) are limited by the loop to what the remaining budget affords
(``ModelRequest.max_spent_attempts``), so they cannot overshoot it either.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, with_aided_explore
from hypothesis import HealthCheck, event, given, settings, target
from hypothesis import strategies as st

from redteam.support import GOOD
from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest, SubagentResult
from subagent_lab.config.profiles import LabConfig, load_config
from subagent_lab.core.model import ModelCallError
from subagent_lab.core.trace import BudgetDecision, ModelCalled, ModelCallFailed, read_trace
from subagent_lab.core.types import LIMIT_REASONS, ModelRequest, ModelResponse, ToolCall, Usage
from subagent_lab.models.scripted import ScriptedModel, Turn, final

SETTINGS = settings(
    max_examples=int(os.environ.get("REDTEAM_BUDGET_EXAMPLES", "200")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
AUTH = (
    "import hashlib\n\n\ndef login(user, password):\n    return check_password(user, password)\n\n\n"
    "def check_password(user, password):\n"
    "    return hashlib.sha256(password.encode()).hexdigest() == user.pw\n"
)
TASK = "Where is login implemented?"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> tuple[LabConfig, Path]:
    """The repository's profiles, traces under a module directory; workspaces are made per example."""
    base = tmp_path_factory.mktemp("budget-props")
    cfg = with_aided_explore(load_config(REPO / "profiles.yaml", env={}))
    return cfg.model_copy(update={"trace_dir": str(base / "runs"), "source": None}), base


def _workspace(base: Path, files: list[tuple[int, int]]) -> Path:
    """A fresh workspace: app/auth.py plus ``src/f<i>.py`` of ``lines`` lines of ``width`` characters."""
    root = Path(tempfile.mkdtemp(prefix="ws-", dir=base))
    (root / "app").mkdir()
    (root / "app" / "auth.py").write_text(AUTH)
    (root / "src").mkdir()
    for i, (lines, width) in enumerate(files):
        row = "value_{n} = " + "'" + "x" * width + "'  # login filler\n"
        (root / "src" / f"f{i}.py").write_text("".join(row.format(n=n) for n in range(lines)))
    return root


# --- random scripts ------------------------------------------------------------------------------

_ids = itertools.count()
Spec = tuple[str, int, int]
"""(kind, file index, number): a turn of the script, made concrete once the interface is known."""

spec_st: st.SearchStrategy[Spec] = st.tuples(
    st.sampled_from(
        [
            *["read"] * 4,
            *["grep"] * 2,
            "glob",
            "multi",
            *["finish"] * 2,
            *["good"] * 2,
            "partial",
            "invalid",
            "empty",
            "junk",
            "cut",
            "unparseable",
            "error",
        ]
    ),
    st.integers(0, 3),
    st.integers(1, 3000),
)
files_st = st.lists(st.tuples(st.integers(0, 4000), st.integers(1, 300)), min_size=1, max_size=4)


def budgets_st(*, max_steps: int = 10, extra_total: int = 60000) -> st.SearchStrategy[dict[str, Any]]:
    """Profile overrides; ``extra_total`` is what the total budget may add to the context budget."""
    return st.fixed_dictionaries(
        {
            "max_steps": st.integers(1, max_steps),
            "context_token_budget": st.integers(1500, 6000)
            | st.integers(6000, 40000)
            | st.integers(6000, 40000),
            "extra_total": st.integers(0, extra_total),
            "max_output_tokens": st.integers(16, 800),
            "action_max_tokens": st.integers(16, 300),
            "max_contract_repairs": st.integers(0, 2),
            "max_stale_turns": st.integers(1, 4),
            "min_tool_calls": st.integers(0, 2),
            "grace_turn": st.sampled_from([True, True, False]),
            "tool_interface": st.sampled_from(["simple", "full"]),
            "constrain_paths": st.booleans(),
            "read_window": st.integers(1, 400),
        }
    )


def _read(interface: str, index: int, number: int) -> ToolCall:
    path = f"src/f{index}.py"
    args: dict[str, Any] = (
        {"path": path, "line": number}
        if interface == "simple"
        else {"path": path, "limit": min(number, 2000)}
    )
    return ToolCall(id=f"b{next(_ids)}", name="Read", arguments=args)


def _turn(spec: Spec, interface: str, files: int) -> Turn:
    kind, index, number = spec
    index %= files
    if kind == "read":
        return ModelResponse(tool_calls=[_read(interface, index, number)])
    if kind == "multi":  # several calls in one turn, the last one a repeat-prone Grep
        calls = [_read(interface, i, number) for i in range(index + 1)]
        return ModelResponse(
            tool_calls=[*calls, ToolCall(id=f"b{next(_ids)}", name="Grep", arguments={"pattern": "login"})]
        )
    if kind == "grep":
        return ModelResponse(
            tool_calls=[ToolCall(id=f"b{next(_ids)}", name="Grep", arguments={"pattern": "login"})]
        )
    if kind == "glob":
        return ModelResponse(
            tool_calls=[ToolCall(id=f"b{next(_ids)}", name="Glob", arguments={"pattern": "**/*.py"})]
        )
    if kind == "finish":
        return ModelResponse(tool_calls=[ToolCall(id=f"b{next(_ids)}", name="finish")])
    if kind == "cut":  # an action cut off at the output cap: retried, never an answer
        return ModelResponse(tool_calls=[_read(interface, index, number)], finish_reason="length")
    if kind == "unparseable":
        return ModelResponse(text="{not an action", parse_ok=False)
    if kind == "error":  # refused before the server computed anything: charged 0
        return ModelCallError("HTTP 503 from http://x/v1: busy", retryable=True, attempts=3, latency_s=0.01)
    return {
        "good": final(GOOD),
        "partial": final({**GOOD, "status": "partial"}),
        "invalid": final("not json at all"),
        "empty": final(""),
        "junk": ModelResponse(text="x" * number),  # a long reply spends output tokens
    }[kind]


def _explorer(interface: str, lines: list[int]) -> Turn:
    """After the script: list the files, then read them at new lines each time; answer when asked."""
    reads = itertools.count()

    def turn(request: ModelRequest) -> ModelResponse:
        if request.phase == "final":
            return final(GOOD)
        k = next(reads)
        if k == 0:
            return ModelResponse(
                tool_calls=[ToolCall(id=f"b{next(_ids)}", name="Glob", arguments={"pattern": "**/*.py"})]
            )
        index = k % len(lines)
        return ModelResponse(tool_calls=[_read(interface, index, 1 + (37 * k) % max(lines[index], 1))])

    return turn


def _launch(config: LabConfig, root: Path, model: ScriptedModel, overrides: dict[str, Any]) -> SubagentResult:
    launcher = SubagentLauncher(config, root, model_factory=lambda choice, mcfg: model)
    return launcher.launch(SubagentRequest(task=TASK, overrides=overrides))


def check_budgets(result: SubagentResult, overrides: dict[str, Any]) -> None:
    """The budget invariants of one run, from its result and its trace alone."""
    assert result.terminal_reason != "crashed", result.detail
    events = read_trace(result.trace_path)
    calls = [e for e in events if isinstance(e, ModelCalled)]
    failed = [e for e in events if isinstance(e, ModelCallFailed)]
    spent = [c.usage for c in calls] + [f.usage for f in failed]
    assert result.usage == sum(spent, Usage())
    assert result.usage.total_tokens <= overrides["total_token_budget"], (
        result.usage.total_tokens,
        overrides["total_token_budget"],
    )
    for call in calls:
        # every attempt sent the same prompt: lost attempts add whole prompts to the call's usage
        attempts = 1 + (call.usage.prompt_tokens - call.prompt_tokens_est) // max(call.prompt_tokens_est, 1)
        reported = call.usage.prompt_tokens
        per_attempt = reported / attempts if call.usage.estimated else reported
        assert per_attempt <= overrides["context_token_budget"], (call.purpose, call.usage)
        assert call.prompt_tokens_est <= overrides["context_token_budget"]
        assert call.usage.completion_tokens <= call.max_tokens
    assert result.steps <= overrides.get("max_steps", result.steps)


def _random_run(
    lab: tuple[LabConfig, Path],
    scale: float,
    files: list[tuple[int, int]],
    specs: list[Spec],
    budgets: dict[str, Any],
    explore_after: bool,
) -> tuple[SubagentResult, dict[str, Any]]:
    config, base = lab
    overrides = dict(budgets)
    overrides["total_token_budget"] = overrides["context_token_budget"] + overrides.pop("extra_total")
    root = _workspace(base, files)
    turns = [_turn(s, overrides["tool_interface"], len(files)) for s in specs]
    tail = _explorer(overrides["tool_interface"], [n for n, _ in files]) if explore_after else final(GOOD)
    model = ScriptedModel([*turns, *[tail] * 60], prompt_scale=scale)
    result = _launch(config, root, model, overrides)

    event(f"terminal_reason={result.terminal_reason}")
    event(f"grace_used={result.grace_used}")
    event(f"repairs_used={result.repairs_used}")
    target(result.usage.total_tokens / overrides["total_token_budget"], label="share of the total budget")
    check_budgets(result, overrides)
    # the decision was exact: each call's counted prompt is the prompt the model then reported
    calls = [e for e in read_trace(result.trace_path) if isinstance(e, ModelCalled)]
    assert result.prompt_counts_exact
    assert all(c.prompt_exact and c.usage.prompt_tokens == c.prompt_tokens_est for c in calls)
    return result, overrides


@SETTINGS
@given(
    scale=st.floats(1.0, 3.0),
    files=files_st,
    specs=st.lists(spec_st, min_size=1, max_size=14),
    budgets=budgets_st(),
    explore_after=st.booleans(),
)
def test_exact_counts_keep_every_run_inside_its_budgets(
    lab: tuple[LabConfig, Path],
    scale: float,
    files: list[tuple[int, int]],
    specs: list[Spec],
    budgets: dict[str, Any],
    explore_after: bool,
) -> None:
    _random_run(lab, scale, files, specs, budgets, explore_after)


@settings(SETTINGS, max_examples=max(SETTINGS.max_examples // 2, 1))
@given(
    scale=st.floats(1.0, 3.0),
    files=files_st,
    specs=st.lists(spec_st, max_size=6),
    budgets=budgets_st(max_steps=6, extra_total=150_000),
)
def test_runs_that_work_until_a_limit_keep_their_budgets_through_grace(
    lab: tuple[LabConfig, Path],
    scale: float,
    files: list[tuple[int, int]],
    specs: list[Spec],
    budgets: dict[str, Any],
) -> None:
    """A tool runs first and the model keeps exploring: most runs end at a limit, many with grace."""
    budgets = {**budgets, "grace_turn": True, "min_tool_calls": 0}
    result, _ = _random_run(lab, scale, files, [("glob", 0, 1), *specs], budgets, explore_after=True)
    events = read_trace(result.trace_path)
    grace = [e for e in events if isinstance(e, ModelCalled) and e.purpose == "grace"]
    assert result.grace_used == bool(grace)
    if result.grace_used:
        # the grace answer is kept with the model's own status; the run is partial at best
        assert result.terminal_reason in LIMIT_REASONS and result.status != "completed"
        assert result.contract is None or result.status == "partial"


# --- the old decision overshoots -------------------------------------------------------------------

SCALE = 2.5
"""The model's tokenizer reports 2.5x the raw byte estimate; the harness's estimate adds only 10%."""


def _answer_after_read(
    config: LabConfig, root: Path, overrides: dict[str, Any], *, exact: bool
) -> SubagentResult:
    model = ScriptedModel(
        [ModelResponse(tool_calls=[_read("full", 0, 400)]), final(GOOD)],
        prompt_scale=SCALE,
        counts_prompts=exact,
    )
    return _launch(config, root, model, {**overrides, "tool_interface": "full", "min_tool_calls": 0})


def test_the_estimate_alone_overshoots_both_budgets(lab: tuple[LabConfig, Path]) -> None:
    """Read a file, then answer: budgets sized to the estimate of the answer call's prompt.

    The estimate-only decision admits the call and the model reports 2.5 / 1.1 times the estimate,
    over the context budget and over the total; ``check_budgets`` catches it. The exact counter
    refuses the call whose prompt is over (context_budget), and its run stays inside both budgets.
    """
    config, base = lab
    root = _workspace(base, [(400, 60)])
    probe = _answer_after_read(
        config, root, {"context_token_budget": 100_000, "total_token_budget": 200_000}, exact=False
    )
    decisions = [e for e in read_trace(probe.trace_path) if isinstance(e, BudgetDecision)]
    assert probe.terminal_reason == "completed" and len(decisions) == 2 and not decisions[1].prompt_exact
    first = probe.usage_by_call[0].total_tokens
    estimate = decisions[1].prompt_tokens_est  # the answer call's prompt, as the old decision saw it
    overrides = {
        "context_token_budget": estimate,
        "total_token_budget": first + estimate + 200,
        "max_output_tokens": 150,
    }

    old = _answer_after_read(config, root, overrides, exact=False)
    calls = [e for e in read_trace(old.trace_path) if isinstance(e, ModelCalled)]
    assert old.terminal_reason == "completed" and not old.prompt_counts_exact
    assert calls[1].prompt_tokens_est <= overrides["context_token_budget"]  # admitted on the estimate
    assert calls[1].usage.prompt_tokens > 2 * overrides["context_token_budget"]  # reported: far over
    assert old.usage.total_tokens > overrides["total_token_budget"]
    with pytest.raises(AssertionError):
        check_budgets(old, overrides)

    new = _answer_after_read(config, root, overrides, exact=True)
    assert new.terminal_reason == "context_budget" and new.prompt_counts_exact
    check_budgets(new, overrides)


def test_spent_retries_stay_inside_the_total_budget(lab: tuple[LabConfig, Path]) -> None:
    """The answer call succeeds on its third attempt after two spent ones: three prompts charged."""
    config, base = lab
    root = _workspace(base, [(400, 60)])
    answer = final(GOOD).model_copy(update={"spent_attempts": 2})
    model = ScriptedModel([ModelResponse(tool_calls=[_read("full", 0, 400)]), answer], prompt_scale=SCALE)
    probe = _answer_after_read(
        config, root, {"context_token_budget": 100_000, "total_token_budget": 200_000}, exact=True
    )
    decisions = [e for e in read_trace(probe.trace_path) if isinstance(e, BudgetDecision)]
    overrides = {
        "context_token_budget": decisions[1].prompt_tokens_est,
        "total_token_budget": probe.usage_by_call[0].total_tokens + decisions[1].prompt_tokens_est + 200,
        "max_output_tokens": 150,
        "tool_interface": "full",
        "min_tool_calls": 0,
    }
    result = _launch(config, root, model, overrides)
    # admitted (one prompt and the output cap fit), but the budget affords no retry after a lost
    # attempt: the call gives up after the first, and exactly that prompt is charged
    assert result.terminal_reason == "model_error"
    check_budgets(result, overrides)
    roomy = {
        **overrides,
        "total_token_budget": overrides["total_token_budget"] + 3 * decisions[1].prompt_tokens_est,
    }
    model = ScriptedModel([ModelResponse(tool_calls=[_read("full", 0, 400)]), answer], prompt_scale=SCALE)
    result = _launch(config, root, model, roomy)
    assert result.terminal_reason == "completed"  # two lost attempts, then an answer: all affordable
    check_budgets(result, roomy)
