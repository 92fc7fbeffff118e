"""HTTP with an overall deadline and a size cap per call, for the model adapter's ``httpx`` client.

httpx's timeouts apply to each socket operation: a server that sends one byte a second answers
every read in time and keeps a call (and the run around it) alive as long as it likes. Here
every read, write and connect of a connection is given at most what is left until the calling
thread's deadline (``CallLimits.deadline``), so the whole exchange (connect, request, headers,
body) ends by then however the server paces its bytes; and the bytes read for one call are
counted, so a reply over ``CallLimits.max_bytes`` is cut off instead of being kept whole.

The limits are per thread: the adapter sets them before each attempt (``CallLimits.start``),
and a connection kept alive for the next call reads the next call's limits.
"""

from __future__ import annotations

import functools
import importlib
import math
import ssl
import threading
import time
from types import ModuleType
from typing import Any

DEFAULT_MAX_REPLY_BYTES = 8 * 1024 * 1024
"""The largest reply body (plus headers) one call may read: a chat completion is kilobytes."""


class CallLimits(threading.local):
    """The deadline and byte cap of the call in progress on this thread."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> None:
        self.max_bytes = max_bytes
        self.deadline = math.inf
        self.received = 0
        self.over = False
        """The last call was cut off at the byte cap."""
        self.expired = False
        """The last call ran into its deadline."""

    def start(self, deadline: float) -> None:
        """Limits for the next call on this thread: ``deadline`` (a ``time.monotonic`` value)."""
        self.deadline, self.received, self.over, self.expired = deadline, 0, False, False

    def clip(self, timeout: float | None, error: type[Exception]) -> float:
        """``timeout`` shortened to what is left of the call; ``error`` when nothing is left."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.expired = True
            raise error("the call's overall deadline passed")
        return left if timeout is None else min(timeout, left)

    def count(self, data: bytes, error: type[Exception]) -> None:
        self.received += len(data)
        if self.received > self.max_bytes:
            self.over = True
            raise error(f"the reply passed the {self.max_bytes:,}-byte cap")


class _Stream:
    """A network stream of the httpcore package ``core`` whose operations obey ``limits``."""

    def __init__(self, inner: Any, limits: CallLimits, core: ModuleType) -> None:
        self._inner, self._limits, self._core = inner, limits, core

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data: bytes = self._inner.read(max_bytes, self._limits.clip(timeout, self._core.ReadTimeout))
        self._limits.count(data, self._core.ReadError)
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._limits.clip(timeout, self._core.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> _Stream:
        clipped = self._limits.clip(timeout, self._core.ConnectTimeout)
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, clipped), self._limits, self._core)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend:
    """httpcore's synchronous network backend, every connection a ``_Stream``."""

    def __init__(self, limits: CallLimits, core: ModuleType) -> None:
        self._inner, self._limits, self._core = core.SyncBackend(), limits, core

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
        socket_options: Any = None,
    ) -> _Stream:  # fmt: skip
        clipped = self._limits.clip(timeout, self._core.ConnectTimeout)
        stream = self._inner.connect_tcp(host, port, clipped, local_address, socket_options)
        return _Stream(stream, self._limits, self._core)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> _Stream:
        clipped = self._limits.clip(timeout, self._core.ConnectTimeout)
        return _Stream(
            self._inner.connect_unix_socket(path, clipped, socket_options), self._limits, self._core
        )

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


@functools.lru_cache(maxsize=1)
def openai_http_package() -> str:
    """The httpx package the installed ``openai`` client is built on (``httpx``, or a fork such
    as ``httpx2``): the client handed to it must be one of that package's."""
    import openai

    for cls in openai.DefaultHttpxClient.__mro__:
        root = cls.__module__.split(".")[0]
        if root.startswith("httpx"):
            return root
    return "httpx"


@functools.lru_cache(maxsize=4)
def _tls_context(package: str) -> ssl.SSLContext:
    """The TLS context of every client of the httpx package ``package`` in this process: httpx's
    default, made once (loading the CA certificates costs more CPU than a fast model call)."""
    context: ssl.SSLContext = importlib.import_module(package).create_ssl_context()
    return context


def bounded_client(limits: CallLimits, *, timeout: float, package: str = "httpx") -> Any:
    """A ``Client`` of the httpx package ``package`` whose connections obey ``limits``.

    Proxies from the environment are not used (a model endpoint is reached directly; a
    proxy's connection would not be bounded) and redirects are not followed.
    """
    http = importlib.import_module(package)
    core = importlib.import_module(package.replace("httpx", "httpcore", 1))
    tls = _tls_context(package)
    transport = http.HTTPTransport(retries=0, verify=tls)
    # httpx offers no way to choose its pool's network backend: the pool is rebuilt with
    # httpx's defaults and the bounded backend, through httpcore's public constructor.
    transport._pool = core.ConnectionPool(
        ssl_context=tls,
        max_connections=100,
        max_keepalive_connections=20,
        keepalive_expiry=5.0,
        retries=0,
        network_backend=_Backend(limits, core),
    )
    return http.Client(transport=transport, timeout=timeout, trust_env=False, follow_redirects=False)
