"""The main agent's profile: the ``agents:`` section of ``profiles.yaml``.

Unlike a sub-agent profile it may hold writing and delegating tools (Edit, Bash, Task). The
system prompt file is resolved when the agent starts, not when the YAML is loaded, so a config
written elsewhere (tests, notebooks) still validates without the prompt file next to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from subagent_lab.config import legacy
from subagent_lab.config.limits import PARENT_LIMITS, Limits, parent_limits_schema
from subagent_lab.config.packaged import DEFAULTS_DIR, prompt_candidates
from subagent_lab.config.scaffolds import PARENT, Scaffold
from subagent_lab.core.contracts import CONTRACTS
from subagent_lab.core.types import ConfigError, ModelChoice
from subagent_lab.core.yaml_load import read_config_text

MAIN_AGENT_TOOLS: frozenset[str] = frozenset({"Read", "Grep", "Glob", "Edit", "Bash", "Task"})
"""Every tool a main agent may hold."""
M = TypeVar("M", bound=BaseModel)


def validation_problems(exc: ValidationError) -> str:
    """A validation error as one line: ``field: message`` per problem, ``; ``-separated."""
    return "; ".join(
        f"{'.'.join(map(str, e['loc']))}: {e['msg'].removeprefix('Value error, ')}" for e in exc.errors()
    )


def apply_overrides(
    kind: type[M], base: BaseModel | Mapping[str, Any], *layers: Mapping[str, Any], where: str
) -> M:
    """``base`` with each of ``layers`` merged over it in turn, validated as ``kind``: the one
    merge-and-validate step of profiles, per-model tuning and overrides. A bad value is a
    ConfigError that starts with ``where`` and names each field. A kind with a ``fold`` step (a child
    profile's scaffold keys) folds each layer before the next: a later layer's scaffold replaces an
    earlier layer's flat scaffold keys, as a later layer's field replaces an earlier one's."""
    # A model's own fields (``dict(model)``), nested models as they are: valid already, they are not
    # dumped and validated again.
    merged = dict(base)
    fold = getattr(kind, "fold", None)
    for layer in layers:
        merged.update(legacy.renamed(layer))  # an older name replaces today's name's value
        if fold is not None and layer:
            try:
                merged = fold(merged)
            except ValidationError as exc:
                raise ConfigError(f"{where}: {validation_problems(exc)}") from None
            except ValueError as exc:
                raise ConfigError(f"{where}: {exc}") from None
    try:
        return kind.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {validation_problems(exc)}") from None


class AgentProfile(Limits):
    """Limits, tools and gates of a parent (main) agent; its limits default to ``PARENT_LIMITS``."""

    model_config = ConfigDict(json_schema_extra=parent_limits_schema)

    description: str = ""
    system_prompt: str | None = None
    """Inline prompt; takes precedence over ``system_prompt_file``."""
    system_prompt_file: str | None = "prompts/main.md"
    """Relative to the directory of ``profiles.yaml`` (or the repository when the config has no file)."""
    tools: tuple[str, ...] = ("Read", "Grep", "Glob", "Edit", "Bash", "Task")
    model: ModelChoice = "main"
    allow_model_fallback: bool = False
    """Let the run go on when the endpoint serves another model than the one asked for."""
    contract: str | None = None
    """The final answer's contract (``core.contracts.CONTRACTS``, e.g. ``AnswerResult``: the answer
    and its ``path:line`` evidence as separate fields); None: free text."""
    scaffold: Scaffold = PARENT
    """How the main agent acts and answers: its policies and its action caps, as a child's
    (``config.scaffolds``; the built-in ``parent`` preset when it names none). The flat fields of
    older files (``min_tool_calls``, ``grace_turn``, ``action_max_tokens``, ``arg_max_chars``) fold
    into it (``config.legacy``)."""
    children_token_cap: int | None = Field(default=None, gt=0)
    """Total tokens all Task children together may spend; None: only each child's own budget."""
    verify: bool = False
    """Check a proposed final answer with the ``verification`` profile before accepting it."""
    max_verification_retries: int = Field(default=2, ge=0, le=10)
    accept_unverified: bool = False
    """Let an UNVERIFIED verdict (the verification child gave no verdict, or gave it only in a grace
    turn after a limit) pass the gate. Off by default: an unchecked claim is not a verified one."""
    bash_timeout_s: int = Field(default=60, gt=0, le=3600)
    """Upper bound on one Bash command's wall-clock time."""
    ask_policy: Literal["allow", "deny"] = "deny"
    """Bash commands that are neither clearly safe nor clearly dangerous: run them or refuse them."""
    bash_sandbox: Literal["bwrap", "none"] = "bwrap"
    """``bwrap``: Bash runs inside bubblewrap (Debian package ``bubblewrap``) and is disabled where
    that cannot run; ``none``: an explicit opt-in to unsandboxed Bash, recorded in the result."""
    bash_ro_paths: tuple[str, ...] = ()
    """Extra directories Bash's sandbox mounts read-only (the harness's Python always is)."""

    @classmethod
    def default(cls) -> AgentProfile:
        """The main agent where the configuration has no ``agents.main``: every field's default."""
        return cls.model_validate({})

    @model_validator(mode="before")
    @classmethod
    def _parent_defaults(cls, raw: Any) -> Any:
        return cls.fold({**PARENT_LIMITS, **raw}) if isinstance(raw, Mapping) else raw

    @classmethod
    def fold(cls, raw: Mapping[str, Any]) -> dict[str, Any]:
        """``raw`` with its scaffold keys (the flat fields of older files, ``Policy.param``, sizes)
        folded into its ``scaffold`` (``apply_overrides`` folds each layer in turn)."""
        return legacy.fold(raw, PARENT)

    @model_validator(mode="after")
    def _invariants(self) -> AgentProfile:
        unknown = sorted(set(self.tools) - MAIN_AGENT_TOOLS)
        if unknown:
            raise ValueError(f"tools: unknown tools {unknown}; allowed are {sorted(MAIN_AGENT_TOOLS)}")
        if self.system_prompt is None and self.system_prompt_file is None:
            raise ValueError("system_prompt or system_prompt_file must be given")
        if self.contract is not None and self.contract not in CONTRACTS:
            raise ValueError(f"contract: unknown contract {self.contract!r}; known: {sorted(CONTRACTS)}")
        return self

    def resolve_system_prompt(self, config_source: str | None) -> str:
        """The prompt text: inline, or read from the file next to the config, else among the packaged
        prompts (ConfigError if missing)."""
        if self.system_prompt is not None:
            return self.system_prompt
        assert self.system_prompt_file is not None  # guaranteed by _invariants
        config_dir = Path(config_source).parent if config_source else DEFAULTS_DIR
        candidates = prompt_candidates(self.system_prompt_file, config_dir)
        for candidate in candidates:
            if candidate.is_file():
                return read_config_text(candidate, what="system prompt")
        tried = ", ".join(str(c) for c in candidates)
        raise ConfigError(f"agents: system_prompt_file {self.system_prompt_file!r} not found (tried {tried})")
