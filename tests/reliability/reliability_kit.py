"""Builders of bad inputs for the reliability tests (tests/reliability/), and small
helpers to run the command and read a store.

PDFs are written by hand (objects, xref, trailer) so that each one is exactly the kind
of bad it is meant to be, deterministic, and fast to make: blank pages by the thousand,
a content stream that inflates to hundreds of MiB, a file cut in half.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def raw_pdf(
    path: Path, contents: list[bytes], *, shared: bool = False, size: tuple[int, int] = (612, 792)
) -> Path:
    """A PDF with one page per content stream (``shared``: every page draws
    ``contents[0]`` and there are ``len(contents)`` pages)."""
    n = len(contents)
    objs: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", _FONT]
    streams = contents[:1] if shared else contents
    first_stream = 4
    for c in streams:
        objs.append(b"<< /Length %d >>\nstream\n" % len(c) + c + b"\nendstream")
    first_page = len(objs) + 1
    kids = []
    for i in range(n):
        ref = first_stream + (0 if shared else i)
        objs.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Resources << /Font << /F1 3 0 R >> >> "
            b"/Contents %d 0 R >>" % (size[0], size[1], ref)
        )
        kids.append(b"%d 0 R" % (first_page + i))
    objs[1] = b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % n
    return _write(path, objs)


def _write(path: Path, objs: list[bytes]) -> Path:
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(out))
    return path


def text_stream(text: str) -> bytes:
    safe = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return b"BT /F1 12 Tf 72 700 Td (" + safe.encode("latin-1") + b") Tj ET"


def blank_pages_pdf(path: Path, pages: int) -> Path:
    """``pages`` blank pages sharing one empty content stream."""
    return raw_pdf(path, [b""] * pages, shared=True)


def many_pages_pdf(path: Path, pages: int, text: str = "Lockout procedure page") -> Path:
    """``pages`` pages that all show one line of text."""
    return raw_pdf(path, [text_stream(text)] * pages, shared=True)


def zero_pages_pdf(path: Path) -> Path:
    return _write(path, [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"])


def bomb_pdf(path: Path, inflated_mib: int) -> Path:
    """A one-page PDF of under 1 MB whose content stream inflates to ``inflated_mib``
    MiB (a line of text, then spaces)."""
    comp = zlib.compressobj(1)
    parts = [comp.compress(text_stream("Hello bomb") + b"\n")]
    block = b" " * (1 << 20)
    parts += [comp.compress(block) for _ in range(inflated_mib)]
    parts.append(comp.flush())
    data = b"".join(parts)
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        _FONT,
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
        b"/Contents 5 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream",
    ]
    return _write(path, objs)


def truncated_pdf(path: Path, source: Path) -> Path:
    """The first third of a valid PDF (no xref, no trailer)."""
    data = source.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    return path


def env() -> dict[str, str]:
    """The environment of a ``python -m sourcepage.cli`` child importing this tree."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(SRC) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e["HF_HUB_OFFLINE"] = e["TRANSFORMERS_OFFLINE"] = "1"
    e["PYTHONHASHSEED"] = "0"
    return e


def cli(*args: str, log: Path | None = None) -> subprocess.Popen:
    """Start ``sourcepage ARGS`` as a child process; its output goes to pipes, or to the
    file ``log`` (for a server, whose output nobody reads while it runs)."""
    out = open(log, "w") if log is not None else subprocess.PIPE  # noqa: SIM115 - the child holds it
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "sourcepage.cli", *args],
            env=env(),
            stdout=out,
            stderr=subprocess.STDOUT if log is not None else subprocess.PIPE,
            text=True,
        )
    finally:
        if log is not None:
            out.close()


def integrity(db: Path) -> str:
    con = sqlite3.connect(db)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def store_dump(store: Path) -> bytes:
    """The content of a store that an ingest determines (documents, pages, chunks,
    history), without times and run ids, as bytes to compare."""
    con = sqlite3.connect(store / "store.sqlite")
    try:
        parts = []
        for sql in (
            "SELECT doc_id, sha256, metadata, status, error, engine, version, n_pages FROM documents"
            " ORDER BY doc_id",
            "SELECT * FROM pages ORDER BY doc_id, page_no",
            "SELECT * FROM chunks ORDER BY version, chunk_id",
            "SELECT doc_id, version, sha256, metadata, pages FROM document_history ORDER BY doc_id, version",
        ):
            parts.append(repr(con.execute(sql).fetchall()).encode())
        return b"\n".join(parts)
    finally:
        con.close()


def descendants(pid: int) -> list[int]:
    """Every living process whose ancestry leads to ``pid`` (read from /proc)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] != "Z":
            parent[int(d.name)] = int(fields[1])
    out = []
    for p in parent:
        q = p
        while q in parent and q not in (0, 1):
            q = parent[q]
            if q == pid:
                out.append(p)
                break
    return out
