"""The explore benchmark suites: loading task files, the built-in splits, and checking gold.

A suite is a task file (docs/task-files.md; the model in ``bench.task``): YAML with optional
defaults and a list of tasks, or JSONL with one task a line. ``load_suite`` takes a built-in
suite's id or a path. The built-in, hand-written suites (``legacy``) are task files over pinned
third-party packages:

- ``dev`` (``tasks.yaml``, the default): 30 tasks over jinja2, PyYAML and tqdm. The workspace root
  is the *installed* package directory (the pinned ``bench`` extra), found through importlib. The
  scaffold was tuned on these tasks.
- ``dev-tree``: the same 30 tasks, ids and prompts in the unpacked source distribution of each
  package (library code with its tests and docs, as a user's checkout looks); the gold paths are
  mapped into the tree (``loaders.py`` -> ``src/jinja2/loaders.py``).
- ``test`` (``tasks_test.yaml``): held out, over other packages (marshmallow, attrs, Markdown) in
  their source trees; written from the source before any model run and frozen by a hash.

``validate_tasks`` resolves every task's workspace (making git checkouts and fetching sdists) and
checks its gold spans against the files, before any run: a ``ConfigError`` names the file, the
task and the field.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from subagent_lab.bench.task import (
    SPLIT_PACKAGES,
    BenchTask,
    Difficulty,
    GoldSpan,
    Split,
    TaskFile,
    TaskKind,
)
from subagent_lab.bench.workspace_spec import (
    PINNED_VERSIONS,
    SPEC_KINDS,
    WorkspaceSpec,
    installed_version,
    package_root,
)
from subagent_lab.bench.workspaces import FieldError
from subagent_lab.core.types import ConfigError

__all__ = [  # the task model is re-exported: callers import a suite's names from here
    "DEFAULT_SUITE_PATH", "PINNED_VERSIONS", "SPLIT_PACKAGES", "SUITES", "SUITE_FILES", "TEST_SUITE_PATH",
    "BenchTask", "Difficulty", "GoldSpan", "Split", "SuiteName", "TaskFile", "TaskKind", "WorkspaceSpec",
    "check_absent", "check_gold", "gold_problems", "installed_version", "is_suite_id", "load_suite",
    "load_tasks", "package_root", "split_table", "suite_label", "task_file_schema", "validate_tasks",
]  # fmt: skip

SuiteName = Literal["dev", "dev-tree", "test"]
SUITES: tuple[SuiteName, ...] = ("dev", "dev-tree", "test")
"""The built-in suite ids ``load_suite`` accepts; anything else is a task file's path."""

SUITE_FILES: dict[str, Path] = {
    "mined-dev": Path(__file__).with_name("tasks_mined_dev.yaml"),
    "mined-dev2": Path(__file__).with_name("tasks_mined_dev2.yaml"),
    "mined-test": Path(__file__).with_name("tasks_mined_test.yaml"),
    "mined-test2": Path(__file__).with_name("tasks_mined_test2.yaml"),
}
"""More built-in suites: id -> task file (a mined suite registers its files here; ``load_suite``,
sweeps and ``subagent-lab sweep --tasks`` then take the id)."""

WORKSPACE_WORKERS = 4
"""Workspaces ``validate_tasks`` makes at once (downloads and unpacking of sdists, git checkouts)."""

DEFAULT_SUITE_PATH = Path(__file__).with_name("tasks.yaml")
TEST_SUITE_PATH = Path(__file__).with_name("tasks_test.yaml")


