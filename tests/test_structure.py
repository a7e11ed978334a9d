"""Page structure at ingest (corpus.structure): heading paths and page kinds."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from sourcepage.corpus.structure import SEP, Line, detect_headings, document_structure, page_spans
from sourcepage.ingest import ingest
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.sections import SectionSettings, section_rank
from sourcepage.store.db import DB_NAME, Store

INTL = Path(__file__).resolve().parents[2] / "shared" / "corpus-intl" / "pdf"
if not INTL.is_dir():
    INTL = Path("/work/shared/corpus-intl/pdf")


def _body(text: str) -> Line:
    return Line(text, 11.5, False)


def test_numbered_and_styled_headings_nest() -> None:
    """Part › Subpart › numbered section, found by style and numbering; a bare "Article N"
    label takes its title from the next line; body lines are never headings."""
    body = "The officer must exercise due diligence to ensure that the PCBU complies with duties."
    pages = [
        [Line("Part 2 Health and safety duties", 14.0, False), _body(body), _body(body)],
        [
            Line("Subpart 3—Duties of officers", 13.5, False),
            Line("44 Duty of officers", 11.5, True),
            _body(body),
            _body(body),
        ],
        [
            _body(body),
            Line("Article 10", 11.5, False),
            Line("Obligations of manufacturers", 11.5, True),
            _body(body),
            _body(body),
        ],
    ]
    heads = detect_headings(pages)
    assert [(h.page, h.title) for h in heads] == [
        (0, "Part 2 Health and safety duties"),
        (1, "Subpart 3—Duties of officers"),
        (1, "44 Duty of officers"),
        (2, "Article 10 Obligations of manufacturers"),
    ]
    st = document_structure(["\n".join(ln.text for ln in p) for p in pages], pages)
    assert st[1].section == SEP.join(
        ["Part 2 Health and safety duties", "Subpart 3—Duties of officers", "44 Duty of officers"]
    )
    assert st[2].sections[-1].endswith("Article 10 Obligations of manufacturers")


def test_kinds_from_titles_and_lines() -> None:
    """Amendment instructions and a correlation table are flagged; rule text is not."""
    amend = [
        "Crown Minerals Act 1991—continued",
        "Replace section 90E(1) with:",
        "In Schedule 1, replace clause 15(7) with:",
        "In section 4, insert “worker” after “employee”.",
        "Repeal section 12.",
    ]
    rules = [
        "An officer must exercise due diligence.",
        "The PCBU must ensure the health and safety of workers.",
    ]
    table = ["ANNEX XII", "CORRELATION TABLE", "Article 1 Article 2"]
    st = document_structure(["\n".join(amend), "\n".join(rules), "\n".join(table)])
    assert st[0].kind == "amendments" and st[1].kind == ""


@pytest.fixture(scope="module")
def nz_eu_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The NZ Act and the EU machinery regulation of ../shared/corpus-intl, ingested."""
    if not (INTL / "nz-hswa-2015-as-at-2025-04-05.pdf").exists():
        pytest.skip("../shared/corpus-intl is absent")
    tmp = tmp_path_factory.mktemp("nz_eu")
    corpus = tmp / "corpus"
    (corpus / "pdf").mkdir(parents=True)
    manifest = (INTL.parent / "manifest.csv").read_text(encoding="utf-8").splitlines()
    keep = [manifest[0]] + [r for r in manifest[1:] if r.startswith(("nz-hswa-2015,", "eu-reg-2023-1230"))]
    (corpus / "manifest.csv").write_text("\n".join(keep) + "\n", encoding="utf-8")
    for name in ("nz-hswa-2015-as-at-2025-04-05.pdf", "eu-reg-2023-1230-machinery.pdf"):
        shutil.copyfile(INTL / name, corpus / "pdf" / name)  # ingest refuses links out of pdf/
    ingest(corpus, tmp / "store", workers=1)
    return tmp / "store"


