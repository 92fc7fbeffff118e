"""Mine the held-out ``mined-dev`` / ``mined-test`` / ``mined-test2`` suites from public git histories
(issue 36; ``mined-test2``, issue 48, is a second test split mined with the fixed miner).

Needs the git histories (bare mirrors) and PyPI; loading the suites afterwards needs only PyPI.
For each package below, every pair of consecutive final releases ``R..N`` (tags, ``since`` on) is
mined with ``subagent_lab.bench.mine`` (the same code as ``subagent-lab mine``); each task's gold
units are then mapped BY QUALIFIED NAME into the sdist of ``R`` (the release before the commit),
downloaded from PyPI and checked by SHA-256, and the task runs in that sdist's tree. A task with a
unit missing from the tree (added after R, renamed, moved) is dropped and counted, and so are a
task whose gold code in the tree is not the parent's (``sdist-differs``), one whose request names
an identifier the tree lacks (``absent-name``) and a second task with the subject and gold units of
an earlier one (a change picked onto two branches).

    python benchmarks/mine_suite.py --mirrors /work/.mirror --downloads /tmp/sdists [--split test2]
        [--write [--out DIR]]

Prints the table docs/benchmarks-mined.md shows; ``--write`` writes the task file of each split
whose packages were all mined (``--split test2 --write`` writes only ``tasks_mined_test2.yaml``),
into ``--out DIR`` (default: the package's ``bench/``, where a committed file, frozen, is never
replaced by a different one).
The split is by package (``split`` below), fixed before any run.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import itertools
import json
import re
import tarfile
import tempfile
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from subagent_lab.bench import mine
from subagent_lab.bench.commit_text import code_names
from subagent_lab.bench.gold_warnings import TreeWords

OUT = Path(__file__).resolve().parent.parent / "subagent_lab" / "bench"


@dataclass(frozen=True)
class Package:
    """One mined package: its PyPI name, its GitHub repository, the first release used, its split."""

    dist: str
    repo: str
    since: str
    split: str


PACKAGES: dict[str, Package] = {
    # dev2 (issue 48): the dev packages re-mined with the fixed miner (tasks_mined_dev2.yaml, suite
    # mined-dev2); the old tasks_mined_dev.yaml (split "dev", the miner of issue 36) stays as committed
    "humanize": Package("humanize", "python-humanize/humanize", "3.0.0", "dev2"),
    "cachetools": Package("cachetools", "tkem/cachetools", "4.0.0", "dev2"),
    "pluggy": Package("pluggy", "pytest-dev/pluggy", "0.13.0", "dev2"),
    "tomlkit": Package("tomlkit", "python-poetry/tomlkit", "0.7.0", "dev2"),
    "sqlparse": Package("sqlparse", "andialbrecht/sqlparse", "0.3.0", "test"),
    "arrow": Package("arrow", "arrow-py/arrow", "0.15.0", "test"),
    "more-itertools": Package("more-itertools", "more-itertools/more-itertools", "8.0.0", "test"),
    "boltons": Package("boltons", "mahmoud/boltons", "20.0.0", "test"),
    # test2 (issue 48): a second test split, mined with the fixed miner from packages no suite used
    "python-dateutil": Package("python-dateutil", "dateutil/dateutil", "2.7.0", "test2"),
    "toolz": Package("toolz", "pytoolz/toolz", "0.9.0", "test2"),
    "parso": Package("parso", "davidhalter/parso", "0.5.0", "test2"),
    "jsonschema": Package("jsonschema", "python-jsonschema/jsonschema", "4.0.0", "test2"),
    "structlog": Package("structlog", "hynek/structlog", "20.1.0", "test2"),
    "packaging": Package("packaging", "pypa/packaging", "20.0", "test2"),
    "wrapt": Package("wrapt", "GrahamDumpleton/wrapt", "1.12.0", "test2"),
    "pyflakes": Package("pyflakes", "PyCQA/pyflakes", "2.0.0", "test2"),
    "tabulate": Package("tabulate", "astanin/python-tabulate", "0.8.0", "test2"),
}
"""Package id (task id prefix) -> where it comes from. The mirror of ``owner/name`` is
``<mirrors>/<owner>+<name>/repo`` (a bare clone)."""

SPLITS: tuple[str, ...] = tuple(dict.fromkeys(p.split for p in PACKAGES.values()))
"""The splits, in order: each is written to ``tasks_mined_<split>.yaml`` as suite ``mined-<split>``."""


def releases(git_dir: Path, since: str) -> list[tuple[Version, str]]:
    """Final-release tags from ``since`` on, as (version, tag), in version order."""
    found = []
    for tag in mine.git(git_dir, "tag").split():
        try:
            version = Version(tag.removeprefix("v"))
        except InvalidVersion:
            continue
        if not version.is_prerelease and not version.is_devrelease and not version.is_postrelease:
            found.append((version, tag))
    return sorted(v for v in found if v[0] >= Version(since))


INDEX = "https://pypi.org/simple"
"""PyPI's simple index, the one pip reads: each file's link carries its SHA-256."""


@functools.cache
def index_links(dist: str) -> dict[str, tuple[str, str]]:
    """File name -> (url, sha256) of every file PyPI lists for ``dist``."""
    with urllib.request.urlopen(f"{INDEX}/{dist}/", timeout=60) as page:
        html = page.read().decode("utf-8")
    links = re.findall(r'href="([^"#]+)#sha256=([0-9a-f]{64})"[^>]*>([^<]+)<', html)
    return {name: (url, sha) for url, sha, name in links}


def sdist(dist: str, version: str, downloads: Path) -> tuple[Path, str] | None:
    """The ``.tar.gz`` sdist of ``dist==version`` from PyPI (cached in ``downloads``) and its SHA-256,
    checked against the index's; None when PyPI has no ``.tar.gz`` sdist of that version.

    The same file ``pip download --no-deps --no-binary :all: dist==version`` fetches (pip reads the
    same index), without preparing its metadata.
    """
    stems = {f"{dist}-{version}".lower(), f"{dist.replace('-', '_')}-{version}".lower()}
    hits = sorted(n for n in index_links(dist) if n.lower().endswith(".tar.gz") and n.lower()[:-7] in stems)
    if len(hits) != 1:
        return None
    url, sha256 = index_links(dist)[hits[0]]
    archive = downloads / hits[0]
    if not archive.is_file() or hashlib.sha256(archive.read_bytes()).hexdigest() != sha256:
        downloads.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(url, timeout=120) as response:
            data = response.read()
        if hashlib.sha256(data).hexdigest() != sha256:
            raise SystemExit(f"{hits[0]}: SHA-256 differs from the index's {sha256}")
        archive.write_bytes(data)
    return archive, sha256


def unpack(archive: Path, into: Path) -> Path:
    """Unpack an sdist; its one top-level directory (the tree root, as the loader names paths)."""
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(into, filter="data")
    tops = [p for p in into.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise SystemExit(f"{archive}: expected one top-level directory, found {tops}")
    return tops[0]


def mine_package(pkg_id: str, pkg: Package, git_dir: Path, downloads: Path, work: Path) -> dict[str, Any]:
    """All tasks of one package, with the record of how they were made."""
    removed: Counter[str] = Counter()
    tasks: dict[str, dict[str, Any]] = {}
    seen: set[tuple[str, tuple[str, ...]]] = set()
    ranges = []
    commits = dropped = 0
    versions = releases(git_dir, pkg.since)
    for (release, tag), (_, next_tag) in itertools.pairwise(versions):
        result = mine.mine(git_dir, f"{tag}..{next_tag}", name=pkg_id)
        commits += result.commits
        removed.update(result.removed)
        if not result.tasks:
            continue
        got = sdist(pkg.dist, str(release), downloads)
        if got is None:
            removed["no-sdist"] += len(result.tasks)
            continue
        archive, sha256 = got
        tree = unpack(archive, Path(tempfile.mkdtemp(dir=work)))
        kept = 0
        words = TreeWords(tree)
        for task in result.tasks:
            mapped = mine.remap(task, tree)
            if mapped is None:
                dropped += 1
                continue
            if mine.drifted(git_dir, task, tree):  # the sdist's gold code is not the parent's
                removed["sdist-differs"] += 1
                continue
            if any(not words.has(n) for n in code_names(task.request) if n not in task.introduced):
                removed["absent-name"] += 1
                continue
            key = (mapped.commit.subject, tuple(g.qualified for g in mapped.units))
            if mapped.id in tasks or key in seen:  # the same change picked onto two branches
                removed["duplicate"] += 1
                continue
            seen.add(key)
            workspace = {"sdist": f"{pkg.dist}=={release}", "sha256": sha256}
            tasks[mapped.id] = mapped.to_dict(workspace, f"https://github.com/{pkg.repo}")
            kept += 1
        ranges.append({"revs": f"{tag}..{next_tag}", "sdist": f"{pkg.dist}=={release}", "sha256": sha256,
                       "mined": len(result.tasks), "kept": kept})  # fmt: skip
    return {
        "package": pkg_id,
        "repo": pkg.repo,
        "head": mine.git(git_dir, "rev-parse", "HEAD").strip(),
        "split": pkg.split,
        "commits": commits,
        "removed": dict(sorted(removed.items())),
        "missing_in_sdist": dropped,
        "ranges": ranges,
        "tasks": [tasks[k] for k in sorted(tasks)],
    }


HEADER = """Explore benchmark, split `{split}`: localize tasks MINED from public git histories (issue 36).

