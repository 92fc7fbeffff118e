"""Secrets: planted keys in the environment, in headers echoed by the server, and in files.

Policy (see docs/redteam.md): API keys from the environment (any variable named like a key,
token, secret or password, and every variable a model config names in ``api_key_env``) and
bearer tokens never appear in traces, results or sweep tables. Secret *files* (``.env``,
``.envrc``, keys, credentials) are refused before they are read. A key inside an ordinary
file is file content: the model sees it as it is, and traces and results mask it when it has a
recognisable shape (``sk-...``, ``ghp_...``, ``AKIA...``, ``Bearer ...``). A secret of no
recognisable shape in an ordinary file can only be in the trace as the observation the model saw.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import REPO, LauncherFactory

from redteam.support import GOOD, FakeOpenAI, Reply, act, ok
from subagent_lab.experiments.sweep import SweepSpec, run_sweep, sweep_dir
from subagent_lab.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.models.scripted import final
from subagent_lab.profiles import LabConfig, ModelConfig
from subagent_lab.trace import read_trace
from subagent_lab.types import ModelResponse, ToolCall


def _hex() -> str:
    return uuid.uuid4().hex


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Keys in the environment: an OpenAI one, LLM_API_KEY, and a custom name no pattern knows."""
    keys = {
        "OPENAI_API_KEY": f"sk-proj-{_hex()}",
        "LLM_API_KEY": f"llmkey-{_hex()}",
        "ACME_GATEWAY_CREDENTIAL": f"acme{_hex()}",  # named in api_key_env only
        "MY_SERVICE_PASSWORD": f'pa"ss\\{_hex()}',  # JSON-special characters
    }
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    return keys


def _echo_auth(body: dict[str, object], headers: dict[str, str]) -> Reply:
    """A server that echoes the Authorization header (and the key alone) in its error."""
    auth = headers.get("authorization", "")
    key = auth.removeprefix("Bearer ")
    return Reply(401, {"error": {"message": f"invalid credentials: {auth!r} (key {key})", "type": "auth"}})


def _leaks(text: str, keys: dict[str, str]) -> list[str]:
    found = [name for name, value in keys.items() if value in text or json.dumps(value)[1:-1] in text]
    return found + (["Bearer"] if re.search(r"(?i)bearer\s+[A-Za-z0-9._~+/-]{8,}", text) else [])


