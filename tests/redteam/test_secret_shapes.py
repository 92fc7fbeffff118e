"""Issue 24: secrets that stay secret, recognised by content.

Private keys in other wrappings (SSH2 blocks, base64 PEM in a Kubernetes Secret, a
service-account JSON), the token shapes that stayed unmasked in traces (AWS secret access
keys, SendGrid, Slack webhooks, Azure account keys, OAuth client secrets, passwords in database
URLs), a few credential files readable by name, and an endpoint's ``user:password@`` written in
clear into every trace. Every shape is checked plain, JSON-encoded once (an observation in a
trace event) and twice (a tool result inside a JSON observation); the masked JSON stays valid.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from subagent_lab.core.model import ModelCallError
from subagent_lab.core.redact import (
    _DETECT_SECRETS_NEEDLES,
    Redactor,
    _default_needles,
    mask_shapes,
    mask_url,
    shapes,
)
from subagent_lab.core.tool import ToolDeniedError
from subagent_lab.core.trace import RunStarted, TraceWriter
from subagent_lab.core.types import Message, ModelRequest
from subagent_lab.models.openai_chat import OpenAIChatModel
from subagent_lab.tools.read import read
from subagent_lab.workspace.sandbox import Workspace

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n"
    "aFDrBz9vFqU4yB2mKEYBODYq\n-----END RSA PRIVATE KEY-----\n"
)
SSH2 = (
    '---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nComment: "rsa-key-20240101"\n'
    "P2/56wAAA+wAAAA3aWYtbW9kbntzaWdue3JzYS1wa2NzMS1zaGExfSxlbmNyeXB0e3JzYS1w\nAAAAAAAAHQ==\n"
    "---- END SSH2 ENCRYPTED PRIVATE KEY ----\n"
)
K8S = (
    "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/tls\ndata:\n"
    f"  tls.key: {base64.b64encode(PEM.encode()).decode()}\n"
    "  tls.crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t\n"
)
SERVICE_ACCOUNT = json.dumps(
    {"type": "service_account", "project_id": "p", "private_key_id": "0f" * 20, "private_key": PEM,
     "client_email": "bot@p.iam.gserviceaccount.com"},
    indent=2,
)  # fmt: skip

AWS_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SENDGRID = "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"
SLACK_HOOK = "https://hooks.slack.com/services/T0123ABCD/B0123ABCD/abcdefghijklmnopqrstuvwx"
AZURE = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + "Zm9v" * 22 + ";EndpointSuffix=x.net"

SHAPES: dict[str, tuple[str, str]] = {
    # name: (text holding the secret, a piece of the secret that must not survive)
    "pem": (PEM, "MIIEowIBAAKCAQEA0Z3VS5JJ"),
    "ssh2": (SSH2, "P2/56wAAA+wAAAA3aWYt"),
    "kubernetes-secret": (K8S, base64.b64encode(PEM.encode()).decode()[40:80]),
    "service-account-json": (SERVICE_ACCOUNT, "MIIEowIBAAKCAQEA0Z3VS5JJ"),
    "aws-secret-ini": (f"[default]\naws_secret_access_key = {AWS_KEY}\n", "wJalrXUtnFEMI"),
    "aws-secret-quoted": (f'AWS_SECRET = "{AWS_KEY}"', "wJalrXUtnFEMI"),
    "sendgrid": (SENDGRID, "TwL2iGABf9DHoTf"),
    "slack-webhook": (SLACK_HOOK, "abcdefghijklmno"),
    "azure-account-key": (AZURE, "Zm9vZm9vZm9vZm9v"),
    "oauth-client-secret-json": ('{"web": {"client_secret": "v3ry-s3cret-cl1"}}', "v3ry-s3cret"),
    "oauth-client-secret-env": ("OAUTH_CLIENT_SECRET=9f8e7d6c5b4a39281706f5e4d3c2b1a0", "9f8e7d6c5b4a"),
    "google-oauth-secret": ("GOCSPX-abcdefghijklmnopqrstuvwxyz12", "abcdefghijklmnopqrst"),
    "database-url": ("DATABASE_URL=postgres://admin:hunter2-s3cret@db.internal:5432/app", "hunter2-s3cret"),
    "endpoint-url": ("http://user:topsecretpw@127.0.0.1:8080/v1", "topsecretpw"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(SHAPES))
@pytest.mark.parametrize("encoding", ["plain", "json", "json-in-json"])
def test_shape_is_masked(name: str, encoding: str) -> None:
    text, secret = SHAPES[name]
    form = {"plain": text, "json": json.dumps(text), "json-in-json": json.dumps(json.dumps(text))}[encoding]
    masked = Redactor()(form)
    assert secret not in masked and "[REDACTED]" in masked
    if encoding != "plain":
        json.loads(masked)  # still valid JSON


def test_a_url_keeps_its_user_and_host() -> None:
    assert mask_url("postgres://admin:pw@db:5432/app") == "postgres://admin:[REDACTED]@db:5432/app"
    assert mask_url("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"


def test_ordinary_text_is_untouched() -> None:
    text = "def login(user, password):\n    return check(password)  # see https://example.org/a:b\n" * 50
    assert Redactor()(text) == text


SAMPLES = {
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "azure_storage_key": "AccountKey=" + "a" * 86 + "==",
    "basic_auth": "https://user:pass123@example.org/",
    "sendgrid": SENDGRID,
    "slack": "xoxb-123456789012-1234567890123-abcdefghijklmnop",
    "stripe": "sk_live_" + "a1B2c3D4e5F6g7H8i9J0k1L2",
    "github_token": "ghp_" + "A" * 36,
    "gitlab_token": "glpat-" + "a" * 20,
    "npm": "//registry.npmjs.org/:_authToken=npm_" + "a" * 36,
    "openai": "sk-" + "a" * 20 + "T3BlbkFJ" + "b" * 20,
    "pypi_token": "pypi-AgEIcHlwaS5vcmc" + "a" * 70,
    "square_oauth": "sq0csp-" + "a" * 43,
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl",
}


@pytest.mark.parametrize("plugin_name", list(_DETECT_SECRETS_NEEDLES))
def test_every_detect_secrets_plugin_passes_its_gate(plugin_name: str) -> None:
    """The needles gate each plugin's regex: a token the plugin finds must reach the regex."""
    import importlib

    module, cls = plugin_name.split(".")
    plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), cls)()
    sample = SAMPLES[module]
    found = list(plugin.analyze_string(sample))
    assert found, f"the sample is not a {cls} secret"
    masked = mask_shapes(f"config: {sample} end")
    assert all(secret not in masked for secret in found), masked


