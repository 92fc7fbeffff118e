"""The benchmark's splits: dev (installed packages), dev-tree and the frozen, held-out test split.

The tests that read the unpacked source trees skip when the trees are not fetched
(``python -m subagent_lab.bench.workspaces fetch``, which ``scripts/setup.sh`` runs), and fail
instead under ``CI=true``, where set-up has fetched them.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from subagent_lab.bench import suite as suite_mod
from subagent_lab.bench import workspaces
from subagent_lab.bench.suite import (
    DEFAULT_SUITE_PATH,
    SPLIT_PACKAGES,
    TEST_SUITE_PATH,
    BenchTask,
    check_absent,
    check_gold,
    load_suite,
)
from subagent_lab.bench.workspaces import SDISTS, Sdist
from subagent_lab.core.types import ConfigError

TEST_SPLIT_SHA256 = "e4d4eb966a4aa5316d35ab1780c23b779d94a7179bb19a8cc0e6135eaf1f2e56"
"""tasks_test.yaml, frozen: written from the source before any run. A change is a new test split."""
DEV_SPLIT_SHA256 = "13f3ef9a2f4591ee399561357ee34fa1a88a0031f8e68f59e618d6f13b4ade22"
"""tasks.yaml: the dev tasks that recorded sweeps and caches refer to."""
RESERVED = {"requests", "httpx", "click"}
"""Kept out of every split: reserved for an external evaluation."""

DEV = load_suite()
DEV_TREE = load_suite("dev-tree")
TEST = load_suite("test")
TREE_TASKS = DEV_TREE + TEST


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _need_tree(package: str) -> Path:
    """The package's unpacked tree; skip without it, except in CI (where set-up fetched it)."""
    if workspaces.is_fetched(package):
        return workspaces.tree_path(package)
    why = (
        f"the source tree of {SDISTS[package].requirement} is not fetched (run `{workspaces.FETCH_COMMAND}`)"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(why + "; in CI scripts/setup.sh must have fetched it")
    pytest.skip(why)


# ---------------------------------------------------------------------------- frozen files


def test_test_split_file_is_frozen() -> None:
    assert _sha256(TEST_SUITE_PATH) == TEST_SPLIT_SHA256, (
        "tasks_test.yaml changed: the test split is frozen (a changed test split is a new one; "
        "update TEST_SPLIT_SHA256 in the same commit and say why)"
    )


def test_dev_split_file_is_unchanged() -> None:
    assert _sha256(DEFAULT_SUITE_PATH) == DEV_SPLIT_SHA256


# ---------------------------------------------------------------------------- the splits' shape


def test_default_suite_is_dev_on_installed_packages() -> None:
    assert load_suite("dev") == DEV
    assert len(DEV) == 30
    assert {(t.split, t.legacy_workspace) for t in DEV} == {("dev", "installed")}
    assert {t.package for t in DEV} == SPLIT_PACKAGES["dev"] == {"jinja2", "yaml", "tqdm"}


def test_test_split_size_kinds_and_packages() -> None:
    assert len(TEST) >= 30
    assert {(t.split, t.legacy_workspace) for t in TEST} == {("test", "tree")}
    kinds = Counter(t.kind for t in TEST)
    assert set(kinds) == {"locate", "trace", "enumerate", "explain", "absent"}
    assert min(kinds.values()) >= 5, kinds
    packages = Counter(t.package for t in TEST)
    assert len(packages) >= 3 and min(packages.values()) >= 8, packages
    multi_file = [t for t in TEST if len({g.path for g in t.gold}) > 1]
    assert len(multi_file) * 4 >= len(TEST), f"{len(multi_file)} of {len(TEST)} tasks span several files"
    assert any(t.smoke for t in TEST)


def test_splits_share_no_package_and_no_id() -> None:
    assert not SPLIT_PACKAGES["dev"] & SPLIT_PACKAGES["test"]
    assert not {t.package for t in DEV} & {t.package for t in TEST}
    assert not {t.id for t in DEV} & {t.id for t in TEST}
    assert len({t.id for t in TEST}) == len(TEST)


def test_reserved_packages_are_in_no_split() -> None:
    dists = {s.dist.lower() for s in SDISTS.values()} | set(SDISTS)
    assert not dists & RESERVED
    for task in DEV + TEST:
        assert not set(task.prompt.lower().split()) & RESERVED, task.id


def test_test_gold_is_library_code_not_tests_or_docs() -> None:
    for task in TEST:
        prefix = SDISTS[task.package].package_dir.split("/")[0]
        for span in task.gold:
            assert span.path.startswith(prefix + "/"), f"{task.id}: {span.path}"
            assert span.path.endswith(".py") and not {"tests", "docs"} & set(Path(span.path).parts)


def test_test_keywords_are_not_in_the_prompt() -> None:
    # A keyword the prompt spells is credited for restating the task: none may be one.
    for task in TEST:
        words = set(re.findall(r"[a-z0-9_]+", task.prompt.lower()))
        for keyword in task.keywords:
            assert keyword.lower() not in words and len(keyword) >= 3, f"{task.id}: {keyword}"


ABSENCE_CUES = re.compile(
    r"say so|if (there is|there are|it has|none)|(has|have) no such|does not (exist|have)|"
    r"not (present|there|exist)|if any\b|if [\w-]+ (has|have) (none|no)\b",
    re.IGNORECASE,
)


def test_no_prompt_wording_tells_absent_from_present() -> None:
    # Every absent prompt once ended "If ... has no such ..., say so." (11 of 11, 0 of 52 present):
    # a no-model rule on that phrase alone scored +0.17. Only the code may tell them apart.
    tasks = DEV + TEST
    cued = [t.id for t in tasks if ABSENCE_CUES.search(" ".join(t.prompt.split()))]
    assert not cued, f"prompts that cue an answer of absence: {cued}"
    absent = [t for t in tasks if t.kind == "absent"]
    located = [t for t in tasks if t.kind == "locate"]  # absent tasks read as a locate task would
    present = {" ".join(t.prompt.split()[:2]) for t in tasks if t.kind != "absent"}
    assert {" ".join(t.prompt.split()[:2]) for t in absent} <= present  # no opening of their own

    def words(group: list[BenchTask]) -> Counter[str]:
        return Counter(w for t in group for w in set(re.findall(r"[a-z]+", t.prompt.lower())))

    in_absent, in_located = words(absent), words(located)
    for word, n in in_absent.items():  # a word of three or more absent prompts is as common elsewhere
        if n >= 3:
            assert in_located[word] / len(located) >= n / len(absent) / 2, word


def test_absent_test_tasks_have_probes_and_others_do_not() -> None:
    for task in TEST:
        assert bool(task.probes) == (task.kind == "absent"), task.id


def test_dev_tree_is_dev_with_gold_mapped_into_the_tree() -> None:
    assert [t.id for t in DEV_TREE] == [t.id for t in DEV]
    for dev, tree in zip(DEV, DEV_TREE, strict=True):
        assert tree.legacy_workspace == "tree" and dev.legacy_workspace == "installed"
        assert (tree.prompt, tree.kind, tree.keywords, tree.smoke) == (
            dev.prompt,
            dev.kind,
            dev.keywords,
            dev.smoke,
        )
        prefix = SDISTS[dev.package].package_dir
        assert [(g.path, g.start, g.end, g.anchor) for g in tree.gold] == [
            (f"{prefix}/{g.path}", g.start, g.end, g.anchor) for g in dev.gold
        ]
        assert tree.in_tree() is tree


# ---------------------------------------------------------------------------- validation


def _task(**fields: Any) -> dict[str, Any]:
    """A valid test-split task's fields, with ``fields`` replacing some."""
    gold = [{"path": "src/attr/a.py", "start": 1, "end": 2, "anchor": "x"}]
    base: dict[str, Any] = {"id": "t", "kind": "locate", "package": "attrs", "difficulty": "easy"}
    base.update(prompt="Find the thing here.", split="test", workspace="tree", gold=gold)
    return {**base, **fields}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"split": "dev"}, "not in the dev split"),
        ({"package": "jinja2"}, "not in the test split"),
        ({"workspace": "installed"}, "workspace: tree"),
        ({"probes": ["x"]}, "only absent tasks have probes"),
    ],
)
def test_task_validation_keeps_splits_apart(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BenchTask.model_validate(_task(**fields))


def test_file_level_split_is_the_tasks_default(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "split: test\nworkspace: tree\ntasks:\n"
        "  - {id: a, kind: absent, package: markdown, prompt: Find the missing thing., difficulty: easy}\n",
        encoding="utf-8",
    )
    for loaded in (load_suite(path), load_suite(str(path)), load_suite(path=path)):
        assert [(t.id, t.split, t.legacy_workspace) for t in loaded] == [("a", "test", "tree")]


def test_test_split_refuses_a_task_of_another_split(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(
        "tasks:\n  - {id: a, kind: absent, package: jinja2, prompt: Find the missing thing.,"
        " difficulty: easy}\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(suite_mod, "TEST_SUITE_PATH", path)
    with pytest.raises(ConfigError, match="not in the test split"):
        load_suite("test")


def test_workspace_root_names_the_fetch_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SUBAGENT_LAB_CACHE", str(tmp_path))
    with pytest.raises(ConfigError, match=r"bench\.workspaces fetch"):
        TEST[0].workspace_root()


# ---------------------------------------------------------------------------- against the trees


@pytest.mark.parametrize("package", sorted(SDISTS))
def test_tree_is_a_checkout_with_tests_and_docs(package: str) -> None:
    root = _need_tree(package)
    assert (root / SDISTS[package].package_dir / "__init__.py").is_file()
    assert (root / "tests").is_dir()
    assert (root / "docs").is_dir() or package in {"yaml", "tqdm"}  # their sdists ship no docs/ folder


@pytest.mark.parametrize("task", TREE_TASKS, ids=[f"{t.split}-{t.id}" for t in TREE_TASKS])
def test_tree_gold_anchors_occur_in_their_spans(task: BenchTask) -> None:
    _need_tree(task.package)
    assert check_gold(task) == []


@pytest.mark.parametrize("task", [t for t in TEST if t.kind == "absent"], ids=lambda t: t.id)
def test_absent_probes_occur_nowhere_in_the_tree(task: BenchTask) -> None:
    _need_tree(task.package)
    assert check_absent(task) == []


@pytest.mark.parametrize("package", sorted(SPLIT_PACKAGES["dev"]))
def test_dev_sdist_sources_equal_the_installed_ones(package: str) -> None:
    tree = _need_tree(package) / SDISTS[package].package_dir
    installed = suite_mod.package_root(package)
    for file in sorted(installed.rglob("*.py")):
        rel = file.relative_to(installed)
        assert (tree / rel).read_bytes() == file.read_bytes(), rel


def test_check_absent_finds_a_probe_in_docs(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.md").write_text("Emoji support is planned.", encoding="utf-8")
    task = next(t for t in TEST if t.id == "md-absent-emoji")
    assert check_absent(task, tmp_path) == ["md-absent-emoji: docs/x.md holds 'emoji'"]


# ---------------------------------------------------------------------------- fetching


def _sdist_bytes(top: str, files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _serve(index: Path, files: dict[str, bytes], digest: bool = True) -> None:
    """A local PEP 503 index page of project ``demo`` listing ``files`` (with their SHA-256)."""
    (index / "files").mkdir(parents=True, exist_ok=True)
    links = []
    for name, data in files.items():
        (index / "files" / name).write_bytes(data)
        fragment = f"#sha256={hashlib.sha256(data).hexdigest()}" if digest else ""
        links.append(f'<a href="../files/{name}{fragment}">{name}</a>')
    (index / "demo").mkdir(exist_ok=True)
    (index / "demo" / "index.html").write_text("\n".join(links), encoding="utf-8")


@pytest.fixture
def fake_pin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[bytes, Path]:
    """A pinned fake sdist ``demo==1.0``, an empty cache and an empty local index (no network);
    no subprocess (pip least of all) may run."""
    data = _sdist_bytes(
        "demo-1.0", {"src/demo/__init__.py": "X = 1\n", "tests/test_x.py": "", "docs/i.md": ""}
    )
    sdist = Sdist("demo", "1.0", hashlib.sha256(data).hexdigest(), "src/demo")
    monkeypatch.setitem(SDISTS, "demo", sdist)
    monkeypatch.setenv("SUBAGENT_LAB_CACHE", str(tmp_path / "cache"))
    _serve(tmp_path / "index", {})
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "index").as_uri())

    def no_subprocess(*args: object, **kwargs: object) -> None:
        raise AssertionError("a subprocess was started")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    monkeypatch.setattr(subprocess, "Popen", no_subprocess)
    return data, tmp_path / "cache" / "workspaces"


def test_fetch_unpacks_a_verified_local_sdist_once(fake_pin: tuple[bytes, Path]) -> None:
    data, base = fake_pin
    (base / "downloads").mkdir(parents=True)
    (base / "downloads" / "demo-1.0.tar.gz").write_bytes(data)
    logs: list[str] = []
    [root] = workspaces.fetch(["demo"], log=logs.append)
    assert root == base / "demo-1.0" and (root / "src/demo/__init__.py").read_text() == "X = 1\n"
    assert workspaces.is_fetched("demo") and workspaces.tree_root("demo") == root
    assert workspaces.fetch(["demo"], log=logs.append) == [root]
    assert len(logs) == 1  # the second fetch found the tree and did nothing
    assert sorted(p.name for p in base.iterdir()) == ["demo-1.0", "demo-1.0.sdist", "downloads"]  # no temp
    assert sorted(p.name for p in root.iterdir()) == ["docs", "src", "tests"]  # the sdist's files only


@pytest.mark.parametrize("digest", [True, False], ids=["digest-on-page", "no-digest-on-page"])
def test_fetch_downloads_from_the_index_and_checks_the_hash(
    fake_pin: tuple[bytes, Path], tmp_path: Path, digest: bool
) -> None:
    data, base = fake_pin
    other = _sdist_bytes("demo-1.0", {"evil.py": ""})
    _serve(tmp_path / "index", {"demo-0.9.tar.gz": other, "demo-1.0.tar.gz": data}, digest=digest)
    workspaces.fetch(["demo"], log=lambda _: None)
    assert workspaces.is_fetched("demo") and (base / "downloads" / "demo-1.0.tar.gz").read_bytes() == data


@pytest.mark.parametrize("digest", [True, False], ids=["digest-on-page", "no-digest-on-page"])
def test_fetch_refuses_a_file_whose_hash_differs(
    fake_pin: tuple[bytes, Path], tmp_path: Path, digest: bool
) -> None:
    _, base = fake_pin
    _serve(tmp_path / "index", {"demo-1.0.tar.gz": _sdist_bytes("demo-1.0", {"evil.py": ""})}, digest=digest)
    with pytest.raises(ConfigError, match="differs from the pinned"):
        workspaces.fetch(["demo"], log=lambda _: None)
    assert not (base / "demo-1.0").exists() and not list((base / "downloads").iterdir())


def test_fetch_offline_names_what_is_missing(
    fake_pin: tuple[bytes, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _, base = fake_pin
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "nowhere").as_uri())
    with pytest.raises(
        ConfigError, match=r"could not read the index .*demo==1\.0.*demo-1\.0\.tar\.gz"
    ) as info:
        workspaces.fetch(["demo"], log=lambda _: None)
    assert str(base / "downloads") in str(info.value)
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "index").as_uri())  # reachable, but no such file
    with pytest.raises(ConfigError, match=r"has no sdist of demo==1\.0"):
        workspaces.fetch(["demo"], log=lambda _: None)


def test_fetch_rejects_unknown_packages_before_downloading(fake_pin: tuple[bytes, Path]) -> None:
    with pytest.raises(ConfigError, match="unknown benchmark package 'nope'"):
        workspaces.fetch(["demo", "nope"])
    assert not workspaces.is_fetched("demo")


def test_fetch_refuses_an_archive_escaping_its_directory(
    fake_pin: tuple[bytes, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, base = fake_pin
    evil = _sdist_bytes("demo-1.0", {"../../outside.py": "x"})
    monkeypatch.setitem(SDISTS, "demo", Sdist("demo", "1.0", hashlib.sha256(evil).hexdigest(), "src/demo"))
    (base / "downloads").mkdir(parents=True)
    (base / "downloads" / "demo-1.0.tar.gz").write_bytes(evil)
    with pytest.raises(ConfigError, match="cannot unpack"):
        workspaces.fetch(["demo"], log=lambda _: None)
    assert not (base.parent / "outside.py").exists() and not (base / "outside.py").exists()


def test_the_index_download_takes_the_file_by_its_pinned_digest() -> None:
    """pip refused more-itertools 8.x (its setup.py imported another release for its version): the
    fetcher picks the file off the index's JSON page by SHA-256, whatever its metadata says."""
    from subagent_lab.bench.sdist_index import find_file, project_url

    page = {
        "files": [
            {
                "filename": "more_itertools-8.10.0-py3-none-any.whl",
                "url": "https://f/w",
                "hashes": {"sha256": "aa"},
            },
            {"filename": "more-itertools-8.10.0.tar.gz", "url": "https://f/a", "hashes": {"sha256": "bb"}},
            {"filename": "../evil.tar.gz", "url": "https://f/e", "hashes": {"sha256": "cc"}},
        ]
    }
    assert find_file(page, "bb") == ("more-itertools-8.10.0.tar.gz", "https://f/a")
    assert find_file(page, "aa") is None  # a wheel is not a source tree
    assert find_file(page, "cc") is None  # a name that is not one path component
    assert find_file({"files": "junk"}, "bb") is None
    assert (
        project_url("More_Itertools", "https://pypi.org/simple") == "https://pypi.org/simple/more-itertools/"
    )
