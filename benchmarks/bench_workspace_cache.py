"""What issue 52's workspace hardening costs a workspace made from the cache, before and after.

A task's workspace is resolved on every run (``spec.root(fetch=True)``); once the git checkout
or sdist tree is in the cache that is a lookup, and issue 52 adds to it: a git checkout is reused
only with its record of what was checked (``git-<rev>.checked``), and ``{installed: a.b}`` walks
the finders instead of importing. The same four specs are resolved at ``BEFORE`` and now, each side
in its own process with its own cache (the old scheme's checkouts have no record, so the new code
would remake them), alternating rounds, the fastest sample of each kind:

- ``git``: a checkout of a 200-file commit of a local repository;
- ``sdist``: an unpacked sdist (a local archive in the cache's ``downloads/``);
- ``installed``: a top-level package on ``sys.path`` (the pinned legacy packages are cached per
  process, so a throw-away one is used), and ``installed-dotted``: its subpackage.

    git worktree add --detach /tmp/ws52-base 3cb5cb3
    .venv/bin/python benchmarks/bench_workspace_cache.py [--base /tmp/ws52-base] [--rounds 5]

The target (issue 52): no kind more than 1.2x slower.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BEFORE = "3cb5cb3"
"""The last commit before issue 52's changes."""

CHILD = r"""
import json, sys, time
from subagent_lab.bench.workspace_spec import GitWorkspace, InstalledWorkspace, SdistWorkspace
repo, rev, sha, calls = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
specs = {
    "git": GitWorkspace(git=repo, rev=rev),
    "sdist": SdistWorkspace(sdist="benchdemo==1.0", sha256=sha),
    "installed": InstalledWorkspace(installed="ws52benchpkg"),
    "installed-dotted": InstalledWorkspace(installed="ws52benchpkg.sub"),
}
out = {}
for kind, spec in specs.items():
    spec.root(fetch=True)  # made (or found) once: what follows is the cached path
    samples = []
    for _ in range(calls):
        t = time.perf_counter()
        for _ in range(100):
            spec.root(fetch=True)
        samples.append((time.perf_counter() - t) / 100)
    out[kind] = min(samples)
print(json.dumps(out))
"""


def _fixtures(tmp: Path) -> tuple[str, str, str]:
    """A 200-file git repository, an sdist archive and an importable package; (repo, rev, sha256)."""
    repo = tmp / "repo"
    for i in range(200):
        path = repo / f"pkg{i % 10}" / f"m{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"def f{i}():\n    return {i}\n" * 20, encoding="utf-8")
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b"}  # fmt: skip
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "bench"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)
    rev = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for i in range(200):
            data = f"x = {i}\n".encode()
            info = tarfile.TarInfo(f"benchdemo-1.0/benchdemo/m{i}.py")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = buf.getvalue()
    for side in ("before", "now"):
        (tmp / side / "workspaces" / "downloads").mkdir(parents=True)
        (tmp / side / "workspaces" / "downloads" / "benchdemo-1.0.tar.gz").write_bytes(archive)
    (tmp / "site" / "ws52benchpkg" / "sub").mkdir(parents=True)
    (tmp / "site" / "ws52benchpkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp / "site" / "ws52benchpkg" / "sub" / "__init__.py").write_text("", encoding="utf-8")
    return str(repo), rev, hashlib.sha256(archive).hexdigest()


def _side(code: Path, cache: Path, site: Path, args: list[str]) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": f"{code}{os.pathsep}{site}", "SUBAGENT_LAB_CACHE": str(cache)}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, *args], capture_output=True, text=True, env=env, cwd=cache, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"{code}: {proc.stderr.strip()[-2000:]}")
    return dict(json.loads(proc.stdout.splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, default=Path("/tmp/ws52-base"), help=f"a checkout of {BEFORE}")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=30, help="samples of 100 lookups per round")
    opts = parser.parse_args()
    if not (opts.base / "subagent_lab" / "bench" / "workspace_spec.py").is_file():
        raise SystemExit(
            f"no checkout of {BEFORE} at {opts.base}: git worktree add --detach {opts.base} {BEFORE}"
        )
    with tempfile.TemporaryDirectory(prefix="bench-ws-") as tmp_name:
        tmp = Path(tmp_name)
        repo, rev, sha = _fixtures(tmp)
        args = [repo, rev, sha, str(opts.calls)]
        best: dict[str, dict[str, float]] = {"before": {}, "now": {}}
        for round_ in range(opts.rounds):
            sides = [("before", opts.base), ("now", REPO)]
            for side, code in sides if round_ % 2 == 0 else sides[::-1]:
                for kind, seconds in _side(code, tmp / side, tmp / "site", args).items():
                    best[side][kind] = min(seconds, best[side].get(kind, float("inf")))
    print(f"{'workspace from cache':22} {'before us':>10} {'now us':>10} {'ratio':>7}")
    worst = 0.0
    for kind, before in best["before"].items():
        now = best["now"][kind]
        worst = max(worst, now / before)
        print(f"{kind:22} {before * 1e6:10.1f} {now * 1e6:10.1f} {now / before:6.2f}x")
    print(f"worst ratio {worst:.2f}x (target <= 1.2x; before = {BEFORE} at {opts.base}, now = {REPO})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
