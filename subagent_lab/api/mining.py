"""``sl.mine``: a git history into a task file a sweep can run (``bench.mine_file``)."""

from __future__ import annotations

from pathlib import Path

from subagent_lab.bench.mine_file import MinedFile, SdistTarget, mine_to_file

__all__ = ["MinedFile", "SdistTarget", "mine"]


def mine(
    repo: str | Path,
    out: str | Path,
    *,
    revs: str | None = None,
    name: str | None = None,
    split: str = "dev",
    sdist: SdistTarget | None = None,
    since: str | None = None,
    max_commits: int | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> MinedFile:
    """Turn ``repo``'s history (``revs``, e.g. ``"v1.0..v1.1"``; default all of ``HEAD``) into
    ``localize`` tasks written to ``out``: each non-merge commit whose message reads as a request and
    that changes one to four source files becomes a task whose prompt is that request, whose
    workspace is the parent commit (its path written relative to ``out``), and whose gold is the
    functions and classes whose own code it modified (docs/benchmarks-mined.md has the rules and
    the filters). ``since`` (``YYYY-MM-DD``), ``max_commits`` (the newest N) and ``sample`` (N
    tasks drawn with ``seed``) size it. Then ``sl.sweep(out, ["none", "retrieval", ...])``.

    Returns what was written and what each filter removed (``.summary()`` says it in one line).
    """
    return mine_to_file(
        repo,
        out,
        revs=revs,
        name=name,
        split=split,
        sdist=sdist,
        since=since,
        max_commits=max_commits,
        sample=sample,
        seed=seed,
    )