def test_keys_never_reach_traces_results_or_tables(
    planted: dict[str, str], config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    leaky_tool_call = act("Grep", pattern=planted["OPENAI_API_KEY"] + "|" + planted["MY_SERVICE_PASSWORD"])
    with FakeOpenAI([ok(leaky_tool_call)], default=_echo_auth) as server:
        model = ModelConfig(
            base_url=server.url, model="m", api_key_env="ACME_GATEWAY_CREDENTIAL", max_retries=0
        )
        cfg = config.model_copy(update={"models": {"main": model, "light": model}})
        # the real default factory: the key goes out in the Authorization header
        result = SubagentLauncher(cfg, workspace, trace_dir=tmp_path / "runs").launch(
            SubagentRequest(task="Where is login implemented?", overrides={"min_tool_calls": 0})
        )
        assert server.requests[0].headers["authorization"] == f"Bearer {planted['ACME_GATEWAY_CREDENTIAL']}"

        # a sweep over the same endpoint, through its config file: results.jsonl and traces
        raw = yaml.safe_load((REPO / "profiles.yaml").read_text())
        for section in ("profiles", "agents"):
            for prof in (raw.get(section) or {}).values():
                if "system_prompt_file" in prof:
                    prof["system_prompt_file"] = str(REPO / prof["system_prompt_file"])
        raw["models"] = {"main": model.model_dump(), "light": None}
        raw["trace_dir"] = str(tmp_path / "runs")
        (tmp_path / "lab.yaml").write_text(yaml.safe_dump(raw))
        spec = SweepSpec(name="secrets", tasks=("yaml-safe-load",), models=("main",))
        table = run_sweep(
            spec, config_path=tmp_path / "lab.yaml", out_dir=tmp_path / "sw", cache=False, progress=False
        )
    assert result.terminal_reason == "model_error" and "invalid credentials" in result.detail
    assert table["terminal_reason"].iloc[0] == "model_error"
    artefacts = {
        "trace": Path(result.trace_path).read_text(),
        "result": result.model_dump_json(),
        "summary": result.summary,
        "results.jsonl": (sweep_dir(spec, tmp_path / "sw") / "results.jsonl").read_text(),
        "sweep traces": "".join(p.read_text() for p in (tmp_path / "sw").rglob("*.jsonl")),
    }
    leaks = {where: _leaks(text, planted) for where, text in artefacts.items()}
    assert not any(leaks.values()), leaks
    assert "[REDACTED]" in artefacts["trace"] and "[REDACTED]" in artefacts["result"]


@pytest.fixture
def secret_files(workspace: Path) -> dict[str, str]:
    """Secret files planted in the workspace, each holding a unique token; and an ordinary file with keys."""
    tokens: dict[str, str] = {}
    for rel in (
        ".env",
        ".ENV",
        ".env.local",
        "config/.env.production",
        "prod.env",
        ".envrc",
        ".netrc",
        ".npmrc",
        ".pypirc",
        ".git-credentials",
        "secrets/credentials.json",
        "deploy/server.pem",
        "deploy/id_ed25519",
        ".ssh/config",
        ".aws/credentials",
        "infra/terraform.tfstate",
    ):
        tokens[rel] = f"FILETOKEN{_hex()}"
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(f"SECRET={tokens[rel]}\n")
    # a hostile ignore file trying to re-include them (and an rg-specific one)
    (workspace / ".gitignore").write_text("!.env\n!**/.env*\n!.ssh/\n!*.pem\n")
    (workspace / ".ignore").write_text("!.env\n!.envrc\n")
    return tokens


def test_secret_files_are_refused_and_file_keys_are_masked(
    make_launcher: LauncherFactory, workspace: Path, secret_files: dict[str, str]
) -> None:
    live, shapeless = f"sk-live-{_hex()}", f"hunter2-{_hex()}"
    (workspace / "settings.py").write_text(
        f'OPENAI_KEY = "{live}"\nDB_PASSWORD = "{shapeless}"\n'
        f'HEADERS = {{"Authorization": "Bearer {_hex()}"}}\n'
    )
    calls = [ToolCall(id=f"r{i}", name="Read", arguments={"path": rel}) for i, rel in enumerate(secret_files)]
    calls += [
        ToolCall(id="g-all", name="Grep", arguments={"pattern": "SECRET=|FILETOKEN"}),
        ToolCall(id="g-hidden", name="Grep", arguments={"pattern": "FILETOKEN", "glob": "**/.env*"}),
        ToolCall(
            id="g-named", name="Grep", arguments={"pattern": "FILETOKEN", "path": "config/.env.production"}
        ),
        ToolCall(id="glob", name="Glob", arguments={"pattern": "**/*", "max_results": 1000}),
        ToolCall(id="glob-env", name="Glob", arguments={"pattern": "**/.env*"}),
        ToolCall(id="settings", name="Read", arguments={"path": "settings.py"}),
    ]
    turns = [ModelResponse(tool_calls=calls[i : i + 4]) for i in range(0, len(calls), 4)]
    launcher, model = make_launcher([*turns, final(GOOD)])
    result = launcher.launch(SubagentRequest(task="Find the API keys.", overrides={"max_steps": 12}))
    assert result.terminal_reason == "completed", result.detail
    finished = {e.call_id: e for e in read_trace(result.trace_path) if e.kind == "tool_finished"}
    refused = {rel: finished[f"r{i}"].status for i, rel in enumerate(secret_files)}
    assert set(refused.values()) == {"denied"}, refused
    assert finished["g-named"].status == "denied"
    assert "No matches" in finished["g-all"].text and "No matches" in finished["g-hidden"].text
    listed = {
        line.rstrip("/") for e in (finished["glob"], finished["glob-env"]) for line in e.text.splitlines()
    }
    assert "settings.py" in listed and not set(secret_files) & listed
    assert not {".ssh", ".aws", "deploy/server.pem"} & listed
    # no secret file's content reached the model, the trace or the result
    seen = "\n".join(m.content for r in model.requests for m in r.messages)
    trace = Path(result.trace_path).read_text()
    for token in secret_files.values():
        assert token not in seen and token not in trace and token not in result.model_dump_json()
    # an ordinary file: the model saw its content; the trace masks the recognisable key...
    assert live in seen and live not in trace and "[REDACTED]" in finished["settings"].text
    assert '"Authorization": "[REDACTED]"' in finished["settings"].text
    # ...and the shapeless secret is only in the observation the model saw
    holders = [e.kind for e in read_trace(result.trace_path) if shapeless in e.model_dump_json()]
    assert holders == ["tool_finished"]
