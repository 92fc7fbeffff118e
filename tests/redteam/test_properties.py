"""Budgets and bookkeeping, property-based: random scripted runs and fuzzed tool arguments."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, with_aided_explore
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from redteam.support import GOOD
from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.analysis.metrics import child_metrics
from subagent_lab.config.profiles import LabConfig, load_config
from subagent_lab.core.model import ModelCallError
from subagent_lab.core.tool import MAX_OBSERVATION_CHARS
from subagent_lab.core.trace import (
    ModelCalled,
    ModelCallFailed,
    ToolFinished,
    ToolStarted,
    TraceWriter,
    read_trace,
)
from subagent_lab.core.types import ModelResponse, ToolCall, ToolOutcome, Usage
from subagent_lab.models.scripted import ScriptedModel, Turn, final
from subagent_lab.tools.registry import READONLY_TOOLS
from subagent_lab.workspace.sandbox import Workspace

SETTINGS = settings(
    max_examples=int(os.environ.get("REDTEAM_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> tuple[LabConfig, Path]:
    base = tmp_path_factory.mktemp("props")
    root = base / "ws"
    (root / "app").mkdir(parents=True)
    (root / "app" / "auth.py").write_text(
        "import hashlib\n\n\ndef login(user, password):\n    return check_password(user, password)\n\n\n"
        "def check_password(user, password):\n"
        "    return hashlib.sha256(password.encode()).hexdigest() == user.pw\n"
    )
    (root / "big.py").write_text(
        "".join(f"value_{i} = {i}  # filler to spend tokens quickly\n" for i in range(3000))
    )
    (root / ".env").write_text("OPENAI_API_KEY=sk-not-a-real-key-0123456789\n")
    (root / "loop").symlink_to("loop")
    (root / "out").symlink_to("/etc")
    os.mkfifo(root / "fifo")
    cfg = with_aided_explore(load_config(REPO / "profiles.yaml", env={}))
    return cfg.model_copy(update={"trace_dir": str(base / "runs"), "source": None}), root


# --- random scripted runs ----------------------------------------------------------------------

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("Read", {"path": "app/auth.py"}),
    ("Read", {"path": "app/auth.py", "start": 3, "limit": 2}),
    ("Read", {"path": "big.py", "limit": 2000}),
    ("Read", {"path": "big.py", "line": 2500}),
    ("Read", {"path": "../../etc/passwd"}),
    ("Read", {"path": "nope.py"}),
    ("Read", {"path": ".env"}),
    ("Grep", {"pattern": "def \\w+"}),
    ("Grep", {"pattern": "("}),
    ("Grep", {"pattern": "login", "path": "app"}),
    ("Glob", {"pattern": "**/*"}),
    ("Glob", {"pattern": "*", "path": "out"}),
    ("Edit", {"path": "app/auth.py", "old": "a", "new": "b"}),
    ("Bash", {"command": "id"}),
    ("Task", {"prompt": "x"}),
    ("Nope", {}),
    ("finish", {}),
]
_ids = itertools.count()

call_st = st.sampled_from(CALLS).map(lambda c: ToolCall(id=f"h{next(_ids)}", name=c[0], arguments=c[1]))
turn_st: st.SearchStrategy[Turn] = st.one_of(
    st.lists(call_st, min_size=1, max_size=6).map(lambda calls: ModelResponse(tool_calls=calls)),
    st.just(final(GOOD)),
    st.just(final({**GOOD, "status": "partial"})),
    st.just(final("not json at all")),
    st.just(final("")),
    st.text(max_size=3000).map(lambda t: ModelResponse(text=t)),  # long junk replies spend output tokens
    st.just(ModelCallError("HTTP 500 from http://x/v1: boom", retryable=True, attempts=3, latency_s=0.01)),
)
budget_st = st.fixed_dictionaries(
    {
        "max_steps": st.integers(1, 8),
        "context_token_budget": st.sampled_from([900, 2300, 2600, 3000, 4000, 5000, 7000, 9000, 12000]),
        "extra_total": st.integers(0, 30000),
        "max_output_tokens": st.integers(16, 600),
        "max_stale_turns": st.integers(1, 4),
        "max_contract_repairs": st.integers(0, 2),
        "min_tool_calls": st.integers(0, 2),
        "grace_turn": st.booleans(),
        "max_tool_calls_per_step": st.integers(1, 4),
        "tool_interface": st.sampled_from(["simple", "full"]),
        "constrain_paths": st.booleans(),
    }
)


@SETTINGS
@given(turns=st.lists(turn_st, min_size=1, max_size=12), budgets=budget_st)
def test_random_runs_respect_budgets_and_bookkeeping(
    lab: tuple[LabConfig, Path], turns: list[Turn], budgets: dict[str, Any]
) -> None:
    config, root = lab
    overrides = dict(budgets)
    overrides["total_token_budget"] = overrides["context_token_budget"] + overrides.pop("extra_total")
    model = ScriptedModel([*turns, *[final(GOOD)] * 40])
    launcher = SubagentLauncher(config, root, model_factory=lambda c, m: model)
    result = launcher.launch(SubagentRequest(task="Where is login implemented?", overrides=overrides))

    assert result.terminal_reason != "crashed", result.detail
    event(f"terminal_reason={result.terminal_reason}")  # shown by --hypothesis-show-statistics
    # budgets
    assert result.usage.total_tokens <= overrides["total_token_budget"]
    assert result.steps <= overrides["max_steps"]
    events = read_trace(result.trace_path)
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert all(c.prompt_tokens_est <= overrides["context_token_budget"] for c in calls)
    assert all(u.prompt_tokens <= overrides["context_token_budget"] for u in result.usage_by_call)
    assert all(c.usage.completion_tokens <= c.max_tokens for c in calls)
    failed = [e for e in events if isinstance(e, ModelCallFailed)]
    assert len(model.requests) == len(calls) + len(failed)
    assert result.usage == sum([c.usage for c in calls] + [f.usage for f in failed], Usage())
    # bookkeeping: the trace alone gives the launcher's figures
    metrics = child_metrics(events)
    assert metrics.token_usage == result.usage
    assert metrics.tool_usage == result.tool_usage
    assert metrics.terminal_reason == result.terminal_reason and metrics.status == result.status
    assert metrics.model_calls == result.model_calls and metrics.repairs_used == result.repairs_used
    assert metrics.grace_used == result.grace_used
    finished = [e for e in events if isinstance(e, ToolFinished)]
    started = [e for e in events if isinstance(e, ToolStarted)]
    assert sum(sum(c.values()) for c in result.tool_usage.values()) == len(finished) == len(started)
    assert {e.call_id for e in finished} == {e.call_id for e in started}
    assert [e.seq for e in events] == list(range(len(events)))
    # reads outside the workspace and secrets never succeed: the sandbox denies them, or (with
    # constrain_paths) the path check refuses a file no search has shown before the sandbox is asked;
    # a repeat of such a call is answered from the record (it points at the refusal, shows nothing)
    for done in finished:
        args = next(s.arguments for s in started if s.call_id == done.call_id)
        if done.tool in ("Edit", "Bash", "Task", "Nope"):
            assert done.status == "denied", (done.tool, args, done.text)
        elif args.get("path") in ("../../etc/passwd", ".env", "out"):
            unshown = done.status == "error" and done.text.startswith("Error: Read only files a search")
            repeat = done.from_record and done.text.startswith("[Already shown at step")
            refused = done.status == "denied" or (overrides["constrain_paths"] and unshown)
            assert refused or repeat, (args, done.text)
            assert "root:" not in done.text
    assert "sk-not-a-real-key" not in Path(result.trace_path).read_text()


# --- tool argument fuzzing -----------------------------------------------------------------------

NASTY = [
    "",
    ".",
    "..",
    "/",
    "../..",
    "/etc/passwd",
    "/proc/self/environ",
    "/dev/zero",
    "fifo",
    "loop",
    "out",
    "out/passwd",
    ".env",
    "app/auth.py",
    "big.py",
    "~",
    "\x00",
    "a\x00b",
    "\udce9",
    "caf\udce9.py",
    "\ud800",
    "*",
    "**",
    "**/*",
    "[z-a]",
    "[",
    "{a,",
    "{a,b}" * 10,
    "(",
    "(a+)+$",
    "\\",
    "-e",
    "--files",
    "-",
    "\n",
    "a" * 5000,
    "../" * 50,
    "app/../..",
    "\u202e",
    "💥",
]
scalar_st = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(NASTY),
    st.text(max_size=40),
)
value_st = st.one_of(
    scalar_st, st.lists(scalar_st, max_size=3), st.dictionaries(st.text(max_size=5), scalar_st, max_size=2)
)


def _args(tool: str) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments that mostly pass validation (so the tool body runs), sometimes not."""
    fields = READONLY_TOOLS[tool].args_model.model_fields
    text_st = st.one_of(st.sampled_from(NASTY), st.text(max_size=40), value_st)
    number_st = st.one_of(st.integers(-5, 3000), st.sampled_from([0, 1, 10**20, -(10**20)]), value_st)

    def field_st(name: str) -> st.SearchStrategy[Any]:
        annotation = str(fields[name].annotation)
        return (
            number_st
            if "int" in annotation
            else st.booleans() | value_st
            if "bool" in annotation
            else text_st
        )

    required = {n: field_st(n) for n, f in fields.items() if f.is_required()}
    optional = {n: field_st(n) for n, f in fields.items() if not f.is_required()}
    return st.fixed_dictionaries(required, optional={**optional, "evil": value_st}) | st.dictionaries(
        st.sampled_from([*fields, "evil"]), value_st, max_size=3
    )


@pytest.mark.parametrize("tool", sorted(READONLY_TOOLS))
def test_fuzzed_arguments_never_raise(lab: tuple[LabConfig, Path], tool: str, tmp_path: Path) -> None:
    _, root = lab
    ws = Workspace(root)
    writer = TraceWriter(tmp_path / "fuzz.jsonl", "run-fuzz")
    outcomes: list[ToolOutcome] = []

    @settings(
        max_examples=int(os.environ.get("REDTEAM_FUZZ", "120")),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(arguments=_args(tool))
    def check(arguments: dict[str, Any]) -> None:
        outcome = READONLY_TOOLS[tool].invoke(ws, arguments)  # any exception fails the test
        assert outcome.status in ("ok", "error", "denied")
        assert len(outcome.text) <= MAX_OBSERVATION_CHARS + 200
        writer.emit(ToolStarted(run_id="run-fuzz", call_id="c", tool=tool, arguments=arguments))
        writer.emit(
            ToolFinished(run_id="run-fuzz", call_id="c", tool=tool, status=outcome.status, text=outcome.text)
        )
        outcomes.append(outcome)

    check()
    writer.close()
    assert len(read_trace(tmp_path / "fuzz.jsonl")) == 2 * len(outcomes)  # every outcome is writable
