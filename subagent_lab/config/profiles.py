"""Declarative configuration: runtime profiles, model endpoints and the local server.

``profiles.yaml`` is validated into frozen pydantic models (``extra="forbid"``); every error is a
``ConfigError`` naming the file and, where there is one, the field. The YAML itself is read by
``subagent_lab.core.yaml_load`` (size cap, UTF-8, duplicate keys and recursive aliases rejected).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from subagent_lab.config.agent_profile import AgentProfile, apply_overrides
from subagent_lab.config.scaffolds import (
    PLAIN,
    SCAFFOLD_FIELDS,
    ScaffoldPreset,
    grammar_aids_on,
    unknown_fields,
)
from subagent_lab.core.contracts import CONTRACTS
from subagent_lab.core.redact import Redactor
from subagent_lab.core.types import FLOOR_CHOICES, ConfigError, ModelChoice
from subagent_lab.core.yaml_load import load_yaml_file, read_config_text

SYMBOL_TOOLS: tuple[str, ...] = ("Find", "Refs", "Outline", "Search")
"""The symbol index's tools (``tools/symbols``), small-model interface only; read-only."""
READONLY_TOOLS: frozenset[str] = frozenset({"Read", "Grep", "Glob", *SYMBOL_TOOLS})
FORBIDDEN_IN_SUBAGENTS: frozenset[str] = frozenset(
    {"Task", "Edit", "Write", "Bash", "MultiEdit", "NotebookEdit", "TodoWrite", "WebFetch"}
)
DEFAULT_SERVER_URL = "http://127.0.0.1:8765/v1"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelConfig(_Frozen):
    """One OpenAI-compatible endpoint and how to talk to it."""

    base_url: str | None = None
    """Endpoint URL; None means the embedded local server (see ``server``)."""
    model: str
    """Model id sent to the endpoint (for the embedded server: the alias)."""
    api_key_env: str | None = None
    """Name of the environment variable holding the key; the key itself never sits in YAML."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    seed: int | None = 0
    max_output_tokens: int = Field(default=1024, gt=0)
    price_per_mtok_input: float = Field(default=0.0, ge=0.0)
    price_per_mtok_output: float = Field(default=0.0, ge=0.0)
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


class RuntimeProfile(_Frozen):
    """A child type: what it may use, how far it may go, what it must return."""

    name: str = Field(min_length=1)
    description: str = ""
    system_prompt: str = Field(min_length=1)
    tools: tuple[str, ...] = ("Read", "Grep", "Glob")
    max_steps: int = Field(gt=0)
    """Model calls in the working phase (grace and repair turns are counted apart)."""
    context_token_budget: int = Field(gt=0)
    """Upper bound on the prompt tokens of any single model call."""
    total_token_budget: int = Field(gt=0)
    """Upper bound on prompt + completion tokens over the whole run."""
    cost_budget_usd: float | None = Field(default=None, gt=0)
    """Upper bound on the run's cost in USD at its model's prices (None: no cost cap); a child of a
    parent with a cost cap gets at most what is left of the parent's."""
    model: ModelChoice = "light"
    allow_model_fallback: bool = False
    """Let the run go on when the endpoint reports serving another model than the one asked for
    (the result says ``fallback``); False ends such a run as ``model_mismatch``."""
    contract: str = "ExploreResult"
    max_contract_repairs: int = Field(default=2, ge=0, le=10)
    timeout_s: float = Field(default=900.0, gt=0)
    """Wall-clock limit of the whole run."""
    max_output_tokens: int | None = Field(default=None, gt=0)
    """Per-call output cap; None takes the model's ``max_output_tokens``."""
    require_grounded_evidence: bool = False
    """When true, evidence that does not point at real lines triggers a contract repair."""
    max_tool_calls_per_step: int = Field(default=4, gt=0)
    max_stale_turns: int = Field(default=3, ge=1)
    """Consecutive turns without a new observation (repeats are answered from the record) that end
    the run as ``loop_detected``."""
    grace_turn: bool = True
    """After a limit, one final-answer call without tools (only once a tool has run)."""
    # --- the scaffold: how the child acts and observes (sweepable, see docs/design.md) ---
    action_max_tokens: int = Field(default=160, ge=16)
    """Output cap of an action call (a brief thought and one tool call)."""
    thought_max_chars: int = Field(default=80, ge=0, le=2000)
    arg_max_chars: int = Field(default=160, ge=8, le=4000)
    """The grammar's cap on each string argument of an action."""
    tool_interface: Literal["simple", "full"] = "simple"
    """``simple``: Grep(pattern, path), Read(path, line), guided observations; ``full``: every option."""
    grep_max_matches: int = Field(default=15, gt=0, le=200)
    read_window: int = Field(default=50, gt=0, le=400)
    glob_max_results: int = Field(default=50, gt=0, le=500)
    constrain_paths: bool = True
    """Read may name only files a tool has shown (the grammar allows no other path)."""
    evidence_from_seen: bool = True
    """The final answer's evidence can only be lines a tool has shown (grammar-enforced)."""
    require_seen: bool = False
    """Evidence that no tool showed triggers a contract repair."""
    finish_after_stale: int = Field(default=1, ge=0)
    """After this many consecutive turns without a new observation (a repeat answered from the
    record), the grammar offers only ``finish``: the model has seen what it will see (0: never)."""
    finish_after_reads: int = Field(default=0, ge=0, le=50)
    """After this many Reads that ran, the only action left is finish, taken without a model call
    (0: never): a small model's next action after its Read tends to repeat it (docs/design.md)."""
    read_after_hits: bool = True
    """After a search that showed matching lines, the next action is Read (of a file shown) or finish."""
    read_on: int = Field(default=0, ge=0, le=20)
    """A repeated Read shows the window after the last one of that file instead of "already shown",
    at most this many times a run (0: never). Small models repeat a Read when they want more."""
    first_search: int = Field(default=0, ge=0, le=10)
    """The first action is a Grep whose pattern the grammar limits to the task's best names, at most
    this many (``tools.search_words``: names written as code or defined in the workspace first);
    0: the model chooses its first action freely."""
    min_evidence: int = Field(default=0, ge=0, le=10)
    """With ``evidence_from_seen``: the final answer must cite at least this many seen lines (when
    any were seen). 0 lets an answer that something does not exist cite nothing."""
    read_outline: int = Field(default=0, ge=0, le=200)
    """A Read also lists up to this many ``class``/``def`` lines of the rest of the file, each one
    citable (0: none). Small models stop after one window; the outline shows the file's shape."""
    cite_anchors: bool = False
    """With ``evidence_from_seen``: the evidence may cite only the lines a tool marked as worth
    citing (Grep matches, a Read's asked line and definitions, outline entries), not every line
    of a window."""
    cite_margin: int | None = Field(default=None, ge=0, le=20)
    """With ``cite_anchors``: list (and let the answer cite) only the citable lines that score within
    this many points of the best (task words held, definition bonuses); None: the best eight."""
    cite_units: bool = False
    """With ``evidence_from_seen``: once a structure tool (Find, Refs, Outline, Search) showed a
    function or class, the final prompt lists the units shown (a function as ``path:start-end``, a
    class by its header line) in the order the tools showed them, and the answer may cite only
    those (no ranking by the task's words)."""
    max_evidence: int = Field(default=6, ge=1, le=50)
    """The most evidence items the final answer's grammar allows."""
    absence_check: bool = False
    """Before the final answer, one yes/no call: did the tools show what the task asks for? On
    "no" the answer cites nothing and says so (an ``absent`` task's right answer)."""
    task_paths: bool = False
    """Files the task names (``loaders.py``) that exist in the workspace count as shown: Read may
    open them first, and the task lists where they are."""
    model_overrides: dict[ModelChoice, dict[str, Any]] = Field(default_factory=dict)
    """Per-model tuning of this profile (e.g. a stricter scaffold for ``light``), applied before a
    request's own overrides when that model runs; recorded with the run."""
    show_layout: bool = False
    """Put the workspace's top-level entries in the task (small models copy that line into arguments)."""
    min_tool_calls: int = Field(default=1, ge=0)
    """Executed tool calls required before a final answer is accepted; 0 lets the model answer blind."""
    symbol_tools: bool = False
    """The child also gets Find, Refs, Outline and Search (``SYMBOL_TOOLS``, after ``tools``): a
    preset can name the tool set, which ``tools`` (not a scaffold field) cannot."""
    repo_map_tokens: int = Field(default=0, ge=0)
    """The first message ends with a repo map of at most this many tokens (estimated): the files and
    their most-referenced definitions (``tools.symbols.repo_map``), each shown unit counting as seen.
    0: no map."""
    tool_guide: bool = False
    """The first message ends with a guide to the structure tools the child holds (what each shows,
    and to start with Find or Search rather than Grep): the explore prompt speaks of Grep only."""
    retrieval_start: int = Field(default=0, ge=0, le=8)
    """Before the first action the harness runs the task's retrieval as tool calls (Find on its
    code-like names, then Search on its text; ``tools.symbols.retrieve``) and the best this many
    units are the answer's candidates, listed and offered first (``scaffold.retrieval_start``);
    needs Find and Search (``symbol_tools``, or ``tools`` naming both). 0: off."""

    @model_validator(mode="after")
    def _invariants(self) -> RuntimeProfile:
        forbidden = sorted(set(self.tools) & FORBIDDEN_IN_SUBAGENTS)
        if forbidden:
            raise ValueError(
                f"tools: a sub-agent profile may not hold {forbidden} (read-only, no delegation)"
            )
        unknown = sorted(set(self.tools) - READONLY_TOOLS)
        if unknown:
            raise ValueError(f"tools: unknown tools {unknown}; allowed are {sorted(READONLY_TOOLS)}")
        if (self.symbol_tools or set(self.tools) & set(SYMBOL_TOOLS)) and self.tool_interface != "simple":
            raise ValueError("tools: Find, Refs, Outline and Search exist in tool_interface 'simple' only")
        held = set(self.tools) | (set(SYMBOL_TOOLS) if self.symbol_tools else set())
        if self.retrieval_start and not {"Find", "Search"} <= held:
            raise ValueError("retrieval_start: the retrieval calls Find and Search; set symbol_tools: true")
        if self.context_token_budget > self.total_token_budget:
            raise ValueError(
                f"context_token_budget ({self.context_token_budget}) must be <= "
                f"total_token_budget ({self.total_token_budget})"
            )
        if "model_overrides" in {k for v in self.model_overrides.values() for k in v}:
            raise ValueError("model_overrides: an override cannot itself hold model_overrides")
        for choice, tuned in self.model_overrides.items():
            apply_overrides(
                RuntimeProfile,
                self.model_dump(exclude={"model_overrides"}),
                tuned,
                where=f"model_overrides.{choice}",
            )
        if self.contract not in CONTRACTS:
            raise ValueError(f"contract: unknown contract {self.contract!r}; known: {sorted(CONTRACTS)}")
        return self