def test_real_corpus_walkthrough_sections(nz_eu_store: Path) -> None:
    """The issue's walkthrough pages: NZ s 44 "Duty of officers" on p.42, the amendments to other
    Acts on p.171, EU Article 10 "Obligations of manufacturers" on p.19."""
    s = Store(nz_eu_store).page_structure()
    sec, secs, kind = s["nz-hswa-2015#p42"]
    assert sec.endswith("Subpart 3—Duties of officers, workers, and other persons › 44 Duty of officers")
    assert kind == "" and sec in json.loads(secs)
    assert s["nz-hswa-2015#p171"][2] == "amendments"
    assert s["nz-hswa-2015#p3"][2] == "contents"
    assert s["eu-reg-2023-1230-machinery#p5"][2] == "recitals"  # "(28) Economic operators should …"
    assert "Article 10 Obligations of manufacturers of machinery" in s["eu-reg-2023-1230-machinery#p19"][0]


def test_sect_stage_on_real_pages(nz_eu_store: Path) -> None:
    """``sect:`` wraps routing; the officers' question puts s 44 first; an amendment page that
    the base ranks first follows the rule pages unless the question asks about amendments."""
    searcher = Searcher(nz_eu_store)
    hits = searcher.rank("What are the duties of an officer under New Zealand's Act?", "sect:route:bm25", k=5)
    assert hits.hits[0].page_id == "nz-hswa-2015#p42"
    q = "Crown Minerals Act permit operator change health and safety regulator"
    base = searcher.rank(q, "bm25", k=None).hits
    assert base[0].page_id == "nz-hswa-2015#p171"  # the amendments to the Crown Minerals Act
    moved = section_rank(searcher, q, base)
    assert moved[0].page_id != "nz-hswa-2015#p171"
    kinds = [searcher.page_section(h.page_id)[1] for h in moved[: SectionSettings.depth]]
    first_amend = kinds.index("amendments")
    assert all(k in SectionSettings().demote for k in kinds[first_amend:])
    asked = section_rank(searcher, q + " amendments", base)
    assert asked[0].page_id == "nz-hswa-2015#p171"
    with pytest.raises(ValueError):
        parse_method("route:sect:bm25")
    assert parse_method("sect:route:rrf:bm25+dense").name == "sect:route:rrf:bm25+dense"


def test_section_index_is_kept_with_the_store_and_read_back(nz_eu_store: Path) -> None:
    """The section index is written once under indexes/raw/sections/<key>/ and a new process
    (a new Searcher) reads it back instead of tokenising every page; same ranks either way."""
    from sourcepage.retrieval.sections import section_index

    q = "What are the duties of an officer under New Zealand's Act?"
    first = Searcher(nz_eu_store)
    pages = [h.page_id for h in first.rank(q, "bm25", k=None).hits]
    built = section_index(first).ranks(q, pages)
    root = nz_eu_store / "indexes" / "raw" / "sections"
    (folder,) = [d for d in root.iterdir() if not d.name.startswith(".")]
    stamp = (folder / "keys.json").stat().st_mtime_ns
    again = Searcher(nz_eu_store)
    assert section_index(again).ranks(q, pages) == built and built
    assert (folder / "keys.json").stat().st_mtime_ns == stamp  # read, not rebuilt
    assert [d.name for d in root.iterdir()] == [folder.name]


def test_schema_4_store_is_migrated_and_reingested(fresh_corpus: Path, fresh_store: Path) -> None:
    """A schema-4 store gains the structure columns; the next ingest re-extracts every document
    to fill them (the PDF outline and fonts are not in the store), then never again."""
    db = sqlite3.connect(fresh_store / DB_NAME)
    with db:
        for col in ("section", "sections", "page_kind"):
            db.execute(f"ALTER TABLE pages DROP COLUMN {col}")
        db.execute("UPDATE meta SET value='4' WHERE key='schema_version'")
    db.close()
    st = Store(fresh_store)
    assert st.structure_pending() and all(v == ("", "[]", "") for v in st.page_structure().values())
    st.close()
    with sqlite3.connect(fresh_store / DB_NAME) as db:  # a value only an ingest replaces
        db.execute("UPDATE pages SET section='stale'")
    db.close()
    report = ingest(fresh_corpus, fresh_store, workers=1)
    assert report.extracted and not report.unchanged
    st = Store(fresh_store)
    assert not st.structure_pending()
    assert "stale" not in {sec for sec, _, _ in st.page_structure().values()}
    st.close()
    assert not ingest(fresh_corpus, fresh_store, workers=1).extracted  # once


