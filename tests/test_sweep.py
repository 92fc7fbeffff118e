"""Sweeps: one row per run, persistence and resume, any executor (Dask included), the cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from subagent_lab.analysis.summary import budget_curve, summarize, terminal_reasons
from subagent_lab.bench.suite import load_suite
from subagent_lab.core.types import ConfigError
from subagent_lab.experiments.stamp import derive_seed
from subagent_lab.experiments.sweep import SweepSpec, Variant, load_results, run_sweep, sweep_dir
from subagent_lab.models.cache import request_key
from subagent_lab.models.scripted import ScriptedFactory, ScriptedModel, final, tool_call

TASK = next(t for t in load_suite() if t.id == "yaml-safe-load")


def _answer(evidence: list[str]) -> dict[str, object]:
    return {
        "status": "completed",
        "summary": "safe_load is defined in __init__.py and uses SafeLoader.",
        "findings": ["safe_load calls load with SafeLoader"],
        "evidence": evidence,
        "unresolved_questions": [],
    }


# The gold span's first line, which the scripted Grep shows: scoring credits only evidence a tool
# showed the run (docs/numbers.md, "Scoring").
GOLD = [f"{g.path}:{g.start}" for g in TASK.gold]
FACTORY = ScriptedFactory({"*": [tool_call("Grep", pattern="def safe_load"), final(_answer(GOLD))]})


def test_sweep_table_has_one_scored_row_per_run(config_path: str, tmp_path: Path) -> None:
    spec = SweepSpec(
        name="t",
        tasks=(TASK.id,),
        models=("light", "main"),
        variants=(Variant(label="s4", overrides={"max_steps": 4}), Variant()),
        repeats=2,
    )
    df = run_sweep(
        spec, config_path=config_path, out_dir=tmp_path / "sw", model_factory=FACTORY, progress=False
    )
    assert len(df) == 2 * 2 * 2
    assert set(df["terminal_reason"]) == {"completed"}
    assert (df["quality"] == 1.0).all() and (df["gold_recall_line"] == 1.0).all()
    assert (df["Grep_executed"] == 1).all() and (df["Read_executed"] == 0).all()
    assert (df["Find_executed"] == 0).all()  # every tool a child can hold has its columns
    assert {tuple(json.loads(e)) for e in df["evidence"]} == {tuple(GOLD)}  # the items, not only scores
    assert set(df.loc[df["variant"] == "s4", "max_steps"]) == {4}
    assert (df["total_tokens"] > 0).all() and all(Path(p).exists() for p in df["trace_path"])
    summary = summarize(df)
    assert set(summary["completion_rate"]) == {1.0} and len(summary) == 4
    assert terminal_reasons(df)["completed"].eq(1.0).all()
    assert not budget_curve(df).empty


def test_resume_skips_finished_runs_and_redoes_torn_ones(config_path: str, tmp_path: Path) -> None:
    spec = SweepSpec(name="r", tasks=(TASK.id,), models=("light",), repeats=3)
    out = tmp_path / "sw"
    run_sweep(spec, config_path=config_path, out_dir=out, model_factory=FACTORY, progress=False)
    results = sweep_dir(spec, out) / "results.jsonl"
    lines = results.read_text().splitlines()
    # Simulate a sweep killed mid-write: drop one finished row and tear the last line.
    results.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])
    calls: list[str] = []
    df = run_sweep(
        spec,
        config_path=config_path,
        out_dir=out,
        model_factory=FACTORY,
        progress=False,
        on_row=lambda row: calls.append(row["run_key"]),
    )
    assert len(calls) == 2  # only the two missing runs ran again
    assert sorted(df["run_key"]) == sorted({json.loads(lines[0])["run_key"], *calls})
    assert len(load_results(sweep_dir(spec, out))) == 3


def test_model_call_cache_makes_reruns_free_and_visible(config_path: str, tmp_path: Path) -> None:
    first = SweepSpec(name="c1", tasks=(TASK.id,), models=("light",))
    second = SweepSpec(name="c2", tasks=(TASK.id,), models=("light",))  # same requests, new sweep
    a = run_sweep(
        first, config_path=config_path, out_dir=tmp_path / "sw", model_factory=FACTORY, progress=False
    )
    b = run_sweep(
        second,
        config_path=config_path,
        out_dir=tmp_path / "sw",
        model_factory=ScriptedFactory({}),
        progress=False,
    )  # an empty script: any miss would fail
    assert a["cache_hits"].iloc[0] == 0 and a["cache_misses"].iloc[0] == 2
    assert b["cache_hits"].iloc[0] == 2 and b["status"].iloc[0] == "completed"
    assert b["total_tokens"].iloc[0] == a["total_tokens"].iloc[0]


def test_crashed_run_is_recorded_not_lost(config_path: str, tmp_path: Path) -> None:
    spec = SweepSpec(name="x", tasks=(TASK.id,), models=("light",))
    broken = ScriptedFactory({"*": []})  # ScriptedModel raises AssertionError: a harness-level crash
    df = run_sweep(
        spec,
        config_path=config_path,
        out_dir=tmp_path / "sw",
        model_factory=broken,
        progress=False,
        cache=False,
    )
    assert df["terminal_reason"].iloc[0] == "crashed" and "ran out of turns" in df["detail"].iloc[0]


def test_dask_local_cluster_executor(config_path: str, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    spec = SweepSpec(name="d", tasks=(TASK.id,), models=("light", "main"), repeats=2)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        df = run_sweep(
            spec,
            config_path=config_path,
            out_dir=tmp_path / "sw",
            executor=client.get_executor(),
            model_factory=FACTORY,
            progress=False,
        )
    assert len(df) == 4 and set(df["status"]) == {"completed"}
    assert (df["quality"] == 1.0).all()


def test_invalid_variant_is_refused_before_any_run(config_path: str, tmp_path: Path) -> None:
    bad = Variant(label="tiny", overrides={"context_token_budget": 9000, "total_token_budget": 1000})
    spec = SweepSpec(name="v", tasks=(TASK.id,), models=("light",), variants=(bad,))
    with pytest.raises(ConfigError, match=r"variant 'tiny'.*context_token_budget"):
        run_sweep(spec, config_path=config_path, out_dir=tmp_path / "sw", model_factory=FACTORY)
    assert not (tmp_path / "sw").exists()


# --- independent repeats (issue 10) ------------------------------------------------------------


class _Recording:
    """A model factory whose every ScriptedModel is kept, so each run's requests can be compared."""

    def __init__(self) -> None:
        self.models: list[ScriptedModel] = []

    def __call__(self, choice: str, cfg: object) -> ScriptedModel:
        model = ScriptedModel([tool_call("Grep", pattern="def safe_load"), final(_answer(GOLD))])
        self.models.append(model)
        return model