class ServerConfig(_Frozen):
    """The embedded llama.cpp server."""

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


class LabConfig(_Frozen):
    """Everything in ``profiles.yaml``."""

    models: dict[str, ModelConfig | None]
    profiles: dict[str, RuntimeProfile]
    agents: dict[str, AgentProfile] = {}
    """Parent (main) agents; see ``subagent_lab.config.agent_profile``."""
    server: ServerConfig = ServerConfig()
    scaffolds: dict[str, ScaffoldPreset] = {}
    """Named scaffold presets (``subagent_lab.config.scaffolds``); ``plain`` is built in."""
    trace_dir: str = "runs"
    """Where traces go, relative to the config file's directory."""
    source: str | None = None
    """The file this was loaded from (filled in by the loader)."""

    @model_validator(mode="after")
    def _models_defined(self) -> LabConfig:
        if self.models.get("main") is None:
            raise ValueError("models.main: the main model must be defined")
        unknown = sorted(set(self.models) - {"light", "main"})
        if unknown:
            raise ValueError(f"models: only 'light' and 'main' are model choices, got {unknown}")
        for name, preset in self.scaffolds.items():
            if name == "plain":
                raise ValueError("scaffolds.plain: built in, it cannot be redefined")
            for field in unknown_fields(preset):
                known = ", ".join(sorted(SCAFFOLD_FIELDS))
                raise ValueError(f"scaffolds.{name}.fields.{field}: not a scaffold field; known: {known}")
            for pname, profile in self.profiles.items():
                where = f"scaffolds.{name}.fields (on profile {pname})"
                apply_overrides(RuntimeProfile, profile, preset.resolved(), where=where)
        for name, profile in self.profiles.items():
            if profile.name != name:
                raise ValueError(f"profiles.{name}.name: must equal its key {name!r}")
        problems = context_overflows(self)
        if problems:
            raise ValueError("\n  ".join(problems))  # one line each under the file name
        return self

    def redactor(self) -> Redactor:
        """A redactor that also knows every configured model's key, whatever its variable is called."""
        names = {cfg.api_key_env for cfg in self.models.values() if cfg is not None and cfg.api_key_env}
        return Redactor(extra_values=[os.environ[name] for name in sorted(names) if os.environ.get(name)])

    def profile(self, name: str) -> RuntimeProfile:
        """The profile called ``name``; a clear error lists the known ones."""
        try:
            return self.profiles[name]
        except KeyError:
            raise ConfigError(f"unknown profile {name!r}; known: {sorted(self.profiles)}") from None

    def scaffold(self, name: str) -> ScaffoldPreset:
        """The preset called ``name`` (``plain`` is built in); a clear error lists the known ones."""
        if name == "plain":
            return PLAIN
        try:
            return self.scaffolds[name]
        except KeyError:
            known = sorted({"plain", *self.scaffolds})
            raise ConfigError(
                f"unknown scaffold {name!r}; known: {known} (profiles.yaml: scaffolds)"
            ) from None

    def grammar_aids(self, fields: Mapping[str, Any], choice: ModelChoice) -> tuple[list[str], list[str]]:
        """The aids only a grammar enforces that ``fields`` switch on, split by how they run on
        ``choice``'s endpoint: (held by the grammar, run as checks). An endpoint configured without
        constrained output (``constrain_output: false``) runs them all as checks: the answer and each
        action are checked after the reply, and a breach gets a repair message (``core.schema_check``)."""
        _, cfg, _ = self.resolve_model(choice)
        aids = grammar_aids_on(dict(fields))
        return (aids, []) if cfg.constrain_output else ([], aids)

    def resolve_model(self, choice: ModelChoice) -> tuple[ModelChoice, ModelConfig, bool]:
        """The model used for ``choice``: (choice actually used, its config, fell back?)."""
        if choice in FLOOR_CHOICES:  # a no-model floor: main's output cap, no endpoint, no price
            base = self.models["main"]
            assert base is not None  # guaranteed by _models_defined
            update = {"model": choice, "max_output_tokens": base.max_output_tokens}
            return choice, NO_MODEL.model_copy(update=update), False
        cfg = self.models.get(choice)
        if cfg is not None:
            return choice, cfg, False
        main = self.models["main"]
        assert main is not None  # guaranteed by _models_defined
        return "main", main, True

    def endpoint_url(self, cfg: ModelConfig) -> str:
        return cfg.base_url or self.server.base_url

    def trace_root(self) -> Path:
        base = Path(self.source).parent if self.source else Path.cwd()
        return (base / self.trace_dir).resolve()


