"""Cleaning operations, chunking (offsets, modes, scope, page credit) and enrichment."""

from __future__ import annotations

import re
from pathlib import Path

import pdf_factory as pf
import pytest

from sourcepage.corpus.extract import ENGINES, extract_pdf
from sourcepage.records import Document
from sourcepage.store.db import Store
from sourcepage.text.chunk import PAGE_JOIN, ChunkConfig, _credit, chunk_document, split_spans
from sourcepage.text.clean import (
    CleanConfig,
    clean_pages,
    dehyphenate,
    normalize_whitespace,
    remove_headers_footers,
)
from sourcepage.text.versions import TextSettings, build_versions, metadata_header

HEADER = pf.LOTO_HEADER
LOTO = "loto_energy_control"


def _norm(text: str) -> str:
    return " ".join(text.split())


def _doc(doc_id: str = "doc", **kw: str) -> Document:
    base = {
        "doc_id": doc_id,
        "file": f"{doc_id}.pdf",
        "title": "Lockout Guide",
        "topic": "loto",
        "authority": "OSHA",
        "jurisdiction": "US",
        "year": "2023",
    }
    base.update(kw)
    return Document.from_dict(base)


@pytest.fixture(scope="module")
def loto_raw(safety_corpus: Path) -> list[str]:
    return extract_pdf(safety_corpus / "pdf" / f"{LOTO}.pdf").texts


# ----------------------------------------------------------------------------- cleaning


def test_loto_header_footer_removed_body_kept(loto_raw: list[str]) -> None:
    assert all(HEADER in t and f"Safety Guide — page {n}" in t for n, t in enumerate(loto_raw, 1))
    cleaned = clean_pages(loto_raw)
    assert len(cleaned) == 3
    for n, (text, body) in enumerate(zip(cleaned, pf.SAFETY_CORPUS_DOCS[LOTO], strict=True), 1):
        assert HEADER not in text
        assert "Safety Guide" not in text and not re.search(r"page \d", text)
        assert text == _norm(body.replace("energy-iso-\nlating", "energy-isolating")), f"p{n}"


def test_headers_footers_switch(loto_raw: list[str]) -> None:
    kept = clean_pages(loto_raw, CleanConfig(headers_footers=False))
    assert all(t.startswith(HEADER) and t.endswith(f"Safety Guide — page {n}") for n, t in enumerate(kept, 1))


def test_repeated_line_kept_away_from_page_edges() -> None:
    words = ["alpha", "bravo", "charlie", "delta"]
    pages = [
        f"ACME Manual\n{w} opens\nACME Manual\nmore {w}\n{w} closes\nPage {n} of 4"
        for n, w in enumerate(words, 1)
    ]
    out = remove_headers_footers(pages)
    for w, text in zip(words, out, strict=True):
        # header and "Page n of 4" gone; the same header line inside the body stays
        assert text.split("\n") == [f"{w} opens", "ACME Manual", f"more {w}", f"{w} closes"]


def test_header_needs_three_pages() -> None:
    pages = ["Head\nbody one\nFoot 1", "Head\nbody two\nFoot 2"]
    assert remove_headers_footers(pages) == pages


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("the energy-iso-\nlating device", "the energy-isolating device"),
        ("the energy-iso- \n  lating device", "the energy-isolating device"),
        ("iso\ufffelating", "isolating"),  # PDFium's marker for a removed line-end hyphen
        ("iso\ufffe\nlating", "isolating"),
        ("see Section-\nA", "see Section-\nA"),  # upper-case continuation is not joined
        ("a well-known term", "a well-known term"),  # no line break: untouched
    ],
)
def test_dehyphenate(text: str, expected: str) -> None:
    assert dehyphenate(text) == expected


def test_dehyphenate_keeps_compound_known_from_document() -> None:
    vocab = {"self-contained", "breathing"}
    assert dehyphenate("the self-\ncontained unit", vocab) == "the self-contained unit"
    assert dehyphenate("the self\ufffecontained unit", vocab) == "the self-contained unit"
    # the joined form also in the vocabulary wins
    assert dehyphenate("the self-\ncontained unit", vocab | {"selfcontained"}) == "the selfcontained unit"
    assert dehyphenate("the self-\ncontained unit") == "the selfcontained unit"


