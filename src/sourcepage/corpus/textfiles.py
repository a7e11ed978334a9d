"""Plain-text documents (``.txt``, ``.md``) as corpus files, next to PDFs.

A plain-text corpus is the same folder as a PDF corpus (``manifest.csv`` + ``pdf/``,
benchmark-format.md §1): ``file`` names a ``.txt`` or ``.md`` file under ``pdf/``
and ``sha256`` is the checksum of that file. One file is one document; its pages are
split at

- a form feed ``\\f`` (what ``pdftotext`` writes between pages), or
- a line that holds only ``<<<PAGE>>>`` (surrounding spaces allowed), the marker to
  use in hand-written files.

Both may appear in one file. Page n is the n-th piece (1-based), so page ids
``<doc_id>#p<n>`` work as for PDFs. A single trailing separator (a file that ends with
``\\f``, as ``pdftotext`` output does) does not open an empty last page; empty pages
elsewhere are kept so that page numbers stay physical. The text is read as UTF-8 (a
byte-order mark is dropped) and line ends are normalised to ``\\n``; nothing else is
changed (the raw text version).

The layout of a text page is trivial (no images, no columns), so the audit reports
``images`` 0 and ``multi_column_risk`` False. :func:`extract_document` dispatches on the
file suffix, so ingest, incremental re-ingest, the audit and the text versions treat
text files and PDFs alike.
"""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

from sourcepage.corpus.extract import (
    ENGINES,
    Extracted,
    ExtractionError,
    check_pages,
    extract_pdf,
)
from sourcepage.records import PageLayout

__all__ = ["PAGE_MARKER", "TEXT_SUFFIXES", "extract_document", "extract_text_file", "split_pages"]

#: file suffixes read as plain text (compared case-insensitively)
TEXT_SUFFIXES: tuple[str, ...] = (".txt", ".md")
#: a line holding only this splits pages, like a form feed
PAGE_MARKER = "<<<PAGE>>>"

_SPLIT = re.compile(r"\f|^[ \t]*" + re.escape(PAGE_MARKER) + r"[ \t]*(?:\n|$)", re.MULTILINE)


def split_pages(text: str) -> list[str]:
    """Pages of a text: split at form feeds and at ``<<<PAGE>>>`` lines.

    Line ends are normalised first. A separator at the very end of the text opens no
    page; every other piece is a page, empty or not (physical numbering).
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    pages = _SPLIT.split(text)
    if len(pages) > 1 and not pages[-1].strip():
        pages.pop()
    return pages


def extract_text_file(path: str | Path) -> Extracted:
    """Pages of a ``.txt``/``.md`` file, with a trivial layout per page.

    Raises ExtractionError for an empty file, a file that is not UTF-8, or a file
    with no text on any page.
    """
    path = Path(path)
    t0 = time.perf_counter()
    data = path.read_bytes()
    if not data:
        raise ExtractionError("empty file (0 bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ExtractionError(f"not a UTF-8 text file ({e})") from e
    pages = split_pages(text)
    if not any(p.strip() for p in pages):
        raise ExtractionError(f"text-less file: no text on any of its {len(pages)} pages")
    layouts = [
        PageLayout(images=0, lines=sum(1 for ln in p.split("\n") if ln.strip()), side_by_side_lines=0)
        for p in pages
    ]
    sha = hashlib.sha256(data).hexdigest()
    return Extracted(texts=pages, layouts=layouts, seconds=time.perf_counter() - t0, sha256=sha)


def extract_document(path: str | Path, engine: str = "pypdfium2", max_pages: int | None = None) -> Extracted:
    """Pages of a corpus file: plain text for ``.txt``/``.md`` (``engine`` is then not
    used), otherwise a PDF through :func:`~sourcepage.corpus.extract.extract_pdf`.
    LimitExceeded for a document of more than ``max_pages`` pages."""
    if engine not in ENGINES:
        raise ValueError(f"unknown extraction engine {engine!r}; choose from {ENGINES}")
    if Path(path).suffix.lower() in TEXT_SUFFIXES:
        out = extract_text_file(path)
        check_pages(len(out.texts), max_pages)
        return out
    return extract_pdf(path, engine, max_pages)