SERVED_CONTEXT_FIELD = "server.n_ctx"
"""The configuration field(s) ``served_context`` reads, for error messages."""


def served_context(config: LabConfig) -> int:
    """Tokens one request may occupy (prompt + output) on the embedded server."""
    return config.server.n_ctx


def context_overflows(config: LabConfig) -> list[str]:
    """Profiles and agents whose largest call (context budget + output cap) exceeds what is served.

    For embedded models (``base_url`` None) the limit is ``served_context``; for a remote endpoint
    its ``context_window`` when set. Such a call would fail as a model error instead of compacting.
    """
    holders: list[tuple[str, RuntimeProfile | AgentProfile]] = [
        *((f"profiles.{name}", p) for name, p in config.profiles.items()),
        *((f"agents.{name}", a) for name, a in config.agents.items()),
    ]
    problems = []
    for where, holder in holders:
        used, model, _ = config.resolve_model(holder.model)
        if model.base_url is None:
            limit, limit_name = served_context(config), SERVED_CONTEXT_FIELD
        elif model.context_window is not None:
            limit, limit_name = model.context_window, f"models.{used}.context_window"
        else:
            continue
        output = holder.max_output_tokens or model.max_output_tokens
        output_name = (
            f"{where}.max_output_tokens" if holder.max_output_tokens else f"models.{used}.max_output_tokens"
        )
        if holder.context_token_budget + output > limit:
            problems.append(
                f"{where}.context_token_budget: {holder.context_token_budget} + {output_name} {output} "
                f"= {holder.context_token_budget + output} exceeds the served context {limit} "
                f"({limit_name}); lower the budget or raise the limit"
            )
    return problems


