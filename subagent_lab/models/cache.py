"""An optional model-call cache keyed by the complete request.

Re-analysis and notebook re-execution cost nothing: an identical request (endpoint, model,
messages, tools, parameters) returns the recorded response, flagged ``cache_hit`` so hits are a
column in every table, never hidden. Failed calls are never cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from subagent_lab.core.model import Model
from subagent_lab.core.types import ModelRequest, ModelResponse


def request_key(namespace: str, request: ModelRequest) -> str:
    """SHA-256 over the namespace (endpoint + model id) and the whole request except its timeout."""
    body = request.model_dump(mode="json", exclude={"timeout_s"})
    blob = json.dumps({"ns": namespace, "request": body}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CachingModel:
    """Wraps a model; one JSON file per request key under ``cache_dir``."""

    def __init__(self, inner: Model, cache_dir: str | Path, namespace: str) -> None:
        self.inner = inner
        count = getattr(inner, "count_prompt", None)
        if callable(count):
            self.count_prompt = count  # exact counts stay exact behind the cache
        self.cache_dir = Path(cache_dir)
        self.namespace = namespace
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.json"

    def complete(self, request: ModelRequest) -> ModelResponse:
        path = self._path(request_key(self.namespace, request))
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
        path.parent.mkdir(parents=True, exist_ok=True)
        # Write-then-rename so a concurrent reader or a crash never sees half a file.
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(response.model_dump_json())
        os.replace(tmp, path)
        return response