def test_mined_pairs_on_the_real_nz_and_eu_pages(nz_eu_store: Path) -> None:
    """A section title with its number stripped → the pages of its section; the document's
    other sections' pages are the hard negatives; listing pages and one-word titles never
    make a pair."""
    from sourcepage.evaluation.mined import LISTING, mine_pairs, sample, strip_number
    from sourcepage.retrieval.tokenize import content_terms

    structure = Store(nz_eu_store).page_structure()
    pairs = {(p.doc_id, p.query): p for p in mine_pairs(structure)}
    officers = pairs[("nz-hswa-2015", "Duty of officers")]
    assert officers.section.endswith("Duties of officers, workers, and other persons › 44 Duty of officers")
    assert officers.positives == ("nz-hswa-2015#p42", "nz-hswa-2015#p43")
    assert {"nz-hswa-2015#p40", "nz-hswa-2015#p171"} <= set(officers.negatives)  # s 42; amendments
    title = "Obligations of manufacturers of machinery and related products"
    makers = pairs[("eu-reg-2023-1230-machinery", title)]
    assert "eu-reg-2023-1230-machinery#p19" in makers.positives
    assert all(n.startswith("eu-reg-2023-1230-machinery#") for n in makers.negatives)
    for p in pairs.values():
        assert not set(p.positives) & set(p.negatives)
        assert all(structure[pid][2] not in LISTING for pid in p.positives)
        assert len(content_terms(p.query)) >= 2 and not p.query[0].isdigit()
    assert strip_number("Article 10 Obligations of manufacturers") == "Obligations of manufacturers"
    assert strip_number("Subpart 2—Duties of PCBUs") == "Duties of PCBUs"
    assert strip_number("1910.147(c)(4) Energy control procedure") == "Energy control procedure"
    assert strip_number("A guide to ladders") == "A guide to ladders"
    few = sample(list(pairs.values()), 5)
    assert len(few) == 10 and few == sample(list(pairs.values()), 5)  # 5 per document, seeded


def test_spans_cut_a_page_where_its_headings_begin() -> None:
    """A page's text is cut at each heading after the first, found across line breaks and case;
    a heading missing from the text adds its stretch to the one before."""
    raw = "end of article 9 text.\nArticle 10\nObligations of\nmanufacturers\n1. Manufacturers shall ensure"
    a9, a10, gone = f"Ch II{SEP}Article 9 Scope", f"Ch II{SEP}Article 10 Obligations of manufacturers", "X"
    cut = page_spans(raw, [a9, a10])
    assert [(p, raw[b:e][:10]) for p, b, e in cut] == [(a9, "end of art"), (a10, "Article 10")]
    assert cut[-1][2] == len(raw) and cut[0][2] == cut[1][1]
    assert page_spans(raw, [a9, f"Ch II{SEP}Article 99 Missing", a10]) == cut
    assert page_spans(raw, [gone]) == [(gone, 0, len(raw))] and page_spans(raw, []) == []


