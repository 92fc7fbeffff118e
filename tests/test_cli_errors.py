"""The command line's errors are one line and exit status 2 (a usage error, a bad value, a task id
or a file that is not there), and its sweep directories nest as ``sl.sweep``'s do; ``help`` on the
API names every model choice."""

from __future__ import annotations

import pydoc
from pathlib import Path

import pytest

import subagent_lab as sl
from subagent_lab.cli.main import main


def _one_line_error(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("subagent-lab") and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    (tmp_path / "code" / "app").mkdir(parents=True)
    (tmp_path / "code" / "app" / "auth.py").write_text("def login(user, password):\n    return True\n")
    path = tmp_path / "tasks.yaml"
    path.write_text(
        "suite: mine\ntasks:\n"
        "  - {id: login, prompt: 'Where is login defined?', workspace: {dir: code},\n"
        "     gold: [{path: app/auth.py, start: 1, end: 2}]}\n"
    )
    return path


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["sweep", "--models", "lite"], ["argument --models", "'lite'", "light, main, none, retrieval"]),
        (["sweep", "--modles", "none"], ["unrecognized arguments: --modles"]),
        (["swep"], ["invalid choice: 'swep'"]),
        (["sweep", "--out", "a", "--runs-dir", "b"], ["not allowed with argument --out"]),
    ],
)
def test_usage_errors_are_one_line(
    argv: list[str], needles: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    _one_line_error(capsys, *needles)


def test_what_the_library_refuses_is_one_line(
    task_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", "--suite", "test", "--models", "none"]) == 2
    _one_line_error(capsys, "'test' is a built-in suite: pass it as --tasks test")
    argv = [
        "sweep",
        "--tasks",
        str(task_file),
        "--suite",
        "nosuch",
        "--models",
        "none",
        "--runs-dir",
        str(tmp_path),
    ]
    assert main(argv) == 2
    _one_line_error(capsys, "unknown task ids or selectors ['nosuch']")
    with pytest.raises(ValueError, match="nosuch"):
        main(["--traceback", *argv])  # the whole traceback, when asked for
    assert main(["--config", str(tmp_path / "gone.yaml"), "check"]) == 2
    _one_line_error(capsys, "gone.yaml", "$SUBAGENT_LAB_CONFIG", "config=")
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: {main: {model: m, max_output_tokens: -1}}\nprofiles: {}\nserver: {n_ctx: x}\n")
    assert main(["--config", str(bad), "check"]) == 2  # a multi-line ConfigError, on one line
    _one_line_error(capsys, "invalid configuration", "max_output_tokens", "n_ctx")


def test_sweep_runs_dir_nests_as_the_api_does(
    task_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs-here"
    argv = [
        "sweep",
        "--tasks",
        str(task_file),
        "--models",
        "none",
        "--scaffold",
        "profile",
        "--runs-dir",
        str(runs),
    ]
    assert main(argv) == 0
    cli_dirs = {p.parent.parent for p in runs.rglob("results.jsonl")}  # <sweeps>/<name>-<hash>/
    df = sl.sweep(str(task_file), ["none"], runs_dir=runs, progress=False)
    assert cli_dirs == {runs / "sweeps"} and Path(df.attrs["sweep_dir"]).parent == runs / "sweeps"
    assert main([*argv[:-2], "--out", str(tmp_path / "o")]) == 0  # --out: the sweeps directory itself
    assert {p.parent.parent for p in (tmp_path / "o").rglob("results.jsonl")} == {tmp_path / "o"}
    capsys.readouterr()


def test_help_on_explore_lists_every_model_choice() -> None:
    text = pydoc.render_doc(sl.explore, renderer=pydoc.plaintext)
    model_arg = text.split("model: ``")[1].split("profile: ")[0]  # the docstring's Args entry
    for choice in ('"light"', '"main"', '"none"', '"retrieval"'):
        assert choice in model_arg, choice
