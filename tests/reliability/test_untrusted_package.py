"""A reproducibility package is someone else's input (issue 51): ``verify`` bounds what
it decompresses — declared sizes checked before reading, actual sizes counted while
reading in chunks — so a small zip holding a 1 GiB entry costs neither memory nor time."""

from __future__ import annotations

import hashlib
import json
import struct
import time
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from sourcepage.package import unpack
from sourcepage.package.export import PackageError, verify

GIB = 2**30


def _zeros_zip(path: Path, name: str, size: int, manifest: dict) -> Path:
    """A zip whose entry ``name`` is ``size`` zero bytes, deflated (1 GiB → about 1 MB)."""
    block = bytes(1 << 22)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("package.json", json.dumps(manifest))
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w", force_zip64=size > 2**31) as f:
            for _ in range(size // len(block)):
                f.write(block)
    return path


def _bounded(fn) -> tuple[float, int]:
    """Seconds and the peak of Python allocations (bytes) while ``fn`` runs."""
    tracemalloc.start()
    t = time.perf_counter()
    try:
        fn()
    finally:
        seconds = time.perf_counter() - t
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return seconds, peak


@pytest.fixture(scope="module")
def gib_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    manifest = {"files": {"segments/raw.jsonl": hashlib.sha256(b"").hexdigest()}}
    return _zeros_zip(tmp_path_factory.mktemp("bomb") / "gib.zip", "segments/raw.jsonl", GIB, manifest)


def test_a_1_gib_entry_is_refused_by_its_declared_size(gib_zip: Path) -> None:
    assert gib_zip.stat().st_size < 2 * 2**20
    with pytest.raises(PackageError, match="'segments/raw.jsonl': declares 1073741824 bytes"):
        verify(gib_zip)
    seconds, peak = _bounded(lambda: pytest.raises(PackageError, verify, gib_zip))
    assert seconds < 2 and peak < 8 * 2**20, (seconds, peak)


def test_an_entry_lying_about_its_size_is_read_in_bounded_chunks(tmp_path: Path) -> None:
    """The central directory and local header say 100 bytes; the data inflates to 64 MiB.
    Reading stops at the declared size (or the CRC fails): never 64 MiB in memory."""
    path = _zeros_zip(tmp_path / "lie.zip", "run.json", 64 * 2**20, {"files": {"run.json": "0" * 64}})
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("run.json")
    local = info.header_offset
    struct.pack_into("<I", raw, local + 22, 100)  # local header: uncompressed size
    cd = raw.rindex(b"PK\x01\x02")  # the last central directory record is run.json's
    struct.pack_into("<I", raw, cd + 24, 100)
    path.write_bytes(bytes(raw))
    seconds, peak = _bounded(lambda: pytest.raises(PackageError, verify, path))
    assert seconds < 5 and peak < 8 * 2**20, (seconds, peak)


def test_too_many_entries_are_refused_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unpack, "MAX_ENTRIES", 50)
    with zipfile.ZipFile(tmp_path / "many.zip", "w") as z:
        z.writestr("package.json", json.dumps({"files": {}}))
        for i in range(60):
            z.writestr(f"trec/{i}.run", "")
    with pytest.raises(PackageError, match="61 entries"):
        verify(tmp_path / "many.zip")


def test_the_total_is_bounded_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unpack, "MAX_TOTAL_BYTES", 3 * 2**20)
    with zipfile.ZipFile(tmp_path / "total.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("package.json", json.dumps({"files": {}}))
        for i in range(4):
            z.writestr(f"trec/{i}.run", bytes(2**20))
    with pytest.raises(PackageError, match="declare 4194(.*) bytes together"):
        verify(tmp_path / "total.zip")