def test_repeats_make_different_requests_and_the_summary_shows_their_spread(
    config_path: str, tmp_path: Path
) -> None:
    factory = _Recording()
    spec = SweepSpec(name="rep", tasks=(TASK.id,), models=("light",), repeats=3, seed=10)
    df = run_sweep(
        spec, config_path=config_path, out_dir=tmp_path / "sw", model_factory=factory, progress=False
    )
    # Seeds are derived per (task, model, repeat) from the sweep's base seed: distinct per repeat.
    seeds = [derive_seed(10, TASK.id, "light", i) for i in range(3)]
    assert len(set(seeds)) == 3
    assert sorted(zip(df["repeat"], df["seed"], strict=True)) == list(enumerate(seeds))
    assert (df["cache_hits"] == 0).all() and (df["cache_misses"] == 2).all()  # the cache is on
    streams = [[request_key("ns", r) for r in model.requests] for model in factory.models]
    assert len(streams) == 3 and all(len(s) == 2 for s in streams)
    assert len({key for stream in streams for key in stream}) == 6  # no request shared by two repeats
    assert sorted(({r.seed for r in model.requests} for model in factory.models), key=str) == sorted(
        ({s} for s in seeds), key=str
    )
    summary = summarize(df)
    assert summary["repeats"].tolist() == [3]
    assert {"quality_min", "quality_median", "quality_max", "completion_min"} <= set(summary.columns)
    columns = list(summary.columns)
    assert columns.index("quality_min") == columns.index("mean_quality") + 1  # next to its mean


