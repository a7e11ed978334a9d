"""Reading a reproducibility package that someone else wrote (``verify``'s input).

A package is untrusted: before anything is decompressed every entry is checked — how many
there are, their names (relative POSIX paths only: no absolute path, no ``..`` or ``.``
part, no backslash, no drive letter, no control character, no duplicate, no symlink) and
their declared sizes — and then only the entries listed in ``package.json`` are written,
each in bounded chunks (never one ``read`` of a whole entry), under the one folder given,
each path resolved and checked to lie inside it and opened without following links and
without overwriting. An entry that decompresses to more than it declared, or more than the
limits, stops the reading. Every refusal is a :class:`PackageError` naming the entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the most entries a package may hold (an export writes about twenty plus one per run)
MAX_ENTRIES = 10_000
#: the largest one entry may be, declared and decompressed (segments of a large corpus)
MAX_ENTRY_BYTES = 512 * 2**20
#: the most all entries together may decompress to
MAX_TOTAL_BYTES = 2 * 2**30
#: package.json is read into memory: it may be this large
MAX_MANIFEST_BYTES = 16 * 2**20
#: entry names longer than this are refused
MAX_NAME_CHARS = 255
CHUNK = 1 << 20
_SHA = re.compile(r"[0-9a-f]{64}")
_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED}


class PackageError(ValueError):
    """The run folder cannot be packaged (missing or changed inputs), or the file is no package."""


@dataclass(frozen=True)
class Unpacked:
    """What :func:`unpack` found: package.json's data, the SHA-256 of each written entry
    (by name), and the names in the zip that package.json does not list (not written)."""

    manifest: dict[str, Any]
    written: dict[str, str]
    unlisted: list[str]


def check_name(name: str) -> None:
    """Refuse an entry name that is not a plain relative POSIX path of ordinary parts."""
    why = None
    if not name or len(name) > MAX_NAME_CHARS:
        why = "an empty or overlong name"
    elif name.startswith("/"):
        why = "an absolute path"
    elif "\\" in name:
        why = "a backslash"
    elif re.match(r"[A-Za-z]:", name):
        why = "a drive letter"
    elif any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name):
        why = "a control character"
    elif any(part in ("", ".", "..") for part in name.rstrip("/").split("/")):
        why = "a '.', '..' or empty path part"
    if why:
        raise PackageError(f"entry {name!r}: {why} (a package entry is a relative path inside it)")


def _check_entries(infos: list[zipfile.ZipInfo]) -> None:
    """Count, names, kinds and declared sizes of every entry, before any is decompressed."""
    if len(infos) > MAX_ENTRIES:
        raise PackageError(f"{len(infos)} entries (at most {MAX_ENTRIES})")
    seen: set[str] = set()
    total = 0
    for info in infos:
        name = info.filename
        check_name(name)
        if name in seen or name.rstrip("/") in seen:
            raise PackageError(f"entry {name!r}: twice in the zip")
        seen.add(name.rstrip("/"))
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise PackageError(f"entry {name!r}: a symbolic link")
        if info.flag_bits & 0x1:
            raise PackageError(f"entry {name!r}: encrypted")
        if info.compress_type not in _METHODS:
            why = f"compression method {info.compress_type} (stored or deflated only)"
            raise PackageError(f"entry {name!r}: {why}")
        if info.file_size > MAX_ENTRY_BYTES:
            raise PackageError(f"entry {name!r}: declares {info.file_size} bytes (at most {MAX_ENTRY_BYTES})")
        total += info.file_size
    if total > MAX_TOTAL_BYTES:
        raise PackageError(f"the entries declare {total} bytes together (at most {MAX_TOTAL_BYTES})")


def _copy(z: zipfile.ZipFile, info: zipfile.ZipInfo, out: Any, budget: int) -> tuple[str, int]:
    """Decompress one entry into ``out`` in chunks; its SHA-256 and size. Stops at the
    declared size, the per-entry limit or ``budget`` (what the total leaves)."""
    limit = min(info.file_size, MAX_ENTRY_BYTES, budget)
    sha, n = hashlib.sha256(), 0
    with z.open(info) as src:
        while chunk := src.read(CHUNK):
            n += len(chunk)
            if n > limit:
                raise PackageError(f"entry {info.filename!r}: decompresses to more than {limit} bytes")
            sha.update(chunk)
            if out is not None:
                out.write(chunk)
    return sha.hexdigest(), n


def _manifest(z: zipfile.ZipFile, infos: dict[str, zipfile.ZipInfo]) -> dict[str, Any]:
    """package.json, read (bounded) and checked for its shape: files maps names to SHA-256s."""
    info = infos.get("package.json")
    if info is None:
        raise PackageError("no package.json, not a sourcepage package")
    if info.file_size > MAX_MANIFEST_BYTES:
        raise PackageError(f"entry 'package.json': {info.file_size} bytes (at most {MAX_MANIFEST_BYTES})")
    with z.open(info) as f:
        raw = f.read(MAX_MANIFEST_BYTES + 1)
    if len(raw) > MAX_MANIFEST_BYTES:
        raise PackageError("entry 'package.json': larger than it declares")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise PackageError(f"entry 'package.json': not JSON ({e})") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        raise PackageError("entry 'package.json': not an object with a 'files' object (name -> SHA-256)")
    for name, sha in files.items():
        if not isinstance(sha, str) or not _SHA.fullmatch(sha):
            raise PackageError(f"entry 'package.json': files[{name!r}] is not a SHA-256 (64 hex digits)")
        check_name(name)
    return data


def _target(folder: Path, name: str) -> Path:
    """Where entry ``name`` is written: resolved, and refused unless inside ``folder``."""
    root = folder.resolve()
    target = (root / name).resolve()
    if target == root or not target.is_relative_to(root):
        raise PackageError(f"entry {name!r}: would be written outside the package's folder")
    return target


def _write(z: zipfile.ZipFile, info: zipfile.ZipInfo, folder: Path, budget: int) -> tuple[str, int]:
    target = _target(folder, info.filename)
    target.parent.mkdir(parents=True, exist_ok=True)
    _target(folder, info.filename)  # the folders just made hold no link (fresh, no link entries)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as out:
        return _copy(z, info, out, budget)


def unpack(package: Path, folder: Path) -> Unpacked:
    """Check every entry of the zip ``package`` and write those package.json lists under
    ``folder`` (an empty folder of the caller's); PackageError on anything refused."""
    try:
        with zipfile.ZipFile(package) as z:
            infos = z.infolist()
            _check_entries(infos)
            by_name = {i.filename: i for i in infos if not i.is_dir()}
            manifest = _manifest(z, by_name)
            listed = manifest["files"]
            written: dict[str, str] = {}
            budget = MAX_TOTAL_BYTES
            for name, info in by_name.items():
                if name in listed:
                    written[name], n = _write(z, info, folder, budget)
                    budget -= n
            unlisted = sorted(set(by_name) - set(listed) - {"package.json"})
    except PackageError as e:
        raise PackageError(f"{package}: {e}") from None
    except (EOFError, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, NotImplementedError) as e:
        raise PackageError(f"{package}: not a readable zip ({e})") from None
    except OSError as e:
        what = "not a readable zip" if e.filename in (str(package), package) else "cannot be unpacked"
        raise PackageError(f"{package}: {what} ({e})") from None
    return Unpacked(manifest, written, unlisted)