def load_suite(split: SuiteName | Path | str = "dev", *, path: Path | str | None = None) -> list[BenchTask]:
    """Load and validate a suite: ``dev`` (the default), ``dev-tree`` or ``test``, or a task file.

    ``split`` may also be a path (a ``Path``, or a string that is not a suite id), as may
    ``path``. Raises ConfigError naming the file, the task and the offending field, or a
    duplicated id. Nothing is fetched: ``validate_tasks`` resolves workspaces and checks gold.
    """
    if path is None and isinstance(split, str) and split in SUITE_FILES:
        return _load_file(SUITE_FILES[split])
    if path is not None or isinstance(split, Path) or split not in SUITES:
        return _load_file(Path(path if path is not None else split))
    if split == "test":
        tasks = _load_file(TEST_SUITE_PATH)
        wrong = [t.id for t in tasks if t.split != "test"]
        if wrong:
            raise ConfigError(f"{TEST_SUITE_PATH}: tasks not in the test split: {wrong}")
        return tasks
    dev = _load_file(DEFAULT_SUITE_PATH)
    return [t.in_tree() for t in dev] if split == "dev-tree" else dev


def load_tasks(source: str | Path, *, check: bool = False) -> list[BenchTask]:
    """The tasks of a task file (or a built-in suite id); with ``check``, ``validate_tasks`` first
    makes their workspaces and checks their gold (ConfigError naming file, task and field)."""
    return validate_tasks(source) if check else load_suite(source)


def is_suite_id(name: str | Path) -> bool:
    """Whether ``name`` is a built-in suite's id (``SUITES``, ``SUITE_FILES``) rather than a path."""
    return isinstance(name, str) and (name in SUITES or name in SUITE_FILES)


def suite_label(split: str | Path) -> str:
    """A suite's name for rows and tables: a built-in id, else the file's ``suite:`` or its stem."""
    if is_suite_id(split):
        return str(split)
    path = Path(split)
    if path.suffix in (".yaml", ".yml"):
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            raw = None
        if isinstance(raw, dict) and isinstance(raw.get("suite"), str):
            return raw["suite"]
    return path.stem


