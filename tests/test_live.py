"""End to end against the embedded OpenAI-compatible server (real models, real HTTP)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO

from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.analysis.metrics import child_metrics
from subagent_lab.config.profiles import LabConfig, load_config
from subagent_lab.core.trace import ModelCalled, RunEnded, RunStarted, read_trace
from subagent_lab.local_models.server import llama_server_binary

pytestmark = pytest.mark.live

if not llama_server_binary().is_file():  # setup.sh builds it; a bare pip install does not
    pytest.skip("llama-server is not built (run scripts/setup.sh)", allow_module_level=True)


@pytest.fixture(scope="module")
def live_config(tmp_path_factory: pytest.TempPathFactory) -> LabConfig:
    from subagent_lab.local_models.server import ensure_server

    cfg = load_config(REPO / "profiles.yaml", env={})
    cfg = cfg.model_copy(update={"trace_dir": str(tmp_path_factory.mktemp("live") / "runs"), "source": None})
    ensure_server(cfg)
    return cfg


@pytest.mark.parametrize(
    ("choice", "alias"), [("light", "qwen2.5-coder-0.5b"), ("main", "qwen2.5-coder-1.5b")]
)
def test_real_child_run_bookkeeping(live_config: LabConfig, workspace: Path, choice: str, alias: str) -> None:
    launcher = SubagentLauncher(live_config, workspace)
    request = SubagentRequest(
        task="Find the file and line where the function `login` is defined.",
        model=choice,  # type: ignore[arg-type]
        overrides={"max_steps": 4, "timeout_s": 400},
    )
    result = launcher.launch(request)
    assert result.terminal_reason in {
        "completed",
        "max_steps",
        "invalid_output",
        "loop_detected",
        "token_budget",
    }
    assert result.model_used == choice and result.model_id == alias and not result.fallback
    assert result.model_calls >= 1
    assert result.usage.prompt_tokens > 0 and not result.usage.estimated  # figures come from the server
    assert result.usage.total_tokens <= 32000
    events = read_trace(result.trace_path)
    assert isinstance(events[0], RunStarted) and isinstance(events[-1], RunEnded)
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert len(calls) == result.model_calls
    # the pre-call count is the server's own template + tokenizer: exactly what it then reports
    assert all(c.prompt_exact and c.usage.prompt_tokens == c.prompt_tokens_est for c in calls)
    assert result.prompt_counts_exact
    metrics = child_metrics(events)
    assert metrics.token_usage == result.usage and metrics.tool_usage == result.tool_usage
    assert metrics.terminal_reason == result.terminal_reason
    if result.contract is not None:
        assert result.grounded_ratio is None or 0.0 <= result.grounded_ratio <= 1.0
