"""Where the time of a real explore run goes: model calls vs the harness (tools, parsing, traces).

Runs smoke tasks from the benchmark suite on the embedded models (no cache) and prints, per run and
in total, elapsed time, time inside model calls, and the harness share (goal: harness <= 5%), and per
model the share of model turns that parsed into a valid action (a tool call or a final answer).

    .venv/bin/python benchmarks/bench_harness.py [--tasks N] [--models light,main]
"""

from __future__ import annotations

import argparse
import tempfile

from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.analysis.metrics import tool_calls_table
from subagent_lab.bench.suite import load_suite, package_root
from subagent_lab.config.profiles import load_config
from subagent_lab.core.trace import ModelCalled, read_trace
from subagent_lab.local_models.server import ensure_server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--models", default="light")
    parser.add_argument(
        "--constrain",
        choices=["yes", "no", "config"],
        default="config",
        help="grammar-constrained JSON actions (response_format) or free generation",
    )
    args = parser.parse_args()
    config = load_config()
    if args.constrain != "config":
        flag = args.constrain == "yes"
        models = {
            k: m.model_copy(update={"constrain_output": flag}) if m else m for k, m in config.models.items()
        }
        config = config.model_copy(update={"models": models})
        print(f"constrain_output={flag}")
    ensure_server(config)
    tasks = [t for t in load_suite() if t.smoke][: args.tasks]
    total_elapsed = total_model = total_tools = 0.0
    turns: dict[str, list[bool]] = {}
    print(
        f"{'task':28} {'model':6} {'reason':15} {'calls':>5} {'elapsed s':>9} {'model s':>8} "
        f"{'tools s':>8} {'harness':>8}"
    )
    with tempfile.TemporaryDirectory() as traces:
        for model in args.models.split(","):
            for task in tasks:
                launcher = SubagentLauncher(config, package_root(task.package), trace_dir=traces)
                r = launcher.launch(SubagentRequest(task=task.prompt, model=model))  # type: ignore[arg-type]
                events = read_trace(r.trace_path)
                table = tool_calls_table(events)
                tools_s = float(table["duration_s"].sum()) if not table.empty else 0.0
                turns.setdefault(model, []).extend(
                    e.parse_ok and (bool(e.tool_calls) or e.text.strip().startswith("{"))
                    for e in events
                    if isinstance(e, ModelCalled)
                )
                harness = r.elapsed_s - r.model_time_s
                total_elapsed += r.elapsed_s
                total_model += r.model_time_s
                total_tools += tools_s
                print(
                    f"{task.id:28} {model:6} {r.terminal_reason:15} {r.model_calls:5d} {r.elapsed_s:9.2f} "
                    f"{r.model_time_s:8.2f} {tools_s:8.3f} {harness / r.elapsed_s:8.2%}"
                )
    for model, ok in turns.items():
        print(
            f"{model}: {sum(ok)}/{len(ok)} model turns parsed into a valid action ({sum(ok) / len(ok):.0%})"
        )
    share = (total_elapsed - total_model) / total_elapsed
    print(
        f"\nTOTAL elapsed {total_elapsed:.1f}s, in model calls {total_model:.1f}s, "
        f"in tools {total_tools:.2f}s; "
        f"harness share {share:.2%} (goal <= 5%): {'OK' if share <= 0.05 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
