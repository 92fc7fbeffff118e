"""An optional model-call cache keyed by the complete request.

Re-analysis and notebook re-execution cost nothing: an identical request (model, messages, tools,
parameters) returns the recorded response, flagged ``cache_hit`` so hits are a column in every
table, never hidden. Failed calls are never cached.

The model part of the key is a namespace the caller builds (``config_namespace``): the weights'
SHA-256 where they are known (the embedded models: the same weights behind any server, port or
alias share their answers), else the endpoint URL and model id (every replica URL of a pool).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

from subagent_lab.config.profiles import ModelConfig
from subagent_lab.core.model import Model
from subagent_lab.core.types import ModelRequest, ModelResponse


def weights_namespace(sha256: str, cfg: ModelConfig) -> str:
    """The namespace of a model whose weights are known: their hash and how the adapter renders
    requests (the tool protocol and the grammar change what the server is sent)."""
    return f"weights-sha256:{sha256}|{cfg.tool_protocol}|constrain={cfg.constrain_output}"


_KEY = re.compile(r"[0-9a-f]{64}")


def entry_path(cache_dir: str | Path, key: str) -> Path:
    """Where the response of request key ``key`` is stored under ``cache_dir``.

    Raises ValueError for a key that is not a SHA-256 hex digest (``request_key``'s form): a key
    from elsewhere (a cluster worker's reply) never becomes ``..`` or an absolute path.
    """
    if not _KEY.fullmatch(key):
        raise ValueError(f"cache key {key[:80]!r} is not a SHA-256 hex digest")
    return Path(cache_dir) / key[:2] / f"{key}.json"


def store_entry(cache_dir: str | Path, key: str, text: str) -> None:
    """Write one cache entry (write-then-rename, so a reader or a crash never sees half a file)."""
    path = entry_path(cache_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def request_key(namespace: str, request: ModelRequest) -> str:
    """SHA-256 over the namespace (``config_namespace``) and the whole request except its timeout."""
    body = request.model_dump(mode="json", exclude={"timeout_s"})
    blob = json.dumps({"ns": namespace, "request": body}, sort_keys=True, ensure_ascii=False)
    # surrogatepass: the same bytes as before for every request without a lone surrogate
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


class CachingModel:
    """Wraps a model; one JSON file per request key under ``cache_dir``."""

    def __init__(
        self, inner: Model, cache_dir: str | Path, namespace: str, *, keep_requests: bool = False
    ) -> None:
        self.inner = inner
        count = getattr(inner, "count_prompt", None)
        if callable(count):
            self.count_prompt = count  # exact counts stay exact behind the cache
        self.cache_dir = Path(cache_dir)
        self.namespace = namespace
        self.hits = 0
        self.misses = 0
        self.written: list[str] = []
        """Keys of the entries this wrapper wrote (a cluster worker sends them to the driver)."""
        self.requests: dict[str, str] | None = {} if keep_requests else None
        """With ``keep_requests``: key -> the request it was written for, as JSON (a cluster worker
        sends it with the entry: the driver checks the key against it)."""

    def _path(self, key: str) -> Path:
        return entry_path(self.cache_dir, key)

    def complete(self, request: ModelRequest) -> ModelResponse:
        key = request_key(self.namespace, request)
        path = self._path(key)
        if path.exists():
            try:
                cached = ModelResponse.model_validate_json(path.read_text(encoding="utf-8"))
            except ValueError:
                cached = None  # a torn cache file is a miss, and gets rewritten below
            if cached is not None:
                self.hits += 1
                return cached.model_copy(update={"cache_hit": True, "latency_s": 0.0, "attempts": 0})
        self.misses += 1
        response = self.inner.complete(request)
        store_entry(self.cache_dir, key, response.model_dump_json())
        self.written.append(key)
        if self.requests is not None:
            # json.dumps, not pydantic's: a lone surrogate (a non-UTF-8 file name) stays an escape
            self.requests[key] = json.dumps(request.model_dump(mode="json"))
        return response