def test_section_spans_on_a_real_page(nz_eu_store: Path) -> None:
    """EU p.18 holds Articles 6–9 and the start of Article 10: only its Article 10 stretch joins
    Article 10's section (with p.19 whole and p.20's first stretch), so that section's text no
    longer holds Article 7's, and p.18 is credited by share."""
    from sourcepage.retrieval.sections import section_index

    searcher = Searcher(nz_eu_store)
    idx = section_index(searcher, spans=True)
    eu = "eu-reg-2023-1230-machinery"
    title = "Article 10 Obligations of manufacturers of machinery and related products"
    art10 = next(i for i, (d, p) in enumerate(idx.keys) if d == eu and p.endswith(title))
    held = {p: w for p, spans in idx.spans_of.items() for i, w in spans if i == art10}
    assert set(held) == {f"{eu}#p18", f"{eu}#p19", f"{eu}#p20"}
    assert held[f"{eu}#p19"] == 1.0 and 0.2 < held[f"{eu}#p18"] < 0.6 and held[f"{eu}#p20"] < 1.0
    whole = section_index(searcher, spans=False)
    assert whole.section_of[f"{eu}#p18"] == whole.section_of[f"{eu}#p19"]
    q = "Article 7 safety components"
    pages = [f"{eu}#p18", f"{eu}#p19"]
    share = idx.credits(q, pages, "share")
    assert share[f"{eu}#p18"] > share.get(f"{eu}#p19", 0.0)
    with pytest.raises(ValueError, match="credit must be one of"):
        SectionSettings(credit="best")


def test_a_hit_shows_the_section_of_its_passage(nz_eu_store: Path) -> None:
    """NZ p.43 holds the end of s 44 and ss 45–47 and is filed under s 47 (most of its lines):
    a hit shows the section of its passage — the chunk holding "45 Duties of workers" s 45,
    the one starting at s 46 s 46 — and, without a chunk, the page's section."""
    searcher = Searcher(nz_eu_store)
    page = "nz-hswa-2015#p43"
    (c1, t1), (c2, t2), *_ = searcher.store.page_chunks("raw", page)
    assert "Duties of workers" in t1 and t2.split("\n")[1].startswith("46 Duties of other persons")
    assert searcher.page_section(page)[0].endswith("47 Offence of reckless conduct in respect of duty")
    assert searcher.page_section(page, c1)[0].endswith("45 Duties of workers")
    assert searcher.page_section(page, c2)[0].endswith("46 Duties of other persons at workplace")
    assert searcher.page_section(page, "no such chunk") == searcher.page_section(page)
    one = "nz-hswa-2015#p42"  # a page whose every chunk is in s 44
    assert {searcher.page_section(one, c)[0] for c, _ in searcher.store.page_chunks("raw", one)} == {
        searcher.page_section(one)[0]
    }


def test_a_quote_names_the_section_it_stands_under(nz_eu_store: Path) -> None:
    """A quote's ``section`` is the heading path where its first chosen unit begins on the page
    (found across line breaks, or by its last words when its start was tidied away): on NZ p.43
    s 45's duty of workers, s 47's offence; the hit's section when the unit is not found."""
    from sourcepage.query import PageHit
    from sourcepage.records import Hit
    from sourcepage.support.answer import quote_section
    from sourcepage.text.sentences import locate

    searcher = Searcher(nz_eu_store)
    page = "nz-hswa-2015#p43"
    raw = searcher.store.page("nz-hswa-2015", 43)["raw"]
    sec, _ = searcher.page_section(page)
    hit = PageHit(
        Hit(1, page, 1.0, page + "#c1"), searcher.documents["nz-hswa-2015"], section=sec,
        sections=searcher.page_sections(page),
    )  # fmt: skip
    duty = "While at work, a worker must— (a) take reasonable care for his or her own health and safety"
    assert locate(raw, duty) == raw.index("While at work")
    assert quote_section(raw, duty, hit).endswith("45 Duties of workers")
    offence = (
        "A person commits an offence against this section if the person— (a) has a duty under subpart 2 or 3"
    )
    assert locate(raw, offence) == raw.index("A person commits an offence against this section")
    assert quote_section(raw, offence, hit).endswith("47 Offence of reckless conduct in respect of duty")
    tidied = "Page 12 of 300 " + duty  # its first words not on the page: found by its last
    assert locate(raw, tidied) == raw.index("or her own health and safety")  # its last six words
    assert quote_section(raw, tidied, hit).endswith("45 Duties of workers")
    assert locate(raw, "words that are not on this page at all") == -1
    assert quote_section(raw, "words that are not on this page at all", hit) == sec
    one = PageHit(hit.hit, hit.document, section="only", sections=("only",))
    assert quote_section(raw, duty, one) == "only"


