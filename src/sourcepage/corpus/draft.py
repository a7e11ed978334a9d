"""A draft ``manifest.csv`` for a folder of PDFs (``sourcepage manifest draft DIR``).

Each PDF gives one row: ``doc_id`` from its file name, ``file``, ``pages`` and ``sha256``
computed, ``license`` left for a person to check, ``found_in`` the folder; the title,
authority, jurisdiction, year, type, topic and role guessed from the PDF's metadata and its
first pages (``corpus.guess``). The ``guessed`` column lists the fields that were guessed
(``title;authority;jurisdiction;year``), so that every hit can say so: nothing guessed is
shown as fact. The PDFs are read in a worker under the extraction limits (a PDF is input
from outside), and only their first pages.

The draft is written atomically and never over an existing manifest unless asked. A folder
holding its PDFs directly (no ``pdf/``) gets ``pdf/`` with a hard link to each (a copy where
links are impossible), so the corpus layout every command reads holds; the originals stay.
"""

from __future__ import annotations

import csv
import datetime
import io
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sourcepage.corpus.guess import (
    Guess,
    guess_authority,
    guess_doc_type,
    guess_role,
    guess_title,
    guess_topic,
    guess_year,
)
from sourcepage.corpus.manifest import sha256_file
from sourcepage.corpus.structure import Line
from sourcepage.limits import EXTRACT_LIMITS, Limits
from sourcepage.records import GUESSED, MANIFEST_COLUMNS, Document

#: the licence of a drafted row until a person writes it
UNKNOWN_LICENSE = "unknown — check"
#: the first pages read for guesses
FIRST_PAGES = 3


class DraftError(ValueError):
    """No PDF to draft from, or a manifest already there."""


@dataclass(frozen=True)
class PdfFacts:
    """What a draft reads of one PDF: its page count, metadata, the first pages' text and
    the text lines (with type sizes) of the first page that has any."""

    pages: int
    title: str
    author: str
    created: str
    texts: tuple[str, ...]
    lines: tuple[Line, ...]
    lines_page: int  # 1-based page of ``lines``


@dataclass(frozen=True)
class DraftRow:
    """One drafted document and the guesses behind it (field order)."""

    doc: Document
    guesses: tuple[Guess, ...]


@dataclass
class Draft:
    """A drafted manifest: its rows, and the PDFs that could not be read (file → why)."""

    corpus_dir: Path
    rows: list[DraftRow] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)
    linked: int = 0  # PDFs linked into pdf/ from the folder itself

    def csv_text(self) -> str:
        """The manifest: the fourteen columns, then ``guessed``."""
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=[*MANIFEST_COLUMNS, GUESSED], lineterminator="\n")
        w.writeheader()
        for r in self.rows:
            w.writerow(r.doc.as_dict())
        return buf.getvalue()


def read_facts(path: str) -> PdfFacts:
    """The facts of one PDF (run in a limited worker): metadata, page count, the text of its
    first pages and the type sizes of the first page with text."""
    import pypdfium2 as pdfium

    from sourcepage.corpus.structure import page_lines

    pdf = pdfium.PdfDocument(path)
    try:
        meta = pdf.get_metadata_dict()
        texts: list[str] = []
        lines: list[Line] = []
        lines_page = 0
        for i in range(min(FIRST_PAGES, len(pdf))):
            tp = pdf[i].get_textpage()
            texts.append(tp.get_text_range())
            if not lines and texts[-1].strip():
                lines, lines_page = page_lines(tp), i + 1
        return PdfFacts(
            len(pdf),
            meta.get("Title", ""),
            meta.get("Author", ""),
            meta.get("CreationDate", ""),
            tuple(texts),
            tuple(lines),
            lines_page,
        )
    finally:
        pdf.close()


def slug(stem: str) -> str:
    """A doc_id from a file name: lower case, runs of other characters as ``-``."""
    s = re.sub(r"[^a-z0-9_-]+", "-", stem.lower()).strip("-_")
    return s or "doc"


def unique_ids(stems: list[str]) -> list[str]:
    """Slugs of ``stems``, a second of the same made unique with ``-2``, ``-3`` …"""
    out: list[str] = []
    for stem in stems:
        base = slug(stem)
        doc_id, n = base, 1
        while doc_id in out:
            n += 1
            doc_id = f"{base}-{n}"
        out.append(doc_id)
    return out


