"""Issue 39 (hardening round two): hostile numbers, quadratic text work, retry storms.

Each test here failed on ``c66a494``: a 5,001-digit evidence line ended the run ``crashed``; the
URL-password mask and the first-search picker grew quadratically with their input; the endpoint
pool retried a replica that asked for 30 s at once.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import LOGIN_ANSWER, LauncherFactory

from redteam.support import GOOD, FakeOpenAI, Reply, answer, chat
from subagent_lab.agents.launcher import SubagentRequest
from subagent_lab.core.contracts import ground_evidence, parse_contract, parse_evidence
from subagent_lab.core.model import ModelCallError
from subagent_lab.core.types import Message, ModelRequest
from subagent_lab.models.openai_chat import OpenAIChatModel
from subagent_lab.models.pool import EndpointPool
from subagent_lab.models.scripted import final

HUGE = "9" * 5001


# --- hostile numbers ------------------------------------------------------------------------------


def test_a_5001_digit_line_number_is_a_contract_error_with_a_repair_message() -> None:
    check = parse_contract(json.dumps({**LOGIN_ANSWER, "evidence": [f"app/auth.py:{HUGE}"]}), "ExploreResult")
    assert not check.valid
    assert any("line number" in e and "digits" in e for e in check.errors), check.errors
    assert parse_evidence(f"app/auth.py:1-{HUGE}") is None  # never an int() past Python's limit
    (check_one,) = ground_evidence([f"app/auth.py:{HUGE}"], Path("/nonexistent"))
    assert not check_one.grounded and check_one.reason == "malformed"


def test_a_child_answering_a_5001_digit_line_is_repaired_not_crashed(make_launcher: LauncherFactory) -> None:
    launcher, _ = make_launcher(
        [final({**LOGIN_ANSWER, "evidence": [f"app/auth.py:{HUGE}"]}), final(LOGIN_ANSWER)]
    )
    result = launcher.launch(SubagentRequest(task="Find where login is implemented."))
    assert result.terminal_reason == "completed", (result.terminal_reason, result.detail)
    assert "digits" in Path(result.trace_path).read_text()  # the repair message named the problem


# --- linear text work -----------------------------------------------------------------------------

SIZES = (1 << 10, 1 << 14, 1 << 18, 1 << 22)
"""1 KB to 4 MB: a quadratic pass that takes 1 ms at 16 KB takes 65 s at 4 MB."""
GROWTH_LIMIT = 4.0
"""Allowed excess over linear growth from one size to the next (x16 in size): generous for a
shared runner's noise; a quadratic pass grows 16x more than linear."""
REDACT = "from subagent_lab.core.redact import Redactor; f = Redactor()"
LOCATION = "from subagent_lab.models.baseline import LOCATION; f = LOCATION.findall"
PICKER = "from subagent_lab.tools.search_words import _candidates; f = lambda s: _candidates(s, '')"
ATTACKS = {
    # the URL-password mask retried at every letter of a long scheme-like word, or user part
    "url_scheme": (REDACT, "'a' * (n // 2) + '://' + 'b' * (n // 2)"),
    "url_user": (REDACT, "'x://a:' * (n // 6)"),
    # detect-secrets' npm, JWT and OpenAI regexes, and the split-literal shape
    "npm_slashes": (REDACT, "'/' * n + ':_authToken='"),
    "jwt_run": (REDACT, "'eyJ-' * (n // 4)"),
    "openai_run": (REDACT, "'sk-' * (n // 3) + 'T3BlbkFJ'"),
    "split_literal": (REDACT, """'ghp_' + '" "' * (n // 3)"""),
    # the first-search picker on a task that is one long word (no dot: every retry fails)
    "picker_word": (PICKER, "'a' * n"),
    "picker_dots": (PICKER, "'a1' * (n // 2) + '.'"),
    # the baselines' `path:line` finder on a prompt or tool result: its lookbehind starts a match
    # only where a run of path characters starts, so each run is walked once
    "location_path": (LOCATION, "'a.' * (n // 2)"),
    "location_ranges": (LOCATION, "'a.b:1-' * (n // 6)"),
    "location_digits": (LOCATION, "'a.py:' + '1' * n"),
}
_TIMER = """
import json, sys, time
{setup}
t = lambda n: {text}
f(t(4096))  # compile and warm up
for n in {sizes}:
    text = t(n)
    runs = []
    for _ in range(3 if n < (1 << 20) else 2):
        start = time.perf_counter(); f(text); runs.append(time.perf_counter() - start)
    print(json.dumps([n, min(runs)]), flush=True)
"""


