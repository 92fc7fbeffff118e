"""Agent files in and out: Claude Code, Gemini CLI, Codex and OpenCode sub-agent definitions read
into a child ``RuntimeProfile``, and a profile written back as a Claude Code agent file.

The four formats (``docs/design.md``, "Agent files"):

- Claude Code ``.claude/agents/*.md`` and Gemini CLI ``.gemini/agents/*.md``: YAML front matter
  (``name``, ``description``, ``tools``, ``model``, ``maxTurns`` / ``max_turns``, ...) and a body
  that is the system prompt.
- Codex ``.codex/agents/*.toml``: ``name``, ``description``, ``developer_instructions`` (the
  prompt), ``model``, ``sandbox_mode``, ...
- OpenCode ``.opencode/agents/*.md``: front matter (``description``, ``mode``, ``model``,
  ``steps``, ``tools`` as a map of booleans, ``permission`` / ``permissions``) and the prompt as body;
  the name is the file's.

A field with a counterpart is mapped (``ImportedAgent.mapped`` says to what); every other field is
kept in ``ImportedAgent.unmapped`` with its value, never dropped in silence. None of the formats
has a token budget: budgets and the scaffold come from the base profile (``explore``). A tool the
file grants that is not one of a child's read-only tools (a shell, an editor, the web, another
agent) is refused with a ConfigError naming the file and the field: a child cannot hold it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Literal

import tomllib
import yaml
from pydantic import BaseModel, ConfigDict, Field

from subagent_lab.config.agent_profile import apply_overrides
from subagent_lab.config.profiles import LabConfig, load_config
from subagent_lab.config.runtime_profile import READONLY_TOOLS, RuntimeProfile
from subagent_lab.core.types import ConfigError, ModelChoice
from subagent_lab.core.yaml_load import parse_yaml, read_config_text
from subagent_lab.tools.symbols import SYMBOL_TOOLS

AgentFormat = Literal["claude", "gemini", "codex", "opencode"]
FORMATS: tuple[AgentFormat, ...] = ("claude", "gemini", "codex", "opencode")
EXTRA_KEY = "x-subagent-lab"
"""The front-matter block an exported file keeps the profile's own fields in (budgets, scaffold):
Claude Code has no field for them; importing the file applies it last."""

TOOL_NAMES: dict[AgentFormat, dict[str, str]] = {
    "claude": {"Read": "Read", "Grep": "Grep", "Glob": "Glob", "LS": "Glob", **{t: t for t in SYMBOL_TOOLS}},
    "gemini": {
        "read_file": "Read", "read_many_files": "Read", "grep_search": "Grep",
        "search_file_content": "Grep", "glob": "Glob", "list_directory": "Glob",
    },
    "codex": {},
    "opencode": {"read": "Read", "grep": "Grep", "glob": "Glob", "list": "Glob"},
}  # fmt: skip
"""Each format's names of the tools a child may hold -> ours."""
SMALL_MODEL_WORDS = ("haiku", "mini", "nano", "flash", "lite", "small", "light")
"""A model id naming one of these is imported as ``light``; any other as ``main``."""
EXPORT_MODEL = {"light": "haiku", "main": "sonnet"}
"""The Claude Code model alias a profile's model choice exports as (they import back the same)."""
AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
"""What an agent's name may be: one plain file-name component (it names the run's trace file), never
``..``, a path or an absolute path."""


class Unmapped(BaseModel):
    """A field of the agent file that no profile field holds, with its value and why."""

    model_config = ConfigDict(frozen=True)

    field: str
    value: Any
    why: str = "no counterpart in a subagent_lab profile"


class ImportedAgent(BaseModel):
    """An agent file read into a child profile, with what was mapped and what was not."""

    model_config = ConfigDict(frozen=True)

    profile: RuntimeProfile
    format: AgentFormat
    source: str
    mapped: dict[str, str] = Field(default_factory=dict)
    """The file's field -> what it became in the profile."""
    unmapped: list[Unmapped] = Field(default_factory=list)
    """Every field with no counterpart, kept with its value."""
    notes: list[str] = Field(default_factory=list)
    """Decisions the import took where the file said nothing (tools, model)."""
    temperature: float | None = None
    """The file's sampling temperature: a request's (``SubagentRequest.temperature``), not a profile's."""

    def profile_yaml(self) -> str:
        """The profile as a ``profiles.yaml`` entry (under ``profiles:``)."""
        body = self.profile.model_dump(mode="json", exclude={"name"})
        # What the agent is before how far it may go (its inherited limits come first in a dump).
        entry = {**{k: body.pop(k) for k in ("description", "system_prompt", "tools")}, **body}
        return yaml.safe_dump({self.profile.name: entry}, sort_keys=False, allow_unicode=True, width=100)