def test_the_section_filter_matches_citations_and_whole_words_of_a_heading() -> None:
    from sourcepage.retrieval.filters import section_test

    paths = ("CHAPTER II OBLIGATIONS › Article 10 Obligations of manufacturers",)
    assert section_test(["article  10"])(paths)  # case and spacing ignored
    assert not section_test(["Article 1"])(paths)  # not Article 10
    assert section_test(["Article 1", "chapter ii"])(paths)  # any value
    nz = ("Part 2 Health and safety duties › Subpart 3—Duties of officers › 44 Duty of officers",)
    assert not section_test(["Part 20", "officer"])(nz)
    assert section_test(["duty of OFFICERS"])(nz)
    assert section_test(["s 44"])(nz) and section_test(["section 44"])(nz) and section_test(["Part 2"])(nz)
    assert not section_test(["s 4"])(nz) and not section_test(["section 45"])(nz)
    code = ("4. Controlling the risks › 4.3. Entry permits",)
    assert section_test(["clause 4.3"])(code) and section_test(["4.3"])(code)  # words too
    assert not section_test(["clause 4.30"])(code)


def test_a_questions_cited_provisions_are_tested_as_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A search keeps the quotes of a question citing a provision to its headings with
    ``heading_test`` of ``Query.cited``, parsed once: the same verdicts as the section
    filter of the citations written out, without parsing them again (it wrote them out and
    parsed them a second time)."""
    from sourcepage.query import Query
    from sourcepage.retrieval import filters
    from sourcepage.retrieval.filters import heading_test, section_test

    q = Query.parse("What do s 44 and clause 4.3 require, and Article 10?")
    assert q.cited == (("section", "44"), ("clause", "4.3"), ("article", "10"))
    paths = [
        ("Part 2 › 44 Duty of officers",),
        ("4. Controlling the risks › 4.3. Entry permits",),
        ("CHAPTER II OBLIGATIONS › Article 10 Obligations of manufacturers",),
        ("Article 1 Scope",),
        ("4.30 Other permits", "441 Fees"),
    ]
    written = section_test([f"{kind} {num}" for kind, num in q.cited])
    monkeypatch.setattr(filters, "cited_sections", lambda text: pytest.fail(f"{text!r} parsed again"))
    test = heading_test(q.cited)
    assert [test(p) for p in paths] == [written(p) for p in paths] == [True, True, True, False, False]


def test_the_section_filter_keeps_the_pages_of_a_section(nz_eu_store: Path) -> None:
    """``section=Article 10`` ranks only the pages that Article 10 covers (pp.18–20 of the EU
    regulation: it starts on p.18 and runs into p.20), whatever the question; ``Part 2`` of
    the NZ Act keeps s 44's p.42 for the officers' question and drops the amendments."""
    searcher = Searcher(nz_eu_store)
    q = "What must the manufacturer do under the EU machinery regulation?"
    got = searcher.rank(q, "sect:route:bm25", k=None, filters={"section": "Article 10"}).pages()
    assert set(got) == {f"eu-reg-2023-1230-machinery#p{n}" for n in (18, 19, 20)}
    officers = "What are the duties of an officer under New Zealand's Act?"
    part2 = searcher.rank(officers, "bm25", k=None, filters={"section": ["Part 2"]}).pages()
    assert part2[0] == "nz-hswa-2015#p42" and "nz-hswa-2015#p171" not in part2
    assert all(any("Part 2" in p for p in searcher.page_sections(pid)) for pid in part2)
    eu_part2 = {"section": "Part 2", "jurisdiction": "EU"}
    assert searcher.rank(officers, "bm25", k=None, filters=eu_part2).pages() == []  # the EU act has no Part 2
    with pytest.raises(ValueError, match="unknown filter 'sections'"):
        searcher.rank(officers, "bm25", filters={"sections": "Part 2"})


def test_citations_in_a_question() -> None:
    from sourcepage.corpus.structure import cited_sections, cites

    assert cited_sections("What does Article 10 of the EU regulation require?") == [("article", "10")]
    assert cited_sections("What does s 44(1) say? And s.45?") == [("section", "44"), ("section", "45")]
    assert cited_sections("ss 36 and 37; Articles 10, 11 or 13") == [
        ("section", "36"),
        ("section", "37"),
        ("article", "10"),
        ("article", "11"),
        ("article", "13"),
    ]
    assert cited_sections("clause 4.3 of the NSW code, Annex III, Part 2, Subpart 3") == [
        ("clause", "4.3"),
        ("annex", "III"),
        ("part", "2"),
        ("subpart", "3"),
    ]
    assert cited_sections("under OSHA Subpart M") == []  # a US standard's name, not a provision
    # an instrument's number, a possessive, a CFR citation and a lower-case letter cite nothing
    for text in ("Under EU Regulation 2023/1230", "OSHA's 3 steps", "29 CFR 1910.147(c)(4)", "part a of it"):
        assert cited_sections(text) == [], text
    assert cites("44 Duty of officers", "section", "44") and not cites("441 Fees", "section", "44")
    assert cites("4.3. Entry permits", "clause", "4.3") and not cites("4.3.1 Permits", "clause", "4.3")
    assert cites("Article 10 Obligations of manufacturers", "article", "10")
    assert not cites("Article 100 Entry into force", "article", "10")
    assert not cites("10 Obligations", "article", "10")  # an article is always labelled
    assert cites("ANNEX III ESSENTIAL HEALTH AND SAFETY REQUIREMENTS", "annex", "III")


#: the section 36 question, the Article 10 question and the pages Article 10 covers
S36 = "What does section 36 of New Zealand's Health and Safety at Work Act require?"
ART10 = "What does Article 10 of the EU machinery regulation require?"
EU10 = {f"eu-reg-2023-1230-machinery#p{n}" for n in (18, 19, 20)}


def _cited_lead(searcher: Searcher, method: str) -> None:
    """s 36's page (p.34) first for the s 36 question; the Article 10 pages first for the
    Article 10 question."""
    assert searcher.rank(S36, method).pages()[0] == "nz-hswa-2015#p34"
    assert set(searcher.rank(ART10, method, k=3).pages()) == EU10


def test_a_cited_provision_ranks_first(nz_eu_store: Path) -> None:
    """"What does section 36 … require?" puts s 36's page first (without the citation rule
    the stage ranked it below pages that only mention the Act); "Article 10" puts the pages
    Article 10 covers (pp.18–20) first; a citation no heading is (clause 208) changes
    nothing. On BM25 (the fused default's dense half is in the heavy test below)."""
    searcher = Searcher(nz_eu_store)
    _cited_lead(searcher, "sect:route:bm25")
    odd = "What does clause 208 say about guarding machinery in the EU?"
    base = searcher.ranked(parse_method("route:bm25"), odd, None, {})
    plain = [h.page_id for h in section_rank(searcher, odd, base)]
    assert searcher.rank(odd, "sect:route:bm25", k=None).pages() == plain


@pytest.mark.heavy  # `make test-all`: the dense index of 400 pages (~40 s of CPU)
def test_a_cited_provision_is_what_the_whole_search_quotes(nz_eu_store: Path) -> None:
    """With the default fusion too, the cited provisions' pages lead; the answer cites
    Article 10 with its pages first and quotes Article 10's text only, not Articles 6–9's
    on p.18; a section filter keeps the quotes under Article 10 (p.20 also holds Article
    11's start)."""
    from sourcepage import api

    searcher = Searcher(nz_eu_store)
    default = "sect:route:rrf:bm25+dense"
    _cited_lead(searcher, default)
    res = api.search(ART10, nz_eu_store, k=5)
    shown = [r["page"] for r in res["results"]]
    assert res["cited"] == [{"citation": "article 10", "pages": [p for p in shown if p in EU10]}]
    assert shown[:3] == res["cited"][0]["pages"]  # first, in the stage's order
    quotes = res["answer"]["quotes"]
    article_10 = "Article 10 Obligations of manufacturers of machinery and related products"
    assert quotes and all(qt["section"].endswith(article_10) for qt in quotes)
    manufacturer = "What must the manufacturer do under the EU machinery regulation?"
    got = searcher.rank(manufacturer, default, k=None, filters={"section": "Article 10"})
    assert set(got.pages()) == EU10
    res = api.search(manufacturer, nz_eu_store, k=5, filters={"section": "Article 10"})
    assert res["answer"]["quotes"] and all("Article 10" in qt["section"] for qt in res["answer"]["quotes"])


def _count_parses(monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> dict[str, int]:
    """Count (or, with ``fail``, forbid) the calls of the jurisdiction finder
    (``Router.route``) and of the citation parser (``cited_sections``, wherever imported)."""
    from sourcepage import query
    from sourcepage.retrieval import filters, routing, sections

    calls = {"route": 0, "cited": 0}

    def counted(name: str, real: object) -> object:
        def call(*args: object) -> object:
            if fail:
                pytest.fail(f"{name} parsed again: {args[-1]!r}")
            calls[name] += 1
            return real(*args)  # type: ignore[operator]

        return call

    monkeypatch.setattr(routing.Router, "route", counted("route", routing.Router.route))
    for module in (query, filters, sections):
        monkeypatch.setattr(module, "cited_sections", counted("cited", module.cited_sections))
    return calls


def test_a_search_finds_the_jurisdictions_and_citations_once(
    nz_eu_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48, point 4: a search through the pipeline (the default method, ``sect:route:``)
    routes the question and parses its citations once, in ``Query``; the stages read
    ``Query.parsed``. Before, ``route:`` routed it again (twice: ``sect:`` ranks the cited
    provision's pages through it too), ``sect:`` parsed the citations again and wrote them out
    as a ``section`` filter, which the searcher's page mask parsed again for each base index
    (route 3 times, citations 4)."""
    from sourcepage import api

    calls = _count_parses(monkeypatch)
    s36 = "What does section 36 of New Zealand's Health and Safety at Work Act require?"
    res = api.search(s36, nz_eu_store, k=5)
    assert res["routing"]["jurisdictions"] == ["NZ"] and res["cited"][0]["citation"] == "section 36"
    assert res["results"][0]["page"] == "nz-hswa-2015#p34"  # s 36's page, first
    assert calls == {"route": 1, "cited": 1}


def test_the_stages_read_the_parsed_question(nz_eu_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Given ``Query.parsed``, ``route:`` and ``sect:`` rank as they do from the question's
    text (a direct ``Searcher`` user), without finding its jurisdictions or citations again;
    a comparison's sides and a cited provision's pages included."""
    from sourcepage.query import Query

    searcher = Searcher(nz_eu_store)
    method = parse_method("sect:route:bm25")
    for q in (
        "What does section 36 of New Zealand's Act require?",
        "Compare Article 10 of the EU regulation with section 36 of New Zealand's Act",
    ):
        plain = searcher.ranked(method, q, 20, {})
        parsed = Query.of(searcher, q).parsed
        assert parsed.route is not None and parsed.cited
        _count_parses(monkeypatch, fail=True)
        assert searcher.ranked(method, q, 20, {}, parsed) == plain
        monkeypatch.undo()
