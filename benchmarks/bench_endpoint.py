"""The default ``explore`` profile on a native-tool endpoint without a grammar, beside the grammar path.

A user's endpoint (vLLM, a hosted API) has native tool calls and may have no JSON-schema grammar.
This runs the shipped default profile, as written (no preset named), on the smoke tasks for both
models twice on the embedded server: once as shipped (``tool_protocol: json``,
``constrain_output: true``: every action and the answer grammar-constrained) and once configured
as such an endpoint (``tool_protocol: native``, ``constrain_output: false``: actions as the
server's own tool calls, the answer as a ``final_answer`` tool call, the grammar-only aids run as
checks with a repair message). Per path and model it prints runs, terminal reasons, contract
validity (exact: the contract check on the final answer), repairs used, which aids ran as grammar
and which as checks (from the rows), mean quality and the median wall time.

The native configuration is the repository's ``profiles.yaml`` with those two model fields
changed, written with the prompts it names into a temporary directory (written out with
``--keep`` for inspection).

    .venv/bin/python benchmarks/bench_endpoint.py [--paths grammar,native] [--models light,main]
        [--split dev] [--tasks smoke] [--save benchmarks/results/endpoint-native.csv] [--from CSV[,CSV]]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import yaml

from subagent_lab.config.profiles import default_config_path, load_config
from subagent_lab.experiments.spec import SweepSpec
from subagent_lab.experiments.sweep import run_sweep

NATIVE = {"tool_protocol": "native", "constrain_output": False}
"""What a native-tool endpoint without a grammar is configured as (docs/design.md, grammar aids)."""


def native_config(source: Path, into: Path) -> Path:
    """``source`` with every model configured as a native-tool endpoint without a grammar, written
    into ``into`` beside a copy of the prompt files it names (they resolve next to the file)."""
    raw = yaml.safe_load(source.read_text(encoding="utf-8"))
    for entry in raw["models"].values():
        entry.update(NATIVE)
    for profile in raw.get("profiles", {}).values():
        given = profile.get("system_prompt_file") if isinstance(profile, dict) else None
        if given:
            target = into / given
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source.parent / given, target)
    path = into / "profiles.native.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    load_config(path)  # refuses now, naming the field, rather than after the grammar path ran
    return path


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """One line per (path, model): what ended how, contract validity, aids as grammar or check."""
    lines = []
    keys = ["path", "model_choice", "code_version"] if "code_version" in df else ["path", "model_choice"]
    for key, part in df.groupby(keys, sort=False):
        path, model = key[0], key[1]
        reasons = part["terminal_reason"].value_counts().to_dict()
        lines.append({
            "path": path, "model": model, "code": str(key[2])[:7] if len(key) > 2 else "", "runs": len(part),
            "ended": ", ".join(f"{k} {v}" for k, v in reasons.items()),
            "contract valid": f"{int(part['contract_valid'].astype(bool).sum())}/{len(part)}",
            "repairs": int(part["repairs_used"].sum()),
            "aids as grammar": _aids(part["aids_grammar"]), "aids as checks": _aids(part["aids_checked"]),
            "quality": round(float(part["quality"].mean()), 2),
            "median wall s": round(float(part["elapsed_s"].median()), 1),
            "served": ", ".join(sorted(set(part["model_used"].astype(str)))),
        })  # fmt: skip
    return pd.DataFrame(lines)


def _table(df: pd.DataFrame) -> str:
    with pd.option_context("display.max_columns", None, "display.width", 220, "display.max_colwidth", 70):
        return summary(df).to_string(index=False)


def _aids(column: pd.Series) -> str:
    names = {a for value in column.astype(object).fillna("").astype(str) for a in value.split(",") if a}
    return ", ".join(sorted(names)) or "none"


def main() -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--paths", default="grammar,native")
    parser.add_argument("--models", default="light,main")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--tasks", default="smoke")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--out", default=None, help="sweeps directory")
    parser.add_argument("--save", default=None, help="write the rows to this CSV")
    parser.add_argument("--keep", default=None, help="write the native configuration into this directory")
    parser.add_argument("--from", dest="source", default=None, help="print the table of a saved CSV")
    args = parser.parse_args()
    if args.source:  # one CSV or several, comma-separated: a line per path, model and code version
        print(_table(pd.concat([pd.read_csv(p) for p in args.source.split(",")], ignore_index=True)))
        return 0
    source = default_config_path()
    frames = []
    started, started_at = time.monotonic(), datetime.now(UTC)
    with tempfile.TemporaryDirectory() as tmp:
        native_dir = Path(args.keep or tmp)
        native_dir.mkdir(parents=True, exist_ok=True)
        configs = {"grammar": source, "native": native_config(source, native_dir)}
        for path in args.paths.split(","):
            spec = SweepSpec(
                name=f"endpoint-{path}", split=args.split, tasks=tuple(args.tasks.split(",")),
                models=tuple(args.models.split(",")), temperature=args.temperature,
            )  # fmt: skip
            rows = run_sweep(spec, config_path=configs[path], out_dir=args.out, max_workers=1, cache=False)
            frames.append(rows.assign(path=path))
    df = pd.concat(frames, ignore_index=True)
    wall = time.monotonic() - started
    print(f"\n{len(df)} runs in {wall / 60:.1f} min, one at a time, T={args.temperature}, explore as written")
    print(_table(df))
    if args.save:
        Path(args.save).parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.save, index=False)
        meta = {
            "runs": len(df), "wall_s": round(wall, 1), "started": started_at.strftime("%Y-%m-%d %H:%M"),
            "finished": datetime.now(UTC).strftime("%H:%M"), "argv": " ".join(sys.argv[1:]),
        }  # fmt: skip
        Path(args.save).with_suffix(".meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
