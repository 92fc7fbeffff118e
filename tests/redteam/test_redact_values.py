"""Issue 52, items 5 and 17: redaction masks values, never the serialized line; more token shapes.

Item 5: on ``3cb5cb3`` the trace writer masked the JSON text of each event, and the split-token
rule (a token across adjacent string literals) matched across JSON strings too: ``{"k": "ghp_abc",
"def": 1}`` became ``{"k":"[REDACTED]":1}``, a line the project's own reader rejects, and list items
merged into one. Now every string inside the event is masked on its own (``Redactor.json_line``),
a token split across two adjacent list items is masked in both, and the line keeps its structure.

Item 17: an AWS secret access key split across two literals, and prefixed tokens written after an
identifier's underscore (``GITHUB_TOKEN_ghp_...``) or of services the redactor did not know
(DigitalOcean, Shopify, Docker Hub, Grafana, Google OAuth, Atlassian, GitLab's routable tokens ...),
stayed unmasked.
"""

from __future__ import annotations

import itertools
import json
import re
import string
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subagent_lab.core.redact import REDACTED, Redactor, mask_shapes
from subagent_lab.core.trace import ToolStarted, TraceWriter, read_trace

ALNUM = string.ascii_letters + string.digits
FILLER = st.text(alphabet=" \",:\\{}[]abcXYZ019'+()\n\t", max_size=12)
"""Text around planted secrets: JSON's own punctuation, escapes and the split rule's separators,
and no letters that could start a token prefix."""
SECRETS = st.one_of(
    st.text(ALNUM, min_size=36, max_size=36).map(lambda b: "ghp_" + b),
    st.text(string.ascii_uppercase + string.digits, min_size=16, max_size=16).map(lambda b: "AKIA" + b),
    st.text(ALNUM, min_size=20, max_size=30).map(lambda b: "glpat-" + b),
    st.text(ALNUM, min_size=24, max_size=24).map(lambda b: "xoxb-1234567890-" + b),
    st.text(ALNUM + "_-", min_size=40, max_size=48).map(lambda b: "sk-proj-" + b),
)
PLANTED = re.compile(r"(?:ghp_|AKIA|glpat-|xoxb-|sk-proj-)[A-Za-z0-9_\-]+")
STRINGS = st.one_of(FILLER, st.tuples(FILLER, SECRETS, FILLER).map(lambda t: f"{t[0]} {t[1]} {t[2]}"))
SPLIT = st.tuples(FILLER, SECRETS, st.integers(5, 30), FILLER).map(
    lambda t: [f"{t[0]} {t[1][: t[2]]}", f"{t[1][t[2] :]} {t[3]}"]
)
"""Two adjacent list items with a secret split between them."""


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    items = st.lists(children, max_size=3)
    lists = st.tuples(items, st.lists(SPLIT, max_size=2), items).map(
        lambda t: [*t[0], *(x for pair in t[1] for x in pair), *t[2]]
    )
    return lists | st.dictionaries(STRINGS, children, max_size=4)


PAYLOADS = st.recursive(STRINGS | st.integers() | st.none() | st.booleans(), _extend, max_leaves=25)


def _shape(value: Any) -> Any:
    """The structure without its text: containers, their sizes and order, non-string scalars."""
    if isinstance(value, dict):
        return ["dict", [_shape(v) for v in value.values()]]
    if isinstance(value, list):
        return ["list", [_shape(v) for v in value]]
    return "str" if isinstance(value, str) else value


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def _splits(value: Any) -> list[str]:
    """The first halves of secrets split across adjacent items (they carry the prefix)."""
    found = []
    if isinstance(value, dict):
        return [s for v in value.values() for s in _splits(v)]
    if isinstance(value, list):
        for first, second in itertools.pairwise(value):
            if isinstance(first, str) and isinstance(second, str):
                tail = re.search(r"(?:ghp_|AKIA|glpat-|xoxb-|sk-proj-)[A-Za-z0-9_\-]*\Z", first)
                if tail and PLANTED.fullmatch(tail.group() + re.match(r"[A-Za-z0-9_\-]*", second).group()):  # type: ignore[union-attr]
                    found.append(tail.group())
        found += [s for v in value for s in _splits(v)]
    return found


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=PAYLOADS)
def test_redaction_keeps_every_line_valid_json_and_every_item_apart(payload: Any) -> None:
    redactor = Redactor()
    line = json.dumps({"payload": payload}, ensure_ascii=False, separators=(",", ":"))
    masked = redactor.json_line(line)
    value = json.loads(masked)["payload"]  # valid JSON
    assert _shape(value) == _shape(payload)  # no list items merged, no keys lost
    secrets = {s for text in _strings(payload) for s in PLANTED.findall(text)}
    assert not [s for s in secrets if s in masked], masked
    assert not [s for s in _splits(payload) if s in masked], masked
    # ... and the project's own reader takes the line the trace writer makes of it
    with tempfile.TemporaryDirectory() as tmp:
        writer = TraceWriter(Path(tmp) / "t.jsonl", "r", redactor=redactor)
        writer.emit(ToolStarted(run_id="r", call_id="c", tool="Grep", arguments={"payload": payload}))
        writer.close()
        (event,) = read_trace(Path(tmp) / "t.jsonl")
    assert isinstance(event, ToolStarted) and _shape(event.arguments["payload"]) == _shape(payload)


