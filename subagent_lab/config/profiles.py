"""The lab's configuration as a whole: ``profiles.yaml`` validated into ``LabConfig``, its checks
across sections (the main model defined, every preset fits every profile, every call fits the
served context) and the loader (``load_config``, the JSON schema for editors).

``profiles.yaml`` is validated into frozen pydantic models (``extra="forbid"``); every error is a
``ConfigError`` naming the file and, where there is one, the field. Which file is read, and the
packaged defaults a file may extend (``extends: defaults``), are ``config.packaged``'s. The YAML
itself is read by ``subagent_lab.core.yaml_load`` (size cap, UTF-8, duplicate keys and recursive
aliases rejected). Its parts live beside this module: a child profile in
``config.runtime_profile``, an endpoint and the embedded server in ``config.endpoints``, the main
agent in ``config.agent_profile``, scaffold presets in ``config.presets``; ``LabConfig``'s field
types can still be imported from here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    model_validator,
)
from typing_extensions import Self  # typing's from Python 3.11

from subagent_lab.config.agent_profile import AgentProfile, apply_overrides
from subagent_lab.config.endpoints import NO_MODEL, ModelConfig, ServerConfig
from subagent_lab.config.packaged import (
    DEFAULTS_DIR,
    EXTENDS_DEFAULTS,
    PACKAGED_CONFIG,
    RUNS_ENV,
    find_config,
    prompt_candidates,
)
from subagent_lab.config.presets import (
    BUILT_IN,
    NamedScaffold,
    ScaffoldPreset,
    named_scaffold,
    preset,
    resolve_presets,
)
from subagent_lab.config.runtime_profile import RuntimeProfile
from subagent_lab.config.scaffolds import Scaffold
from subagent_lab.core.redact import Redactor
from subagent_lab.core.types import FLOOR_CHOICES, ConfigError, ModelChoice
from subagent_lab.core.yaml_load import load_yaml_file, read_config_text
from subagent_lab.tools.symbols import SYMBOL_TOOLS as SYMBOL_TOOLS  # re-exported: tests import it here


class LabConfig(BaseModel):
    """Everything in ``profiles.yaml``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    models: dict[str, ModelConfig | None]
    profiles: dict[str, RuntimeProfile]
    agents: dict[str, AgentProfile] = {}
    """Parent (main) agents; see ``subagent_lab.config.agent_profile``."""
    server: ServerConfig = ServerConfig()
    scaffolds: dict[str, ScaffoldPreset] = {}
    """Named scaffold presets (``subagent_lab.config.scaffolds``); ``plain`` is built in."""
    trace_dir: str = "runs"
    """Where traces and sweeps go: a relative path is taken from the working directory at run time
    (never the install's or the config file's directory); ``$SUBAGENT_LAB_RUNS`` replaces it."""
    source: str | None = None
    """The file this was loaded from (filled in by the loader)."""

    _presets: dict[str, Scaffold] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _resolve_scaffolds(cls, raw: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        """Presets resolved through ``extends``, once per load, and each profile's and agent's named
        scaffold replaced by the scaffold it names (a list or mapping written in place resolves as a preset
        would); the resolved presets are kept for ``scaffold`` and ``_models_defined``."""
        if not isinstance(raw, Mapping):
            return handler(raw)
        presets = raw.get("scaffolds") or {}
        profiles = raw.get("profiles")
        if not isinstance(presets, Mapping) or not isinstance(profiles, Mapping):
            return handler(raw)  # a wrong shape: validation reports it with the field
        written = {name: preset(f"scaffolds.{name}", p) for name, p in presets.items()}
        resolved = resolve_presets(written)
        out = dict(raw)
        out["profiles"] = {
            name: named_scaffold(f"profiles.{name}", prof, resolved) if isinstance(prof, Mapping) else prof
            for name, prof in profiles.items()
        }
        agents = raw.get("agents")
        if isinstance(agents, Mapping):
            out["agents"] = {
                name: named_scaffold(f"agents.{name}", agent, resolved, over="parent")
                if isinstance(agent, Mapping)
                else agent
                for name, agent in agents.items()
            }
        config = handler(out)
        config._presets = resolved
        return config

    # Defined after the wrap validator above, so pydantic runs it on the config that one returns:
    # ``_presets`` is set by then.
    @model_validator(mode="after")
    def _models_defined(self) -> LabConfig:
        if self.models.get("main") is None:
            raise ValueError("models.main: the main model must be defined")
        unknown = sorted(set(self.models) - {"light", "main"})
        if unknown:
            raise ValueError(f"models: only 'light' and 'main' are model choices, got {unknown}")
        for name, scaffold in self._presets.items():
            for pname, profile in self.profiles.items():
                where = f"scaffolds.{name} (on profile {pname})"
                apply_overrides(RuntimeProfile, profile, {"scaffold": scaffold}, where=where)
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

    def scaffold(self, name: str) -> NamedScaffold:
        """The preset called ``name`` (``plain`` and ``base`` are built in), resolved; a clear
        error lists the known ones."""
        if name not in self._presets:
            known = sorted(self._presets)
            raise ConfigError(f"unknown scaffold {name!r}; known: {known} (profiles.yaml: scaffolds)")
        written = self.scaffolds.get(name)
        description = written.description if written else BUILT_IN[name][0]
        return NamedScaffold(name, description, self._presets[name])

    def grammar_aids(self, scaffold: Scaffold, choice: ModelChoice) -> tuple[list[str], list[str]]:
        """The aids only a grammar enforces that ``scaffold`` holds, split by how they run on
        ``choice``'s endpoint: (held by the grammar, run as checks). An endpoint configured without
        constrained output (``constrain_output: false``) runs them all as checks: the answer and each
        action are checked after the reply, and a breach gets a repair message (``core.schema_check``)."""
        _, cfg, _ = self.resolve_model(choice)
        aids = scaffold.grammar_aids()
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
        """Where traces and sweeps go: ``trace_dir``, from the working directory when relative."""
        return (Path.cwd() / self.trace_dir).resolve()


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
    if env.get(RUNS_ENV):
        raw["trace_dir"] = env[RUNS_ENV]
    models = raw.setdefault("models", {}) or {}
    if not isinstance(models, dict):
        return  # a wrong shape: validation reports it with the field
    raw["models"] = models
    for choice, prefix in (("main", "LLM_"), ("light", "LIGHT_LLM_")):
        base, model_id = env.get(f"{prefix}BASE_URL"), env.get(f"{prefix}MODEL_ID")
        key_set = f"{prefix}API_KEY" in env
        # native | json; any other value reaches validation, which names models.<choice>.tool_protocol.
        protocol = env.get(f"{prefix}TOOL_PROTOCOL")
        if not (base or model_id or key_set or protocol):
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
        if protocol:
            entry["tool_protocol"] = protocol
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
            candidates = prompt_candidates(given, base)
            found = next((c for c in candidates if c.is_file()), candidates[0])
            try:
                text = read_config_text(found, what="system prompt")
            except ConfigError as exc:
                tried = "" if len(candidates) < 2 else f" (looked beside the file, then in {DEFAULTS_DIR})"
                raise ConfigError(f"{where}: {exc}{tried}") from None
            prof.setdefault("system_prompt", text)
        prof.setdefault("name", name)


def load_config(path: str | Path | None = None, *, env: Mapping[str, str] | None = None) -> LabConfig:
    """Load and validate ``profiles.yaml``: ``path``, else ``$SUBAGENT_LAB_CONFIG``, else the working
    directory's, else the packaged defaults (``config.packaged.find_config``). A file that says
    ``extends: defaults`` adds to the packaged file: its entries of ``models``, ``profiles``,
    ``agents`` and ``scaffolds`` replace or join the packaged ones by name, its ``server`` fields
    replace the packaged ones, any other key replaces the packaged value."""
    env = os.environ if env is None else env
    path = find_config(path, env)
    raw = _read_raw(path)
    extends = raw.pop("extends", None)
    if extends is not None:
        if extends != EXTENDS_DEFAULTS:
            raise ConfigError(
                f"{path}: extends: only {EXTENDS_DEFAULTS!r} (the packaged profiles.yaml) can be "
                f"extended, got {extends!r}"
            )
        raw = _merged(_read_raw(PACKAGED_CONFIG), raw)
    incomplete = extends is None and not {"models", "profiles"} <= set(raw)
    _apply_env_overrides(raw, env)
    raw["source"] = str(path)
    try:
        return LabConfig.model_validate(raw)
    except ValidationError as exc:
        message = _format_validation(path, exc)
        if incomplete:
            message += (
                f"\n  (to add to the packaged profiles.yaml instead, start the file with "
                f"`extends: {EXTENDS_DEFAULTS}`)"
            )
        raise ConfigError(message) from None


def _read_raw(path: Path) -> dict[str, Any]:
    """One file's mapping, its profiles' prompt files read (beside it, else the packaged ones)."""
    raw = load_yaml_file(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping with 'models' and 'profiles'")
    _load_prompt_files(raw, path.parent, path)
    return raw


MERGED_BY_NAME = ("models", "profiles", "agents", "scaffolds", "server")
"""The sections a file that extends the defaults merges entry by entry (``server``: field by field)."""


def _merged(defaults: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """``own`` over ``defaults``: the named sections merged by entry, any other key replaced."""
    out = dict(defaults)
    for key, value in own.items():
        base = defaults.get(key)
        if key in MERGED_BY_NAME and isinstance(base, dict) and isinstance(value, dict):
            out[key] = {**base, **value}
        else:
            out[key] = value
    return out


def default_config_path() -> Path:
    """The file ``load_config()`` reads (``config.packaged.find_config`` without ``config=``):
    ``$SUBAGENT_LAB_CONFIG``, else the working directory's ``profiles.yaml``, else the packaged one."""
    return find_config(None)


def config_json_schema() -> dict[str, Any]:
    """JSON schema of ``profiles.yaml`` for editors (``subagent-lab schema``)."""
    schema = LabConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "subagent_lab profiles.yaml"
    # `extends` is read by the loader, not kept in LabConfig: a file that extends the defaults
    # needs neither models nor profiles of its own.
    schema["properties"]["extends"] = {
        "const": EXTENDS_DEFAULTS,
        "description": "Add to (or replace entries of) the packaged profiles.yaml",
    }
    required = schema.pop("required", [])
    schema["anyOf"] = [{"required": ["extends"]}, {"required": required}]
    return schema
