"""Embedded server vs in-process llama.cpp: prompt and generation tokens/s of both models.

For each model, the same chat request (a ~500-token prompt, then 128 generated tokens at
temperature 0) is timed through the embedded server (OpenAI client, token counts from the
server's ``usage``) and through ``llama_cpp.Llama`` in this process with the same n_ctx and
threads; the ratio server/in-process is the figure of merit (goal >= 0.9).

Method, identical on both sides: a unique first line defeats the KV prefix cache, so a
``max_tokens=1`` call times prompt processing; the same request again (its prefix now cached)
with ``max_tokens=128`` and end-of-turn tokens banned by ``logit_bias`` times generation.
The best of ``--repeats`` runs is reported: other load on a shared machine only ever slows a
run down, so the fastest is the steadiest estimate of what each side can do. Also printed:
llama.cpp's own timings (best) from the server log (``llama_perf_context_print``).

Usage: python benchmarks/bench_server.py [--port 8799] [--repeats 3] [--models light,main]
"""

from __future__ import annotations

import argparse
import platform
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from subagent_lab.config.profiles import LabConfig, ServerConfig, load_config
from subagent_lab.local_models import server, weights

SOURCE = Path(__file__).resolve().parent.parent / "subagent_lab" / "profiles.py"
QUESTION = "\n\nExplain in detail what the code above does, section by section."
END_OF_TURN = ("<|im_end|>", "<|endoftext|>")
_PERF = re.compile(r"(prompt eval|\beval) time =\s*([\d.]+) ms /\s*(\d+) (?:tokens|runs)")


@dataclass
class Sample:
    """Timing of one request: tokens and wall seconds."""

    prompt_tokens: int
    completion_tokens: int
    seconds: float


Call = Callable[[list[dict[str, str]], int], Sample]


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def make_prompt(base_url: str, alias: str, n_tokens: int) -> str:
    """About ``n_tokens`` tokens of real source code plus a question, cut with the server's tokenizer."""
    root = base_url.removesuffix("/v1")
    tokens = httpx.post(f"{root}/extras/tokenize", json={"input": SOURCE.read_text(), "model": alias}).json()
    cut = tokens["tokens"][:n_tokens]
    text = httpx.post(f"{root}/extras/detokenize", json={"tokens": cut, "model": alias}).json()["text"]
    return str(text) + QUESTION


def messages(prompt: str, nonce: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": f"Session {nonce}. You are a careful code reviewer."},
        {"role": "user", "content": prompt},
    ]


def server_call(base_url: str, alias: str, bias: dict[str, float]) -> Call:
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=600)

    def call(msgs: list[dict[str, str]], max_tokens: int) -> Sample:
        start = time.perf_counter()
        reply = client.chat.completions.create(
            model=alias,
            messages=msgs,  # type: ignore[arg-type]
            temperature=0,
            seed=0,
            max_tokens=max_tokens,
            logit_bias=bias,  # type: ignore[arg-type]
        )
        seconds = time.perf_counter() - start
        assert reply.usage is not None, "the server returned no usage"
        return Sample(reply.usage.prompt_tokens, reply.usage.completion_tokens, seconds)

    return call


def inprocess_call(llm: Any, bias: dict[str, float]) -> Call:
    int_bias = {int(k): v for k, v in bias.items()}

    def call(msgs: list[dict[str, str]], max_tokens: int) -> Sample:
        start = time.perf_counter()
        reply = llm.create_chat_completion(
            messages=msgs, temperature=0, seed=0, max_tokens=max_tokens, logit_bias=int_bias
        )
        seconds = time.perf_counter() - start
        usage = reply["usage"]
        return Sample(usage["prompt_tokens"], usage["completion_tokens"], seconds)

    return call


def measure(call: Call, prompt: str, gen_tokens: int) -> tuple[Sample, Sample]:
    """(prompt-processing sample, generation sample) for one fresh prompt."""
    msgs = messages(prompt, uuid.uuid4().hex)
    pp = call(msgs, 1)
    gen = call(msgs, gen_tokens)  # prefix now cached: this times generation
    return pp, gen


def log_perf(log: Path, offset: int) -> list[tuple[str, float]]:
    """llama.cpp's (kind, tokens/s) lines written to the server log after ``offset``."""
    try:
        with log.open("rb") as fh:
            fh.seek(offset)
            text = fh.read().decode(errors="replace")
    except OSError:
        return []
    return [(kind, int(n) / (float(ms) / 1000)) for kind, ms, n in _PERF.findall(text) if float(ms) > 0]


