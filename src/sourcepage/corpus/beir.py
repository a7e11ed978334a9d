"""BEIR folders: read them; their corpus is ingested into a store, streaming, by
``sourcepage.ingest.ingest_beir`` (the ingest loop of sourcepage.ingest over corpus.sources.BeirSource).

A BEIR folder (https://github.com/beir-cellar/beir) holds::

    corpus.jsonl        {"_id": "...", "title": "...", "text": "...", "metadata": {...}}  one a line
    queries.jsonl       {"_id": "...", "text": "..."}                                   one a line
    qrels/<split>.tsv   header row, then  query-id <TAB> corpus-id <TAB> score

Each BEIR document becomes one store document with one page, ``<doc_id>#p1``. BEIR ids
can be anything (``"Doc/1"``, ``"doc 1"``, ``"MED-10"``, unicode), so every ``_id`` gets
a doc_id that matches ``[a-z0-9][a-z0-9_-]*`` (:func:`beir_doc_id`): an id that already
matches is kept as it is; any other is folded to ASCII, lower-cased, runs of other
characters become ``-``, cut to 60 characters, and a ``-`` plus the first 8 hex digits
of the SHA-1 of the original id is appended. Should that still collide with another id
of the corpus, ``-2``, ``-3``, ... is appended in corpus order. The mapping is kept in
the store's ``beir_ids`` table (:func:`id_map`) and in each document's metadata
(``beir_id``), and is stable across re-ingests.

Provenance of a BEIR document: title = the BEIR title, authority ``BEIR:<folder name>``,
doc_type ``beir_document``, pages ``1``, sha256 = SHA-256 of the page text (UTF-8),
file ``corpus.jsonl``, source_url = ``metadata.url`` where the corpus has it.

The page text (the raw version) is the BEIR ``text``; the title goes into the enriched
version's header (``Document: <title>``; by default BEIR ingest enriches with the title
only, and chunks in ``page`` mode: one chunk a document, as BEIR retrieves documents).
With ``title_in_text`` the page text is ``title + "\\n\\n" + text`` (Pyserini's and the
dense BEIR baselines' input). A document with an empty text uses its title as text.

corpus.jsonl is read line by line and written in batches, each batch one SQLite
transaction; memory does not grow with the corpus (the id bookkeeping lives in SQLite).
Incremental: a document whose text and metadata are unchanged is not rewritten, and an
unchanged corpus file (same size and modification time, same settings) is not read.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sourcepage.jsonl import jsonl_lines
from sourcepage.records import Document
from sourcepage.store.db import Store
from sourcepage.text.chunk import ChunkConfig
from sourcepage.text.versions import TextSettings

__all__ = [
    "BEIR_DOC_TYPE",
    "BEIR_ENRICH_FIELDS",
    "BEIR_SETTINGS",
    "BeirDoc",
    "BeirError",
    "beir_doc_id",
    "beir_document",
    "beir_page_text",
    "beir_splits",
    "dataset_name",
    "id_map",
    "iter_corpus",
    "iter_jsonl",
    "read_qrels",
    "read_queries",
    "trec_id",
]

BEIR_DOC_TYPE = "beir_document"
BEIR_ENRICH_FIELDS: tuple[str, ...] = ("title",)
#: BEIR ingest defaults: one chunk a document (``page`` mode), enriched with the title only
BEIR_SETTINGS = TextSettings(chunk=ChunkConfig(mode="page"), enrich_fields=BEIR_ENRICH_FIELDS)
BATCH_SIZE = 1000
ENGINE = "beir"

Progress = Callable[[int, int, str], None]

_VALID = re.compile(r"^[a-z0-9][a-z0-9_-]*\Z")
_OTHER = re.compile(r"[^a-z0-9_-]+")
_SPACE = re.compile(r"\s")
_MAX_SLUG = 60


class BeirError(ValueError):
    """A BEIR folder or file that cannot be read; the message names file and line."""


# --------------------------------------------------------------------------- ids


def beir_doc_id(beir_id: str) -> str:
    """The base doc_id of a BEIR ``_id`` (before corpus-level collision handling).

    ``"123"`` → ``"123"``; ``"Doc/1"`` → ``"doc-1-<8 hex>"``; ``"Über"`` → ``"uber-<8 hex>"``.
    """
    if _VALID.fullmatch(beir_id) and len(beir_id) <= _MAX_SLUG + 9:
        return beir_id
    folded = unicodedata.normalize("NFKD", beir_id.replace("Æ", "AE").replace("æ", "ae"))
    ascii_ = folded.encode("ascii", "ignore").decode("ascii").lower()
    slug = _OTHER.sub("-", ascii_).strip("-_")[:_MAX_SLUG].strip("-_")
    digest = hashlib.sha1(beir_id.encode("utf-8")).hexdigest()[:8]
    return f"{slug}-{digest}" if slug else f"beir-{digest}"


def trec_id(beir_id: str) -> str:
    """A BEIR id as a TREC run/qrels field: whitespace characters percent-encoded
    (``"doc 1"`` → ``"doc%201"``); every id without whitespace is written unchanged."""
    return _SPACE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group(0).encode("utf-8")), beir_id)


def id_map(store: str | Path | Store) -> dict[str, str]:
    """doc_id → original BEIR ``_id`` for every BEIR document of a store."""
    st = store if isinstance(store, Store) else Store(store)
    try:
        return st.beir_id_map()
    finally:
        if st is not store:
            st.close()


# --------------------------------------------------------------------------- reading


def dataset_name(beir_dir: str | Path) -> str:
    """The folder name, used in ``authority = "BEIR:<name>"``."""
    return Path(beir_dir).resolve().name


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(line number, bytes read so far, object) for every non-blank line, read one line
    at a time. BeirError naming ``file:line`` for a line that is not a JSON object."""
    lineno = 0
    try:
        for lineno, done, line in jsonl_lines(path):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError) as e:
                raise BeirError(f"{path}:{lineno}: invalid JSON ({e})") from None
            if not isinstance(obj, dict):
                raise BeirError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
            yield lineno, done, obj
    except UnicodeDecodeError as e:
        raise BeirError(f"{path}:{lineno + 1}: not UTF-8 ({e.reason})") from None