def test_sweep_temperature_reaches_the_requests_and_the_rows(config_path: str, tmp_path: Path) -> None:
    factory = _Recording()
    sampled = SweepSpec(name="temp", tasks=(TASK.id,), models=("light",), temperature=0.7)
    df = run_sweep(
        sampled, config_path=config_path, out_dir=tmp_path / "sw", model_factory=factory, progress=False
    )
    assert df["temperature"].tolist() == [0.7]
    assert {r.temperature for r in factory.models[0].requests} == {0.7}
    plain = run_sweep(
        SweepSpec(name="temp0", tasks=(TASK.id,), models=("light",)),
        config_path=config_path,
        out_dir=tmp_path / "sw",
        model_factory=FACTORY,
        progress=False,
        cache=False,
    )
    assert plain["temperature"].tolist() == [0.0]  # the model's own
    assert plain["seed"].tolist() == [derive_seed(0, TASK.id, "light", 0)]


def test_spread_is_over_per_repeat_means() -> None:
    rows = [
        {"model_used": "light", "variant": "v", "task_id": task, "repeat": repeat, "quality": quality,
         "grounded_ratio": 1.0, "status": "completed" if quality else "partial", "contract_valid": True,
         "total_tokens": 10, "elapsed_s": 1.0, "cost_usd": 0.0}
        for repeat, qualities in enumerate([(0.0, 0.2), (0.4, 0.6), (1.0, 1.0)])
        for task, quality in zip(("a", "b"), qualities, strict=True)
    ]  # fmt: skip
    summary = summarize(pd.DataFrame(rows)).iloc[0]
    assert summary["mean_quality"] == pytest.approx(3.2 / 6)
    assert (summary["quality_min"], summary["quality_median"], summary["quality_max"]) == pytest.approx(
        (0.1, 0.5, 1.0)
    )
    assert (summary["completion_min"], summary["completion_max"], summary["repeats"]) == (0.5, 1.0, 3)