def test_every_needle_opens_the_one_pass_gate() -> None:
    """``mask_shapes`` first looks for the needles of all shapes at once (a needle that holds
    another left out): a text holding any one shape's needle must still reach that shape."""
    plain, folded = _default_needles()
    assert len(plain) < len({n for s in shapes() if not s.folded for n in s.needles})  # some left out
    for shape in shapes():
        for needle in shape.needles:
            text = f"x {needle.upper() if shape.folded else needle} y"
            lower = text.lower()
            assert any(n in text for n in plain) or any(n in lower for n in folded), (needle, shape.source)


def test_the_shape_list_is_built_from_detect_secrets() -> None:
    sources = {s.source for s in shapes()}
    assert {f"detect-secrets:{name.split('.')[0]}" for name in _DETECT_SECRETS_NEEDLES} <= sources


# --- files ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content"),
    [("docs/ssh2.txt", SSH2), ("deploy/tls-secret.yaml", K8S), ("config/sa.json", SERVICE_ACCOUNT)],
)
def test_private_keys_in_any_wrapping_are_not_readable(tmp_path: Path, name: str, content: str) -> None:
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text("notes\n" * 1000 + content)
    with pytest.raises(ToolDeniedError, match="private key"):
        read(Workspace(tmp_path), name)


@pytest.mark.parametrize(
    "name",
    [".cargo/credentials.toml", ".gem/credentials", ".bash_history", ".psql_history",
     ".terraform.d/credentials.tfrc.json", "keys/AuthKey_ABC123.p8", ".config/rclone/rclone.conf",
     ".m2/settings.xml"],
)  # fmt: skip
def test_credential_files_are_secret_by_name(tmp_path: Path, name: str) -> None:
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text("token = abc\n")
    with pytest.raises(ToolDeniedError, match="secret"):
        read(Workspace(tmp_path), name)


# --- where the harness writes a URL ----------------------------------------------------------------


def test_the_trace_masks_the_endpoints_password(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    writer = TraceWriter(path, "run-1")
    writer.emit(
        RunStarted(
            run_id="run-1", session_id="s", profile="explore", model_choice="light", model_used="light",
            model_id="m", endpoint="http://agent:pa55-w0rd-xyz@10.0.0.5:8080/v1", workspace="/w",
            system_prompt="sys", task="t",
        )
    )  # fmt: skip
    text = path.read_text()
    assert "pa55-w0rd-xyz" not in text and "agent:[REDACTED]@10.0.0.5" in text


def test_the_adapters_errors_mask_the_endpoints_password() -> None:
    model = OpenAIChatModel(
        base_url="http://agent:pa55-w0rd-xyz@127.0.0.1:9/v1", model="m", max_retries=0, timeout_s=2.0
    )
    request = ModelRequest(messages=[Message(role="user", content="hi")], phase="final", timeout_s=2.0)
    with pytest.raises(ModelCallError) as failure:
        model.complete(request)
    assert "pa55-w0rd-xyz" not in str(failure.value) and "[REDACTED]" in str(failure.value)
