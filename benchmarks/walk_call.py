"""The call walk, measured: where one model call's request goes, from ``call_model`` to the wire and back.

Runs one child launch (the ``explore`` profile under the ``retrieval-start`` preset, whose model
writes the answer: the shipped ``rank`` has the harness write it) against the scripted fake endpoint
(``fake_endpoint.py``, in this process: no model, no server of the lab's) through the real
OpenAI-compatible adapter (grammar on, the shipped default), and records its final-answer call
(``call_model`` with purpose ``final``: the contract's schema decoded under the grammar) under
``sys.settrace``, with
``benchmarks/walk_launch.py``'s rules: each call that the call's own code makes with the request,
or a value made from it, as an argument is a stay. The request is every ``ModelRequest``, what
``call_model`` is asked (its purpose, phase, menu, schema), every value a recorded call returns,
and those values' fields and items. Calls are followed from ``call_model`` and, recursively, from
functions in the call's own code (``core/calls.py`` and the model adapters, ``models/``); a call
into any other module is one stay there, its own callees not followed. Comprehensions and lambdas
belong to the function they are in; a function's calls to itself are one stay.

- stays: recorded calls; rooms: the distinct modules they are in;
- to the wire: the stays before the request is posted (the openai client's ``post``);
- returns: recorded calls that hand a value back (not None);
- switches: consecutive stays in different modules (the back and forth).

Run it from a worktree root to measure that commit::

    PYTHONPATH=$PWD python benchmarks/walk_call.py [--protocol json|native] [--exact]

``--exact`` counts prompts as on the lab's llama-server (``count_url``: the fake endpoint's
``/apply-template`` and ``/tokenize``), where counting reads the request's wire form too.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

from fake_endpoint import FakeEndpoint

import subagent_lab
from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.config.profiles import load_config
from subagent_lab.core.types import ModelRequest
from subagent_lab.models.openai_chat import OpenAIChatModel

ROOT = Path(subagent_lab.__file__).parent
QUESTION = ("purpose", "phase", "menu", "narrowed_by", "schema")
"""``call_model``'s arguments that make the request (``run`` is the loop's state, not the request)."""


def _module(frame: FrameType) -> str | None:
    path = Path(frame.f_code.co_filename)
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else None


def _own(module: str) -> bool:
    return module == "core/calls.py" or module.startswith("models/")


def _inline(frame: FrameType) -> bool:
    return frame.f_code.co_name.startswith("<")  # <listcomp>, <genexpr>, <lambda> ...


def walk(protocol: str = "json", exact: bool = False) -> tuple[list[tuple[str, str, bool]], int]:
    """(module, function, returned a value) for each recorded call, in call order, and how many of
    them came before the request went on the wire."""
    stays: list[list[Any]] = []
    walking: set[int] = set()  # ids of frames whose callees are recorded
    made: dict[int, Any] = {}  # the request and what was made from it, by id (kept alive: ids stay unique)
    state: dict[str, Any] = {"root": None, "wire": None}

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
        values = [frame.f_locals.get(n) for n in names if n != "self"]
        for value in values:
            if isinstance(value, ModelRequest):
                taint(value)
        return any(id(v) in made for v in values)

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if event != "call" or state["root"] is False:
            return None
        code = frame.f_code
        if state["root"] is None:
            if code.co_qualname != "call_model" or frame.f_locals.get("purpose") != "final":
                return None
            state["root"] = frame
            for name in QUESTION:
                taint(frame.f_locals.get(name))
            stays.append(["core/calls.py", "call_model", False])
            return _walking(frame, None)
        caller = frame.f_back
        if caller is None or id(caller) not in walking:
            return None
        module = _module(frame)
        if module is None:  # library code: not followed; the client's post is the wire
            if state["wire"] is None and "openai" in code.co_filename and code.co_name == "post":
                state["wire"] = len(stays)
            return None
        if _inline(frame):
            return _walking(frame, None)
        while _inline(caller) and caller.f_back is not None:
            caller = caller.f_back
        if caller.f_code is code or not carries(frame):  # recursion is one stay
            return None
        stay = [module, code.co_qualname, False]
        stays.append(stay)
        return _walking(frame, stay) if _own(module) else _returns(stay)

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
                if f is state["root"]:
                    state["root"] = False  # one call only
                if stay is not None:
                    stay[2] = value is not None
                    taint(value)
            return on_return

        return on_return

    with tempfile.TemporaryDirectory() as tmp, FakeEndpoint(max_requests=60, max_seconds=120) as fake:
        ws = Path(tmp) / "ws"
        (ws / "app").mkdir(parents=True)
        (ws / "app" / "auth.py").write_text("def login(user, password):\n    return True\n")
        config = load_config(Path.cwd() / "profiles.yaml", env={})
        config = config.model_copy(update={"trace_dir": str(Path(tmp) / "runs")})
        model = OpenAIChatModel(
            base_url=fake.url,
            model="fake",
            tool_protocol=protocol,
            count_url=fake.url.removesuffix("/v1") if exact else None,
        )
        launcher = SubagentLauncher(config, ws, model_factory=lambda c, m: model)
        written_by_model = config.scaffold("retrieval-start").resolved()
        request = SubagentRequest(task="Where is `login` defined?", overrides=written_by_model)
        previous = sys.gettrace()  # a coverage tool's or a debugger's, given back after
        sys.settrace(tracer)
        try:
            result = launcher.launch(request)
        finally:
            sys.settrace(previous)
        if result.terminal_reason != "completed" or state["root"] is not False:
            ended = f"{result.terminal_reason} ({result.detail})"
            raise SystemExit(f"the launch ended {ended} without its final call")
    wire = state["wire"] if state["wire"] is not None else len(stays)
    return [(m, n, bool(r)) for m, n, r in stays], wire


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", choices=("json", "native"), default="json")
    parser.add_argument("--exact", action="store_true", help="count prompts on the server (count_url)")
    args = parser.parse_args(argv)
    stays, wire = walk(args.protocol, args.exact)
    modules = [m for m, _, _ in stays]
    switches = sum(a != b for a, b in itertools.pairwise(modules))
    for i, (module, name, returned) in enumerate(stays):
        if i == wire:
            print("  -- the request on the wire --")
        print(f"  {module:32} {name}{'  ->' if returned else ''}")
    visits = {m: modules.count(m) for m in dict.fromkeys(modules)}
    print("visits: " + ", ".join(f"{m} {n}" for m, n in visits.items()))
    counts = "exact (count_url)" if args.exact else "estimated"
    print(f"code: {subagent_lab.__file__}; protocol {args.protocol}, prompt counts {counts}")
    print(
        f"stays {len(stays)} ({wire} to the wire), rooms {len(set(modules))}, "
        f"returns {sum(r for _, _, r in stays)}, switches {switches}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
