"""What issues 24 and 39's hardening costs: the Bash sandbox per call, the secret scan per observation,
and the first-search word picker, each before and after, side by side, in one run.

"Before" is the code as it was at ``BEFORE`` (loaded from git, so both sides run on this machine
in the same process, interleaved): bubblewrap's old argument set (no user namespace, no seccomp
filter, no prlimit, unsized /tmp) against the new one, on the same commands in the same
workspace; the old redactor (11 regexes on every text) against the new one (detect-secrets'
plugin regexes and the harness's own, each gated by its literal needles) on the same observations,
plain and as the JSON trace line they are written in; the old quadratic picker against the new one.

    .venv/bin/python benchmarks/bench_hardening.py [--calls 15] [--rounds 30]

The target (issue 24): neither the sandbox per Bash call nor the scan per observation more than
doubles. Runs take ~1-2 minutes on a 2-core machine.

Issue 39 (``--tools``): Grep (a directory search now opens every file by descriptor), Read, Glob
and a trace write (the redactor grew shapes) at ``BEFORE_39`` and now, side by side: each side
runs in its own process (the old tree extracted with ``git archive``), alternating, best of
``--rounds``; the workspace is a copy of a real package (jinja2's source when the workspace
cache has it, else this repository's ``subagent_lab``). A directory Grep keeps rg's file listing
while the tree is unchanged (``tools/rg/listing.py``): the calls after the first are what a run
repeats; "no kept listing" is a first call. The target: no tool or trace write more than 1.5x
slower.

    .venv/bin/python benchmarks/bench_hardening.py --tools [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from subagent_lab.core.redact import Redactor  # noqa: E402
from subagent_lab.tools import search_words  # noqa: E402
from subagent_lab.tools.read import read  # noqa: E402
from subagent_lab.workspace.bwrap import BashSandbox, run_bwrap  # noqa: E402
from subagent_lab.workspace.sandbox import Workspace  # noqa: E402

BEFORE = "cd66270"
"""The last commit before issue 24's changes."""
BEFORE_39 = "c66a494"
"""The last commit before issue 39's changes."""
TOOL_TIMER = r"""
import json, sys, time
from pathlib import Path
from subagent_lab.core.trace import ToolFinished, TraceWriter
from subagent_lab.tools.glob import find_paths
from subagent_lab.tools.read import read
from subagent_lab.workspace.sandbox import Workspace

try:
    from subagent_lab.tools.rg.search import search
except ImportError:  # the tree before the import circle was cut
    from subagent_lab.tools.rg import search

try:
    from subagent_lab.tools.rg.listing import clear_cache  # kept listings, since issue 39
except ImportError:
    clear_cache = lambda: None  # noqa: E731 (the tree before: nothing kept)

def cold_grep():
    clear_cache()
    return search(ws, ["def "], ".", max_results=100)

ws = Workspace(Path(sys.argv[1]))
out = Path(sys.argv[2])
page = read(ws, sys.argv[3], start=1, limit=400)
cases = {
    "Grep 'def ' (100 hits)": lambda: search(ws, ["def "], ".", max_results=100),
    "Grep 'def ', no kept listing": cold_grep,
    "Grep, no match (whole tree)": lambda: search(ws, ["zq_no_such_name_zq"], "."),
    "Grep glob '*.py', 20 files": lambda: search(
        ws, ["import"], ".", glob="*.py", files_only=True, max_results=20
    ),
    "Grep one file": lambda: search(ws, ["def "], sys.argv[3]),
    "Read 400 lines": lambda: read(ws, sys.argv[3], start=1, limit=400),
    "Glob '**/*.py'": lambda: find_paths(ws, "**/*.py"),
}
n = [0]
def trace_write():
    n[0] += 1
    writer = TraceWriter(out / f"t{n[0]}.jsonl", "bench")
    for i in range(50):
        writer.emit(ToolFinished(run_id="bench", call_id=f"c{i}", tool="Read", status="ok", text=page))
    writer.close()
cases["trace write (50 Read events)"] = trace_write
secret_page = page + "\nTOKEN = 'ghp_" + "a1B2" * 9 + "'\n"
def trace_write_secret():
    n[0] += 1
    writer = TraceWriter(out / f"s{n[0]}.jsonl", "bench")
    for i in range(50):
        writer.emit(ToolFinished(run_id="bench", call_id=f"c{i}", tool="Read", status="ok", text=secret_page))
    writer.close()
cases["trace write (50 events, a token)"] = trace_write_secret
from subagent_lab.tools.bash import explain_command
LINES = ["ls -la app | head -5", "git -C app log --oneline -3", "bash -lc 'pytest -q && git status'",
         "timeout 5 python -m pytest -q", "rm -rf build/*"]
cases["Bash classify (5 lines)"] = lambda: [explain_command(c, root=sys.argv[1]) for c in LINES]
for fn in cases.values():
    fn()  # warm up: imports, compiled shapes, the page cache
result = {}
for name, fn in cases.items():
    runs = []
    for _ in range(int(sys.argv[4])):
        start = time.perf_counter(); fn(); runs.append(time.perf_counter() - start)
    result[name] = sorted(runs)[len(runs) // 2] * 1000
print(json.dumps(result))
"""