Written by benchmarks/mine_suite.py (subagent_lab.bench.mine), no model involved; see
docs/benchmarks-mined.md for the packages, revision ranges, filters and the prompt template.
Each task runs in the PyPI sdist of the release before its commit ({{sdist, sha256}}); its gold is
the functions/classes the commit changed, found by qualified name in that sdist's tree, with
paths relative to the tree root. meta.names_gold_symbol flags a prompt that names a gold unit.
{frozen}"""


def markdown(records: list[dict[str, Any]]) -> str:
    """The tables of docs/benchmarks-mined.md: per package, per filter, per sdist."""
    out = ["| package | split | repository (HEAD mined) | releases | commits | tasks | names a gold unit | "
           "unit not in sdist |", "|---|---|---|---|---:|---:|---:|---:|"]  # fmt: skip
    for r in records:
        first, last = r["ranges"][0]["revs"].split("..")[0], r["ranges"][-1]["revs"].split("..")[1]
        named = sum(t["meta"]["names_gold_symbol"] for t in r["tasks"])
        out.append(f"| {r['package']} | {r['split']} | {r['repo']} (`{r['head'][:10]}`) | {first}..{last} | "
                   f"{r['commits']} | {len(r['tasks'])} | {named} | {r['missing_in_sdist']} |")  # fmt: skip
    for split in dict.fromkeys(r["split"] for r in records):
        side = [r for r in records if r["split"] == split]
        named = sum(t["meta"]["names_gold_symbol"] for r in side for t in r["tasks"])
        missing = sum(r["missing_in_sdist"] for r in side)
        out.append(f"| **{split}** | | | | {sum(r['commits'] for r in side)} | "
                   f"{sum(len(r['tasks']) for r in side)} | {named} | {missing} |")  # fmt: skip
    out += ["", "| filter | " + " | ".join(r["package"] for r in records) + " | all |",
            "|---|" + "---:|" * (len(records) + 1)]  # fmt: skip
    for name in (*mine.FILTERS, "no-sdist", "sdist-differs"):
        counts = [r["removed"].get(name, 0) for r in records]
        out.append(f"| {name} | " + " | ".join(map(str, counts)) + f" | {sum(counts)} |")
    out += [
        "",
        "| package | sdist | SHA-256 of the .tar.gz | commits of | mined | kept |",
        "|---|---|---|---|---:|---:|",
    ]
    for r in records:
        for g in r["ranges"]:
            cells = [r["package"], g["sdist"], f"`{g['sha256']}`", g["revs"], g["mined"], g["kept"]]
            out.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(out) + "\n"


def written(records: list[dict[str, Any]], out: Path = OUT) -> dict[str, Path]:
    """Split -> its task file, for each split whose packages were ALL mined (``--only`` or ``--split``
    leave the other files as they are: a partial split is never written)."""
    mined = {r["package"] for r in records}
    return {
        split: out / f"tasks_mined_{split}.yaml"
        for split in SPLITS
        if {k for k, p in PACKAGES.items() if p.split == split} <= mined
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mirrors", default="/work/.mirror", help="where <owner>+<name>/repo are")
    parser.add_argument("--downloads", default="/tmp/mined-sdists", help="sdist cache")
    parser.add_argument("--write", action="store_true", help="write the task files")
    parser.add_argument("--out", default=str(OUT), help="where --write writes")
    parser.add_argument("--record", default=None, help="write the per-package record (JSON) here")
    parser.add_argument("--markdown", default=None, help="write the docs' tables (Markdown) here")
    parser.add_argument("--only", nargs="*", default=None, help="only these packages")
    parser.add_argument("--split", nargs="*", default=None, choices=SPLITS, help="only these splits")
    args = parser.parse_args(argv)
    records = []
    with tempfile.TemporaryDirectory() as work:
        for pkg_id, pkg in PACKAGES.items():
            if (args.only and pkg_id not in args.only) or (args.split and pkg.split not in args.split):
                continue
            git_dir = Path(args.mirrors) / pkg.repo.replace("/", "+") / "repo"
            record = mine_package(pkg_id, pkg, git_dir, Path(args.downloads), Path(work))
            records.append(record)
            named = sum(t["meta"]["names_gold_symbol"] for t in record["tasks"])
            print(f"{pkg_id:15} {pkg.split:5} commits {record['commits']:5}  tasks {len(record['tasks']):4}  "
                  f"names-gold {named:3}  missing-in-sdist {record['missing_in_sdist']:3}  "
                  f"sdists {len(record['ranges']):3}  removed {record['removed']}", flush=True)  # fmt: skip
    if args.record:
        slim = [{k: v for k, v in r.items() if k != "tasks"} | {"count": len(r["tasks"])} for r in records]
        Path(args.record).write_text(json.dumps(slim, indent=1) + "\n", encoding="utf-8")
    if args.markdown:
        Path(args.markdown).write_text(markdown(records), encoding="utf-8")
    if args.write:
        for split, path in written(records, Path(args.out)).items():
            tasks = [t for r in records if r["split"] == split for t in r["tasks"]]
            side = "test" if split.startswith("test") else "dev"  # the task file's split field
            frozen = "FROZEN: tests/test_mined_suite.py checks this file's SHA-256.\n" * (split != "dev")
            with tempfile.TemporaryDirectory() as scratch:
                fresh = Path(scratch) / path.name
                mine.write_tasks(fresh, tasks, suite=f"mined-{split}", split=side,
                                 header=HEADER.format(split=f"mined-{split}", frozen=frozen))  # fmt: skip
                data = fresh.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            if path.is_file() and path.read_bytes() != data and path.parent.resolve() == OUT.resolve():
                # every committed mined file is frozen: a different file is a new split, written elsewhere
                print(f"{path}: NOT overwritten (frozen; the new file's sha256 {digest}): use --out DIR")
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            print(f"{path}: {len(tasks)} tasks, sha256 {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