def bench_model(
    config: LabConfig, choice: str, handle: server.ServerHandle, args: argparse.Namespace
) -> None:
    import llama_cpp

    spec = weights.SPECS[choice]
    path = weights.assemble(spec)
    settings = server.server_settings(config, {choice: path})["models"][0]
    prompt = make_prompt(handle.url, spec.alias, args.prompt_tokens)
    llm = llama_cpp.Llama(
        model_path=str(path),
        n_ctx=settings["n_ctx"],
        n_threads=settings["n_threads"],
        n_threads_batch=settings["n_threads_batch"],
        logits_all=False,
        verbose=False,
    )
    bias = {str(llm.tokenize(t.encode(), add_bos=False, special=True)[0]): -100.0 for t in END_OF_TURN}
    sides = {"server": server_call(handle.url, spec.alias, bias), "in-process": inprocess_call(llm, bias)}
    for call in sides.values():  # warm-up: page in the weights, build the chat template
        call(messages("warm-up", uuid.uuid4().hex), 2)
    rates: dict[str, tuple[list[float], list[float]]] = {side: ([], []) for side in sides}
    counts: dict[str, tuple[int, int]] = {}
    log_offset = handle.log_path.stat().st_size if handle.log_path.exists() else 0
    for _ in range(args.repeats):
        for side, call in sides.items():  # interleaved, so drifts hit both sides alike
            pp, gen = measure(call, prompt, args.gen_tokens)
            rates[side][0].append(pp.prompt_tokens / pp.seconds)
            rates[side][1].append(gen.completion_tokens / gen.seconds)
            counts[side] = (pp.prompt_tokens, gen.completion_tokens)
    llm.close()
    best = {side: (max(r[0]), max(r[1])) for side, r in rates.items()}
    label = f"{choice} ({spec.alias})"
    for side in sides:
        n_prompt, n_gen = counts[side]
        print(
            f"{label:<30} {side:<11} {n_prompt:>7} {best[side][0]:>10.1f} {n_gen:>6} {best[side][1]:>10.1f}"
        )
    ratio_pp = best["server"][0] / best["in-process"][0]
    ratio_gen = best["server"][1] / best["in-process"][1]
    verdict = "ok" if min(ratio_pp, ratio_gen) >= 0.9 else "BELOW GOAL"
    print(f"{label:<30} {'ratio':<11} {'':>7} {ratio_pp:>10.2f} {'':>6} {ratio_gen:>10.2f}   {verdict}")
    perf = log_perf(handle.log_path, log_offset)
    pp_log = [r for kind, r in perf if kind == "prompt eval" and r < 1e5]
    gen_log = [r for kind, r in perf if kind == "eval"]
    if pp_log and gen_log:
        print(
            f"{label:<30} {'(server log)':<11} {'':>7} {max(pp_log):>10.1f} {'':>6} "
            f"{max(gen_log):>10.1f}   llama.cpp's own timings (best)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=None, help="profiles.yaml")
    parser.add_argument("--port", type=int, default=None, help="server port (default: the configured one)")
    parser.add_argument("--models", default="light,main", help="comma-separated model choices")
    parser.add_argument("--prompt-tokens", type=int, default=500)
    parser.add_argument("--gen-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    config = load_config(args.config)
    if args.port:
        srv = config.server.model_dump() | {"port": args.port}
        config = config.model_copy(update={"server": ServerConfig(**srv)})
    started = time.perf_counter()
    handle = server.ensure_server(config)  # a server started here is stopped at exit
    import llama_cpp

    threads = server.server_settings(config, {"light": Path("x")})["models"][0]["n_threads"]
    print(f"machine: {cpu_name()}, {threads} threads; llama-cpp-python {llama_cpp.__version__}")
    print(f"server:  {handle.url} ({'started' if handle.started else 'reused'}), log {handle.log_path}")
    print(
        f"request: ~{args.prompt_tokens}-token prompt, {args.gen_tokens} generated, best of {args.repeats}\n"
    )
    print(f"{'model':<30} {'side':<11} {'prompt':>7} {'pp tok/s':>10} {'gen':>6} {'gen tok/s':>10}")
    for choice in args.models.split(","):
        bench_model(config, choice.strip(), handle, args)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    if handle.started:
        server.stop_server(config)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