COMMANDS: dict[str, list[str]] = {
    "true": ["/bin/sh", "-c", "true"],
    "ls -la": ["/bin/sh", "-c", "ls -la >/dev/null"],
    "grep -rn def .": ["/bin/sh", "-c", "grep -rn def . >/dev/null"],
    "python -c pass": [sys.executable, "-c", "pass"],
    "git status": ["/bin/sh", "-c", "git status --short >/dev/null 2>&1"],
}


def _old_module(path: str, name: str, package: str = "") -> types.ModuleType:
    """``path`` as it was at ``BEFORE``, loaded as a module of its own."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{BEFORE}:{path}"], capture_output=True, text=True, check=True
    ).stdout
    module = types.ModuleType(name)
    module.__package__ = package
    sys.modules[name] = module
    exec(compile(source, f"{BEFORE}:{path}", "exec"), module.__dict__)
    return module


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bench_sandbox(calls: int) -> None:
    old = _old_module("subagent_lab/workspace/bwrap.py", "_old_bwrap")
    new_sandbox, old_sandbox = BashSandbox(), old.BashSandbox()
    binary = new_sandbox.executable()
    problem = new_sandbox.problem()
    if binary is None or problem is not None:
        print(f"sandbox: skipped ({problem})")
        return
    with tempfile.TemporaryDirectory(prefix="bench-hardening-") as scratch:
        workspace = os.path.realpath(scratch)
        for package in ("subagent_lab/core", "subagent_lab/tools"):
            subprocess.run(["cp", "-r", str(REPO / package), workspace], check=True)
        subprocess.run(["git", "init", "-q", workspace], check=True)
        print(f"\nBash sandbox, per call ({calls} calls of each command per side, interleaved; median ms)")
        print(f"{'command':<18}{'before':>10}{'after':>10}{'ratio':>8}")
        for label, command in COMMANDS.items():
            before: list[float] = []
            after: list[float] = []
            for _ in range(calls):
                for side, samples in (("old", before), ("new", after)):
                    with tempfile.TemporaryFile() as out:
                        started = time.perf_counter()
                        if side == "old":
                            old.run_bwrap(old_sandbox, binary, workspace, command, out, 60)
                        else:
                            run_bwrap(new_sandbox, binary, workspace, command, out, 60)
                        samples.append(time.perf_counter() - started)
            b, a = _median_ms(before), _median_ms(after)
            print(f"{label:<18}{b:>10.1f}{a:>10.1f}{a / b:>8.2f}")


def _observations() -> list[str]:
    """Tool observations as the model sees them: Read windows of the harness's own files, and a
    few that hold secrets (so the gated regexes run too)."""
    ws = Workspace(REPO)
    texts: list[str] = []
    for path in sorted((REPO / "subagent_lab").rglob("*.py"))[:120]:
        rel = str(path.relative_to(REPO))
        for start in (1, 200):
            try:
                texts.append(read(ws, rel, start=start, limit=200))
            except Exception:  # a window past the end of a short file
                continue
    secretish = (
        "config.py:3: OPENAI_API_KEY = 'sk-abcdefghijklmnopqrstuvwx'\n"
        "deploy.yaml:7: DATABASE_URL: postgres://app:hunter2-pw@db:5432/app\n"
        "notes.md:2: aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
    )
    texts += [secretish * 20] * 10
    return texts


def _time_per_item(fn: Callable[[str], str], items: list[str], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, (time.perf_counter() - started) / len(items))
    return best * 1e6


def bench_redaction(rounds: int) -> None:
    old = _old_module("subagent_lab/core/redact.py", "_old_redact")
    old_redactor, new_redactor = old.Redactor(), Redactor()
    new_redactor("warm up: import detect-secrets' plugins once")
    texts = _observations()
    lines = [json.dumps({"kind": "tool_finished", "text": t}) for t in texts]
    chars = sum(map(len, texts)) / len(texts)
    print(f"\nSecret scan, per observation ({len(texts)} observations, mean {chars:,.0f} chars; "
          f"best of {rounds} rounds; microseconds)")  # fmt: skip
    print(f"{'form':<28}{'before':>10}{'after':>10}{'ratio':>8}")
    for label, items in (("observation text", texts), ("its trace line (JSON)", lines)):
        b = _time_per_item(old_redactor, items, rounds)
        a = _time_per_item(new_redactor, items, rounds)
        print(f"{label:<28}{b:>10.1f}{a:>10.1f}{a / b:>8.2f}")


def bench_picker() -> None:
    old = _old_module("subagent_lab/tools/search_words.py", "_old_search_words", "subagent_lab.tools")
    words = [f"name{i}x{i * 7 % 13}" for i in range(6000)]
    print("\nFirst-search word picker, the task's names (seconds for one task)")
    print(f"{'task chars':<18}{'before':>10}{'after':>10}")
    for size in (4_000, 8_000, 16_000, 64_000):
        task = " ".join(words)[:size]
        started = time.perf_counter()
        old._candidates(task, "pkg")
        b = time.perf_counter() - started
        started = time.perf_counter()
        search_words._candidates(task, "pkg")
        a = time.perf_counter() - started
        print(f"{size:<18,}{b:>10.3f}{a:>10.4f}")


def _bench_workspace(scratch: str, where: str | None) -> tuple[str, str]:
    """(a copy of a real package's source, or of ``where``, and a file in it to Read)."""
    if where:
        dest = os.path.join(scratch, "ws")
        subprocess.run(["cp", "-r", where, dest], check=True)
        first = next(
            os.path.relpath(os.path.join(d, f), dest)
            for d, _, fs in sorted(os.walk(dest))
            for f in fs
            if f.endswith(".py")
        )
        return dest, first
    cache = Path.home() / ".cache" / "subagent_lab" / "workspaces" / "jinja2-3.1.6"
    source, page = (
        (cache, "src/jinja2/environment.py") if cache.is_dir() else (REPO / "subagent_lab", "core/trace.py")
    )
    dest = os.path.join(scratch, "ws")
    subprocess.run(["cp", "-r", str(source), dest], check=True)
    return dest, page


def bench_tools(rounds: int, where: str | None = None, repeats: int = 9, before: str = BEFORE_39) -> None:
    """Issue 39: Grep, Read, Glob, trace writes and the Bash classifier at ``before`` (default
    ``BEFORE_39``; issue 52 compared with ``3cb5cb3``) and now (see the docstring)."""
    with tempfile.TemporaryDirectory(prefix="bench-hardening-39-") as scratch:
        old_tree = os.path.join(scratch, "old")
        os.mkdir(old_tree)
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", before], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", old_tree], input=archive.stdout, check=True)
        workspace, page = _bench_workspace(scratch, where)
        files = sum(len(f) for _, _, f in os.walk(workspace))
        best: dict[str, dict[str, float]] = {"before": {}, "after": {}}
        for round_ in range(rounds):
            for side, tree in (("before", old_tree), ("after", str(REPO))):
                out = os.path.join(scratch, f"traces-{side}-{round_}")
                os.mkdir(out)
                env = {**os.environ, "PYTHONPATH": tree}
                proc = subprocess.run(
                    [sys.executable, "-c", TOOL_TIMER, workspace, out, page, str(repeats)],
                    capture_output=True, text=True, env=env, cwd=tree, check=True,
                )  # fmt: skip
                for name, ms in json.loads(proc.stdout.strip().splitlines()[-1]).items():
                    best[side][name] = min(best[side].get(name, float("inf")), ms)
        print(f"\nTools and trace writes, {before} vs now ({files} files in the workspace; median of "
              f"{repeats} calls, best of {rounds} alternating rounds; ms)")  # fmt: skip
        print(f"{'call':<32}{'before':>10}{'after':>10}{'ratio':>8}")
        for name, b in best["before"].items():
            a = best["after"][name]
            print(f"{name:<32}{b:>10.2f}{a:>10.2f}{a / b:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=15, help="sandboxed calls per command and side")
    parser.add_argument("--rounds", type=int, default=30, help="rounds over the observations per side")
    parser.add_argument(
        "--tools", action="store_true", help=f"issue 39: tools and trace writes vs {BEFORE_39}"
    )
    parser.add_argument("--workspace", help="with --tools: a directory to copy and search (default: jinja2)")
    parser.add_argument("--before", default=BEFORE_39, help="with --tools: the commit to compare with")
    args = parser.parse_args()
    if args.tools:
        where = f"{os.cpu_count()} CPUs, load {os.getloadavg()}"
        print(f"before = {args.before} (git), after = the working tree; {where}")
        bench_tools(min(args.rounds, 5), args.workspace, before=args.before)
        return
    print(f"before = {BEFORE} (git), after = the working tree; {os.cpu_count()} CPUs, load {os.getloadavg()}")
    bench_sandbox(args.calls)
    bench_redaction(args.rounds)
    bench_picker()


if __name__ == "__main__":
    main()
