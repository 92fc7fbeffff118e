"""Issue 52: a task file's workspace is data. Making it from an sdist, a git repository or an
installed package runs none of their code: no build backend, no filter, hook or ``core.fsmonitor``
of the repository's, no package ``__init__``; replace refs and planted objects cannot pass a
hostile tree off as a trusted commit, and an archive cannot place anything outside its tree.

Each hostile input is built here and leaves a marker file if any of its code runs."""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import git_in

from subagent_lab.bench import safe_tar
from subagent_lab.bench.git_checkout import checkout_path, checkout_root
from subagent_lab.bench.workspace_spec import GitWorkspace, InstalledWorkspace, SdistWorkspace
from subagent_lab.core.types import ConfigError


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SUBAGENT_LAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "workspaces"


# ---------------------------------------------------------------------------- sdists


def _tar(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buf.getvalue()


def _file(name: str, text: str) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), text.encode()


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, b""


def _hostile_sdist(marker: Path) -> bytes:
    """``hostile==1.0``: an in-tree build backend and a ``setup.py``, each writing ``marker``."""
    touch = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
    return _tar(
        [
            _file(
                "hostile-1.0/pyproject.toml",
                '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
            ),
            _file(
                "hostile-1.0/backend.py", touch + "def get_requires_for_build_wheel(c=None):\n    return []\n"
            ),
            _file("hostile-1.0/setup.py", touch),
            _file("hostile-1.0/PKG-INFO", "Metadata-Version: 2.1\nName: hostile\nVersion: 1.0\n"),
            _file("hostile-1.0/hostile/__init__.py", touch),
        ]
    )


def _index(root: Path, project: str, name: str, data: bytes) -> str:
    """A local PEP 503 index serving ``data`` as ``name`` (the page states no digest); its URL."""
    (root / "files").mkdir(parents=True, exist_ok=True)
    (root / "files" / name).write_bytes(data)
    (root / project).mkdir()
    (root / project / "index.html").write_text(f'<a href="../files/{name}">{name}</a>\n', encoding="utf-8")
    return root.as_uri()


def test_an_sdist_workspace_never_runs_the_archives_build_backend(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    data = _hostile_sdist(marker)
    monkeypatch.setenv("PIP_INDEX_URL", _index(tmp_path / "index", "hostile", "hostile-1.0.tar.gz", data))
    wrong = SdistWorkspace(sdist="hostile==1.0", sha256="0" * 64)
    with pytest.raises(ConfigError, match="differs from the pinned") as info:
        wrong.root(fetch=True)
    assert getattr(info.value, "field", None) == "sha256"
    assert not marker.exists()  # refused before anything of the archive ran
    assert not list(cache.glob("hostile*"))  # nor was anything unpacked
    right = SdistWorkspace(sdist="hostile==1.0", sha256=hashlib.sha256(data).hexdigest())
    root = right.root(fetch=True)
    assert (root / "backend.py").is_file() and (root / "hostile" / "__init__.py").is_file()
    assert not marker.exists()  # unpacked, never built


@pytest.mark.parametrize(
    "members",
    [
        [_file("demo-1.0/ok.py", ""), _file("/tmp/abs.py", "")],
        [_file("demo-1.0/ok.py", ""), _file("demo-1.0/../../escape.py", "")],
        [_file("demo-1.0/ok.py", ""), _link("demo-1.0/out", "../../..")],
        [_file("demo-1.0/ok.py", ""), _link("demo-1.0/etc", "/etc")],
        # each link stays inside alone; together the first leads two levels above the tree
        [
            _file("demo-1.0/a/b/ok.py", ""),
            _link("demo-1.0/x", "a/b/l/../../.."),
            _link("demo-1.0/a/b/l", "../.."),
        ],
        [_file("demo-1.0/ok.py", ""), _link("demo-1.0/hard", "/etc/passwd", tarfile.LNKTYPE)],
        [_file("demo-1.0/ok.py", ""), _link("demo-1.0/null", "", tarfile.CHRTYPE)],
        [_file("demo-1.0/ok.py", ""), _link("demo-1.0/pipe", "", tarfile.FIFOTYPE)],
    ],
    ids=["absolute", "dotdot", "link-out", "link-absolute", "link-chain", "hardlink-out", "device", "fifo"],
)
def test_an_sdist_that_would_place_anything_outside_its_tree_is_refused(
    cache: Path, tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes]]
) -> None:
    data = _tar(members)
    (cache / "downloads").mkdir(parents=True)
    (cache / "downloads" / "demo-1.0.tar.gz").write_bytes(data)
    spec = SdistWorkspace(sdist="demo==1.0", sha256=hashlib.sha256(data).hexdigest())
    with pytest.raises(ConfigError, match="cannot unpack the sdist"):
        spec.root(fetch=True)
    assert not (cache / "demo-1.0").exists() and not (tmp_path / "escape.py").exists()