def detect_format(path: Path) -> AgentFormat:
    """The format of an agent file: by its folder (``.claude/agents`` ...), else by its extension
    (``.toml``: Codex) and its front matter's fields."""
    parts = [p.lower() for p in path.parts]
    for fmt in FORMATS:
        if f".{fmt}" in parts:
            return fmt
    if path.suffix.lower() == ".toml":
        return "codex"
    front, _ = _front_matter(read_config_text(path, what="agent file"), path)
    if {"max_turns", "timeout_mins", "kind"} & set(front):
        return "gemini"
    if {"mode", "steps", "permission", "permissions"} & set(front) or isinstance(front.get("tools"), dict):
        return "opencode"
    return "claude"


def import_agent(
    path: str | Path,
    *,
    config: LabConfig | None = None,
    format: AgentFormat | None = None,
    base: str = "explore",
) -> ImportedAgent:
    """Read an agent file of any of the four formats into a child profile built on ``base``'s
    budgets and scaffold. ConfigError (naming the file and the field) for a tool a child may not
    hold or a value the profile rejects.

    Args:
        path: The agent file (``.md`` with YAML front matter, or Codex ``.toml``).
        config: The lab configuration holding ``base`` (None: ``load_config()``).
        format: ``claude``, ``gemini``, ``codex`` or ``opencode``; None: ``detect_format``.
        base: The profile whose budgets, contract and scaffold the child gets.
    """
    path = Path(path)
    fmt = format or detect_format(path)
    text = read_config_text(path, what="agent file")
    if fmt == "codex":
        fields, body = _toml(text, path), None
    else:
        fields, body = _front_matter(text, path)
    reader = _Reader(path, fmt, dict(fields))
    updates = reader.read(body)
    base_profile = (config or load_config()).profile(base)
    where = f"{path}: the profile it makes"
    profile = apply_overrides(RuntimeProfile, base_profile, updates, reader.extra, where=where)
    return ImportedAgent(
        profile=profile,
        format=fmt,
        source=str(path),
        mapped=reader.mapped,
        unmapped=reader.unmapped,
        notes=reader.notes,
        temperature=reader.temperature,
    )


def export_agent(profile: RuntimeProfile, path: str | Path, *, config: LabConfig | None = None) -> Path:
    """Write ``profile`` as a Claude Code agent file (``name``, ``description``, ``tools``, ``model``,
    ``maxTurns``, the prompt as body) and return its path. Its fields Claude Code has no name for
    (budgets, scaffold) go in the ``x-subagent-lab`` block, so ``import_agent`` gives the same
    profile back.

    Args:
        profile: The child profile to write.
        path: Where (parent folders are created).
        config: The configuration whose ``explore`` profile an import would build on (None: the default).
    """
    path = Path(path)
    front: dict[str, Any] = {"name": profile.name, "description": profile.description}
    front["tools"] = ", ".join(profile.tools)
    if profile.model in EXPORT_MODEL:
        front["model"] = EXPORT_MODEL[profile.model]
    front["maxTurns"] = profile.max_steps
    body = f"\n{profile.system_prompt}"
    plain = _render(front, body)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(plain, encoding="utf-8")
    # What the standard fields alone import as; every field that comes back different is kept.
    back = import_agent(path, config=config, format="claude").profile
    extra = {
        k: v for k, v in profile.model_dump(mode="json").items() if getattr(back, k) != getattr(profile, k)
    }
    if extra:
        path.write_text(_render({**front, EXTRA_KEY: extra}, body), encoding="utf-8")
    return path


def _render(front: dict[str, Any], body: str) -> str:
    head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{head}---\n{body}"


