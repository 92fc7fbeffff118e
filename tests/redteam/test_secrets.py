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
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from conftest import REPO, LauncherFactory

from redteam.support import GOOD, FakeOpenAI, Reply, act, ok
from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.config.profiles import LabConfig, ModelConfig
from subagent_lab.core.contracts import ground_evidence
from subagent_lab.core.tool import ToolDeniedError
from subagent_lab.core.trace import Redactor, read_trace
from subagent_lab.core.types import ModelResponse, ToolCall
from subagent_lab.experiments.sweep import SweepSpec, run_sweep, sweep_dir
from subagent_lab.models.scripted import final
from subagent_lab.tools.glob import glob
from subagent_lab.tools.grep import grep
from subagent_lab.tools.read import read
from subagent_lab.workspace.sandbox import Workspace


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
            base_url=server.url, model="fake-model", api_key_env="ACME_GATEWAY_CREDENTIAL", max_retries=0
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


# --- issue 11: backup copies, credential stores, private keys by content, grounding, redaction ----

_PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ{tok}\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)


def _text(tool: Callable[..., object], *args: object, **kwargs: object) -> str:
    """A tool's observation text (tools return plain text or an Observation with ``.text``)."""
    out = tool(*args, **kwargs)
    return out if isinstance(out, str) else str(getattr(out, "text"))  # noqa: B009


