"""Task files on any workspace (docs/task-files.md): a directory, a git commit, an sdist, an
installed package; errors that name the file, the task and the field before any run."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import git_in

from subagent_lab.analysis.summary import headline, summarize
from subagent_lab.bench.suite import load_suite, task_file_schema, validate_tasks
from subagent_lab.bench.workspace_spec import DirWorkspace, GitWorkspace, InstalledWorkspace
from subagent_lab.cli.main import main
from subagent_lab.core.types import ConfigError
from subagent_lab.experiments.sweep import SweepSpec, run_sweep

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "docs" / "task-file.schema.json"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str, str]:
    """A git repository of two commits (``calc.add`` written, then ``calc.sub`` added) and an
    empty cache; returns the repository and the two commit ids."""
    monkeypatch.setenv("SUBAGENT_LAB_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "proj"
    (repo / "calc").mkdir(parents=True)
    git_in(repo, "init", "-q")
    (repo / "calc" / "__init__.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    git_in(repo, "add", "-A")
    git_in(repo, "commit", "-q", "-m", "add")
    first = git_in(repo, "rev-parse", "HEAD")
    with (repo / "calc" / "__init__.py").open("a", encoding="utf-8") as fh:
        fh.write("\n\ndef sub(a, b):\n    return a - b\n")
    git_in(repo, "commit", "-q", "-am", "Add subtraction")
    return repo, first, git_in(repo, "rev-parse", "HEAD")


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _git_file(tmp_path: Path, rev: str, gold: str = "{path: calc/__init__.py, start: 1, end: 2}") -> Path:
    return _write(
        tmp_path / "tasks" / "mine.yaml",
        f"suite: mine\nworkspace: {{git: ../proj, rev: {rev}}}\ntasks:\n"
        f"  - id: calc-add\n    prompt: Where are two numbers added?\n    gold: [{gold}]\n"
        f"    meta: {{repo: proj}}\n",
    )


def test_a_git_workspace_is_a_clean_read_only_checkout_of_that_commit(
    repo: tuple[Path, str, str], tmp_path: Path
) -> None:
    proj, first, _ = repo
    (proj / "calc" / "__init__.py").write_text("edited, not committed\n", encoding="utf-8")
    (proj / "build.log").write_text("untracked\n", encoding="utf-8")
    path = _git_file(tmp_path, first)
    [task] = load_suite(path)
    assert task.workspace == GitWorkspace(git=str(proj.resolve()), rev=first)  # relative to the file
    assert (task.kind, task.package, task.difficulty, task.meta) == ("localize", None, None, {"repo": "proj"})
    with pytest.raises(ConfigError, match="not checked out"):
        task.workspace_root()  # nothing is written without fetch
    [checked] = validate_tasks(path)
    root = checked.workspace_root()
    assert root == tmp_path / "cache" / "workspaces" / f"git-{first}"
    assert sorted(p.name for p in root.rglob("*")) == ["__init__.py", "calc"]  # no .git, no untracked file
    text = (root / "calc" / "__init__.py").read_text(encoding="utf-8")
    assert text == "def add(a, b):\n    return a + b\n"  # the commit's, not the working copy's
    assert not (root / "calc" / "__init__.py").stat().st_mode & 0o222
    assert validate_tasks(path) == [checked]  # a second check reuses the checkout


def test_a_dir_workspace_is_relative_to_the_task_file(tmp_path: Path) -> None:
    _write(tmp_path / "code" / "app.py", "def main():\n    pass\n")
    path = _write(
        tmp_path / "suite" / "t.yaml",
        "tasks:\n  - {id: app-main, prompt: 'Where does the app start?', workspace: {dir: ../code},"
        " gold: [{path: app.py, start: 1, end: 2, anchor: 'def main('}]}\n",
    )
    [task] = validate_tasks(path)
    assert task.workspace == DirWorkspace(dir=str((tmp_path / "code").resolve()))
    assert task.workspace_root() == (tmp_path / "code").resolve() and task.scored


def test_jsonl_loads_one_task_a_line_and_gold_is_optional(tmp_path: Path) -> None:
    lines = [
        {"id": "x.1", "prompt": "Where is the YAML loader?", "workspace": {"installed": "yaml"}},
        {"id": "x.2", "prompt": "Where is a feature that is not there?", "kind": "absent",
         "workspace": {"dir": "."}, "meta": {"units": ["a.b"]}},
    ]  # fmt: skip
    path = _write(tmp_path / "t.jsonl", "\n".join(json.dumps(t) for t in lines) + "\n\n")
    a, b = validate_tasks(path)
    assert a.workspace == InstalledWorkspace(installed="yaml") and not a.scored  # no gold: not scored
    assert Path(a.workspace_root()).name == "yaml"
    assert b.scored and b.workspace_root() == tmp_path.resolve() and b.meta == {"units": ["a.b"]}


@pytest.mark.parametrize(
    ("case", "field"),
    [
        ("wrong-rev", "workspace.rev"),
        ("beyond", "gold.0.end"),
        ("anchor", "gold.0.anchor"),
        ("no-file", "gold.0.path"),
        ("no-dir", "workspace.dir"),
    ],
)
def test_each_problem_names_file_task_and_field_before_any_run(
    repo: tuple[Path, str, str], tmp_path: Path, case: str, field: str
) -> None:
    _, first, second = repo
    if case == "wrong-rev":
        path = _git_file(tmp_path, "0" * 40)
    elif case == "beyond":
        path = _git_file(tmp_path, first, "{path: calc/__init__.py, start: 4, end: 5}")  # sub: only at second
    elif case == "anchor":
        path = _git_file(tmp_path, second, "{path: calc/__init__.py, start: 1, end: 2, anchor: 'def sub('}")
    elif case == "no-file":
        path = _git_file(tmp_path, first, "{path: calc/missing.py, start: 1, end: 1}")
    else:
        path = _write(
            tmp_path / "t.yaml", "tasks:\n  - {id: calc-add, prompt: 'Where is a?', workspace: {dir: gone}}\n"
        )
    with pytest.raises(ConfigError) as info:
        validate_tasks(path)
    assert str(info.value).startswith(f"{path}: task 'calc-add': {field}: "), str(info.value)
    if case == "beyond":  # the same span is sound at the commit that has it
        _git_file(tmp_path, second, "{path: calc/__init__.py, start: 4, end: 5, anchor: 'def sub('}")
        assert [t.id for t in validate_tasks(path)] == ["calc-add"]


def test_a_rev_that_names_a_tag_or_branch_is_refused_at_load(
    repo: tuple[Path, str, str], tmp_path: Path
) -> None:
    path = _git_file(tmp_path, "main")
    with pytest.raises(
        ConfigError, match=rf"{path}: invalid task file: task 'calc-add' \(tasks\.0\): workspace\.rev: "
    ):
        load_suite(path)


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ("{id: a, prompt: 'Where is add?'}", r"task 'a' \(tasks\.0\): workspace: Field required"),
        ("{id: a, prompt: 'Where is add?', workspace: {url: x}}", "a workspace is one of"),
        ("{id: a, prompt: 'Where is add?', workspace: {dir: .}, gold: [{path: a.py, start: 3, end: 1}]}",
         r"task 'a' \(tasks\.0\): gold\.0: .*before start"),
        ("{id: A, prompt: 'Where is add?', workspace: {dir: .}}", r"task 'A' \(tasks\.0\): id: "),
        ("{id: a, prompt: 'Where is add?', workspace: {dir: .}, colour: red}", "colour: Extra inputs"),
    ],
)  # fmt: skip
def test_load_errors_name_the_task_and_the_field(tmp_path: Path, task: str, message: str) -> None:
    path = _write(tmp_path / "t.yaml", f"tasks:\n  - {task}\n")
    with pytest.raises(ConfigError, match=message):
        load_suite(path)


def test_an_sdist_whose_sha256_differs_is_refused_naming_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBAGENT_LAB_CACHE", str(tmp_path / "cache"))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("demo-1.0/demo/__init__.py")
        tar.addfile(info, io.BytesIO(b""))
    data = buf.getvalue()
    page = _write(tmp_path / "index" / "demo" / "index.html", '<a href="../files/demo-1.0.tar.gz">x</a>\n')
    (tmp_path / "index" / "files").mkdir()
    (tmp_path / "index" / "files" / "demo-1.0.tar.gz").write_bytes(data)
    monkeypatch.setenv("PIP_INDEX_URL", page.parents[1].as_uri())  # a PEP 503 page stating no digest
    good = hashlib.sha256(data).hexdigest()
    for sha, ok in (("f" * 64, False), (good, True)):
        path = _write(
            tmp_path / "t.yaml",
            f"workspace: {{sdist: demo==1.0, sha256: {sha}}}\ntasks:\n  - {{id: d, prompt: 'Where is X?'}}\n",
        )
        if ok:
            [task] = validate_tasks(path)
            assert (task.workspace_root() / "demo" / "__init__.py").is_file()
        else:
            with pytest.raises(ConfigError, match=rf"^{path}: task 'd': workspace\.sha256: .*differs"):
                validate_tasks(path)


def test_legacy_suites_load_and_resolve_as_before() -> None:
    dev = load_suite("dev")
    assert len(dev) == 30 and {t.legacy_workspace for t in dev} == {"installed"}
    assert validate_tasks(dev, fetch=False) == dev  # the installed packages, gold checked


def test_committed_schema_is_the_models() -> None:
    assert json.loads(SCHEMA_PATH.read_text(encoding="utf-8")) == task_file_schema(), (
        "docs/task-file.schema.json is stale: regenerate it with "
        "`subagent-lab schema --tasks > docs/task-file.schema.json`"
    )


def _schema_validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_docs_examples_are_valid_under_the_schema(tmp_path: Path) -> None:
    """Every task file written out in docs/task-files.md passes the committed schema (as an editor
    pointed at it checks it) and the loader."""
    import yaml

    text = (SCHEMA_PATH.parent / "task-files.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in text.split("```yaml\n")[1:]]
    examples = [b for b in blocks if "tasks:" in b]
    assert examples, "docs/task-files.md shows no task file"
    validator = _schema_validator()
    for i, example in enumerate(examples):
        problems = [
            f"{'/'.join(map(str, e.path))}: {e.message}"
            for e in validator.iter_errors(yaml.safe_load(example))
        ]
        assert problems == []
        assert load_suite(_write(tmp_path / f"example{i}.yaml", example))


SCHEMA_CASES = [
    # A file-level default: its tasks need no workspace of their own (the schema required one).
    ("workspace: {dir: proj}\ntasks:\n  - {id: a, prompt: 'Where is a defined?'}\n", True),
    ("workspace: {dir: proj}\ntasks:\n  - {id: a, prompt: 'Where is a defined?', workspace: {dir: b}}\n",
     True),
    # No default: each task names one (or a package: its installed directory).
    ("tasks:\n  - {id: a, prompt: 'Where is a defined?'}\n", False),
    ("workspace: null\ntasks:\n  - {id: a, prompt: 'Where is a defined?'}\n", False),
    ("tasks:\n  - {id: a, prompt: 'Where is a defined?', workspace: {dir: proj}}\n", True),
    ("tasks:\n  - {id: a, prompt: 'Where is a defined?', package: calc}\n", True),
    ("tasks:\n  - {id: a, prompt: 'Where is a defined?', package: calc, workspace: installed}\n", True),
    ("tasks:\n  - {id: a, prompt: 'Where is a defined?', workspace: installed}\n", False),
    ("workspace: installed\ntasks:\n  - {id: a, prompt: 'Where is a defined?'}\n", False),
    ("workspace: installed\ntasks:\n  - {id: a, prompt: 'Where is a defined?', package: calc}\n", True),
    ("workspace: {dir: proj}\ntasks:\n  - {id: a, prompt: 'short'}\n", False),
    ("workspace: {dir: proj}\ntasks:\n  - {id: a, prompt: 'Where is a defined?', colour: red}\n", False),
]  # fmt: skip


@pytest.mark.parametrize(("text", "valid"), SCHEMA_CASES)
def test_the_schema_accepts_what_the_loader_accepts(text: str, valid: bool, tmp_path: Path) -> None:
    import yaml

    path = _write(tmp_path / "t.yaml", text)
    try:
        load_suite(path)
        loads = True
    except ConfigError:
        loads = False
    errors = list(_schema_validator().iter_errors(yaml.safe_load(text)))
    assert loads is valid and (not errors) is valid, [e.message for e in errors]


# ---------------------------------------------------------------------------- sweeps over a task file


def _two_tasks(tmp_path: Path, rev: str) -> Path:
    """A task with gold and one without (run and tabulated, not scored)."""
    return _write(
        tmp_path / "tasks" / "mine.yaml",
        f"suite: mine\nworkspace: {{git: ../proj, rev: {rev}}}\ntasks:\n"
        "  - {id: calc-add, prompt: 'Where are two numbers added?', meta: {commit: abc},\n"
        "     gold: [{path: calc/__init__.py, start: 1, end: 2, anchor: 'def add('}]}\n"
        "  - {id: calc-sub, prompt: 'Where are two numbers subtracted?'}\n",
    )


def test_sweep_over_a_task_file_tabulates_scored_and_unscored_tasks(
    repo: tuple[Path, str, str], tmp_path: Path, config_path: str
) -> None:
    import subagent_lab as sl

    _, _, second = repo
    path = _two_tasks(tmp_path, second)
    df = sl.sweep(str(path), ["none"], config=config_path, progress=False).set_index("task_id")
    assert sorted(df.index) == ["calc-add", "calc-sub"] and set(df["split"]) == {"mine"}
    assert not df["terminal_reason"].eq("crashed").any(), df.get("error")
    assert pd.notna(df.loc["calc-add", "quality"]) and pd.isna(df.loc["calc-sub", "quality"])
    assert df["total_tokens"].notna().all() and "Grep_executed" in df.columns
    assert json.loads(df.loc["calc-add", "task_meta"]) == {"commit": "abc"}
    table = df.reset_index()
    assert len(summarize(table)) == 1 and not headline(table).empty  # the tables take unscored rows


def test_a_task_file_sweep_stops_before_any_run_on_a_bad_task(
    repo: tuple[Path, str, str], tmp_path: Path, config_path: str
) -> None:
    _, first, _ = repo
    path = _two_tasks(tmp_path, first)  # calc-add's gold is fine at first; make it wrong:
    path.write_text(path.read_text().replace("end: 2,", "end: 9,"), encoding="utf-8")
    spec = SweepSpec(name="bad", split=str(path), tasks=("all",), models=("none",))
    with pytest.raises(ConfigError, match=r"task 'calc-add': gold\.0\.end: "):
        run_sweep(spec, config_path=config_path, out_dir=tmp_path / "sw", progress=False)
    assert not list((tmp_path / "sw").rglob("results.jsonl"))


def test_cli_sweep_takes_a_task_file(
    repo: tuple[Path, str, str], tmp_path: Path, config_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, second = repo
    path = _two_tasks(tmp_path, second)
    argv = [
        "--config",
        config_path,
        "sweep",
        "--tasks",
        str(path),
        "--models",
        "none",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Quality, lift over" in out and "Terminal reasons" in out
    assert main(["tasks", str(path)]) == 0 and "2 tasks OK" in capsys.readouterr().out


def test_a_registered_suite_id_loads_its_file(
    repo: tuple[Path, str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from subagent_lab.bench import suite as suite_mod

    path = _two_tasks(tmp_path, repo[2])
    monkeypatch.setitem(suite_mod.SUITE_FILES, "mined-dev", path)
    assert load_suite("mined-dev") == load_suite(path) and suite_mod.suite_label("mined-dev") == "mined-dev"
    assert suite_mod.suite_label(path) == "mine" and suite_mod.is_suite_id("mined-dev")


def test_explore_runs_a_task_of_a_file_in_its_checkout(
    repo: tuple[Path, str, str], tmp_path: Path, config_path: str
) -> None:
    import subagent_lab as sl
    from subagent_lab.core.trace import RunStarted, read_trace
    from subagent_lab.models.scripted import final, tool_call

    path = _two_tasks(tmp_path, repo[1])
    task = sl.bench_task("calc-add", path)
    assert task == sl.load_tasks(path)[0]
    answer = {"status": "completed", "summary": "add adds.", "findings": ["add returns a + b"],
              "evidence": ["calc/__init__.py:1"], "unresolved_questions": []}  # fmt: skip
    model = sl.ScriptedModel([tool_call("Grep", pattern="def add"), final(answer)])
    result = sl.explore(task, model=model, config=config_path, runs_dir=tmp_path / "runs")
    start = read_trace(result.trace_path)[0]
    checkout = tmp_path / "cache" / "workspaces" / f"git-{repo[1]}"
    assert isinstance(start, RunStarted) and Path(start.workspace) == checkout  # made on first use
    assert result.status == "completed" and sl.score(task, result).gold_recall_line == 1.0


def test_a_jsonl_error_names_the_line(tmp_path: Path) -> None:
    good = {"id": "a", "prompt": "Where is the loader?", "workspace": {"dir": "."}}
    bad = {"id": "b", "prompt": "Where is the dumper?", "workspace": {"dir": "."}, "gold": [{"path": "x.py"}]}
    path = _write(tmp_path / "t.jsonl", f"{json.dumps(good)}\n\n{json.dumps(bad)}\n")
    with pytest.raises(ConfigError, match=r"task 'b' \(line 3\): gold\.0\.start: Field required"):
        load_suite(path)
