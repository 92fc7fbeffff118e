"""The launch walk, measured: where ``SubagentLauncher.launch``'s ``request`` goes on its way down.

Runs one child launch (the shipped ``explore`` profile, a scripted model, a one-file workspace)
under ``sys.settrace`` and records each call that the launch's own code makes with the request,
or a value made from it, as an argument: the request and its fields, then every value a recorded
call returns and that value's fields (the profile, the model, the spec, the plan ...). Calls are
followed from ``launch`` and, recursively, from functions in the launch's modules
(``agents/launcher.py``, ``agents/launch_io.py``, ``agents/plan.py``); a call into any other
module is one stay there; its
own callees are not followed (``run_loop`` is one stay). Comprehensions, lambdas and a function's
calls to itself (``plain_json``'s recursion) are left out.

- stays: recorded calls; rooms: the distinct modules they are in;
- returns: recorded calls that hand a value back (not None);
- switches: consecutive stays in different modules (the back and forth).

Run it from a worktree root to measure that commit::

    PYTHONPATH=$PWD python benchmarks/walk_launch.py
"""

from __future__ import annotations

import itertools
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

import subagent_lab
from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.config.profiles import load_config
from subagent_lab.models.scripted import ScriptedModel, final

ROOT = Path(subagent_lab.__file__).parent
WALK = {"agents/launcher.py", "agents/launch_io.py", "agents/plan.py"}


def _module(frame: FrameType) -> str | None:
    path = Path(frame.f_code.co_filename)
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else None


def walk() -> list[tuple[str, str, bool]]:
    """(module, function, returned a value) for each recorded call, in call order."""
    stays: list[list[Any]] = []
    walking: set[int] = set()  # ids of frames whose callees are recorded
    made: dict[int, Any] = {}  # the request and what was made from it, by id (kept alive: ids stay unique)

    def taint(value: Any) -> None:
        if value is None or isinstance(value, bool | int | float):
            return
        made[id(value)] = value
        fields = vars(value) if hasattr(value, "__dict__") else {}
        items = value if isinstance(value, tuple | list) else ()
        for part in (*fields.values(), *items):
            if part is not None and not isinstance(part, bool | int | float):
                made[id(part)] = part

    def carries(frame: FrameType) -> bool:
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        return any(id(frame.f_locals.get(n)) in made for n in names if n != "self")

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if event != "call":
            return None
        module, code = _module(frame), frame.f_code
        if code.co_qualname == "SubagentLauncher.launch":
            taint(frame.f_locals["request"])
            return _walking(frame, None)
        caller = frame.f_back
        if module is None or caller is None or id(caller) not in walking or code.co_name.startswith("<"):
            return None
        if caller.f_code is code or not carries(frame):  # recursion (plain_json) is one stay
            return None
        stay = [module, code.co_qualname, False]
        stays.append(stay)
        return _walking(frame, stay) if module in WALK else _returns(stay)

    def _returns(stay: list[Any]) -> Any:
        def on_return(f: FrameType, ev: str, value: Any) -> Any:
            if ev == "return":
                stay[2] = value is not None
                taint(value)
            return on_return

        return on_return

    def _walking(frame: FrameType, stay: list[Any] | None) -> Any:
        walking.add(id(frame))

        def on_return(f: FrameType, ev: str, value: Any) -> Any:
            if ev == "return":
                walking.discard(id(f))  # a frame id is reused once the frame is gone
                if stay is not None:
                    stay[2] = value is not None
                    taint(value)
            return on_return

        return on_return

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "app").mkdir(parents=True)
        (ws / "app" / "auth.py").write_text("def login(user, password):\n    return True\n")
        config = load_config(Path.cwd() / "profiles.yaml", env={})
        config = config.model_copy(update={"trace_dir": str(Path(tmp) / "runs")})
        model = ScriptedModel([final({"status": "completed", "summary": "login is in app/auth.py"})] * 8)
        launcher = SubagentLauncher(config, ws, model_factory=lambda c, m: model)
        request = SubagentRequest(task="Where is login implemented?", context={"hint": "app/"})
        sys.settrace(tracer)
        try:
            launcher.launch(request)
        finally:
            sys.settrace(None)
    return [(m, n, bool(r)) for m, n, r in stays]


def main() -> int:
    stays = walk()
    modules = [m for m, _, _ in stays]
    switches = sum(a != b for a, b in itertools.pairwise(modules))
    for module, name, returned in stays:
        print(f"  {module:32} {name}{'  ->' if returned else ''}")
    visits = {m: modules.count(m) for m in dict.fromkeys(modules)}
    print("visits: " + ", ".join(f"{m} {n}" for m, n in visits.items()))
    print(f"code: {subagent_lab.__file__}")
    print(
        f"stays {len(stays)}, rooms {len(set(modules))}, returns {sum(r for _, _, r in stays)}, "
        f"switches {switches}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
