"""The study's three text versions (Table 3) and their chunks.

- ``raw``: extracted page text (line ends normalised only);
- ``cleaned``: raw text through ``clean.clean_pages``;
- ``enriched``: the cleaned chunks, each with a short metadata header prepended
  (document, topic, source, page by default; the fields are configurable). The
  header goes on every chunk, not once per page, so that every retrieval unit
  carries its source context; chunk offsets still refer to the cleaned page text,
  so the enriched version has exactly the cleaned version's chunks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sourcepage.records import Chunk, Document
from sourcepage.text.chunk import ChunkConfig, chunk_document
from sourcepage.text.clean import CleanConfig, clean_pages

DEFAULT_ENRICH_FIELDS: tuple[str, ...] = ("title", "topic", "authority", "jurisdiction", "year", "page")

_LABELS = {
    "title": "Document",
    "doc_id": "Document id",
    "topic": "Topic",
    "authority": "Source",
    "jurisdiction": "Jurisdiction",
    "year": "Year",
    "doc_type": "Type",
    "role": "Role",
    "source_url": "URL",
    "page": "Page",
}


@dataclass(frozen=True)
class TextSettings:
    """Everything that decides chunk text: cleaning, chunking and enrichment fields."""

    clean: CleanConfig = CleanConfig()
    chunk: ChunkConfig = ChunkConfig()
    enrich_fields: tuple[str, ...] = DEFAULT_ENRICH_FIELDS

    def as_dict(self) -> dict[str, object]:
        return {
            "clean": self.clean.as_dict(),
            "chunk": self.chunk.as_dict(),
            "enrich_fields": list(self.enrich_fields),
        }

    @classmethod
    def from_dict(cls, d: dict) -> TextSettings:
        return cls(
            CleanConfig(**d.get("clean", {})),
            ChunkConfig(**d.get("chunk", {})),
            tuple(d.get("enrich_fields", DEFAULT_ENRICH_FIELDS)),
        )


def metadata_header(doc: Document, page: int, fields: tuple[str, ...] = DEFAULT_ENRICH_FIELDS) -> str:
    """``Document: … | Topic: … | Source: … | Page: N`` for the enriched version.

    Topic slugs are spelled with spaces ("machine guarding") so a tokenizer sees words.
    Empty fields are left out.
    """
    parts = []
    for f in fields:
        value = str(page) if f == "page" else doc.get(f)
        if f == "topic":
            value = value.replace("_", " ")
        if value:
            parts.append(f"{_LABELS.get(f, f.replace('_', ' ').capitalize())}: {value}")
    return " | ".join(parts)


def check_enrich_fields(fields: tuple[str, ...], extra_columns: list[str]) -> None:
    """ValueError naming an enrichment field that is neither a known field nor a column
    of the manifest (a misspelt field was silently left out of every header)."""
    known = [*_LABELS, *extra_columns]
    bad = [f for f in fields if f not in known]
    if bad:
        names = ", ".join(map(repr, bad))
        raise ValueError(f"unknown enrichment field(s) {names}: choose from {', '.join(known)}")


def enrich(chunks: list[Chunk], doc: Document, fields: tuple[str, ...]) -> list[Chunk]:
    """Prepend the metadata header of each chunk's credited page to its text."""
    return [replace(c, text=metadata_header(doc, c.page, fields) + "\n" + c.text) for c in chunks]


def build_versions(
    doc: Document,
    raw_pages: list[str],
    settings: TextSettings = TextSettings(),
    ordered: list[str | None] | None = None,
) -> tuple[list[str], dict[str, list[Chunk]]]:
    """Cleaned page texts, and the chunks of every text version for one document. The
    cleaned text starts from ``ordered`` (a page's text in column order) where given:
    the raw version keeps the extraction's order."""
    source = [o or r for r, o in zip(raw_pages, ordered, strict=True)] if ordered else raw_pages
    cleaned = clean_pages(source, settings.clean)
    raw_chunks = chunk_document(doc.doc_id, raw_pages, settings.chunk)
    clean_chunks = chunk_document(doc.doc_id, cleaned, settings.chunk)
    return cleaned, {
        "raw": raw_chunks,
        "cleaned": clean_chunks,
        "enriched": enrich(clean_chunks, doc, settings.enrich_fields),
    }