def test_a_plain_sdist_with_inner_links_unpacks_as_it_is(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(
        _tar(
            [
                _file("p-1/src/m.py", "x = 1\n"),
                _link("p-1/m.py", "src/m.py"),
                _link("p-1/up", "src/.."),
                _link("p-1/same.py", "p-1/src/m.py", tarfile.LNKTYPE),
            ]
        )
    )
    safe_tar.unpack(archive, tmp_path / "out")
    assert (tmp_path / "out/p-1/m.py").read_text() == "x = 1\n" and (tmp_path / "out/p-1/up/src").is_dir()
    assert (tmp_path / "out/p-1/same.py").read_text() == "x = 1\n"


def test_index_credentials_go_to_the_index_host_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """pip took ``https://user:token@host/simple``; so does the downloader, without pip: the token
    goes as Basic authorisation to that host, never in a URL, a message or another host's request."""
    from subagent_lab.bench.sdist_index import _request, shown_index

    monkeypatch.setenv("PIP_INDEX_URL", "https://me:s3cr3t@idx.example:8443/simple")
    page = _request("https://me:s3cr3t@idx.example:8443/simple/p/", {})
    assert page.full_url == "https://idx.example:8443/simple/p/" and "s3cr3t" not in shown_index()
    assert page.headers["Authorization"] == "Basic bWU6czNjcjN0"  # me:s3cr3t
    assert "Authorization" not in _request("https://files.example/p-1.tar.gz", {}).headers


# ---------------------------------------------------------------------------- git


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")
    git_in(repo, "add", "-A")
    git_in(repo, "commit", "-q", "-m", message)
    return git_in(repo, "rev-parse", "HEAD")


def test_a_git_workspace_runs_none_of_the_repositorys_configured_commands(
    cache: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    repo = tmp_path / "hostile"
    repo.mkdir()
    git_in(repo, "init", "-q")
    rev = _commit(repo, {".gitattributes": "* filter=evil\n", "app.py": "print('hi')\n"}, "app")
    hooks = repo / "hooks"
    hooks.mkdir()
    for hook in ("post-checkout", "post-index-change", "reference-transaction"):
        (hooks / hook).write_text(f"#!/bin/sh\necho {hook} >> {marker}\n", encoding="utf-8")
        (hooks / hook).chmod(0o755)
    for key, value in {
        "filter.evil.smudge": f"sh -c 'echo smudge >> {marker}; cat'",
        "filter.evil.process": f"sh -c 'echo process >> {marker}'",
        "filter.evil.required": "true",
        "core.fsmonitor": f"echo fsmonitor >> {marker}; true",
        "core.hooksPath": str(hooks),
    }.items():
        git_in(repo, "config", key, value)
    root = GitWorkspace(git=str(repo), rev=rev).root(fetch=True)
    assert not marker.exists(), marker.read_text()
    assert (root / "app.py").read_text(encoding="utf-8") == "print('hi')\n"  # the blob's bytes, unfiltered
    assert sorted(p.name for p in root.iterdir()) == [".gitattributes", "app.py"]


def test_replace_refs_cannot_pass_a_hostile_tree_for_a_trusted_commit(cache: Path, tmp_path: Path) -> None:
    trusted_repo = tmp_path / "trusted"
    trusted_repo.mkdir()
    git_in(trusted_repo, "init", "-q")
    trusted = _commit(trusted_repo, {"auth.py": "def check(token):\n    return verify(token)\n"}, "auth")
    hostile_repo = tmp_path / "hostile"
    git_in(tmp_path, "clone", "-q", str(trusted_repo), str(hostile_repo))
    evil = _commit(hostile_repo, {"auth.py": "def check(token):\n    return True\n"}, "evil")
    git_in(hostile_repo, "replace", trusted, evil)  # refs/replace/<trusted> -> the hostile commit
    assert "return True" in git_in(hostile_repo, "show", f"{trusted}:auth.py")  # git itself is fooled
    root = checkout_root(str(hostile_repo), trusted, fetch=True)
    assert "verify(token)" in (root / "auth.py").read_text(encoding="utf-8")
    assert checkout_root(str(trusted_repo), trusted, fetch=True) == root  # a later trusted task: same tree
    assert "verify(token)" in (root / "auth.py").read_text(encoding="utf-8")


def test_an_unverified_cached_tree_is_not_reused(cache: Path, tmp_path: Path) -> None:
    """A checkout left by the earlier scheme (no record of what was checked) is made again."""
    repo = tmp_path / "trusted"
    repo.mkdir()
    git_in(repo, "init", "-q")
    rev = _commit(repo, {"auth.py": "verify()\n"}, "auth")
    poisoned = checkout_path(rev)
    poisoned.mkdir(parents=True)
    (poisoned / "auth.py").write_text("return True\n", encoding="utf-8")
    root = checkout_root(str(repo), rev, fetch=True)
    assert (root / "auth.py").read_text(encoding="utf-8") == "verify()\n"
    assert rev in (cache / f"git-{rev}.checked").read_text(encoding="utf-8")


def test_a_planted_object_under_a_trusted_id_is_refused(cache: Path, tmp_path: Path) -> None:
    """``git cat-file`` does not check an object's bytes against its id; the checkout does."""
    repo = tmp_path / "planted"
    repo.mkdir()
    git_in(repo, "init", "-q")
    trusted = _commit(repo, {"auth.py": "verify()\n"}, "auth")
    evil = _commit(repo, {"auth.py": "return True\n"}, "evil")
    objects = repo / ".git" / "objects"
    target = objects / trusted[:2] / trusted[2:]
    target.chmod(0o644)
    target.write_bytes((objects / evil[:2] / evil[2:]).read_bytes())
    with pytest.raises(ConfigError, match="bytes of another object") as info:
        checkout_root(str(repo), trusted, fetch=True)
    assert getattr(info.value, "field", None) == "rev" and not checkout_path(trusted).exists()


# ---------------------------------------------------------------------------- installed


def test_an_installed_workspace_imports_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "ran"
    touch = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
    for init in ("ws52pkg/__init__.py", "ws52pkg/sub/__init__.py", "ws52pkg/sub/deep/__init__.py"):
        (tmp_path / "site" / init).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "site" / init).write_text(touch, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name, where in (
        ("ws52pkg", "ws52pkg"),
        ("ws52pkg.sub", "ws52pkg/sub"),
        ("ws52pkg.sub.deep", "ws52pkg/sub/deep"),
    ):
        assert InstalledWorkspace(installed=name).root() == (tmp_path / "site" / where).resolve()
    assert not marker.exists() and not any(m.startswith("ws52pkg") for m in sys.modules)
    with pytest.raises(ConfigError, match="cannot locate"):
        InstalledWorkspace(installed="ws52pkg.missing").root()
    assert not marker.exists()