@pytest.mark.parametrize("engine", ENGINES)
def test_dehyphenation_from_pdf(tmp_path: Path, engine: str) -> None:
    pdf = pf.hyphenated_pdf(
        tmp_path / "h.pdf",
        [
            "Wear a self-contained breathing apparatus when",
            "entering the tank. Refill the self-",
            "contained unit after use and iso-",
            "late the valve.",
        ],
    )
    raw = extract_pdf(pdf, engine).texts
    assert clean_pages(raw) == [
        "Wear a self-contained breathing apparatus when entering the tank. Refill the "
        "self-contained unit after use and isolate the valve."
    ]
    no_dehyph = clean_pages(raw, CleanConfig(dehyphenate=False))[0]
    assert "iso-late" in no_dehyph or "iso- late" in no_dehyph


def test_loto_dehyphenation_in_cleaned_text(loto_raw: list[str]) -> None:
    assert "energy-iso\ufffelating" in loto_raw[0]  # PDFium form in the raw text
    assert "energy-isolating device" in clean_pages(loto_raw)[0]


def test_normalize_whitespace() -> None:
    text = "a  b\tc\nd\n\n\n e\u00a0f\fg soft\u00adhyphen\n\n   \n\nlast  para \n"
    assert normalize_whitespace(text) == "a b c d\n\ne f g softhyphen\n\nlast para"
    assert normalize_whitespace("  \n\n ") == ""


def test_whitespace_switch(loto_raw: list[str]) -> None:
    kept = clean_pages(loto_raw, CleanConfig(whitespace=False))
    assert all("\n" in t for t in kept)
    assert HEADER not in kept[0]
    assert "energy-isolating device" in kept[0]


def test_all_cleaning_off_is_identity(loto_raw: list[str]) -> None:
    off = CleanConfig(
        headers_footers=False, dehyphenate=False, whitespace=False, glyphs=False, page_numbers=False
    )
    assert clean_pages(loto_raw, off) == loto_raw
    assert off.as_dict() == {
        "headers_footers": False,
        "dehyphenate": False,
        "whitespace": False,
        "glyphs": False,
        "page_numbers": False,
    }


# ----------------------------------------------------------------------------- split_spans


SENTENCES = " ".join(
    f"Rule {k} says the {'authorized ' * (k % 4)}employee must verify isolation before work."
    for k in range(1, 41)
)
WORDS = " ".join(f"word{k % 13}" + "x" * (k % 5) for k in range(400))


@pytest.mark.parametrize(("size", "overlap"), [(200, 50), (300, 0), (1000, 200), (120, 60)])
def test_split_spans_sizes_overlap_and_coverage(size: int, overlap: int) -> None:
    spans = split_spans(SENTENCES, size, overlap)
    assert len(spans) > 2
    assert spans[0][0] == 0 and spans[-1][1] == len(SENTENCES)
    for s, e in spans:
        assert 0 < e - s <= size
        chunk = SENTENCES[s:e]
        assert chunk == chunk.strip()
        assert s == 0 or SENTENCES[s - 1].isspace()  # starts at a word start
    for (s1, e1), (s2, _e2) in zip(spans, spans[1:], strict=False):
        assert s1 < s2 <= e1 + 1
        if overlap:
            assert 0 < e1 - s2 <= overlap  # overlap present, never more than asked
    covered = set()
    for s, e in spans:
        covered.update(range(s, e))
    assert all(i in covered for i, ch in enumerate(SENTENCES) if not ch.isspace())


def test_split_spans_ends_at_sentence_breaks() -> None:
    spans = split_spans(SENTENCES, 200, 50)
    for s, e in spans[:-1]:
        assert SENTENCES[e - 1] == "."
        assert e - s > 100  # the break is in the second half of the window


def test_split_spans_falls_back_to_word_breaks() -> None:
    spans = split_spans(WORDS, 150, 30)
    for s, e in spans:
        assert e - s <= 150
        assert e == len(WORDS) or WORDS[e].isspace()
        assert s == 0 or WORDS[s - 1].isspace()