@pytest.mark.parametrize(
    "payload",
    [
        {"k": "ghp_abc", "def": 1},  # the split rule reached across `","` into the next key
        {"t": "see ghp_abcdefgh", "u": "ijklmnop"},
        {"items": ["x AKIAIOSF", 1, "ODNN7EXAMPLE y"]},
        {"items": ["AKIAIOSF", "ODNN7EXAMPLE", "z"]},
    ],
)
def test_lines_the_old_rule_broke_stay_valid(payload: dict[str, Any], tmp_path: Path) -> None:
    line = json.dumps(payload, separators=(",", ":"))
    masked = Redactor().json_line(line)
    assert _shape(json.loads(masked)) == _shape(payload)
    writer = TraceWriter(tmp_path / "t.jsonl", "r")
    writer.emit(ToolStarted(run_id="r", call_id="c", tool="Grep", arguments=payload))
    writer.close()
    (event,) = read_trace(tmp_path / "t.jsonl")
    assert isinstance(event, ToolStarted) and _shape(event.arguments) == _shape(payload)


def test_a_token_split_across_two_items_is_masked_in_both() -> None:
    out = Redactor().data({"evidence": ["key: AKIAIOSF", "ODNN7EXAMPLE (line 4)", "app/auth.py:4"]})
    assert out == {"evidence": ["key: " + REDACTED, REDACTED + " (line 4)", "app/auth.py:4"]}


def test_configured_values_with_json_characters_are_masked_in_values() -> None:
    value = 'pa"ss,wo\\rd-1234'
    line = json.dumps({"text": f"password is {value}.", "list": [value, "ok"]}, separators=(",", ":"))
    masked = Redactor(extra_values=[value]).json_line(line)
    assert json.loads(masked) == {"text": f"password is {REDACTED}.", "list": [REDACTED, "ok"]}


def test_keys_masked_alike_stay_two_keys() -> None:
    a, b = "ghp_" + "a" * 36, "ghp_" + "b" * 36
    out = Redactor().data({a: 1, b: 2})
    assert list(out.values()) == [1, 2] and all(a not in k and b not in k for k in out)


def _token(prefix: str, size: int, chars: str = ALNUM) -> str:
    return prefix + "".join(chars[(i * 7 + 3) % len(chars)] for i in range(size))


TOKENS = {
    "github": _token("ghp_", 36),
    "github fine-grained": _token("github_pat_11", 70, ALNUM + "_"),
    "openai project": _token("sk-proj-", 48, ALNUM + "_-"),
    "anthropic": _token("sk-ant-api03-", 90, ALNUM + "_-"),
    "gitlab": _token("glpat-", 20),
    "gitlab routable": _token("glpat-", 27) + ".01." + _token("", 9, string.ascii_lowercase),
    "gitlab deploy": _token("gldt-", 20),
    "slack bot": "xoxb-123456789012-1234567890123-" + _token("", 24),
    "hugging face": _token("hf_", 34),
    "npm": _token("npm_", 36),
    "pypi": _token("pypi-AgEIcHlwaS5vcmc", 50),
    "digitalocean": _token("dop_v1_", 64, "abcdef0123456789"),
    "shopify": _token("shpat_", 32, "abcdef0123456789"),
    "docker hub": _token("dckr_pat_", 27, ALNUM + "_-"),
    "grafana": _token("glc_", 40),
    "google oauth": _token("ya29.", 60, ALNUM + "_-"),
    "square": _token("sq0atp-", 22, ALNUM + "_-"),
    "atlassian": _token("ATATT3xFfGF0", 60, ALNUM + "_-"),
    "linear": _token("lin_api_", 40),
    "age": _token("AGE-SECRET-KEY-1", 58, string.ascii_uppercase + string.digits),
}
CONTEXTS = ["{t}", "TOKEN={t}", 'token: "{t}"', "GITHUB_TOKEN_{t}", "x_{t}", "'{t}',"]


@pytest.mark.parametrize("kind", sorted(TOKENS))
@pytest.mark.parametrize("context", CONTEXTS)
def test_prefixed_tokens_are_masked_whole(kind: str, context: str) -> None:
    token = TOKENS[kind]
    out = mask_shapes(context.format(t=token))
    leaked = [token[i : i + 8] for i in range(0, len(token) - 8, 4) if token[i : i + 8] in out]
    assert not leaked, out


AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    "text",
    [
        f'aws_secret_access_key = "{AWS_SECRET[:20]}" "{AWS_SECRET[20:]}"',
        f"AWS_SECRET_ACCESS_KEY = '{AWS_SECRET[:17]}' + '{AWS_SECRET[17:]}'",
        f'aws_secret_key = ("{AWS_SECRET[:10]}"\n    "{AWS_SECRET[10:30]}"\n    "{AWS_SECRET[30:]}")',
        json.dumps({"text": f'aws_secret_access_key = "{AWS_SECRET[:20]}" \\\n  "{AWS_SECRET[20:]}"'}),
    ],
)
def test_an_aws_secret_key_split_across_literals_is_masked(text: str) -> None:
    out = mask_shapes(text)
    assert AWS_SECRET[:8] not in out and AWS_SECRET[-8:] not in out and AWS_SECRET[18:26] not in out, out


@pytest.mark.parametrize(
    "text",
    ["task-list-identifier-abcdef", "my_ghost_protocol_handler", "keyboard_layout",
     "disk-partition-0123456789", "the hf_ prefix", "aws_region = 'eu-west-1'"],
)  # fmt: skip
def test_ordinary_words_are_left_alone(text: str) -> None:
    assert mask_shapes(text) == text
