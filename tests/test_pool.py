"""The endpoint pool against fake OpenAI-compatible servers answering 429 and 500 (127.0.0.1 only)."""

from __future__ import annotations

import json
import random
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import REPO

from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.model import ModelCallError
from subagent_lab.core.types import Message, ModelRequest, ModelResponse
from subagent_lab.local_models.factory import default_model_factory
from subagent_lab.local_models.namespace import config_namespace
from subagent_lab.local_models.weights import spec_for
from subagent_lab.models.openai_chat import OpenAIChatModel
from subagent_lab.models.pool import EndpointPool, failure_status, pooled_factory

sys.path.insert(0, str(REPO / "benchmarks"))
from fake_endpoint import FakeEndpoint

REQUEST = ModelRequest(
    messages=[Message(role="user", content="Where is `safe_load` defined?")], phase="final", timeout_s=20
)  # no schema: the fake answers its scripted first action as plain text


def _adapter(url: str) -> OpenAIChatModel:
    return OpenAIChatModel(base_url=url, model="fake", max_retries=0, timeout_s=10)


def _pool(*fakes: FakeEndpoint, limit: int = 4, **kwargs: float) -> EndpointPool:
    members = [(f.url, _adapter(f.url), limit) for f in fakes]
    return EndpointPool(members, backoff_s=0.01, max_backoff_s=0.05, rng=random.Random(0), **kwargs)  # type: ignore[arg-type]


def test_429_backs_off_and_retries_on_the_same_endpoint_which_stays_in() -> None:
    with FakeEndpoint(statuses=(429, 429, 200), max_requests=30, max_seconds=30) as busy:
        pool = _pool(busy, down_after=1)
        response = pool.complete(REQUEST)
        again = pool.complete(REQUEST)
    assert json.loads(response.text) == {"thought": "", "tool": "Grep", "pattern": "safe_load"}
    assert response.attempts == 3 and again.attempts == 3  # two 429s, then the answer
    (stats,) = pool.stats()
    assert stats["statuses"] == {"429": 4} and stats["removals"] == 0 and not stats["down"]


def test_a_replica_answering_500_is_taken_out_and_its_calls_go_to_the_other() -> None:
    with (
        FakeEndpoint(statuses=(500,), max_requests=100, max_seconds=30) as down,
        FakeEndpoint(max_requests=100, max_seconds=30) as good,
    ):
        pool = _pool(down, good, down_after=2, cooldown_s=60)
        responses = [pool.complete(REQUEST) for _ in range(10)]
        assert all(r.parse_ok for r in responses)
        by_url = {s["endpoint"]: s for s in pool.stats()}
        assert by_url[down.url]["down"] and by_url[down.url]["removals"] == 1
        assert down.answered == {500: 2}  # tried twice, then out: no more calls while it cools down
        assert good.answered == {200: 10}
        assert sum(r.attempts for r in responses) == 12  # the two failed attempts stay counted


def test_every_endpoint_down_fails_retryable_within_the_deadline() -> None:
    with (
        FakeEndpoint(statuses=(500,), max_requests=100, max_seconds=30) as a,
        FakeEndpoint(statuses=(503,), max_requests=100, max_seconds=30) as b,
    ):
        pool = _pool(a, b, down_after=100, max_attempts=6)
        with pytest.raises(ModelCallError) as info:
            pool.complete(REQUEST)
    assert info.value.retryable and info.value.attempts == 6
    assert "endpoint pool" in str(info.value) and failure_status(info.value) in (500, 503)
    assert a.answered[500] == 3 and b.answered[503] == 3  # alternated: a retry goes to the other


def test_concurrency_limit_per_endpoint_holds_under_load() -> None:
    with (
        FakeEndpoint(max_requests=100, max_seconds=30, delay_s=0.05) as one,
        FakeEndpoint(max_requests=100, max_seconds=30, delay_s=0.05) as two,
    ):
        pool = _pool(one, two, limit=2)
        with ThreadPoolExecutor(max_workers=8) as threads:
            responses = list(threads.map(lambda _: pool.complete(REQUEST), range(16)))
    assert len(responses) == 16 and all(r.parse_ok for r in responses)
    assert one.max_in_flight <= 2 and two.max_in_flight <= 2
    assert one.answered[200] >= 4 and two.answered[200] >= 4  # spread over both


class _Spent:
    """A member whose calls fail after the server likely computed them (e.g. a timeout)."""

    def __init__(self, then: ModelResponse | None = None) -> None:
        self.then = then
        self.calls = 0

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.then is not None and self.calls > 1:
            return self.then.model_copy()
        raise ModelCallError("model endpoint x timed out", retryable=True, spent_attempts=1)


def test_attempts_that_cost_tokens_stay_charged_and_bound_the_retries() -> None:
    pool = EndpointPool([("a", _Spent(), 1), ("b", _Spent(), 1)], backoff_s=0.0, rng=random.Random(0))
    with pytest.raises(ModelCallError) as info:
        pool.complete(REQUEST.model_copy(update={"max_spent_attempts": 1}))
    assert info.value.spent_attempts == 2 and info.value.attempts == 2  # the budget affords no third
    recovering = EndpointPool([("a", _Spent(then=ModelResponse(text="ok")), 1)], backoff_s=0.0)
    response = recovering.complete(REQUEST)
    assert response.text == "ok" and response.spent_attempts == 1 and response.attempts == 2


def test_pooled_factory_shares_one_pool_per_model_and_leaves_plain_models_alone(config: LabConfig) -> None:
    with (
        FakeEndpoint(max_requests=10, max_seconds=30) as a,
        FakeEndpoint(max_requests=10, max_seconds=30) as b,
    ):
        main = config.models["main"]
        assert main is not None
        pooled = main.model_copy(
            update={"base_url": a.url, "model": "fake", "endpoints": {a.url: 1, b.url: 3}}
        )
        plain = main.model_copy(update={"base_url": a.url, "model": "fake"})
        make = pooled_factory(config, default_model_factory(config))
        first, second = make("main", pooled), make("main", pooled)
        assert isinstance(first, EndpointPool) and first is second
        assert [(m.name, m.limit) for m in first.members] == [(a.url, 1), (b.url, 3)]
        assert all(isinstance(m.model, OpenAIChatModel) and m.model.max_retries == 0 for m in first.members)
        assert isinstance(make("main", plain), OpenAIChatModel)
        assert first.complete(REQUEST).parse_ok


# --- the call cache's namespace (what a pool's replicas and a moved server share) ------------------


def test_cache_namespace_is_the_weights_hash_when_known_else_the_endpoints(config: LabConfig) -> None:
    main = config.models["main"]
    assert main is not None and main.base_url is None  # the embedded server's model
    ns = config_namespace(config, main)
    assert ns.startswith(f"weights-sha256:{spec_for(main.model).sha256}|")
    moved = config.model_copy(update={"server": config.server.model_copy(update={"port": 9999})})
    assert config_namespace(moved, main) == ns  # another port, the same weights: the same answers
    assert config_namespace(config, main.model_copy(update={"tool_protocol": "native"})) != ns
    remote = main.model_copy(update={"base_url": "http://gpu-0:8000/v1", "model": "main"})
    assert config_namespace(config, remote) == "http://gpu-0:8000/v1|main"  # as before
    pool = remote.model_copy(update={"endpoints": {"http://b:8000/v1": 1, "http://a:8000/v1": 2}})
    assert config_namespace(config, pool) == "http://a:8000/v1|http://b:8000/v1|main"
    unknown = main.model_copy(update={"model": "not-shipped"})
    assert config_namespace(config, unknown) == f"{config.server.base_url}|not-shipped"