def _apply_env_overrides(raw: dict[str, Any], env: Mapping[str, str]) -> None:
    models = raw.setdefault("models", {}) or {}
    if not isinstance(models, dict):
        return  # a wrong shape: validation reports it with the field
    raw["models"] = models
    for choice, prefix in (("main", "LLM_"), ("light", "LIGHT_LLM_")):
        base, model_id = env.get(f"{prefix}BASE_URL"), env.get(f"{prefix}MODEL_ID")
        key_set = f"{prefix}API_KEY" in env
        if not (base or model_id or key_set):
            continue
        given = models.get(choice)
        if given is not None and not isinstance(given, dict):
            continue  # validation reports models.<choice> as not a mapping
        entry = dict(given or {})
        if base:
            entry["base_url"] = base
        if model_id:
            entry["model"] = model_id
        if key_set:
            entry["api_key_env"] = f"{prefix}API_KEY"
        models[choice] = entry


def _format_validation(path: Path, exc: ValidationError) -> str:
    lines = [f"{path}: invalid configuration"]
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"  {loc}: {msg}" if loc else f"  {msg}")  # root messages name their field
    return "\n".join(lines)


def _load_prompt_files(raw: dict[str, Any], base: Path, path: Path) -> None:
    profiles = raw.get("profiles")
    if not isinstance(profiles, dict):
        return  # a wrong shape: validation reports it with the field
    for name, prof in profiles.items():
        if not isinstance(prof, dict):
            continue
        if "system_prompt_file" in prof:
            where = f"{path}: profiles.{name}.system_prompt_file"
            given = prof.pop("system_prompt_file")
            if not isinstance(given, str) or not given:
                raise ConfigError(f"{where}: must be a file name, got {given!r}")
            try:
                text = read_config_text(base / given, what="system prompt")
            except ConfigError as exc:
                raise ConfigError(f"{where}: {exc}") from None
            prof.setdefault("system_prompt", text)
        prof.setdefault("name", name)


def load_config(path: str | Path | None = None, *, env: Mapping[str, str] | None = None) -> LabConfig:
    """Load and validate ``profiles.yaml`` (default: ``$SUBAGENT_LAB_CONFIG`` or the repo's file)."""
    env = os.environ if env is None else env
    path = Path(path or env.get("SUBAGENT_LAB_CONFIG") or default_config_path()).resolve()
    raw = load_yaml_file(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping with 'models' and 'profiles'")
    _load_prompt_files(raw, path.parent, path)
    _apply_env_overrides(raw, env)
    raw["source"] = str(path)
    try:
        return LabConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_format_validation(path, exc)) from None


def default_config_path() -> Path:
    """The repository's ``profiles.yaml`` (next to the package), else one in the working directory."""
    repo_file = Path(__file__).resolve().parents[2] / "profiles.yaml"
    return repo_file if repo_file.exists() else Path.cwd() / "profiles.yaml"


def config_json_schema() -> dict[str, Any]:
    """JSON schema of ``profiles.yaml`` for editors (``subagent-lab schema``)."""
    schema = LabConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "subagent_lab profiles.yaml"
    return schema
