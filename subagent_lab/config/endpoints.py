"""Where the models run: an OpenAI-compatible endpoint (``ModelConfig``, the ``models:`` section of
``profiles.yaml``), the embedded llama.cpp server (``ServerConfig``, ``server:``) and the
configuration of the no-model choices (``NO_MODEL``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from subagent_lab.core.budget import PricePerMtok

DEFAULT_SERVER_URL = "http://127.0.0.1:8765/v1"


class ModelConfig(BaseModel):
    """One OpenAI-compatible endpoint and how to talk to it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str | None = None
    """Endpoint URL; None means the embedded local server (see ``server``)."""
    model: str
    """Model id sent to the endpoint (for the embedded server: the alias)."""
    api_key_env: str | None = None
    """Name of the environment variable holding the key; the key itself never sits in YAML."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    seed: int | None = 0
    max_output_tokens: int = Field(default=1024, gt=0)
    price_per_mtok_input: PricePerMtok = 0.0
    price_per_mtok_output: PricePerMtok = 0.0
    """USD per million tokens: 0, or finite within the bounds ``core.budget`` sets (checked at load)."""
    tool_protocol: Literal["native", "json"] = "json"
    """``native``: ``tools=``/``tool_calls``; ``json``: one JSON action per turn, schema-constrained."""
    constrain_output: bool = True
    """Send ``response_format`` with a JSON schema (json protocol); turn off for servers without it."""
    strict_tools: bool = True
    """Native protocol: the final answer is a ``final_answer`` tool call whose parameters are the
    answer's schema, sent with ``strict: true`` (OpenAI structured outputs); turn off for servers
    that reject the key."""
    timeout_s: float = Field(default=180.0, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10)
    context_window: int | None = Field(default=None, gt=0)
    """Tokens a remote endpoint serves per request (prompt + output). When set, every profile using
    this model must fit in it (checked at load). Ignored for the embedded server, whose limit is
    ``served_context``."""
    endpoints: dict[str, int] = Field(default_factory=dict)
    """Replicas serving this model, base URL -> requests in flight at once (at least 1): calls are
    spread over them by ``subagent_lab.models.pool`` (retries, a replica that stays down is taken
    out). Empty: the one endpoint ``base_url`` names."""


class ServerConfig(BaseModel):
    """The embedded llama.cpp server."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8765, gt=0, lt=65536)
    n_ctx: int = Field(default=16384, gt=0)
    """Context of each slot: a call's prompt plus its output must fit in it."""
    parallel: int = Field(default=2, gt=0, le=16)
    """Slots per model: requests served concurrently (continuous batching), each with its own cache."""
    n_threads: int | None = None
    """CPU threads per model; None uses every core this process may run on."""
    batch_size: int = Field(default=512, gt=0)
    startup_timeout_s: float = Field(default=300.0, gt=0)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """The server root (``/tokenize``, ``/apply-template``, ``/metrics``, ``/health``)."""
        return f"http://{self.host}:{self.port}"


NO_MODEL = ModelConfig(model="none")
"""The configuration of the ``none`` choice (``resolve_model``; ``retrieval`` takes it with its own
``model``); it never talks to an endpoint."""
