"""An endpoint pool: one model served by several OpenAI-compatible replicas (vLLM, llama-server).

``EndpointPool`` is a ``Model`` over several adapters. Each member has a concurrency limit (a
semaphore: at most that many requests in flight to it from this process, or from the whole
cluster when the limiter is a cluster-wide one); a call goes to the least loaded member that is up.
A 429 or a 5xx (or a refused connection, a timeout) backs off with full jitter and is retried,
on another member where there is one, within the call's deadline and its run's budget: attempts
that likely cost tokens stay charged (``spent_attempts`` adds up over members). A member that
fails ``down_after`` calls in a row (429s excepted: a busy server is up) is taken out of the pool
for ``cooldown_s``; its calls go to the others, and after the cooldown one call probes it again.
A member that answers with ``Retry-After`` (seconds or an HTTP date, on a 429 or a 503) gets no
call before that time: the call goes to another member, or waits for the first one free again
when the run's deadline allows it, and gives up at once when it does not.

The adapters do not retry themselves here (``max_retries=0``): the pool decides where a retry goes.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from subagent_lab.config.profiles import LabConfig, ModelConfig
from subagent_lab.core.model import Model, ModelCallError
from subagent_lab.core.tokens import TokenCount, estimate_count
from subagent_lab.core.types import ModelChoice, ModelRequest, ModelResponse

Limiter = Callable[[str, int], AbstractContextManager[bool]]
"""``limiter(name, limit)``: a context manager holding one of ``limit`` slots of endpoint ``name``
(entering may wait); it yields False when no slot came free in time. The default is a semaphore
per endpoint in this process; ``subagent_lab.experiments.cluster`` offers a cluster-wide one."""

_STATUS = re.compile(r"\bHTTP (\d{3}) from ")


def failure_status(exc: ModelCallError) -> int | None:
    """The HTTP status of a failed call, when the endpoint answered with one (None: no answer).

    The adapter names it in its message (``HTTP 503 from <url>: ...``); an exception that carries
    a ``status_code`` attribute wins over the message.
    """
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status
    found = _STATUS.search(str(exc))
    return int(found.group(1)) if found else None


class _LocalSlots:
    """One ``threading.BoundedSemaphore`` per endpoint name, created on first use."""

    def __init__(self, wait_s: float = 600.0) -> None:
        self._lock = threading.Lock()
        self._slots: dict[str, threading.BoundedSemaphore] = {}
        self.wait_s = wait_s

    @contextmanager
    def __call__(self, name: str, limit: int) -> Iterator[bool]:
        with self._lock:
            slot = self._slots.setdefault(name, threading.BoundedSemaphore(limit))
        got = slot.acquire(timeout=self.wait_s)
        try:
            yield got
        finally:
            if got:
                slot.release()


@dataclass
class _Member:
    name: str
    model: Model
    limit: int
    in_flight: int = 0
    failures: int = 0
    """Consecutive failed calls (429 excepted)."""
    down_until: float = 0.0
    """No call before this (``time.monotonic()``): taken out after failures, or asked to wait."""
    calls: int = 0
    errors: int = 0
    removals: int = 0
    statuses: dict[str, int] = field(default_factory=dict)


class EndpointPool:
    """A ``Model`` spreading calls over several endpoints of the same model (see the module doc)."""

    def __init__(
        self,
        members: Sequence[tuple[str, Model, int]],
        *,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        max_attempts: int = 8,
        down_after: int = 3,
        cooldown_s: float = 30.0,
        limiter: Limiter | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """``members``: (name, adapter, max concurrency); names are unique (usually the base URL)."""
        if not members:
            raise ValueError("an endpoint pool needs at least one endpoint")
        names = [name for name, _, _ in members]
        if len(set(names)) != len(names):
            raise ValueError(f"endpoint names must be unique, got {names}")
        self.members = [_Member(name, model, max(int(limit), 1)) for name, model, limit in members]
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_attempts = max_attempts
        self.down_after = down_after
        self.cooldown_s = cooldown_s
        self.limiter: Limiter = limiter or _LocalSlots()
        self._rng = rng or random.Random()
        self._lock = threading.Lock()

    # --- choosing a member -------------------------------------------------------------------

    def _pick(self, avoid: str | None) -> _Member | None:
        """The least loaded member that is up (not ``avoid`` when another is up); None: all down."""
        now = time.monotonic()
        with self._lock:
            up = [m for m in self.members if m.down_until <= now]
            if len(up) > 1 and avoid is not None:
                up = [m for m in up if m.name != avoid] or up
            if not up:
                return None
            best = min(up, key=lambda m: (m.in_flight / m.limit, m.calls))
            best.in_flight += 1
            best.calls += 1
            return best

    def _next_up_in(self) -> float:
        with self._lock:
            return max(min(m.down_until for m in self.members) - time.monotonic(), 0.0)

    def _done(self, member: _Member, error: ModelCallError | None) -> None:
        with self._lock:
            member.in_flight -= 1
            if error is None:
                member.failures = 0
                return
            member.errors += 1
            status = failure_status(error)
            label = str(status) if status is not None else "no answer"
            member.statuses[label] = member.statuses.get(label, 0) + 1
            wait = getattr(error, "retry_after_s", None)
            if isinstance(wait, (int, float)) and wait > 0 and status in (429, 503):
                # The server named when to come back: nothing is sent to it before then.
                member.down_until = max(member.down_until, time.monotonic() + float(wait))
            if status == 429:
                return  # busy, not down: back off, but keep it in the pool
            member.failures += 1
            if member.failures >= self.down_after:
                member.down_until = time.monotonic() + self.cooldown_s
                member.failures = self.down_after - 1  # after the cooldown, one more failure removes it
                member.removals += 1

    def stats(self) -> list[dict[str, Any]]:
        """Per member: calls, errors by status, times taken out, whether it is out now."""
        now = time.monotonic()
        with self._lock:
            return [
                {
                    "endpoint": m.name,
                    "max_concurrency": m.limit,
                    "calls": m.calls,
                    "errors": m.errors,
                    "statuses": dict(m.statuses),
                    "removals": m.removals,
                    "down": m.down_until > now,
                }
                for m in self.members
            ]

    # --- the Model protocol ------------------------------------------------------------------

    def count_prompt(self, request: ModelRequest) -> TokenCount:
        """The first member's count (every member serves the same model), else an estimate."""
        count = getattr(self.members[0].model, "count_prompt", None)
        return count(request) if callable(count) else estimate_count(request)

    def complete(self, request: ModelRequest) -> ModelResponse:
        started = time.monotonic()
        deadline = started + request.timeout_s
        attempts = spent = 0
        last: ModelCallError | None = None
        avoid: str | None = None
        while True:
            member = self._pick(avoid)
            if member is None:
                wait = self._next_up_in()
                if time.monotonic() + wait >= deadline:
                    why = "every endpoint of the pool is out"
                    if last is not None and getattr(last, "retry_after_s", None):
                        why = "no time left in the run for a retry (every endpoint asked to wait)"
                    raise self._give_up(last, why, attempts, spent, started)
                time.sleep(wait)
                continue
            error: ModelCallError | None = None
            try:
                with self.limiter(member.name, member.limit) as got:
                    if not got:
                        error = ModelCallError(
                            f"no free slot on {member.name} in time", retryable=True, attempts=0
                        )
                    else:
                        remaining = max(deadline - time.monotonic(), 0.001)
                        response = member.model.complete(request.model_copy(update={"timeout_s": remaining}))
            except ModelCallError as exc:
                error = exc
            finally:
                self._done(member, error)
            if error is None:
                response.attempts += attempts
                response.spent_attempts += spent
                response.latency_s = time.monotonic() - started
                return response
            attempts += error.attempts
            spent += error.spent_attempts
            last, avoid = error, member.name
            if not error.retryable:
                raise self._give_up(error, "", attempts, spent, started)
            if attempts >= self.max_attempts or spent > request.max_spent_attempts:
                raise self._give_up(error, f"gave up after {attempts} attempts", attempts, spent, started)
            # Full jitter: replicas hit by the same burst do not retry in step.
            pause = self._rng.uniform(0, min(self.max_backoff_s, self.backoff_s * 2 ** max(attempts - 1, 0)))
            if time.monotonic() + pause >= deadline:
                raise self._give_up(error, "no time left in the run for a retry", attempts, spent, started)
            time.sleep(pause)

    def _give_up(
        self, last: ModelCallError | None, why: str, attempts: int, spent: int, started: float
    ) -> ModelCallError:
        names = ", ".join(m.name for m in self.members)
        message = f"endpoint pool ({names}): {why + ': ' if why else ''}{last if last else 'no endpoint up'}"
        return ModelCallError(
            message,
            retryable=last.retryable if last is not None else True,
            attempts=attempts,
            latency_s=time.monotonic() - started,
            spent_attempts=spent,
        )