def _str_id(obj: dict[str, Any], path: Path, lineno: int) -> str:
    raw = obj.get("_id")
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str) or not raw.strip():
        raise BeirError(f"{path}:{lineno}: missing or empty '_id'")
    return raw


@dataclass(frozen=True)
class BeirDoc:
    """One corpus.jsonl line."""

    beir_id: str
    title: str
    text: str
    url: str
    line: int
    bytes_read: int


def iter_corpus(beir_dir: str | Path) -> Iterator[BeirDoc]:
    """The documents of ``corpus.jsonl``, streamed."""
    path = Path(beir_dir) / "corpus.jsonl"
    if not path.is_file():
        raise BeirError(f"{path} not found (a BEIR folder holds corpus.jsonl, queries.jsonl, qrels/)")
    for lineno, done, obj in iter_jsonl(path):
        meta = obj.get("metadata")
        url = meta.get("url", "") if isinstance(meta, dict) else ""
        yield BeirDoc(
            _str_id(obj, path, lineno),
            str(obj.get("title") or ""),
            str(obj.get("text") or ""),
            url if isinstance(url, str) else "",
            lineno,
            done,
        )


def read_queries(beir_dir: str | Path, wanted: set[str] | None = None) -> dict[str, str]:
    """query id → text from ``queries.jsonl`` (streamed; only ``wanted`` ids if given)."""
    path = Path(beir_dir) / "queries.jsonl"
    if not path.is_file():
        raise BeirError(f"{path} not found")
    out: dict[str, str] = {}
    for lineno, _, obj in iter_jsonl(path):
        qid = _str_id(obj, path, lineno)
        if wanted is None or qid in wanted:
            out[qid] = str(obj.get("text") or "")
    return out


def beir_splits(beir_dir: str | Path) -> list[str]:
    """The qrels splits present (``qrels/<split>.tsv``)."""
    return sorted(p.stem for p in (Path(beir_dir) / "qrels").glob("*.tsv"))


def read_qrels(beir_dir: str | Path, split: str = "test") -> dict[str, dict[str, int]]:
    """query id → {corpus id: score} from ``qrels/<split>.tsv`` (header row skipped;
    a repeated pair keeps its last score, as BEIR's loader does)."""
    path = Path(beir_dir) / "qrels" / f"{split}.tsv"
    if not path.is_file():
        have = ", ".join(beir_splits(beir_dir)) or "none"
        raise BeirError(f"{path} not found (splits present: {have})")
    out: dict[str, dict[str, int]] = {}
    with open(path, encoding="utf-8", newline="") as f:
        for lineno, row in enumerate(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_MINIMAL), 1):
            if not row or not "".join(row).strip():
                continue
            if len(row) < 3:
                raise BeirError(f"{path}:{lineno}: expected query-id, corpus-id, score; got {row!r}")
            try:
                score = int(float(row[2]))
            except ValueError:
                if lineno == 1:
                    continue  # the header row
                raise BeirError(f"{path}:{lineno}: score {row[2]!r} is not a number") from None
            out.setdefault(row[0], {})[row[1]] = score
    return out


# --------------------------------------------------------------------------- documents


def beir_page_text(d: BeirDoc, title_in_text: bool) -> str:
    """The page text of a BEIR document: its text (line ends normalised), or its title
    when the text is empty; ``title + "\\n\\n" + text`` with ``title_in_text``."""
    text = d.text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        return d.title
    if title_in_text and d.title.strip():
        return f"{d.title}\n\n{text}"
    return text


def beir_document(d: BeirDoc, doc_id: str, dataset: str, page_text: str) -> Document:
    """The provenance record of a BEIR document (see the module docstring)."""
    return Document(
        doc_id=doc_id,
        file="corpus.jsonl",
        title=d.title,
        topic="",
        authority=f"BEIR:{dataset}",
        jurisdiction="",
        year="",
        doc_type=BEIR_DOC_TYPE,
        role="",
        source_url=d.url,
        sha256=hashlib.sha256(page_text.encode("utf-8")).hexdigest(),
        pages="1",
        license="",
        found_in=f"{dataset}/corpus.jsonl",
        extra={"beir_id": d.beir_id},
    )