def test_split_spans_hard_cut_without_spaces() -> None:
    text = "x" * 250
    # the overlap start moves forward to a word start, so an unbroken run is cut without overlap
    assert split_spans(text, 100, 20) == [(0, 100), (100, 200), (200, 250)]


def test_split_spans_short_and_blank() -> None:
    assert split_spans("  short text \n", 100, 20) == [(2, 12)]
    assert split_spans(" \n\t ", 100, 20) == []


def test_chunk_config_validation() -> None:
    with pytest.raises(ValueError, match="mode"):
        ChunkConfig(mode="paragraph")
    with pytest.raises(ValueError, match="scope"):
        ChunkConfig(scope="corpus")
    with pytest.raises(ValueError, match="too small"):
        ChunkConfig(size=10)
    with pytest.raises(ValueError, match="overlap"):
        ChunkConfig(size=100, overlap=60)


# ----------------------------------------------------------------------------- chunk_document


def _assert_offsets(chunks, pages: list[str]) -> None:
    """Every chunk's text is exactly its page slices, joined by one PAGE_JOIN per page
    break crossed (an empty page in between adds its own)."""
    for c in chunks:
        text = pages[c.spans[0][0] - 1][c.spans[0][1] : c.spans[0][2]]
        for (p0, _, _), (p, s, e) in zip(c.spans, c.spans[1:], strict=False):
            assert all(not pages[q - 1] for q in range(p0 + 1, p))
            text += PAGE_JOIN * (p - p0) + pages[p - 1][s:e]
        assert text == c.text, c.chunk_id


def test_page_scope_chunks() -> None:
    pages = [SENTENCES, "", "  Short third page.  "]
    chunks = chunk_document("d", pages, ChunkConfig(size=300, overlap=60))
    _assert_offsets(chunks, pages)
    assert all(len(c.spans) == 1 and c.spans[0][0] == c.page for c in chunks)
    assert {c.page for c in chunks} == {1, 3}  # blank page: no chunk
    p1 = [c.chunk_id for c in chunks if c.page == 1]
    assert p1 == [f"d#p1#c{k}" for k in range(1, len(p1) + 1)]
    assert chunks[-1].chunk_id == "d#p3#c1" and chunks[-1].text == "Short third page."
    assert all(len(c.text) <= 300 for c in chunks)


def test_page_mode() -> None:
    pages = ["  First page.\n", "", SENTENCES]
    chunks = chunk_document("d", pages, ChunkConfig(mode="page"))
    assert [c.chunk_id for c in chunks] == ["d#p1#c1", "d#p3#c1"]
    assert chunks[0].text == "First page." and chunks[1].text == SENTENCES
    _assert_offsets(chunks, pages)


def test_two_page_mode() -> None:
    pages = ["Page one text.", "Page two has a much longer text than page one.", "Three."]
    chunks = chunk_document("d", pages, ChunkConfig(mode="two_page"))
    assert len(chunks) == 2  # windows (1,2) and (2,3)
    assert chunks[0].text == pages[0] + PAGE_JOIN + pages[1]
    assert [s[0] for s in chunks[0].spans] == [1, 2] and [s[0] for s in chunks[1].spans] == [2, 3]
    assert chunks[0].page == 2 and chunks[1].page == 2  # page 2 holds most of both windows
    assert [c.chunk_id for c in chunks] == ["d#p2#c1", "d#p2#c2"]
    _assert_offsets(chunks, pages)
    assert chunk_document("d", ["Only page."], ChunkConfig(mode="two_page"))[0].spans == ((1, 0, 10),)


def test_two_page_mode_tie_goes_to_earlier_page() -> None:
    chunks = chunk_document("d", ["aaaa bbbb", "cccc dddd"], ChunkConfig(mode="two_page"))
    assert len(chunks) == 1 and chunks[0].page == 1


