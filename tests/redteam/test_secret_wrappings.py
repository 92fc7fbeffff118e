"""Issue 39: secrets by content in every wrapping, and the credential stores still readable.

On ``c66a494``: a service-account key base64-encoded at two of the three byte alignments was
readable and reached the trace; tokens split across two adjacent string literals (GitHub, AWS)
and Slack ``xapp-`` / ``xoxe-`` tokens were not masked; ``.dockerconfigjson``, ``secrets.yaml``,
``secrets.json`` and ``.git/config`` (a token in a remote URL) were readable; a hard link inside
the workspace to a file outside it was read like any file.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from subagent_lab.core.redact import Redactor
from subagent_lab.core.tool import ToolDeniedError
from subagent_lab.tools.glob import glob
from subagent_lab.tools.grep import grep
from subagent_lab.tools.read import read
from subagent_lab.workspace.sandbox import Workspace

PEM = (
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n-----END PRIVATE KEY-----\n"
)
SERVICE_ACCOUNT = json.dumps(
    {"type": "service_account", "project_id": "acme-prod", "private_key_id": "1f" * 20,
     "private_key": PEM, "client_email": "deploy@acme-prod.iam.gserviceaccount.com"},
)  # fmt: skip
KEY_PIECE = "MIIEvQIBADANBgkqhkiG9w0B"


def _b64_at(shift: int) -> str:
    """The service account base64-encoded whole, with ``shift`` bytes before it (alignment 0-2)."""
    return base64.b64encode(b"#" * shift + SERVICE_ACCOUNT.encode()).decode()


def _key_visible(text: str, shift: int) -> bool:
    """Whether the key can be recovered from ``text``: any base64 of the blob's key part survives."""
    blob = _b64_at(shift)
    start = blob.index(base64.b64encode(b"#" * shift + SERVICE_ACCOUNT.encode())[0:4].decode())
    middle = blob[len(blob) // 2 : len(blob) // 2 + 24]  # inside the key's body
    return middle in text or blob[start:][200:230] in text


@pytest.mark.parametrize("shift", [0, 1, 2])
@pytest.mark.parametrize("encoding", ["plain", "json"])
def test_a_base64_service_account_is_masked_at_every_alignment(shift: int, encoding: str) -> None:
    text = f"GOOGLE_CREDENTIALS_B64: {_b64_at(shift)}\nnext: value\n"
    form = json.dumps(text) if encoding == "json" else text
    masked = Redactor()(form)
    assert "[REDACTED]" in masked and not _key_visible(masked, shift), masked[:300]
    assert "next: value" in (json.loads(masked) if encoding == "json" else masked)


@pytest.mark.parametrize("shift", [0, 1, 2])
def test_a_base64_service_account_file_is_not_readable_nor_searchable(tmp_path: Path, shift: int) -> None:
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "values.yaml").write_text(f"name: app\ncredentials: {_b64_at(shift)}\n")
    (tmp_path / "app.py").write_text("name = 'app'\n")
    ws = Workspace(tmp_path)
    with pytest.raises(ToolDeniedError, match="private key"):
        read(ws, "deploy/values.yaml")
    found = grep(ws, "name").text
    assert "app.py" in found and "values.yaml" not in found


SPLIT = {
    "github-adjacent": ('TOKEN = "ghp_0123456789abcdef" "ghijklmnopqrstuvwx"\n', "ghijklmnopqrstuvwx"),
    "github-plus": ("token = 'ghp_0123456789' + 'abcdefghijklmnopqrstuv'\n", "abcdefghijklmnopqrstuv"),
    "aws-adjacent": ('KEY_ID = ("AKIAIOSF" "ODNN7EXAMPLE")\n', "ODNN7EXAMPLE"),
    "aws-next-line": ('KEY_ID = (\n    "AKIAIOSF"\n    "ODNN7EXAMPLE"\n)\n', "ODNN7EXAMPLE"),
    "aws-read-lines": ('  12\tKEY_ID = (\n  13\t    "AKIAIOSF"\n  14\t    "ODNN7EXAMPLE"\n', "ODNN7EXAMPLE"),
    "slack-xapp": ("SLACK_APP = xapp-1-A0123456789-0123456789012-abcdef0123456789\n", "0123456789012-abcdef"),
    "slack-xoxe": ("refresh: xoxe-1-My0xLTM0NTY3ODkwMTIzNC1hYmNkZWZnaGlqa2xt\n", "My0xLTM0NTY3ODkw"),
    "slack-xoxe-xoxp": ("cfg: xoxe.xoxp-1-Mi0yLTM0NTY3ODkwMTIzNC1hYmNk\n", "Mi0yLTM0NTY3ODkw"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SPLIT))
@pytest.mark.parametrize("encoding", ["plain", "json", "json-in-json"])
def test_split_and_new_token_shapes_are_masked(name: str, encoding: str) -> None:
    text, rest = SPLIT[name]
    form = {"plain": text, "json": json.dumps(text), "json-in-json": json.dumps(json.dumps(text))}[encoding]
    masked = Redactor()(form)
    assert rest not in masked and "[REDACTED]" in masked, masked
    if encoding != "plain":
        json.loads(masked)


def test_ordinary_adjacent_literals_are_untouched() -> None:
    text = 'msg = ("ghost " "town")\nname = "AKIA" + suffix\nx = "gh" "p"\n'
    assert Redactor()(text) == text


CREDENTIAL_STORES = [
    ".dockerconfigjson", "deploy/.dockerconfigjson", "secrets.yaml", "config/secrets.yml", "secrets.json",
    "helm/secrets.prod.yaml", "app.secrets.json", ".git/config", "vendor/lib/.git/config",
    ".config/containers/auth.json", "config/master.key",
]  # fmt: skip


@pytest.mark.parametrize("name", CREDENTIAL_STORES)
def test_credential_stores_are_secret_by_name(tmp_path: Path, name: str) -> None:
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text('[remote "origin"]\n\turl = https://x-access-token:t0ken@github.com/a/b\n')
    ws = Workspace(tmp_path)
    with pytest.raises(ToolDeniedError, match="secret"):
        read(ws, name)
    assert name not in glob(ws, "**/*", max_results=500).text.split("\n")


def test_git_objects_and_ordinary_config_files_stay_readable(tmp_path: Path) -> None:
    for name in ("config.yaml", "app/config", "settings.json", "secrets_manager.py", ".git/HEAD"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
        assert "x = 1" in read(Workspace(tmp_path), name)


def test_a_hard_link_to_a_file_outside_is_not_read_nor_searched(tmp_path: Path) -> None:
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "canary.txt").write_text("CANARY-7f3a host secret\n")
    ws_root = tmp_path / "ws"
    ws_root.mkdir()
    (ws_root / "notes.txt").write_text("ordinary\n")
    os.link(outside / "canary.txt", ws_root / "notes-link.txt")
    ws = Workspace(ws_root)
    with pytest.raises(ToolDeniedError, match="hard link"):
        read(ws, "notes-link.txt")
    assert "CANARY-7f3a" not in grep(ws, "host secret|ordinary").text
    with pytest.raises(ToolDeniedError, match="hard link"):
        grep(ws, "host", path="notes-link.txt")