_POOLS: dict[tuple[Any, ...], EndpointPool] = {}
_ADAPTERS: dict[tuple[Any, ...], Model] = {}
_POOLS_LOCK = threading.Lock()


def pooled_factory(
    lab: LabConfig,
    inner: Callable[[ModelChoice, ModelConfig], Model],
    *,
    limiter: Limiter | None = None,
    share_adapters: bool = False,
) -> Callable[[ModelChoice, ModelConfig], Model]:
    """A model factory that serves a model with ``endpoints`` from an ``EndpointPool``.

    One pool per (model, endpoints) in a process, shared by all its runs, so the concurrency
    limits and the down state hold across runs. Models without ``endpoints`` come from ``inner``
    (the embedded engine's ``local_models.factory.default_model_factory(lab)`` where the caller
    has no other); each member adapter is made by it too, with the
    member's ``base_url`` and no retries of its own. ``share_adapters``: also make one model per
    configuration for the process's runs (a cluster worker: one adapter, its HTTP client and its
    kept-alive connections serve every run instead of being built for each).
    """
    make_one = inner

    def make(choice: ModelChoice, cfg: ModelConfig) -> Model:
        endpoints: dict[str, int] = cfg.endpoints
        # The embedded server's models are made per run: making one checks the server is up.
        if not endpoints and not (share_adapters and cfg.base_url is not None):
            return make_one(choice, cfg)
        key = (choice, cfg.model_dump_json(), id(limiter))
        with _POOLS_LOCK:
            if not endpoints:
                model = _ADAPTERS.get(key)
                if model is None:
                    model = _ADAPTERS[key] = make_one(choice, cfg)
                return model
            pool = _POOLS.get(key)
            if pool is None:
                members = [
                    (url, make_one(choice, cfg.model_copy(update={"base_url": url, "max_retries": 0})), limit)
                    for url, limit in endpoints.items()
                ]
                pool = _POOLS[key] = EndpointPool(members, limiter=limiter)
        return pool

    return make
