"""The mined suites (tasks_mined_dev.yaml, tasks_mined_dev2.yaml, tasks_mined_test.yaml,
tasks_mined_test2.yaml): shape, counts, frozen hashes, and every gold span against its sdist's tree.

The span check reads each pinned sdist from ``<cache>/workspaces/downloads/`` (where the sdists are
fetched) and skips the sdists that are not there.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from subagent_lab.bench.units import module_name, parse_units
from subagent_lab.local_models.weights import cache_root

BENCH = Path(__file__).resolve().parent.parent / "subagent_lab" / "bench"
DEV_FILE = BENCH / "tasks_mined_dev.yaml"
TEST_FILE = BENCH / "tasks_mined_test.yaml"
MINED_TEST_SHA256 = "0c662ee24994d0fe21059a94489c26c9f8e633fce28d8cfb8b05abab5b2d8aea"
"""tasks_mined_test.yaml, frozen before any run: a change is a new test split (say why)."""
TEST2_FILE = BENCH / "tasks_mined_test2.yaml"
MINED_TEST2_SHA256 = "dd3d5b112242b307896fed23c5fd76052c38ee75864a49a57a5f076b73c1548a"
"""tasks_mined_test2.yaml (issue 48: the fixed miner, nine packages no other suite uses), frozen
before any run, the floors included: a change is a new test split (say why)."""
DEV2_FILE = BENCH / "tasks_mined_dev2.yaml"
MINED_DEV2_SHA256 = "c8b9c66f19bdff6abad66e801391b644e53867b085d290dd85a677c92da9e735"
"""tasks_mined_dev2.yaml (issue 48: the dev packages re-mined with the fixed miner, the dev split
for tuning from now on), frozen so that figures tuned on it name one file: a change is a new dev
split (say why)."""
MAX_PACKAGE_SHARE = 0.30
"""No package holds more than this share of a test split's tasks (issue 48)."""
USED_ELSEWHERE = {
    "jinja2",
    "pyyaml",
    "tqdm",
    "marshmallow",
    "attrs",
    "markdown",
    "requests",
    "httpx",
    "click",
}
"""The hand-written suites' packages and the reserved ones: never mined."""


def _tasks(path: Path) -> list[dict[str, Any]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert data["split"] in ("dev", "test")
    assert data["suite"] == "mined-" + path.stem.removeprefix("tasks_mined_")
    return list(data["tasks"])


DEV = _tasks(DEV_FILE)
TEST = _tasks(TEST_FILE)
TEST2 = _tasks(TEST2_FILE)
DEV2 = _tasks(DEV2_FILE)
ALL = DEV + TEST + TEST2
"""The files with distinct ids (``DEV2`` re-mines ``DEV``'s commits: the same ids, by design)."""


def _package(task: dict[str, Any]) -> str:
    return str(task["workspace"]["sdist"]).split("==")[0].lower()


def test_test_split_is_frozen() -> None:
    assert hashlib.sha256(TEST_FILE.read_bytes()).hexdigest() == MINED_TEST_SHA256


def test_test2_split_is_frozen() -> None:
    assert hashlib.sha256(TEST2_FILE.read_bytes()).hexdigest() == MINED_TEST2_SHA256


def test_dev2_is_frozen_and_re_mines_the_dev_packages() -> None:
    assert hashlib.sha256(DEV2_FILE.read_bytes()).hexdigest() == MINED_DEV2_SHA256
    assert {_package(t) for t in DEV2} == {_package(t) for t in DEV}
    assert len({t["id"] for t in DEV2}) == len(DEV2) >= 90
    assert yaml.safe_load(DEV2_FILE.read_text(encoding="utf-8"))["split"] == "dev"


def test_test2_is_a_fresh_split_of_its_own_packages() -> None:
    per_package = Counter(_package(t) for t in TEST2)
    assert len(TEST2) >= 200 and len(per_package) >= 6
    assert max(per_package.values()) <= MAX_PACKAGE_SHARE * len(TEST2), per_package.most_common(1)
    assert not set(per_package) & ({_package(t) for t in DEV + TEST} | USED_ELSEWHERE)
    assert yaml.safe_load(TEST2_FILE.read_text(encoding="utf-8"))["split"] == "test"


def test_counts_ids_and_split_by_package() -> None:
    ids = [t["id"] for t in ALL]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9._-]*", i) for i in ids)
    per_package = Counter(_package(t) for t in ALL)
    assert len(ALL) >= 200 and len(per_package) >= 6
    assert len(DEV) >= 90 and len(TEST) >= 90
    assert not {_package(t) for t in DEV} & {_package(t) for t in TEST}
    assert not set(per_package) & USED_ELSEWHERE


