"""Strict, bounded YAML for configuration files: every problem is a ``ConfigError`` naming the file.

Plain ``yaml.safe_load`` lets the last of two duplicate keys win silently, builds self-referential
structures from recursive aliases (which later blow up far from the file), expands alias chains
exponentially, and reads files of any size. This loader rejects all four, before anything is
validated, and every value no setting can hold (an integer beyond 64 bits, which also keeps
Python's 4,300-digit conversion error from escaping; a NaN or infinite number; a NUL byte in a
string) with the file and the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from subagent_lab.core.types import ConfigError

MAX_CONFIG_BYTES = 1_000_000
"""Configuration files larger than this are refused unread (a profiles file is a few KB)."""
MAX_INT_DIGITS = 40
"""Characters of an integer scalar the loader converts at all (no setting needs more)."""
MAX_CONFIG_INT = 2**63 - 1
"""The largest magnitude of an integer setting; beyond it a value is refused with its field."""
MAX_EXPANDED_NODES = 100_000
"""Nodes after alias expansion; beyond it the file is an alias bomb, not a configuration."""
_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class _HugeInt:
    """An integer scalar too long to convert: its first digits and its line."""

    head: str
    line: int


class _StrictLoader(yaml.SafeLoader):
    """A SafeLoader that rejects duplicate mapping keys and recursive aliases while composing.

    Duplicate keys are checked on the composed mapping node, before merge keys (``<<``) are
    flattened, so a key that overrides a merged one is still allowed.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._open_anchors: set[str] = set()

    # The stubs type ``anchor`` as a dict; PyYAML passes the anchor's name (or None).
    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.peek_event()
            if event.anchor in self._open_anchors:
                raise ComposerError(
                    None, None, f"recursive alias *{event.anchor} (it refers to itself)", event.start_mark
                )
        return super().compose_node(parent, index)

    def construct_yaml_int(self, node: ScalarNode) -> int | _HugeInt:  # type: ignore[override]
        # int() of a 4,301-digit scalar raises a bare ValueError (Python's conversion limit);
        # a value that long is no setting: it is kept as a marker that ``check_values`` refuses
        # with its field's name.
        text = str(node.value)
        if len(text) > MAX_INT_DIGITS:
            return _HugeInt(text[:20], node.start_mark.line + 1)
        value: int = super().construct_yaml_int(node)
        return value

    def compose_sequence_node(self, anchor: Any) -> SequenceNode:
        with _open(self._open_anchors, anchor):
            return super().compose_sequence_node(anchor)

    def compose_mapping_node(self, anchor: Any) -> MappingNode:
        with _open(self._open_anchors, anchor):
            node = super().compose_mapping_node(anchor)
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG or not isinstance(key_node, ScalarNode):
                continue  # non-scalar keys are rejected as unhashable by the constructor
            key = self._key_identity(key_node)
            line = key_node.start_mark.line + 1
            if key in first_line:
                raise ConstructorError(
                    None,
                    None,
                    f"duplicate key {key_node.value!r} (lines {first_line[key]} and {line})",
                    key_node.start_mark,
                )
            first_line[key] = line
        return node

    def _key_identity(self, node: ScalarNode) -> Any:
        """The key as Python will see it (``yes`` and ``true`` are the same key), else its text."""
        try:
            value = self.construct_object(node, deep=True)
            hash(value)
        except (yaml.YAMLError, TypeError, ValueError):
            return (node.tag, node.value)
        return (type(value).__name__, value)


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)


class _open:
    """Marks an anchor as being composed, so an alias to it from inside is caught."""

    def __init__(self, anchors: set[str], anchor: str | None) -> None:
        self.anchors, self.anchor = anchors, anchor

    def __enter__(self) -> None:
        if self.anchor is not None:
            self.anchors.add(self.anchor)

    def __exit__(self, *exc: object) -> None:
        self.anchors.discard(self.anchor or "")


def _expanded_size(node: Node, memo: dict[int, int]) -> int:
    """How many nodes ``node`` stands for once every alias is expanded (memoised: shared nodes)."""
    key = id(node)
    if key not in memo:
        if isinstance(node, SequenceNode):
            memo[key] = 1 + sum(_expanded_size(child, memo) for child in node.value)
        elif isinstance(node, MappingNode):
            memo[key] = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
        else:
            memo[key] = 1
        memo[key] = min(memo[key], MAX_EXPANDED_NODES + 1)  # keeps the sums small
    return memo[key]


def read_config_text(path: Path, *, what: str = "configuration", max_bytes: int = MAX_CONFIG_BYTES) -> str:
    """The file's UTF-8 text; ConfigError (naming the file) when unreadable, too large or not UTF-8."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ConfigError(f"{path}: {what} file is {size:,} bytes; the limit is {max_bytes:,}")
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)  # the file may have grown since stat
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise ConfigError(f"{path}: {what} file is over the {max_bytes:,}-byte limit")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{path}: line {line}: {what} is not UTF-8 text "
            f"(byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def parse_yaml(text: str, path: Path) -> Any:
    """Parse one YAML document strictly; ConfigError with the file, line and column on any problem."""
    loader: _StrictLoader | None = None
    try:
        loader = _StrictLoader(text)  # the reader already rejects characters YAML does not allow
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, {}) > MAX_EXPANDED_NODES:
            raise ConfigError(
                f"{path}: aliases expand to more than {MAX_EXPANDED_NODES:,} values; "
                "refusing what looks like an alias bomb"
            )
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}:{_where(exc)} not valid YAML: {_problem(exc)}") from None
    except RecursionError:
        raise ConfigError(f"{path}: YAML nested too deeply") from None
    except (ValueError, OverflowError) as exc:  # a scalar the constructor could not convert
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    finally:
        if loader is not None:
            loader.dispose()
    check_values(data, path)
    return data


def check_values(data: Any, path: Path) -> None:
    """ConfigError naming the file and the field of the first value no setting can hold: an
    integer beyond ``MAX_CONFIG_INT``, a NaN or infinite number, a string with a NUL byte."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:  # iterative: the composer already bounded the size
        field, value = stack.pop()
        where = field or "(top level)"
        if isinstance(value, bool):
            continue
        if isinstance(value, _HugeInt):
            raise ConfigError(
                f"{path}: line {value.line}: {where}: the integer {value.head}... is out of range"
            )
        if isinstance(value, int) and abs(value) > MAX_CONFIG_INT:
            raise ConfigError(f"{path}: {where}: the integer {str(value)[:20]}... is out of range")
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{path}: {where}: {value} is not a usable number")
        if isinstance(value, str) and "\x00" in value:
            raise ConfigError(f"{path}: {where}: the text holds a NUL byte")
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and "\x00" in key:
                    raise ConfigError(f"{path}: {where}: a key holds a NUL byte")
                stack.append((f"{field}.{key}" if field else str(key), item))
        elif isinstance(value, list):
            stack.extend((f"{field}[{i}]", item) for i, item in enumerate(value))


def load_yaml_file(path: Path, *, what: str = "configuration") -> Any:
    """``read_config_text`` then ``parse_yaml``."""
    return parse_yaml(read_config_text(path, what=what), path)


def _where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        return f" line {mark.line + 1}, column {mark.column + 1}:"
    position = getattr(exc, "position", None)  # ReaderError: a character YAML does not allow
    return f" character {position}:" if position is not None else ""


def _problem(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None)
    if problem:
        context = getattr(exc, "context", None)
        return f"{problem} ({context})" if context else str(problem)
    return str(exc).replace("\n", " ")