@pytest.mark.parametrize(
    "rel",
    [".env~", "#.env#", ".env.bak", "config/.env.orig", "deploy/server.pem~", "id_rsa.old",
     ".server.pem.swp", "credentials.json.orig", ".vault-token", ".config/gh/hosts.yml",
     ".config/gcloud/application_default_credentials.json", ".config/gcloud/credentials.db",
     ".aws/credentials", ".azure/accessTokens.json", ".s3cfg", ".boto", ".my.cnf", ".pgpass",
     "keys/deploy.ppk", ".kube/config", "kubeconfig", "ops/prod.kubeconfig"],
)  # fmt: skip
def test_backup_copies_and_credential_stores_are_secret(workspace: Path, rel: str) -> None:
    token = f"FILETOKEN{_hex()}"
    (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
    (workspace / rel).write_text(f"token={token}\n")
    ws = Workspace(workspace)
    with pytest.raises(ToolDeniedError):
        _text(read, ws, rel)
    assert token not in _text(grep, ws, "token=") + _text(grep, ws, "token=", glob="*")
    assert rel not in _text(glob, ws, "**/*", max_results=1000)
    assert not ground_evidence([f"{rel}:1"], workspace)[0].grounded


def test_ordinary_backups_stay_readable(workspace: Path) -> None:
    """Only the copies of secret names are secret: an ordinary *.bak or *.orig is not."""
    (workspace / "settings.py.bak").write_text("DEBUG = True\n")
    (workspace / "app" / "auth.py.orig").write_text("def login(): ...\n")
    ws = Workspace(workspace)
    assert "DEBUG = True" in _text(read, ws, "settings.py.bak")
    assert "app/auth.py.orig" in _text(grep, ws, "def login", files_only=True)


def test_a_private_key_is_secret_whatever_its_name(workspace: Path) -> None:
    token = _hex()
    (workspace / "docs").mkdir()
    (workspace / "docs" / "notes.md").write_text(f"# setup\nmarker {token}\n" + _PEM.format(tok=token))
    (workspace / "app" / "fixture.txt").write_text("x" * 3_000_000 + _PEM.format(tok=token))  # past 1 MB
    (workspace / "app" / "ok.txt").write_text(f"marker {token}\n")
    ws = Workspace(workspace)
    for rel in ("docs/notes.md", "app/fixture.txt"):
        with pytest.raises(ToolDeniedError, match="private key"):
            _text(read, ws, rel)
        with pytest.raises(ToolDeniedError):
            _text(grep, ws, "marker", path=rel)
        assert not ground_evidence([f"{rel}:1"], workspace)[0].grounded
    hits = _text(grep, ws, f"marker|{token}|PRIVATE")
    assert "app/ok.txt" in hits and "docs/notes.md" not in hits and "fixture.txt" not in hits
    assert ground_evidence(["app/ok.txt:1"], workspace)[0].grounded


def test_grep_glob_does_not_reinclude_gitignored_files(workspace: Path) -> None:
    (workspace / ".gitignore").write_text("private/\n*.log\n")
    (workspace / "private").mkdir()
    (workspace / "private" / "notes.txt").write_text("needle in private\n")
    (workspace / "debug.log").write_text("needle in a log\n")
    (workspace / "app" / "needle.py").write_text("needle = 1\n")
    ws = Workspace(workspace)
    for pattern in ("*.txt", "*.log", "private/**", "**/*", "*"):
        out = _text(grep, ws, "needle", glob=pattern)
        assert "private/notes.txt" not in out and "debug.log" not in out, (pattern, out)
    assert "app/needle.py" in _text(grep, ws, "needle", glob="*.py")


@pytest.mark.parametrize(
    "secret",
    ["sk_live_" + "a1B2c3D4e5F6g7H8i9J0", "AIza" + "SyA-1234567890abcdefghijklmnopqrstu",
     "glpat-" + "x1y2z3" * 4, "hf_" + "abcdEFGHijklMNOPqrstUVWX", "npm_" + "abcdEFGHijklMNOPqrstUVWX1234",
     "ghp_" + "A" * 36, "xoxb-" + "1234-5678-abcdefgh", "sk-proj-" + "Zx9" * 8,
     "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N"],
)  # fmt: skip
def test_token_shapes_are_redacted_in_plain_and_json_text(secret: str) -> None:
    redact = Redactor()
    assert secret not in redact(f"the key is {secret}, keep it safe")
    encoded = json.dumps({"text": f"x={secret}\n"})
    assert secret not in redact(encoded) and json.loads(redact(encoded))["text"].startswith("x=")


def test_private_key_blocks_and_secret_named_variables_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    values = {
        "STRIPE_KEY": f"stripe{_hex()}",
        "DB_PASSWD": f"pw{_hex()}",
        "GCP_CREDENTIALS": f"cred{_hex()}",
        "PROXY_AUTH": f"auth{_hex()}",
        "VAULT_TOKEN": f"hvs.{_hex()}",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("KEYBOARD_LAYOUT", "us-international")  # not a secret name
    token = _hex()
    text = f"before\n{_PEM.format(tok=token)}after {' '.join(values.values())} us-international"
    redact = Redactor()
    for form in (text, json.dumps(text)):
        out = redact(form)
        assert token not in out and "PRIVATE KEY" not in out and "before" in out and "after" in out
        assert not [v for v in values.values() if v in out] and "us-international" in out
    cut = redact(json.dumps("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA" + token))  # output cut short
    assert token not in cut and json.loads(cut) == "[REDACTED]"


def test_for_config_knows_every_configured_key(monkeypatch: pytest.MonkeyPatch, config: LabConfig) -> None:
    value = f"shapeless{_hex()}"
    monkeypatch.setenv("LAB_GATEWAY", value)  # a name no pattern knows
    model = ModelConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="LAB_GATEWAY")
    cfg = config.model_copy(update={"models": {"main": model, "light": None}})
    assert value in Redactor()(f"k={value}") and value not in cfg.redactor()(f"k={value}")


def test_main_agent_results_and_traces_use_the_config_redactor(
    monkeypatch: pytest.MonkeyPatch, config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    from subagent_lab.agents.parent import MainAgent
    from subagent_lab.models.scripted import ScriptedModel

    value = f"shapeless{_hex()}"
    monkeypatch.setenv("LAB_GATEWAY", value)
    model_cfg = ModelConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="LAB_GATEWAY")
    cfg = config.model_copy(update={"models": {**config.models, "main": model_cfg}})
    model = ScriptedModel([final(f"the gateway key is {value}")])
    result = MainAgent(cfg, workspace, model_factory=lambda c, m: model, scratch_dir=tmp_path).run("Leak it")
    assert result.answer is not None and "[REDACTED]" in result.answer
    assert value not in result.model_dump_json() and value not in Path(result.trace_path).read_text()
