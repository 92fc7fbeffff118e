"""The embedded engine, new vs old, side by side in one run: llama.cpp's llama-server vs llama-cpp-python.

For each model the same requests go to both servers, one server at a time (never concurrently):

* prompt processing: a ~500-token prompt with a unique first line (no cached prefix), 1 token out;
* free generation: the same prompt again (now cached), 128 tokens with end-of-turn banned
  (``logit_bias``), timed as (t(128) - t(1)) / 127, so prompt handling cancels out;
* constrained generation: the same, with the final-answer contract's JSON schema as grammar
  (new server: ``response_format: json_schema``; llama-cpp-python: ``json_object`` + ``schema``);
* prefix reuse (new server only): a growing explore-style conversation; per step the prompt
  tokens the server evaluated (``timings.prompt_n``) over the tokens new in that step.

Each figure is the best of ``--repeats`` (other load only ever slows a run down). The old server
needs a Python with ``llama-cpp-python[server]==0.3.16`` built without AMX (``--old-python``);
without one the old columns are skipped. Prints ratios new/old.

Usage: python benchmarks/bench_engine.py [--old-python PATH] [--repeats 3] [--models light,main]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from subagent_lab.config.profiles import LabConfig, ServerConfig, load_config
from subagent_lab.core.contracts import contract_schema
from subagent_lab.local_models import server, weights
from subagent_lab.models.actions import decoding_schema

SOURCE = Path(__file__).resolve().parent.parent / "subagent_lab" / "loop.py"
BAN_END = {"151643": -100, "151645": -100}  # Qwen2.5 <|endoftext|>, <|im_end|>
GEN = 128


def _prompt(n_chars: int) -> list[dict[str, str]]:
    code = SOURCE.read_text(encoding="utf-8")[:n_chars]
    return [{"role": "user", "content": f"# run {uuid.uuid4().hex}\n{code}\n\nExplain this code in detail."}]


def _post(client: httpx.Client, url: str, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    resp = client.post(f"{url}/chat/completions", json=body, timeout=600)
    resp.raise_for_status()
    return time.perf_counter() - started, resp.json()


def _schema_format(new: bool) -> dict[str, Any]:
    schema = decoding_schema(contract_schema("ExploreResult"))
    if new:
        return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
    return {"type": "json_object", "schema": schema}


def measure(url: str, alias: str, *, new: bool, repeats: int) -> dict[str, float]:
    """Best-of-``repeats`` pp tok/s, free and constrained gen tok/s of one server and model."""
    best = {"pp": 0.0, "free": 0.0, "constrained": 0.0}
    with httpx.Client(trust_env=False) as client:
        for _ in range(repeats):
            messages = _prompt(1800)
            base = {"model": alias, "messages": messages, "temperature": 0, "seed": 0}
            secs, out = _post(client, url, {**base, "max_tokens": 1})
            best["pp"] = max(best["pp"], out["usage"]["prompt_tokens"] / secs)
            for kind, extra in (("free", {}), ("constrained", {"response_format": _schema_format(new)})):
                one, _ = _post(client, url, {**base, **extra, "max_tokens": 1, "logit_bias": BAN_END})
                secs, out = _post(client, url, {**base, **extra, "max_tokens": GEN, "logit_bias": BAN_END})
                made = out["usage"]["completion_tokens"]
                if made > 1 and secs > one:
                    best[kind] = max(best[kind], (made - 1) / (secs - one))
    return best


def prefix_reuse(url: str, alias: str, steps: int = 6) -> list[tuple[int, int, int]]:
    """(prompt tokens, new tokens, evaluated tokens) per step of a growing conversation."""
    code = SOURCE.read_text(encoding="utf-8").splitlines()
    messages = [
        {"role": "system", "content": f"You explore code. Session {uuid.uuid4().hex}."},
        {"role": "user", "content": "Where does the loop decide whether a call may start?"},
    ]
    rows, previous = [], 0
    with httpx.Client(trust_env=False) as client:
        for step in range(steps):
            _, out = _post(
                client, url, {"model": alias, "messages": messages, "max_tokens": 8, "temperature": 0}
            )
            prompt = out["usage"]["prompt_tokens"]
            evaluated = out.get("timings", {}).get("prompt_n", prompt)
            rows.append((prompt, prompt - previous, evaluated))
            previous = prompt + out["usage"]["completion_tokens"]
            window = "\n".join(code[step * 40 : step * 40 + 40])
            reply = out["choices"][0]["message"]["content"] or ""
            messages += [
                {"role": "assistant", "content": reply},
                {"role": "user", "content": f"Result:\n{window}"},
            ]
    return rows


def _old_server(python: str, model: Path, port: int, threads: int, log: Path) -> subprocess.Popen[bytes]:
    command = [python, "-m", "llama_cpp.server", "--model", str(model), "--port", str(port),
               "--n_ctx", "4096", "--n_threads", str(threads), "--n_threads_batch", str(threads)]  # fmt: skip
    proc = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2, trust_env=False).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"the old server did not start; log {log}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=None)
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument("--old-python", default=None, help="a python with llama-cpp-python[server]")
    parser.add_argument("--models", default="light,main")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    config: LabConfig = load_config(args.config)
    srv = ServerConfig(**(config.server.model_dump() | {"port": args.port, "parallel": 1, "n_ctx": 4096}))
    config = config.model_copy(update={"server": srv})
    threads = server.server_settings(config, {"light": Path("x")})["models"][0]["threads"]
    print(f"machine: {os.cpu_count()} CPUs, {threads} threads per server")
    results: dict[str, dict[str, dict[str, float]]] = {}
    reuse: dict[str, list[tuple[int, int, int]]] = {}
    handle = server.ensure_server(config)
    try:
        for choice in args.models.split(","):
            alias = weights.SPECS[choice].alias
            results.setdefault(choice, {})["new"] = measure(handle.url, alias, new=True, repeats=args.repeats)
            reuse[choice] = prefix_reuse(handle.url, alias)
    finally:
        server.stop_server(config)
    if args.old_python:
        for choice in args.models.split(","):
            log = Path("/tmp") / f"bench-old-{choice}.log"
            proc = _old_server(args.old_python, weights.model_path(choice), args.port + 1, threads, log)
            try:
                url = f"http://127.0.0.1:{args.port + 1}/v1"
                alias = weights.SPECS[choice].alias
                results[choice]["old"] = measure(url, alias, new=False, repeats=args.repeats)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    print(f"\nbest of {args.repeats}; tok/s (new = llama-server, old = llama-cpp-python 0.3.16 server)")
    print(f"{'model':<6} {'metric':<12} {'new':>8} {'old':>8} {'new/old':>8}")
    for choice, sides in results.items():
        for metric in ("pp", "free", "constrained"):
            new, old = sides["new"][metric], sides.get("old", {}).get(metric)
            ratio = f"{new / old:8.2f}" if old else "     n/a"
            print(f"{choice:<6} {metric:<12} {new:8.1f} {old if old else float('nan'):8.1f} {ratio}")
    print("\nprefix reuse (new server): evaluated prompt tokens / tokens new in the step")
    for choice, rows in reuse.items():
        ratios = [f"{evaluated}/{new_tokens}" for _, new_tokens, evaluated in rows[1:]]
        print(f"{choice:<6} " + "  ".join(ratios))
    print(json.dumps({"results": results, "reuse": reuse}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