def test_every_task_is_well_formed() -> None:
    for task in ALL + DEV2:
        assert task["kind"] == "localize" and len(task["prompt"]) >= 10
        assert re.fullmatch(r"[0-9a-f]{64}", task["workspace"]["sha256"])
        meta = task["meta"]
        assert len(meta["units"]) == len(task["gold"]) >= 1
        assert re.fullmatch(r"[0-9a-f]{40}", meta["commit"]) and isinstance(meta["names_gold_symbol"], bool)
        for span in task["gold"]:
            assert 1 <= span["start"] <= span["end"] and not span["path"].startswith("/")


def _archive(requirement: str, sha256: str) -> Path | None:
    """The sdist's ``.tar.gz`` in the download cache when its hash matches, else None."""
    name, version = requirement.split("==")
    stems = {f"{name}-{version}".lower(), f"{name.replace('-', '_')}-{version}".lower()}
    downloads = cache_root() / "workspaces" / "downloads"
    for path in sorted(downloads.glob("*.tar.gz")) if downloads.is_dir() else []:
        stem = path.name[: -len(".tar.gz")].lower()
        if stem in stems and hashlib.sha256(path.read_bytes()).hexdigest() == sha256:
            return path
    return None


SDISTS = sorted({(t["workspace"]["sdist"], t["workspace"]["sha256"]) for t in ALL + DEV2})


@pytest.mark.parametrize(("requirement", "sha256"), SDISTS, ids=[s[0] for s in SDISTS])
def test_gold_spans_are_their_units_in_the_sdist(requirement: str, sha256: str) -> None:
    archive = _archive(requirement, sha256)
    if archive is None:
        pytest.skip(f"{requirement} is not in {cache_root() / 'workspaces' / 'downloads'}")
    with tarfile.open(archive, "r:gz") as tar:
        files = {
            m.name.split("/", 1)[1]: m for m in tar.getmembers() if m.isfile() and m.name.endswith(".py")
        }
        sources = {}
        for task in (t for t in ALL + DEV2 if t["workspace"]["sdist"] == requirement):
            for span, unit in zip(task["gold"], task["meta"]["units"], strict=True):
                path = span["path"]
                assert path in files, f"{task['id']}: {path} is not in {requirement}"
                if path not in sources:
                    data = tar.extractfile(files[path])
                    assert data is not None
                    sources[path] = io.TextIOWrapper(data, encoding="utf-8", errors="replace").read()
                lines = sources[path].splitlines()
                assert span["end"] <= len(lines), f"{task['id']}: {path} has {len(lines)} lines"
                assert span["anchor"] in "\n".join(lines[span["start"] - 1 : span["end"]]), task["id"]
                qualname = unit.removeprefix(module_name(path) + ".") if module_name(path) else unit
                units = parse_units(sources[path]) or []
                if (qualname, span["start"], span["end"]) in {(u.qualname, u.start, u.end) for u in units}:
                    continue  # the unit, whole
                # A class's own statements (issue 48): lines inside that class, anchored on the first.
                classes = [u for u in units if u.qualname == qualname and u.keyword == "class"]
                inside = any(c.start <= span["start"] <= span["end"] <= c.end for c in classes)
                assert inside, f"{task['id']}: {unit}"
                assert lines[span["start"] - 1].strip().startswith(span["anchor"]), task["id"]