def guesses_for(facts: PdfFacts) -> list[Guess]:
    """Every field guessed of one PDF, in manifest order."""
    title = guess_title(facts.title, facts.lines, facts.lines_page)
    title_text = title.value if title else ""
    found = guess_authority(facts.texts, facts.author)
    authority, jurisdiction = found if found else (None, None)
    doc_type = guess_doc_type(title_text, facts.title, facts.texts)
    out = [
        title,
        guess_topic(title_text, facts.texts),
        authority,
        jurisdiction,
        guess_year(facts.lines, facts.lines_page, facts.texts, facts.created),
        doc_type,
        guess_role(authority, doc_type),
    ]
    return [g for g in out if g is not None]


def row_for(doc_id: str, pdf: Path, facts: PdfFacts, found_in: str) -> DraftRow:
    """The drafted manifest row of one PDF."""
    guesses = guesses_for(facts)
    values = {g.field: g.value for g in guesses}
    row = {c: "" for c in MANIFEST_COLUMNS}
    row |= {"doc_id": doc_id, "file": pdf.name, "title": values.get("title") or pdf.stem}
    row |= {k: values.get(k, "") for k in ("topic", "authority", "jurisdiction", "year", "doc_type", "role")}
    row |= {"sha256": sha256_file(pdf), "pages": str(facts.pages), "license": UNKNOWN_LICENSE}
    row |= {"found_in": found_in, GUESSED: ";".join(g.field for g in guesses)}
    return DraftRow(Document.from_dict(row), tuple(guesses))


def _pdfs(folder: Path) -> list[Path]:
    return (
        sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() == ".pdf")
        if folder.is_dir()
        else []
    )


def needs_draft(corpus_dir: Path) -> bool:
    """True for a folder of PDFs (in it or under ``pdf/``) without ``manifest.csv``: what
    ``ingest --corpus`` drafts a manifest for (any other folder gets the manifest's errors)."""
    return not (corpus_dir / "manifest.csv").exists() and bool(_pdfs(corpus_dir / "pdf") or _pdfs(corpus_dir))


def pdf_folder(corpus_dir: Path) -> tuple[Path, int]:
    """``corpus_dir/pdf``, made and filled with links to the PDFs lying in ``corpus_dir``
    itself when it has none (with the number linked); DraftError when neither holds a PDF."""
    pdf_dir = corpus_dir / "pdf"
    if _pdfs(pdf_dir):
        return pdf_dir, 0
    loose = _pdfs(corpus_dir)
    if not loose:
        raise DraftError(f"{corpus_dir} holds no PDF (in it or under pdf/)")
    pdf_dir.mkdir(exist_ok=True)
    for p in loose:
        target = pdf_dir / p.name
        if target.exists():
            continue
        try:
            os.link(p, target)
        except OSError:
            shutil.copy2(p, target)
    return pdf_dir, len(loose)


def draft_manifest(corpus_dir: str | Path, limits: Limits = EXTRACT_LIMITS) -> Draft:
    """A draft of ``corpus_dir``'s manifest: one row a PDF, in file-name order."""
    from sourcepage.executor import LimitedPool

    corpus_dir = Path(corpus_dir)
    if not corpus_dir.is_dir():
        raise DraftError(f"{corpus_dir} is not a folder")
    pdf_dir, linked = pdf_folder(corpus_dir)
    pdfs = _pdfs(pdf_dir)
    draft = Draft(corpus_dir, linked=linked)
    found_in = f"{corpus_dir.resolve()} (drafted {datetime.date.today().isoformat()})"
    with LimitedPool(workers=1, limits=limits) as pool:
        results = pool.settle(read_facts, [str(p) for p in pdfs])
    readable = [(p, r) for p, r in zip(pdfs, results, strict=True) if isinstance(r, PdfFacts)]
    for p, r in zip(pdfs, results, strict=True):
        if not isinstance(r, PdfFacts):
            draft.unreadable[p.name] = str(r) or type(r).__name__
    ids = unique_ids([p.stem for p, _ in readable])
    draft.rows = [row_for(i, p, facts, found_in) for i, (p, facts) in zip(ids, readable, strict=True)]
    if not draft.rows:
        raise DraftError(f"no PDF under {pdf_dir} could be read: {draft.unreadable}")
    return draft


def write_draft(draft: Draft, force: bool = False) -> Path:
    """Write ``manifest.csv`` atomically (a temporary file, then a link or a rename); an
    existing manifest is replaced only when ``force`` (DraftError otherwise)."""
    target = draft.corpus_dir / "manifest.csv"
    fd, tmp = tempfile.mkstemp(prefix=".manifest.csv.", suffix=".tmp", dir=draft.corpus_dir)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would hide the manifest from the team
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(draft.csv_text())
            f.flush()
            os.fsync(f.fileno())
        if force:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)  # fails when a manifest is there, even one written just now
            except FileExistsError:
                raise DraftError(f"{target} exists; give --force to replace it") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target