def _timings(setup: str, text: str, budget_s: float) -> list[tuple[int, float]]:
    """(size, seconds) for each size, timed in a child process killed after ``budget_s`` (a regex
    holds the GIL: a quadratic one cannot be interrupted from this process)."""
    import subprocess
    import sys

    import subagent_lab

    env = {"PYTHONPATH": str(Path(subagent_lab.__file__).parent.parent), "PATH": "/usr/bin:/bin"}
    code = _TIMER.format(setup=setup, text=text, sizes=SIZES)
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        out, err = proc.communicate(timeout=budget_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    rows = [tuple(json.loads(line)) for line in out.splitlines() if line.startswith("[")]
    assert proc.returncode == 0 or rows, err[-2000:]
    return [(int(n), float(s)) for n, s in rows]


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_text_work_grows_linearly_from_1kb_to_4mb(attack: str) -> None:
    timings = _timings(*ATTACKS[attack], budget_s=60)
    assert len(timings) == len(SIZES), f"{attack}: did not finish 4 MB in 60 s: {timings}"
    for (n1, t1), (n2, t2) in itertools.pairwise(timings):
        allowed = GROWTH_LIMIT * (n2 / n1) * max(t1, 0.01)  # a floor: tiny timings are all noise
        assert t2 <= allowed, f"{attack}: {timings} grows faster than linear ({n1} -> {n2} bytes)"


# --- retry storms ---------------------------------------------------------------------------------

ERR = {"error": {"message": "slow down"}}
REQUEST = ModelRequest(messages=[Message(role="user", content="Where is login?")], phase="final", timeout_s=4)


def _pool(*fakes: FakeOpenAI) -> EndpointPool:
    members = [
        (f.url, OpenAIChatModel(base_url=f.url, model="fake", max_retries=0, timeout_s=5), 2) for f in fakes
    ]
    return EndpointPool(members, backoff_s=0.05, max_backoff_s=0.2)


def _http_date(seconds_ahead: float) -> str:
    import email.utils

    return email.utils.formatdate(time.time() + seconds_ahead, usegmt=True)


@pytest.mark.parametrize("retry_after", ["30", "date"])
def test_replicas_asking_for_30_s_get_one_request_each_within_a_4_s_run(retry_after: str) -> None:
    def busy(body: dict[str, Any], headers: dict[str, str]) -> Reply:
        value = _http_date(30) if retry_after == "date" else "30"
        return Reply(429, ERR, {"Retry-After": value})

    with FakeOpenAI(default=busy) as one, FakeOpenAI(default=busy) as two:
        started = time.monotonic()
        with pytest.raises(ModelCallError, match="no time left"):
            _pool(one, two).complete(REQUEST)
        elapsed = time.monotonic() - started
        counts = len(one.requests), len(two.requests)
    assert counts == (1, 1), counts  # c66a494: 8 requests in 4 s (its own jittered backoff)
    assert elapsed < 2.0  # gives up at once: waiting 30 s cannot fit in the run


@pytest.mark.parametrize("retry_after", ["1.2", "date"])
def test_a_short_retry_after_is_waited_for_then_the_call_completes(retry_after: str) -> None:
    stamps: list[float] = []

    def first_busy(body: dict[str, Any], headers: dict[str, str]) -> Reply:
        stamps.append(time.monotonic())
        if len(stamps) == 1:
            return Reply(429, ERR, {"Retry-After": _http_date(2) if retry_after == "date" else retry_after})
        return Reply(200, chat(answer(GOOD)))

    with FakeOpenAI(default=first_busy) as only:
        response = _pool(only).complete(REQUEST)
    assert response.parse_ok and len(stamps) == 2
    assert stamps[1] - stamps[0] >= 1.0, stamps  # c66a494: retried after its own 0-0.05 s jitter
