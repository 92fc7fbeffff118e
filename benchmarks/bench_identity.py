"""Identity proof without a model server: every request the loop sends, hashed, for two code versions.

Runs every task of the dev suite (``load_suite()``) under both model choices (``light``, ``main``:
they resolve to different profile overrides) and a few override variants and child profiles, each
with several deterministic stand-in models (``Oracle``) that answer a ``ModelRequest`` from its
content alone: the first offered action and argument choice, a rotation through the menu, a repeat
of one call, a call the menu did not offer, unparseable or cut-off output, a finish before any
tool, broken and then unseen-evidence answers. For each run it records the cache key
(``cache.request_key``) of every ``ModelRequest``, the terminal reason, status and contract, and a
digest of the trace's harness-visible content (prompts added, tool calls and their texts, contract
checks), and writes them to a JSON file.

Record the old code in a git worktree (its own ``profiles.yaml`` and prompts load from its root)::

    git worktree add /work/h1-base b09537b
    cd /work/h1-base && PYTHONPATH=/work/h1-base /work/main/.venv/bin/python \\
        /work/main/benchmarks/bench_identity.py --out /tmp/identity-base.json
    cd /work/main && .venv/bin/python benchmarks/bench_identity.py --out /tmp/identity-new.json \\
        --compare /tmp/identity-base.json

The printed ``code`` line shows which ``subagent_lab`` was imported.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import subagent_lab
from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.agents.parent import MainAgent
from subagent_lab.bench.suite import load_suite, package_root
from subagent_lab.config.profiles import load_config
from subagent_lab.core.context import estimate_messages
from subagent_lab.core.tokens import TokenCount
from subagent_lab.core.trace import read_trace
from subagent_lab.core.types import ModelRequest, ModelResponse, ToolCall, Usage
from subagent_lab.models.cache import request_key

STRATEGIES = ("first", "rotate", "repeat", "off_menu", "garbage", "finish_now", "long")
VARIANTS: dict[str, dict[str, Any]] = {
    "read_on": {"read_on": 2, "cite_margin": None},
    "seen_lines": {
        "cite_anchors": False,
        "read_after_hits": True,
        "finish_after_stale": 1,
        "min_evidence": 2,
    },
    "full_tools": {
        "tool_interface": "full",
        "symbol_tools": False,  # Find, Refs, Outline and Search exist in the simple interface only
        "retrieval_start": 0,  # which calls Find and Search
        "constrain_paths": False,
        "min_tool_calls": 0,
        "task_paths": False,
    },
    "strict": {"evidence_from_seen": False, "require_seen": True, "require_grounded_evidence": True},
    "no_grace": {"grace_turn": False, "first_search": 3, "absence_check": True, "show_layout": True},
}
"""Override sets that switch on branches the explore profile leaves off (run on every 3rd task)."""
PRESETS = ("aided",)
"""Presets of the config run as variants too (every scaffold field as the preset sets it): the
explore profile ships ``retrieval-start``, and ``aided`` is the scaffold without the symbol tools."""
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{2,}")
FILE = re.compile(r"[\w./-]+\.(?:py|pyi|txt|md|cfg)")


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


class Oracle:
    """A deterministic model: its reply depends only on the request and how many it has seen."""

    def __init__(self, strategy: str) -> None:
        self.strategy = strategy
        self.keys: list[str] = []
        self.acts = 0
        self.finals = 0

    def count_prompt(self, request: ModelRequest) -> TokenCount:
        """An exact count (so both code versions take the same, non-estimated path)."""
        return TokenCount(tokens=math.ceil(estimate_messages(request.messages, request.tools)), exact=True)

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.keys.append(request_key("identity", request))
        if request.phase == "act":
            response = self._act(request)
            self.acts += 1
        else:
            response = self._final(request)
            self.finals += 1
        out = len(response.text) + len(json.dumps([c.arguments for c in response.tool_calls]))
        usage = Usage(
            prompt_tokens=self.count_prompt(request).tokens,
            completion_tokens=min(max(out // 3, 1), request.max_tokens),
        )
        return response.model_copy(update={"usage": usage, "model_id": "oracle"})

    def _act(self, request: ModelRequest) -> ModelResponse:
        n, s = self.acts, self.strategy
        names = [t["function"]["name"] for t in request.tools]
        allowed = request.allowed_tools if request.allowed_tools is not None else names
        tools = [a for a in allowed if a != "finish"]
        if s == "garbage" and n == 0:
            return ModelResponse(text="{not an action", parse_ok=False)
        if s == "garbage" and n == 1:
            return ModelResponse(text="thinking...", finish_reason="length", parse_ok=True)
        if s == "garbage" and n == 3:  # the answer written as the action
            return ModelResponse(text=json.dumps(self._payload(request.final_schema or {}, 0)))
        if s == "finish_now" or not tools:
            return self._call(request, "finish", 0)
        if s == "first":
            return self._call(request, "finish" if n >= 3 and "finish" in allowed else tools[0], 0)
        if s == "rotate":
            return self._call(request, allowed[n % len(allowed)], n)
        if s == "repeat":
            return self._call(request, tools[0], 0)
        if s == "off_menu":
            outside = [t for t in names if t not in allowed and t != "finish"]
            if n % 2 == 0:
                return self._call(request, outside[0] if outside else tools[0], n, off=True)
            if n == 3:
                call = ToolCall(id=f"c{n}-raw", name=tools[0], raw_arguments="{path: oops")
                return ModelResponse(tool_calls=[call])
            return self._call(request, tools[-1], n)
        return self._call(request, tools[n % len(tools)], n)  # long: never finishes

    def _call(self, request: ModelRequest, name: str, k: int, *, off: bool = False) -> ModelResponse:
        if name == "finish":
            return ModelResponse(text="done", tool_calls=[ToolCall(id=f"c{self.acts}-finish", name=name)])
        tool = next(t for t in request.tools if t["function"]["name"] == name)
        params = tool["function"].get("parameters", {})
        required = params.get("required", [])
        args: dict[str, Any] = {}
        for arg, prop in params.get("properties", {}).items():
            if arg not in required and not (arg == "line" and k % 2):
                continue
            args[arg] = self._arg(request, name, arg, prop, k, off)
        call = ToolCall(id=f"c{self.acts}-{name}", name=name, arguments=args)
        return ModelResponse(text=f"step {self.acts}", tool_calls=[call])

    def _arg(
        self, request: ModelRequest, tool: str, arg: str, prop: dict[str, Any], k: int, off: bool
    ) -> Any:
        choices = request.arg_choices.get(tool, {}).get(arg)
        if choices and not off:
            return choices[k % len(choices)]
        if prop.get("type") == "integer":
            return 1 + 17 * k
        if arg == "pattern":
            words = NAME.findall(_first_user(request))
            return words[k % len(words)] if words else "def"
        if arg == "path":
            if off:
                return "no/such/file.py"
            files = FILE.findall(" ".join(str(m.content) for m in request.messages if m.role == "tool"))
            return files[k % len(files)] if files else "."
        return "*.py" if "glob" in arg or arg == "pattern" else "x"

    def _final(self, request: ModelRequest) -> ModelResponse:
        schema = request.final_schema
        props = (schema or {}).get("properties", {})
        if "found" in props:  # the harness's yes/no question
            return ModelResponse(
                text=json.dumps({"found": "no" if self.strategy in ("rotate", "long") else "yes"})
            )
        if schema is None:
            return ModelResponse(text="The answer." if self.finals else "")
        if self.strategy == "finish_now" and self.finals == 0:
            return ModelResponse(text="not json at all")
        if self.strategy == "garbage" and self.finals == 0:
            return ModelResponse(text="```json\n{}\n```")
        return ModelResponse(text=json.dumps(self._payload(schema, self.finals)))

    def _payload(self, schema: dict[str, Any], k: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, prop in schema.get("properties", {}).items():
            if name == "verdict" and self.strategy == "first":  # FAIL, then PASS: retry segments run
                out[name] = "FAIL" if self.finals < 3 else "PASS"
            elif "enum" in prop:  # "repeat" answers partial
                out[name] = prop["enum"][min(1, len(prop["enum"]) - 1) if self.strategy == "repeat" else 0]
            elif prop.get("type") == "string":
                out[name] = f"{name} of the answer"[: prop.get("maxLength", 40)]
            elif prop.get("type") == "array":
                items = prop.get("items", {})
                if "enum" in items:
                    low = prop.get("minItems", 0)
                    out[name] = items["enum"][: max(low, min(2, prop.get("maxItems", 2)))]
                elif name == "evidence":
                    out[name] = [] if k else ["__init__.py:1", "nowhere.py:3"]  # unseen, then none
                elif items.get("type") == "string":
                    out[name] = [f"{name} one"]
                else:
                    out[name] = []
        return out


def _first_user(request: ModelRequest) -> str:
    return next((str(m.content) for m in request.messages if m.role == "user"), "")


def _trace_digest(path: str) -> str:
    """The harness-visible content of a trace: prompts, tool calls and texts, contract checks."""
    keep: list[Any] = []
    for event in read_trace(path):
        kind = event.kind
        if kind == "prompt_added":
            keep.append((kind, event.purpose, event.content))
        elif kind == "tool_started":
            keep.append((kind, event.tool, event.arguments))
        elif kind == "tool_finished":
            keep.append((kind, event.tool, event.status, event.text, event.from_record, event.spans))
        elif kind == "contract_checked":
            keep.append((kind, event.valid, event.errors, event.unseen, event.ungrounded))
        elif kind == "model_called":
            keep.append((kind, event.purpose, event.prompt_tokens_est, event.max_tokens, event.text))
        elif kind in ("subagent_started", "subagent_completed"):
            keep.append((kind, event.profile, event.terminal_reason))
        elif kind == "run_ended":
            keep.append((kind, event.terminal_reason, event.steps, event.model_calls))
    return _digest(keep)


def run_all(workdir: Path, tasks_every: int) -> list[dict[str, Any]]:
    config = load_config(Path.cwd() / "profiles.yaml", env={})
    config = config.model_copy(update={"trace_dir": str(workdir)})
    if config.profiles["explore"].scaffold == config.scaffold("rank").scaffold:
        # Issue 49 shipped `rank` as the explore profile's scaffold; the proof holds the explore
        # profile at `retrieval-start`, its scaffold before, so both sides run one scaffold.
        explore = config.profiles["explore"].model_copy(
            update={"scaffold": config.scaffold("retrieval-start").scaffold}
        )
        config = config.model_copy(update={"profiles": {**config.profiles, "explore": explore}})
    cells: list[tuple[str, str, str, dict[str, Any]]] = []
    suite = load_suite()
    for index, task in enumerate(suite):
        for model in ("light", "main"):
            cells.append((task.id, model, "explore", {}))
            if index % tasks_every == 0:
                cells += [(task.id, model, "explore", {"variant": v}) for v in (*VARIANTS, *PRESETS)]
        if index % tasks_every == 1:
            cells += [(task.id, "main", p, {}) for p in ("verification", "plan")]
    by_id = {t.id: t for t in suite}
    rows = []
    for task_id, model, profile, extra in cells:
        task = by_id[task_id]
        variant = extra.get("variant", "")
        overrides = config.scaffold(variant).resolved() if variant in PRESETS else VARIANTS.get(variant, {})
        for strategy in STRATEGIES:
            oracle = Oracle(strategy)
            launcher = SubagentLauncher(
                config, package_root(task.package), model_factory=lambda c, m, o=oracle: o, trace_dir=workdir
            )
            request = SubagentRequest(task=task.prompt, profile=profile, model=model, overrides=overrides)
            result = launcher.launch(request)
            rows.append(
                {
                    "run": f"{task_id}/{model}/{profile}/{extra.get('variant', '-')}/{strategy}",
                    "requests": oracle.keys,
                    "terminal_reason": result.terminal_reason,
                    "status": result.status,
                    "contract": result.contract,
                    "steps": result.steps,
                    "tool_usage": result.tool_usage,
                    "trace": _trace_digest(result.trace_path),
                }
            )
    return rows + run_parents(config, suite[:: tasks_every * 3])


def run_parents(config: Any, tasks: list[Any]) -> list[dict[str, Any]]:
    """The main agent on the real package (no scratch copy: its Edit and Bash are refused at the
    gate), without and with verification, every strategy; its Task children share the oracle."""
    rows = []
    for task in tasks:
        for verify in (False, True):
            for strategy in STRATEGIES:
                oracle = Oracle(strategy)
                agent = MainAgent(
                    config, package_root(task.package), model_factory=lambda c, m, o=oracle: o,
                    scratch=False, verify=verify,
                )  # fmt: skip
                result = agent.run(task.prompt)
                rows.append(
                    {
                        "run": f"{task.id}/main/parent/{'verify' if verify else '-'}/{strategy}",
                        "requests": oracle.keys,
                        "terminal_reason": result.terminal_reason,
                        "status": result.status,
                        "contract": result.contract,
                        "steps": result.steps,
                        "tool_usage": result.tool_usage,
                        "trace": _trace_digest(result.trace_path),
                        "children": [(c.profile, c.terminal_reason, c.result) for c in result.children],
                    }
                )
    return rows


def compare(new: dict[str, Any], base: dict[str, Any]) -> int:
    """Print the side-by-side figures; returns the number of runs that differ."""
    old = {r["run"]: r for r in base["runs"]}
    diffs = 0
    for row in new["runs"]:
        ref = old.get(row["run"])
        fields = [k for k in row if ref is None or ref.get(k) != row[k]]
        if fields:
            diffs += 1
            if diffs <= 10:
                print(f"DIFF {row['run']}: {fields}")
    missing = set(old) - {r["run"] for r in new["runs"]}
    print(f"base  {base['code']}: {len(base['runs'])} runs, {base['requests']} requests")
    print(f"new   {new['code']}: {len(new['runs'])} runs, {new['requests']} requests")
    print(f"differences: {diffs} runs differ, {len(missing)} runs missing")
    return diffs + len(missing)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare", type=Path, help="a base file to compare with")
    parser.add_argument("--every", type=int, default=3, help="variants and child profiles on every Nth task")
    args = parser.parse_args()
    print(f"code: {subagent_lab.__file__}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        rows = run_all(Path(tmp), args.every)
    data = {"code": subagent_lab.__file__, "runs": rows, "requests": sum(len(r["requests"]) for r in rows)}
    args.out.write_text(json.dumps(data, indent=1, sort_keys=True))
    reasons: dict[str, int] = {}
    for row in rows:
        reasons[row["terminal_reason"]] = reasons.get(row["terminal_reason"], 0) + 1
    print(f"{len(rows)} runs, {data['requests']} requests in {time.monotonic() - started:.0f} s; {reasons}")
    if args.compare:
        new = json.loads(args.out.read_text())  # compared as written: tuples are lists on both sides
        return 1 if compare(new, json.loads(args.compare.read_text())) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