def _front_matter(text: str, path: Path) -> tuple[dict[str, Any], str]:
    """The YAML front matter (between ``---`` lines) and the body after it."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise ConfigError(f"{path}: no YAML front matter (the file must start with a '---' line)")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise ConfigError(f"{path}: the front matter has no closing '---' line")
    data = parse_yaml("".join(lines[1:end]), path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the front matter must be a mapping of fields")
    return data, "".join(lines[end + 1 :])


def _toml(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except (RecursionError, ValueError) as exc:  # nesting past the stack, a value tomllib rejects late
        raise ConfigError(f"{path}: not valid TOML: {type(exc).__name__}") from None


def model_choice(model: str) -> ModelChoice | None:
    """The model choice a file's model id imports as: ``light`` for a small model's name (``haiku``,
    ``*-mini``, ``*-flash`` ...), ``main`` for any other; None for ``inherit`` (the base profile's)."""
    name = model.strip().lower()
    if name in ("", "inherit", "default"):
        return None
    if name in ("light", "main", "none"):
        return name  # type: ignore[return-value]  # one of ModelChoice's values
    return "light" if any(word in name for word in SMALL_MODEL_WORDS) else "main"


class _Reader:
    """Walks one file's fields: each known one becomes a profile update, the rest are reported."""

    def __init__(self, path: Path, fmt: AgentFormat, fields: dict[str, Any]) -> None:
        self.path, self.fmt, self.fields = path, fmt, fields
        self.mapped: dict[str, str] = {}
        self.unmapped: list[Unmapped] = []
        self.notes: list[str] = []
        self.temperature: float | None = None
        self.extra: dict[str, Any] = {}

    def read(self, body: str | None) -> dict[str, Any]:
        f, fmt = self.fields, self.fmt
        updates: dict[str, Any] = {}
        named = bool(f.get("name"))
        name = f.pop("name", None) or self.path.stem
        field = "name" if named else "(file name)"
        if not isinstance(name, str) or not AGENT_NAME.fullmatch(name) or ".." in name:
            raise ConfigError(
                f"{self.path}: {field}: {str(name)[:120]!r} is not a plain agent name (letters, digits, "
                "'-', '_', '.'; at most 100; no path): it names the run's trace file"
            )
        updates["name"] = name
        self.mapped[field] = "name"
        if "description" in f:
            updates["description"] = str(f.pop("description") or "")
            self.mapped["description"] = "description"
        prompt = f.pop("developer_instructions", None) if fmt == "codex" else body
        if fmt == "opencode" and not (prompt or "").strip() and "prompt" in f:
            prompt = f.pop("prompt")
        if prompt is not None and str(prompt).strip():
            # The blank lines after the front matter are layout; the rest is the prompt as written.
            updates["system_prompt"] = str(prompt).lstrip("\n")
            self.mapped["developer_instructions" if fmt == "codex" else "body"] = "system_prompt"
        tools = self._tools()
        if tools:
            updates["tools"] = tools
        else:
            self.notes.append("the file grants no read-only tool by name: the base profile's tools are kept")
        self._model(updates)
        for key, target in (("maxTurns", "max_steps"), ("max_turns", "max_steps"), ("steps", "max_steps"),
                            ("max_steps", "max_steps")):  # fmt: skip
            if key in f:
                turns = f.pop(key)
                if isinstance(turns, bool) or not isinstance(turns, int):
                    raise ConfigError(
                        f"{self.path}: {key}: {str(turns)[:120]!r} is not a whole number of turns"
                    )
                updates[target] = turns
                self.mapped[key] = f"{target} (a turn is one model call of the working phase)"
        if "timeout_mins" in f:
            updates["timeout_s"] = self._number("timeout_mins") * 60
            self.mapped["timeout_mins"] = "timeout_s (x 60)"
        if "temperature" in f:
            self.temperature = self._number("temperature")
            self.mapped["temperature"] = "ImportedAgent.temperature (a request's sampling, not a profile's)"
        if EXTRA_KEY in f:
            block = f.pop(EXTRA_KEY)
            if not isinstance(block, dict):
                raise ConfigError(f"{self.path}: {EXTRA_KEY}: must be a mapping of profile fields")
            self.extra = block
            self.mapped[EXTRA_KEY] = ", ".join(sorted(block))
        self.unmapped.extend(Unmapped(field=k, value=v) for k, v in f.items())
        return updates

    def _number(self, key: str) -> float:
        """Field ``key`` as a finite number (taken from the fields); ConfigError naming the file and
        the field for text, a list, a boolean, NaN or an infinity."""
        value = self.fields.pop(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                number = float(value)
            except OverflowError:  # an integer past a float's range
                number = math.inf
            if math.isfinite(number):
                return number
        raise ConfigError(f"{self.path}: {key}: {str(value)[:120]!r} is not a finite number")

    def _model(self, updates: dict[str, Any]) -> None:
        if "model" not in self.fields:
            self.notes.append("no model: the base profile's model choice is kept")
            return
        given = str(self.fields.pop("model"))
        choice = model_choice(given)
        if choice is None:
            self.mapped["model"] = f"{given!r}: the base profile's model choice (inherit)"
            return
        updates["model"] = choice
        self.mapped["model"] = f"{given!r} -> {choice} (by its name; the endpoint is profiles.yaml's)"

    def _tools(self) -> tuple[str, ...]:
        """The read-only tools the file grants, ours; ConfigError naming the field for any other."""
        granted: list[tuple[str, str]] = []  # (field, tool name as the file writes it)
        f = self.fields
        if self.fmt in ("claude", "gemini") and "tools" in f:
            granted += [("tools", t) for t in _names(f.pop("tools"))]
            self.mapped["tools"] = "tools"
        if self.fmt == "claude" and "disallowedTools" in f:
            denied = set(_names(f.pop("disallowedTools")))
            granted = [(field, t) for field, t in granted if t not in denied]
            self.mapped["disallowedTools"] = "tools (removed from them)"
        if self.fmt == "codex" and "sandbox_mode" in f:
            mode = f.pop("sandbox_mode")
            if mode != "read-only":
                raise ConfigError(
                    f"{self.path}: sandbox_mode: {mode!r} lets the agent write or run commands; a sub-agent "
                    'profile is read-only (sandbox_mode = "read-only")'
                )
            self.mapped["sandbox_mode"] = "read-only (the child's sandbox)"
        if self.fmt == "opencode":
            granted += self._opencode_grants()
        ours = TOOL_NAMES[self.fmt]
        bad: dict[str, list[str]] = {}
        for field, name in granted:
            if name not in ours:
                bad.setdefault(field, []).append(name)
        if bad:
            which = "; ".join(f"{field}: {', '.join(names)}" for field, names in bad.items())
            raise ConfigError(
                f"{self.path}: {which}: not among a sub-agent's read-only tools "
                f"({', '.join(sorted(READONLY_TOOLS))}); a child may not hold a shell, an editor, the web "
                f"or other agents; {_refusal_fix(self.fmt, sorted({n for ns in bad.values() for n in ns}))}"
            )
        return tuple(dict.fromkeys(ours[name] for _, name in granted))

    def _opencode_grants(self) -> list[tuple[str, str]]:
        """OpenCode's grants: ``tools`` entries set true, ``permission`` entries that allow or ask
        (a pattern map that allows any pattern grants the tool), v2 ``permissions`` rules."""
        f, granted = self.fields, []
        tools = f.pop("tools", None)
        if isinstance(tools, dict):
            granted += [("tools", str(k)) for k, v in tools.items() if v]
            self.mapped["tools"] = "tools (the ones set true)"
        permission = f.pop("permission", None)
        if isinstance(permission, dict):
            for name, rule in permission.items():
                rules = rule.values() if isinstance(rule, dict) else [rule]
                if any(r in ("allow", "ask") for r in rules):
                    granted.append(("permission", str(name)))
            self.mapped["permission"] = "tools (the ones allowed)"
        permissions = f.pop("permissions", None)
        if isinstance(permissions, list):
            for rule in permissions:
                if isinstance(rule, dict) and rule.get("effect") in ("allow", "ask"):
                    granted.append(("permissions", str(rule.get("action"))))
            self.mapped["permissions"] = "tools (the actions allowed)"
        return granted


def _refusal_fix(fmt: AgentFormat, names: list[str]) -> str:
    """How the file gets imported anyway: the edit that takes ``names`` out of its grants."""
    listed = ", ".join(names)
    if fmt == "claude":
        return f"to import it, add `disallowedTools: {listed}` to its front matter or drop it from tools"
    if fmt == "opencode":
        return f"to import it, set {listed} to false (tools) or deny (permission)"
    return f"to import it, drop {listed} from tools"


def _names(value: Any) -> list[str]:
    """Tool names from a list or a comma-separated string; ``Bash(git diff:*)`` names ``Bash``."""
    items = value if isinstance(value, list) else str(value or "").split(",")
    return [str(item).split("(", 1)[0].strip() for item in items if str(item).strip()]