def _read(suite_path: Path) -> tuple[dict[str, Any], list[str]]:
    """The file as a task file's mapping (JSONL: its lines as tasks) and each task's place."""
    try:
        text = suite_path.read_text(encoding="utf-8")
        if suite_path.suffix == ".jsonl":
            lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
            return {"tasks": [json.loads(line) for _, line in lines]}, [f"line {n}" for n, _ in lines]
        raw = yaml.safe_load(text)
    except (OSError, yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{suite_path}: cannot read the task file: {exc}") from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("tasks"), list):
        raise ConfigError(f"{suite_path}: a task file is a mapping with a 'tasks' list (or JSONL)")
    # The file's split/workspace are its tasks' defaults (a task may still say otherwise).
    defaults = {k: raw[k] for k in ("split", "workspace") if raw.get(k) is not None}
    tasks = [{**defaults, **t} if isinstance(t, dict) else t for t in raw["tasks"]]
    # Validated in each task, where an error names the task: not once more at the top.
    top = {k: v for k, v in raw.items() if k not in ("split", "workspace")}
    return {**top, "tasks": tasks}, [f"tasks.{i}" for i in range(len(tasks))]


def _load_file(suite_path: Path) -> list[BenchTask]:
    raw, places = _read(suite_path)
    try:  # relative workspace paths are relative to the task file
        suite = TaskFile.model_validate(raw, context={"base": suite_path.resolve().parent})
    except ValidationError as exc:
        details = "; ".join(_explain(err, raw["tasks"], places) for err in exc.errors())
        raise ConfigError(f"{suite_path}: invalid task file: {details}") from exc
    seen: set[str] = set()
    for task in suite.tasks:
        if task.id in seen:
            raise ConfigError(f"{suite_path}: duplicate task id {task.id!r}")
        seen.add(task.id)
    return list(suite.tasks)


def _explain(err: Any, tasks: list[Any], places: list[str]) -> str:
    """One validation error as ``task 'id' (tasks.3): workspace.rev: message``."""
    loc = [str(p) for p in err["loc"]]
    # A workspace's kind tag is not a field: ``workspace.git.rev`` reads ``workspace.rev``.
    tag = [
        bool(i) and loc[i - 1] == "workspace" and p in SPEC_KINDS and i + 1 < len(loc)
        for i, p in enumerate(loc)
    ]
    loc = [p for p, is_tag in zip(loc, tag, strict=True) if not is_tag]
    if len(loc) >= 2 and loc[0] == "tasks" and loc[1].isdigit() and int(loc[1]) < len(tasks):
        index = int(loc[1])
        task = tasks[index]
        name = task.get("id") if isinstance(task, dict) else None
        field = ".".join(loc[2:]) or "task"
        return f"task {name!r} ({places[index]}): {field}: {err['msg']}"
    return f"{'.'.join(loc)}: {err['msg']}"


def validate_tasks(
    source: str | Path | Sequence[BenchTask], *, fetch: bool = True, where: str | None = None
) -> list[BenchTask]:
    """Load a task file (or take tasks), resolve every workspace and check every gold span.

    With ``fetch`` (the default) git checkouts are made and sdists fetched into the cache first.
    Raises one ConfigError listing each problem as ``<file>: task '<id>': <field>: <what>``: a
    missing directory, a commit the repository lacks, an sdist whose SHA-256 differs, a gold file
    that is not there, a span beyond its file's end, an anchor not in its span. Returns the tasks.
    """
    if isinstance(source, (str, Path)):
        tasks, label = load_suite(source), where or str(source)
    else:
        tasks, label = list(source), where or "tasks"
    problems: list[str] = []
    first: dict[str, BenchTask] = {}
    for task in tasks:
        first.setdefault(task.workspace.model_dump_json(), task)
    # Distinct workspaces are made side by side: a mined suite names a hundred sdists, and each
    # download waits on the network far more than on a core.
    with ThreadPoolExecutor(max_workers=WORKSPACE_WORKERS) as pool:
        made = dict(
            zip(first, pool.map(lambda t: _workspace_root(t, fetch, label), first.values()), strict=True)
        )
    roots: dict[str, Path | None] = {}
    for key, (root, problem) in made.items():
        roots[key] = root
        problems += [problem] if problem else []
    for task in tasks:
        root = roots[task.workspace.model_dump_json()]
        if root is not None:
            problems += [
                f"{label}: task {task.id!r}: {field}: {what}" for field, what in gold_problems(task, root)
            ]
    if problems:
        raise ConfigError("\n".join(problems))
    return tasks


def _workspace_root(task: BenchTask, fetch: bool, label: str) -> tuple[Path | None, str | None]:
    """``task``'s workspace root, or None and the problem naming the file, the task and the field."""
    try:
        return task.workspace_root(fetch=fetch), None
    except FieldError as exc:
        return None, f"{label}: task {task.id!r}: workspace.{exc.field}: {exc}"
    except ConfigError as exc:
        return None, f"{label}: task {task.id!r}: workspace: {exc}"


def task_file_schema() -> dict[str, Any]:
    """The JSON Schema of a YAML task file as the loader reads it (``docs/task-file.schema.json``
    is this, committed; ``subagent-lab schema --tasks`` prints it).

    Generated from the models (``TaskFile``, ``BenchTask``), then given the two rules the loader
    applies before them (``_read``, ``BenchTask._legacy_workspace``): a task may leave out
    ``workspace`` when the file gives a default, or when it names a ``package`` (its installed
    directory); and a task's ``workspace`` may be a legacy suite's ``installed`` or ``tree``.
    """
    schema = TaskFile.model_json_schema()
    task = schema["$defs"]["BenchTask"]
    task["required"] = [name for name in task["required"] if name != "workspace"]
    spec = {k: v for k, v in task["properties"]["workspace"].items() if k in ("oneOf", "anyOf", "$ref")}
    legacy = {"enum": ["installed", "tree"], "type": "string"}
    task["properties"]["workspace"] = {
        "anyOf": [spec, legacy],
        "description": task["properties"]["workspace"].get("description", "")
        + " Required unless the file gives a default or the task names a ``package``.",
        "title": "Workspace",
    }
    # A legacy ``installed``/``tree`` names the package's directory: only a task naming one has it.
    task["if"] = {"properties": {"workspace": {"type": "string"}}, "required": ["workspace"]}
    task["then"] = {"required": ["package"]}

    def every_task(rule: dict[str, Any]) -> dict[str, Any]:
        return {"properties": {"tasks": {"items": rule}}}

    own = {"anyOf": [{"required": ["workspace"]}, {"required": ["package"]}]}
    schema["allOf"] = [
        # No file-level default (the key absent or null): each task names its workspace or a package.
        {"if": {"properties": {"workspace": {"type": "null"}}}, "then": every_task(own)},
        # A legacy default: each task without a workspace of its own names its package.
        {
            "if": {"properties": {"workspace": {"type": "string"}}, "required": ["workspace"]},
            "then": every_task({"anyOf": [{"required": ["package"]}, {"required": ["workspace"]}]}),
        },
    ]
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "subagent_lab task file"
    return schema


def gold_problems(task: BenchTask, root: Path) -> list[tuple[str, str]]:
    """(field, problem) for each unsound gold span of ``task`` under ``root``; empty when sound.

    A missing file (``gold.<i>.path``), a span beyond the end of its file (``gold.<i>.end``), an
    anchor not within the span's lines (``gold.<i>.anchor``; only checked when given).
    """
    problems: list[tuple[str, str]] = []
    cache: dict[str, list[str]] = {}
    for i, span in enumerate(task.gold):
        if span.path not in cache:
            file = root / span.path
            if not file.is_file():
                problems.append((f"gold.{i}.path", f"{span.path}: no such file under {root}"))
                continue
            cache[span.path] = file.read_text(encoding="utf-8", errors="replace").splitlines()
        lines = cache[span.path]
        if span.end > len(lines):
            problems.append((f"gold.{i}.end", f"{span.label}: beyond end of file ({len(lines)} lines)"))
            continue
        text = "\n".join(lines[span.start - 1 : span.end])
        if span.anchor is not None and span.anchor not in text:
            problems.append(
                (f"gold.{i}.anchor", f"{span.label}: anchor {span.anchor!r} not found in the span")
            )
    return problems


def check_gold(task: BenchTask, root: Path | None = None) -> list[str]:
    """Problems with a task's gold spans against its sources, as ``id: what``; empty when sound.

    Reports a missing file, a span beyond the end of the file, and an anchor that does not
    occur within the span's lines. ``root`` defaults to ``task.workspace_root()``.
    """
    base = root if root is not None else task.workspace_root()
    return [f"{task.id}: {what}" for _, what in gold_problems(task, base)]


def check_absent(task: BenchTask, root: Path | None = None) -> list[str]:
    """The files of the tree that hold one of an absent task's ``probes`` (case-insensitive).

    Every file under the root counts (code, tests, docs): the answer "not there" must hold for
    the whole checkout. Empty when sound. ``root`` defaults to ``task.workspace_root()``.
    """
    base = root if root is not None else task.workspace_root()
    probes = [p.lower() for p in task.probes]
    hits: list[str] = []
    for file in sorted(base.rglob("*")):
        if not file.is_file():
            continue
        text = file.read_bytes().decode("utf-8", errors="replace").lower()
        hits += [f"{task.id}: {file.relative_to(base)} holds {p!r}" for p in probes if p in text]
    return hits


def split_table() -> str:
    """Tasks per split and package by kind, and how many cite several files (docs/benchmarks.md)."""
    kinds: tuple[TaskKind, ...] = ("locate", "trace", "enumerate", "explain", "absent")  # the legacy ones
    rows = [
        f"{'split':9} {'package':12} "
        + " ".join(f"{k:>9}" for k in kinds)
        + f" {'multi-file':>10} {'all':>4}"
    ]
    for split in SUITES:
        tasks = load_suite(split)
        for package in [*sorted({t.package or "-" for t in tasks}), "all"]:
            part = [t for t in tasks if package in ("all", t.package or "-")]
            counts = " ".join(f"{sum(t.kind == k for t in part):>9}" for k in kinds)
            multi = sum(len({g.path for g in t.gold}) > 1 for t in part)
            rows.append(f"{split:9} {package:12} {counts} {multi:>10} {len(part):>4}")
    return "\n".join(rows)