def test_credit_rule() -> None:
    assert _credit([(3, 0, 10), (4, 0, 10)]) == 3  # tie → earlier page
    assert _credit([(3, 0, 5), (4, 0, 6)]) == 4
    assert _credit([(1, 90, 100), (2, 0, 40), (3, 0, 40)]) == 2


def test_document_scope_chunk_crossing_a_page_break() -> None:
    pages = [" ".join(["alpha"] * 50), " ".join(["bravo"] * 50), "", " ".join(["charlie"] * 20)]
    chunks = chunk_document("d", pages, ChunkConfig(size=400, overlap=150, scope="document"))
    _assert_offsets(chunks, pages)
    crossing = [c for c in chunks if len(c.spans) > 1]
    assert crossing, [c.spans for c in chunks]
    for c in chunks:
        lengths = {p: e - s for p, s, e in c.spans}
        best = max(lengths.values())
        assert c.page == min(p for p, n in lengths.items() if n == best)
        assert c.chunk_id.startswith(f"d#p{c.page}#c")
        assert len(c.text) <= 400
    first = chunks[0]
    assert [p for p, _, _ in first.spans] == [1, 2] and first.page == 1  # most of it on p1
    assert any(c.page == 2 and c.spans[0][0] == 1 for c in chunks)  # starts on p1, mostly p2


def test_document_scope_exact_tie_goes_to_earlier_page() -> None:
    pages = ["x" * 100, "y" * 100]
    (chunk,) = chunk_document("d", pages, ChunkConfig(size=250, overlap=50, scope="document"))
    assert chunk.spans == ((1, 0, 100), (2, 0, 100)) and chunk.page == 1
    assert chunk.text == pages[0] + PAGE_JOIN + pages[1]


def test_store_chunk_offsets_map_back(safety_store: Path) -> None:
    st = Store(safety_store)
    try:
        for version in ("raw", "cleaned"):
            chunks = st.chunks(version)
            assert chunks
            for c in chunks:
                pages = st.page_texts(c.doc_id, version)
                ((p, s, e),) = c.spans
                assert p == c.page and pages[p - 1][s:e] == c.text
        raw_ids = [c.chunk_id for c in st.chunks("raw")]
        assert "confined_space_entry#p2#c1" not in raw_ids  # blank page
    finally:
        st.close()


# ----------------------------------------------------------------------------- enrichment


def test_enriched_chunks_start_with_header() -> None:
    doc = _doc(topic="machine_guarding", year="")
    raw = ["Guard page one.\nMore text.", "Second page about nip points."]
    cleaned, versions = build_versions(doc, raw)
    assert cleaned == ["Guard page one. More text.", "Second page about nip points."]
    assert [c.chunk_id for c in versions["enriched"]] == [c.chunk_id for c in versions["cleaned"]]
    for e, c in zip(versions["enriched"], versions["cleaned"], strict=True):
        header = metadata_header(doc, c.page)
        assert e.text == header + "\n" + c.text and e.spans == c.spans
    assert versions["enriched"][1].text.split("\n")[0] == (
        "Document: Lockout Guide | Topic: machine guarding | Source: OSHA | Jurisdiction: US | Page: 2"
    )


def test_enrich_fields_configurable() -> None:
    doc = _doc(project_type="bridge")
    settings = TextSettings(enrich_fields=("doc_id", "project_type", "role", "page"))
    _, versions = build_versions(doc, ["Some text here."], settings)
    assert versions["enriched"][0].text == (
        "Document id: doc | Project type: bridge | Page: 1\nSome text here."
    )
    assert TextSettings.from_dict(settings.as_dict()) == settings


def test_store_enriched_version(safety_store: Path) -> None:
    st = Store(safety_store)
    try:
        enriched = {c.chunk_id: c for c in st.chunks("enriched")}
        cleaned = st.chunks("cleaned")
        assert set(enriched) == {c.chunk_id for c in cleaned}
        c = enriched["hse_ppe_at_work#p2#c1"]
        assert c.text.startswith(
            "Document: Personal Protective Equipment (PPE) at Work | Topic: ppe | "
            "Source: HSE | Jurisdiction: UK | Year: 2022 | Page: 2\nHearing protection"
        )
    finally:
        st.close()
