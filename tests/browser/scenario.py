"""Real runs for the browser tests, made with scripted models over small real folders.

Shared by the notebook the JupyterLab test runs (its kernel imports this file from the notebook's
directory) and by the report test (in the test process). Only the public API is used
(``import subagent_lab as sl``): the runs are the harness's own runs and their traces are the
harness's real trace files; only the model's turns are scripted, so everything is deterministic
and takes a second or two.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import subagent_lab as sl

# The turn builders live next to ScriptedModel, wherever the package keeps it.
_scripted = inspect.getmodule(sl.ScriptedModel)
tool_call = _scripted.tool_call  # type: ignore[union-attr]
final = _scripted.final  # type: ignore[union-attr]

LOOSE = {
    "min_tool_calls": 0,
    "tool_interface": "full",
    "constrain_paths": False,
    "finish_after_stale": 0,
    "read_after_hits": False,
    # the shipped default starts from the harness's own Find and Search (symbol tools of the simple
    # interface); these scripted turns make every call themselves
    "symbol_tools": False,
    "tool_guide": False,
    "cite_units": False,
    "retrieval_start": 0,
    "min_evidence": 0,
}
"""As the unit tests: scripted turns call the full tools with any path and answer when they like."""

SCRIPTED_SCAFFOLD = "retrieval-start"
"""The scaffold these scripted turns were written for: the model writes the answer (under the
shipped `rank` the harness writes it, and a judge call would take a scripted turn)."""

TASK = "Where is login implemented?"
AUTH_PY = (
    "import hashlib\n\n\ndef login(user, password):\n    return check_password(user, password)\n\n\n"
    "def check_password(user, password):\n"
    "    return hashlib.sha256(password.encode()).hexdigest() == user.pw\n"
)
ANSWER = {
    "status": "completed",
    "summary": "login is defined in app/auth.py and checks the password hash.",
    "findings": ["login calls check_password"],
    "evidence": ["app/auth.py:4-5", "app/missing.py:3"],
    "unresolved_questions": [],
}
SWEEP_TASK = "yaml-safe-load"
SECOND_TASK = "yaml-yamlerror"
"""The report's sweep runs a second task too, so its paired comparison has an interval."""
SWEEP_VARIANTS = {"s4": {"max_steps": 4}, "default": {}}


def make_workspace(root: str | Path) -> Path:
    """A small real code base to explore: ``<root>/ws/app/{auth,views}.py`` and a README."""
    ws = Path(root) / "ws"
    (ws / "app").mkdir(parents=True, exist_ok=True)
    (ws / "app" / "auth.py").write_text(AUTH_PY)
    (ws / "app" / "views.py").write_text("from app.auth import login\n\n\ndef index():\n    return 'hi'\n")
    (ws / "README.md").write_text("# demo\nAuthentication lives in app/auth.py.\n")
    return ws


def explore_run(root: str | Path) -> Any:
    """One explore run: a Grep, an Edit the explore profile does not allow (denied), a Read, then
    an answer citing one real span (``app/auth.py:4-5``) and one missing file."""
    root = Path(root).resolve()
    model = sl.ScriptedModel(
        [
            tool_call("Grep", pattern="def login"),
            tool_call("Edit", path="app/auth.py", old="a", new="b"),
            tool_call("Read", path="app/auth.py"),
            final(ANSWER),
        ]
    )
    return sl.explore(
        TASK, make_workspace(root), model, runs_dir=root / "runs", scaffold=SCRIPTED_SCAFFOLD, **LOOSE
    )


def _sweep_factory(choice: str, cfg: object) -> Any:
    """light never produces valid JSON (invalid_output); main greps and answers with the gold spans."""
    if choice == "light":
        return sl.ScriptedModel(
            [tool_call("Glob", pattern="*.py"), final("nope"), final("still not json"), final("{")]
        )
    gold = [g.label for g in sl.bench_task(SWEEP_TASK).gold]
    answer = {**ANSWER, "summary": "safe_load uses SafeLoader", "evidence": gold}
    return sl.ScriptedModel([tool_call("Grep", pattern="def safe_load"), final(json.dumps(answer))])


def sweep_runs(root: str | Path, tasks: tuple[str, ...] = (SWEEP_TASK,)) -> Any:
    """A sweep of benchmark tasks x light/main x two variants (one task: four rows, two of each
    outcome)."""
    root = Path(root).resolve()
    return sl.sweep(
        tasks=list(tasks),
        models=["light", "main"],
        variants=SWEEP_VARIANTS,
        model=_sweep_factory,
        cache=False,
        name="browser",
        runs_dir=root / "runs",
        scaffolds=[SCRIPTED_SCAFFOLD],
        progress=False,
        **LOOSE,
    )
