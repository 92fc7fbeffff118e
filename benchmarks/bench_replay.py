"""Replay a sweep recorded with the call cache on this checkout: the byte-identity proof of a refactor.

A sweep recorded before a change (its ``results.jsonl`` and the ``model-cache`` beside it) is run
again, run for run, by the code of this checkout with the recorded configuration and seeds,
through a cache keyed exactly as the recording keyed it (endpoint and model id). Every model call
of the replay is looked up: a miss means the replay sent a request the recorded code never sent
(a prompt, a grammar or a parameter differs), and it is answered by the live model so the run can
finish. The script prints the runs replayed, the calls made, the misses, and every row field that
differs between the recorded row and the replayed one.

Usage: python benchmarks/bench_replay.py RECORDED_SWEEP_DIR --config OLD_PROFILES_YAML
       [--models light,main] [--out DIR] [--save ROWS.csv]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from subagent_lab.config.profiles import LabConfig, ModelConfig, load_config
from subagent_lab.core.model import Model
from subagent_lab.core.types import ModelChoice
from subagent_lab.experiments.sweep import SweepSpec, run_sweep
from subagent_lab.local_models.factory import default_model_factory
from subagent_lab.local_models.namespace import config_namespace
from subagent_lab.models.cache import CachingModel

COMPARED = (
    "terminal_reason", "status", "model_calls", "prompt_tokens", "completion_tokens",
    "cached_tokens", "contract_valid", "repairs_used", "grace_used", "grounded_ratio", "seen_ratio",
    "evidence_count", "Read_executed", "Grep_executed", "Glob_executed", "Read_repeated",
    "Grep_repeated", "Glob_repeated", "steps",
)  # fmt: skip
"""Row fields compared as they are; the recorded ``quality`` is compared with ``quality_legacy``
(the scorer of the recording's time), or, for a recording that has both, each with its own."""


class Counting:
    """Model factory: the live model behind a cache keyed as the recorded code keyed it."""

    def __init__(self, lab: LabConfig, cache_dir: Path, endpoint_keys: bool = False) -> None:
        self.inner = default_model_factory(lab)
        self.lab = lab
        self.cache_dir = cache_dir
        self.endpoint_keys = endpoint_keys
        self.models: list[CachingModel] = []

    def __call__(self, choice: ModelChoice, cfg: ModelConfig) -> Model:
        # Keyed as the sweep that recorded keys its cache (by the weights' digest for the embedded
        # models; recordings before that keyed by endpoint and model id: --endpoint-keys).
        by_endpoint = f"{self.lab.endpoint_url(cfg)}|{cfg.model}"
        namespace = by_endpoint if self.endpoint_keys else config_namespace(self.lab, cfg)
        model = CachingModel(self.inner(choice, cfg), self.cache_dir, namespace)
        self.models.append(model)
        return model


def _same(old: dict[str, Any], new: dict[str, Any], field: str) -> bool:
    a, b = old.get(field), new.get(field)
    missing = (a is None or a != a) and (b is None or b != b)  # None and NaN (a table's empty cell)
    return missing or a == b


def _rows(path: Path) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        rows[row["run_key"]] = row
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("recorded", help="the recorded sweep directory (results.jsonl, ../model-cache)")
    parser.add_argument("--config", required=True, help="the profiles.yaml the recording ran with")
    parser.add_argument("--models", default="light,main")
    old_keys = "a recording keyed by endpoint and model id (before 2656759)"
    parser.add_argument("--endpoint-keys", action="store_true", help=old_keys)
    parser.add_argument("--out", default="/tmp/replay-sweeps")
    parser.add_argument(
        "--save", default=None, help="append the replayed rows to this CSV (bench_explore --from)"
    )
    args = parser.parse_args()
    recorded_dir = Path(args.recorded)
    recorded = {
        k: r
        for k, r in _rows(recorded_dir / "results.jsonl").items()
        # A run that crashed, or whose server failed it, recorded no model output to replay.
        if r.get("terminal_reason") not in ("crashed", "model_error")
    }
    models = [m for m in args.models.split(",") if any(k.split("|")[1] == m for k in recorded)]
    spec_file = recorded_dir / "spec.json"
    recorded_spec: dict[str, Any] = {"seeding": "base"}  # recordings older than spec.json: base seeds
    if spec_file.is_file():
        recorded_spec = json.loads(spec_file.read_text(encoding="utf-8"))
    lab = load_config(args.config)
    factory = Counting(lab, recorded_dir.parent / "model-cache", args.endpoint_keys)
    started = time.monotonic()
    replayed: dict[str, dict[str, Any]] = {}
    for model in models:
        tasks = tuple(k.split("|")[0] for k in recorded if k.split("|")[1] == model)
        choices: tuple[Any, ...] = (model,)
        # The recording's own spec (scaffolds, seeding, temperature, variants) where it kept one: a
        # replay under other seeds or another scaffold sends other requests, every one a miss.
        replay = {"name": f"replay-{model}", "tasks": tuple(dict.fromkeys(tasks)), "models": choices}
        spec = SweepSpec.model_validate({**recorded_spec, **replay})
        df = run_sweep(
            spec, config_path=args.config, out_dir=args.out, model_factory=factory, cache=False,
            progress=False,
        )  # fmt: skip
        replayed.update({str(r["run_key"]): r for r in df.to_dict("records")})
    if args.save:
        import pandas as pd

        path = Path(args.save)
        rows = pd.DataFrame(list(replayed.values()))
        if path.exists():
            rows = pd.concat([pd.read_csv(path), rows], ignore_index=True)
        rows = rows.drop_duplicates(subset=["run_key"], keep="last")
        rows.to_csv(path, index=False)
    hits = sum(m.hits for m in factory.models)
    misses = sum(m.misses for m in factory.models)
    took = time.monotonic() - started
    print(f"replayed {len(replayed)} of {len(recorded)} recorded runs ({', '.join(models)}) in {took:.0f} s: "
          f"{hits + misses} model calls, {hits} cache hits, {misses} misses")  # fmt: skip
    differing = 0
    for key, old in sorted(recorded.items()):
        new = replayed.get(key)
        if new is None:
            print(f"  {key}: not replayed")
            differing += 1
            continue
        diffs = [
            f"{f}: {old.get(f)!r} -> {new.get(f)!r}" for f in COMPARED if f in old and not _same(old, new, f)
        ]
        if "quality_legacy" in old:  # recorded by today's scorer: the same scores, both of them
            diffs += [
                f"{f}: {old.get(f)!r} -> {new.get(f)!r}"
                for f in ("quality", "quality_legacy")
                if not _same(old, new, f)
            ]
        elif old.get("quality") != new.get("quality_legacy"):
            legacy = f"{old.get('quality')!r} -> {new.get('quality_legacy')!r}"
            diffs.append(f"quality (legacy scorer): {legacy}")
        if diffs:
            differing += 1
            print(f"  {key}: " + "; ".join(diffs))
    same = len(recorded) - differing
    print(f"rows identical on {', '.join(COMPARED)} and quality: {same} of {len(recorded)}")
    return 0 if misses == 0 and differing == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