def test_a_runs_process_does_not_import_the_statistics() -> None:
    """A Dask scheduler unpickles every run's cell and a worker runs it: neither loads scipy (the
    bootstrap's, ~0.7 s of CPU per process), only the seed function the plan needs."""
    code = (
        "import sys, subagent_lab.experiments.cluster, subagent_lab.experiments.execute, "
        "subagent_lab.experiments.sweep; print('scipy' in {m.split('.')[0] for m in sys.modules})"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# ---------------------------------------------------------------- issue 48: sweeps a user can start safely


def test_rows_keep_paths_relative_to_the_sweep_so_the_directory_can_move(
    config_path: str, tmp_path: Path
) -> None:
    spec = SweepSpec(name="rel", tasks=(TASK.id,), models=("light",))
    run_sweep(spec, config_path=config_path, out_dir=tmp_path / "sw", model_factory=FACTORY, progress=False)
    out = sweep_dir(spec, tmp_path / "sw")
    saved = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert saved and all(not Path(r["trace_path"]).is_absolute() for r in saved)
    assert str(tmp_path) not in (out / "results.jsonl").read_text()  # no absolute path at all
    moved = tmp_path / "elsewhere" / out.name
    moved.parent.mkdir()
    out.rename(moved)
    df = load_results(moved)
    assert all(Path(p).is_file() and Path(p).is_relative_to(moved) for p in df["trace_path"])


def test_the_resume_key_does_not_depend_on_where_the_task_file_lives(tmp_path: Path) -> None:
    for folder in ("a", "b/c"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "mine.yaml").write_text("suite: mine\ntasks: []\n", encoding="utf-8")
    here = SweepSpec(name="f", split=str(tmp_path / "a" / "mine.yaml"), tasks=("all",), models=("none",))
    there = here.model_copy(update={"split": str(tmp_path / "b" / "c" / "mine.yaml")})
    relative = here.model_copy(update={"split": "a/mine.yaml"})
    assert here.key() == there.key() == relative.key()
    assert sweep_dir(here, tmp_path / "sw") == sweep_dir(there, tmp_path / "sw")  # the same directory resumes
    assert here.key() != here.model_copy(update={"models": ("retrieval",)}).key()
    builtin = SweepSpec(name="f", split="dev", tasks=("all",), models=("none",))
    import hashlib

    assert builtin.key() == hashlib.sha256(builtin.model_dump_json().encode()).hexdigest()[:10]  # kept


def test_a_sweep_prints_its_estimate_before_it_starts(
    config_path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from subagent_lab.experiments.estimate import estimate_lines, recorded_walls
    from subagent_lab.experiments.sweep import sweep_estimate

    rows = pd.DataFrame({"model_choice": ["main"] * 3 + ["none"], "elapsed_s": [10.0, 30.0, 500.0, 0.1],
                         "cache_hits": [0, 0, 2, 0]})  # fmt: skip
    rows.to_csv(tmp_path / "r.csv", index=False)
    walls = recorded_walls([tmp_path / "r.csv"])
    assert walls == {"main": (20.0, 2), "none": (0.1, 1)}  # the cached run is no time
    lines = estimate_lines({"main": 30, "none": 30, "light": 30}, walls, 1)
    assert lines[0] == "estimate: 90 runs, about 10 min on 1 worker(s) plus the runs of light"
    assert "main: 30 runs x 20.0 s (median of 2 recorded runs) = 10 min" in lines[1]
    spec = SweepSpec(name="est", tasks=(TASK.id,), models=("none", "main"), repeats=2)
    committed = sweep_estimate(spec, 1, [TASK])
    assert committed[0].startswith("estimate: 4 runs, about ") and "main: 2 runs x " in committed[2]
    floors = SweepSpec(name="est", tasks=(TASK.id,), models=("none",))
    run_sweep(floors, config_path=config_path, out_dir=tmp_path / "sw", progress=True)
    assert capsys.readouterr().out.startswith("estimate: 1 runs")


def test_a_sweep_with_a_real_model_defaults_to_one_worker() -> None:
    from subagent_lab.experiments.sweep import sweep_workers

    assert sweep_workers(SweepSpec(models=("none", "retrieval"))) == 2
    assert sweep_workers(SweepSpec(models=("none", "main"))) == 1
    assert sweep_workers(SweepSpec(models=("light",))) == 1


def test_the_sweep_tables_show_acc_at_k_over_all_and_non_leaking_tasks(
    config_path: str, tmp_path: Path
) -> None:
    from subagent_lab.analysis.fields import field_table

    spec = SweepSpec(name="acc", tasks=(TASK.id,), models=("light",))
    df = run_sweep(
        spec, config_path=config_path, out_dir=tmp_path / "sw", model_factory=FACTORY, progress=False
    )
    table = field_table(df)
    assert {"file Acc@1", "file Acc@5", "func Acc@1", "func Acc@5", "unit recall@4"} <= set(table.columns)
    assert list(table["on"]) == ["all"] and table["file Acc@5"].iloc[0].startswith("1.00")
    other = df.assign(task_id="other", task_meta=json.dumps({"names_gold_symbol": False}), file_acc_at5=0.0)
    flagged = pd.concat([df.assign(task_meta=json.dumps({"names_gold_symbol": True})), other])
    split = field_table(flagged).set_index("on")
    assert int(split.loc["all", "tasks"]) == 2 and int(split.loc["no-leak", "tasks"]) == 1
    assert int(split.loc["no-leak", "leaks"]) == 1 and split.loc["no-leak", "file Acc@5"] == "0.00"


def test_the_summary_keeps_absent_tasks_and_leaking_ones_apart() -> None:
    leak, clean = json.dumps({"names_gold_symbol": True}), json.dumps({"names_gold_symbol": False})
    df = pd.DataFrame({
        "model_used": "main", "task_id": ["a", "b", "c"], "kind": ["localize", "localize", "absent"],
        "task_meta": [leak, clean, clean], "quality": [1.0, 0.0, 1.0], "status": "completed",
        "contract_valid": True, "total_tokens": 10, "grounded_ratio": 1.0, "elapsed_s": 1.0, "cost_usd": 0.0,
    })  # fmt: skip
    row = summarize(df).iloc[0]
    assert row["mean_quality"] == 0.5  # the absent task's give-up-able 1.0 is not in it
    assert row["mean_quality_absent"] == 1.0
    assert row["mean_quality_no_leak"] == 0.0 and row["leaks"] == 1


def test_a_sweep_with_absent_tasks_carries_the_give_up_floor_beside_them(
    config_path: str, tmp_path: Path
) -> None:
    from subagent_lab.analysis.headline import lift_table
    from subagent_lab.bench.giveup import GIVE_UP

    spec = SweepSpec(name="gu", tasks=(TASK.id, "yaml-absent-toml"), models=("light",))
    df = run_sweep(
        spec, config_path=config_path, out_dir=tmp_path / "sw", model_factory=FACTORY, progress=False
    )
    floor = df[df["model_choice"] == GIVE_UP].set_index("task_id")
    assert set(floor.index) == {TASK.id, "yaml-absent-toml"}
    assert floor.loc["yaml-absent-toml", "quality"] == 1.0 and floor.loc[TASK.id, "quality"] == 0.0
    assert len(load_results(df.attrs["sweep_dir"])) == 2  # computed beside the rows, not saved as runs
    table = lift_table(df).set_index(["tasks", "model_choice"])
    assert table.loc[("absent", "light"), "floor"] == GIVE_UP
    assert table.loc[("present", "light"), "mean"] == 1.0  # the scripted answer cites the gold


def test_bench_explore_prints_acc_at_k_with_the_leak_split(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_explore.py"
    module_spec = importlib.util.spec_from_file_location("bench_explore", path)
    assert module_spec is not None and module_spec.loader is not None
    bench = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(bench)
    metas = [json.dumps({"names_gold_symbol": i < 2}) for i in range(6)]
    rows = pd.DataFrame([
        {"split": "mined-test", "scaffold": "aided", "model_choice": arm, "task_id": f"t{i}",
         "kind": "localize", "repeat": 0, "task_meta": metas[i], "quality": q, "file_acc_at1": q,
         "file_acc_at5": q, "func_acc_at1": q, "func_acc_at5": q, "unit_recall_at4": q,
         "strict_line_recall": q, "gold_recall_file": q, "contract_valid": True, "elapsed_s": 1.0,
         "model_time_s": 1.0, "terminal_reason": "completed"}
        for arm, scores in (("none", [1, 1, 0, 0, 1, 0]), ("main", [1, 1, 1, 0, 0, 0]))
        for i, q in enumerate(scores)
    ])  # fmt: skip
    bench.report(rows, ())
    out = capsys.readouterr().out
    assert "func Acc@5" in out and "unit recall@4" in out and "no-leak" in out
    assert "non-tied, sign test p" in out
    assert "main − none (aided, no-leak tasks, 4): func_acc_at5 0.25 − 0.25" in out  # 2 leaking left out


def test_the_sweep_command_prints_its_estimate_first_and_saves_no_absolute_path(
    config_path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from subagent_lab.cli.main import main

    argv = ["--config", config_path, "sweep", "--tasks", "dev", "--suite", f"{TASK.id},yaml-absent-toml"]
    assert main([*argv, "--models", "none", "--scaffold", "plain", "--out", str(tmp_path / "sw")]) == 0
    out = capsys.readouterr().out
    assert (
        out.startswith("estimate: 2 runs, about ") and "on 2 worker(s)" in out.splitlines()[0]
    )  # floors only
    assert "Localization (Acc@k" in out and "func Acc@5" in out and "give-up" in out
    results = next((tmp_path / "sw").rglob("results.csv"))
    assert (
        str(tmp_path) not in results.read_text()
        and str(tmp_path) not in (results.parent / "results.jsonl").read_text()
    )
