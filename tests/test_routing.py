"""Jurisdiction routing: names from the manifest (and ISO 3166), never a hand-written list."""

from __future__ import annotations

from pathlib import Path

import pytest

from sourcepage.records import Document, doc_of
from sourcepage.retrieval.routing import Router
from sourcepage.retrieval.search import Searcher


def _doc(doc_id: str, jurisdiction: str, authority: str, title: str = "A code") -> Document:
    return Document.from_dict(
        {"doc_id": doc_id, "jurisdiction": jurisdiction, "authority": authority, "title": title}
    )


DOCS = [
    _doc("osha", "US", "US OSHA (Department of Labor)"),
    _doc("swa", "AU", "Safe Work Australia"),
    _doc("nsw", "AU-NSW", "SafeWork NSW (based on Safe Work Australia model code)"),
    _doc("hse", "UK", "UK Health and Safety Executive (HSE)"),
    _doc("nz", "NZ", "New Zealand Parliamentary Counsel Office"),
]


@pytest.mark.parametrize(
    ("question", "expect", "query"),
    [
        ("Under the NSW code, who may remove a lock?", ("AU-NSW",), "Under the code, who may remove a lock?"),
        ("What does OSHA require for lockout?", ("US",), "What does require for lockout?"),
        ("What does Safe Work Australia's code say about falls?", ("AU",), None),
        ("How are falls managed in Australia?", ("AU", "AU-NSW"), None),  # a country admits its states
        ("Which Australian code covers ladders?", ("AU", "AU-NSW"), None),
        ("What does HSE say about first aiders?", ("UK",), None),
        ("Who is an officer in New Zealand?", ("NZ",), None),
        ("Is a permit needed in New South Wales?", ("AU-NSW",), None),
        ("How often must locks be inspected?", (), "How often must locks be inspected?"),
    ],
)
def test_route_names_from_the_manifest(question: str, expect: tuple[str, ...], query: str | None) -> None:
    r = Router(DOCS).route(question)
    assert r.jurisdictions == expect
    assert r.uncovered == ()
    if query is not None:
        assert r.query == query


CODED = [
    _doc(
        "uk-hse-hsg150-construction",
        "UK",
        "UK Health and Safety Executive (HSE)",
        "Health and safety in construction, HSG150 (3rd edition 2006; published by HSE 08/11)",
    ),
    _doc(
        "uk-hse-l153-cdm2015",
        "UK",
        "UK Health and Safety Executive (HSE)",
        "Managing health and safety in construction. Construction (Design and Management) Regulations 2015",
    ),
    _doc(
        "osha3146-fall-protection-construction",
        "US",
        "US OSHA (Department of Labor)",
        "Fall Protection in Construction, OSHA 3146-05R 2015",
    ),
    _doc(
        "osha-factsheet",
        "US",
        "US OSHA (Department of Labor)",
        "OSHA Fact Sheet: Lockout/Tagout (29 CFR 1910.147)",
    ),
    _doc(
        "eu-reg-2023-1230-machinery",
        "EU",
        "European Union",
        "Regulation (EU) 2023/1230 of 14 June 2023 on machinery (OJ L 165, 29.6.2023, p. 1-102)",
    ),
    _doc("swa-guide", "AU", "Safe Work Australia", "Guide to scaffolds (ISBN 978-1-74361-000-0)"),
]


def test_publication_codes_come_from_titles_and_ids_not_citations_dates_or_numbers() -> None:
    from sourcepage.retrieval.routing import publication_codes

    got = {d.doc_id: publication_codes(d) for d in CODED}
    assert got == {
        "uk-hse-hsg150-construction": [("HSG", "150")],
        "uk-hse-l153-cdm2015": [("CDM", "2015"), ("L", "153")],
        "osha3146-fall-protection-construction": [("OSHA", "3146")],
        "osha-factsheet": [],  # "29 CFR 1910.147" is a citation, "HSE 08/11" a date
        "eu-reg-2023-1230-machinery": [],  # "OJ L 165" is a journal page
        "swa-guide": [],  # "ISBN 978-…" a number
    }


@pytest.mark.parametrize(
    ("question", "expect", "query"),
    [
        # a named document establishes the jurisdiction (study §3.1); the code stays in the
        # query, since it names the document's topic too ("CDM 2015" is what L153 is about)
        ("What does HSG150 say about ladders?", ("UK",), "What does HSG150 say about ladders?"),
        ("According to hsg 150, how are ladders tied?", ("UK",), None),
        ("Under CDM 2015, who draws up the plan?", ("UK",), "Under CDM 2015, who draws up the plan?"),
        ("What does 29 CFR 1910.147 require?", (), "What does 29 CFR 1910.147 require?"),
        ("Does BRE 470 give a platform design?", (), None),
    ],
)
def test_a_question_naming_a_publication_code_is_routed_to_its_document(
    question: str, expect: tuple[str, ...], query: str | None
) -> None:
    r = Router(CODED).route(question)
    assert r.jurisdictions == expect and not r.compares
    if query is not None:
        assert r.query == query


def test_naming_a_code_and_another_jurisdiction_compares_them() -> None:
    r = Router(CODED).route("Compare the clearance HSG150 requires with OSHA's rule for power lines.")
    assert r.jurisdictions == ("UK", "US") and r.compares


def test_uncovered_country_is_reported_not_routed() -> None:
    r = Router(DOCS).route("What does the law in Canada say about confined spaces?")
    assert r.jurisdictions == () and r.uncovered == ("Canada",)


def test_generic_authority_words_are_not_names() -> None:
    r = Router(DOCS).route("What does the Department of Health say about safety at work?")
    assert r.jurisdictions == ()


def test_route_stage_filters_to_the_named_jurisdiction(safety_store: Path) -> None:
    s = Searcher(safety_store)
    docs = {d.doc_id: d for d in s.documents.values()}
    q = "What personal protective equipment does HSE expect employers to provide?"
    plain = s.rank(q, "bm25", k=10).hits
    routed = s.rank(q, "route:bm25", k=10).hits
    assert routed and {docs[doc_of(h.page_id)].jurisdiction for h in routed} == {"UK"}
    assert {docs[doc_of(h.page_id)].jurisdiction for h in plain} != {"UK"}
    # a caller's own jurisdiction filter wins over routing
    us = s.rank(q, "route:bm25", k=10, filters={"jurisdiction": ["US"]}).hits
    assert us and {docs[doc_of(h.page_id)].jurisdiction for h in us} == {"US"}
    # a question that names nothing ranks as its base does
    q2 = "Who may remove a lockout device?"
    assert s.rank(q2, "route:bm25", k=10).hits == s.rank(q2, "bm25", k=10).hits


def test_search_reports_routing_and_refuses_an_uncovered_jurisdiction(safety_store: Path) -> None:
    from sourcepage import api

    out = api.search("What PPE does HSE expect employers to provide?", safety_store, method="route:bm25", k=5)
    assert out["routing"]["jurisdictions"] == ["UK"] and out["routing"]["applied"] is True
    assert {r["jurisdiction"] for r in out["results"]} == {"UK"}
    plain = api.search("What PPE does HSE expect employers to provide?", safety_store, method="bm25", k=5)
    assert plain["routing"]["applied"] is False and plain["routing"]["matched"] == ["HSE"]
    out = api.search("What must an employer in Canada do before confined space entry?", safety_store, k=5)
    assert out["decision"] == "refuse" and "Canada" in out["reasons"][0]
    assert out["routing"]["uncovered"] == ["Canada"]


def test_the_fields_abbreviations_in_an_authoritys_remarks_are_not_names() -> None:
    """ "WHS" in "(… s274 WHS Act 2011 …)" names no jurisdiction: every Australian state has a
    WHS Act. It once routed "What must a WHS management plan contain?" to the national
    documents only."""
    docs = [
        *DOCS,
        _doc("cth", "AU", "Commonwealth of Australia (Minister for Employment, s274 WHS Act 2011)"),
    ]
    r = Router(docs).route("What must a WHS management plan contain?")
    assert r.jurisdictions == () and r.query == "What must a WHS management plan contain?"


@pytest.mark.parametrize(
    ("question", "compares"),
    [
        ("Compare OSHA's rule with HSE's guidance on guards.", True),
        ("How does the NSW code differ from Safe Work Australia's code on falls?", True),
        ("How are falls managed in Australia?", False),  # one name, a country and its states
        # one place named twice: Safe Work Australia's AU lies within Australia's AU and AU-NSW
        ("What does Safe Work Australia's falls code expect of a worker in Australia?", False),
        ("What does OSHA require for lockout?", False),
        ("How often must locks be inspected?", False),
    ],
)
def test_a_question_naming_several_jurisdictions_compares_them(question: str, compares: bool) -> None:
    assert Router(DOCS).route(question).compares is compares


def test_the_groups_are_the_sides_named_in_question_order() -> None:
    r = Router(DOCS).route("Can a tag alone isolate a machine? Compare OSHA's position with the NSW code.")
    assert r.groups == (("US",), ("AU-NSW",)) and r.compares
    assert r.as_dict()["groups"] == [["US"], ["AU-NSW"]]
    assert Router(DOCS).route("How are falls managed in Australia?").groups == (("AU", "AU-NSW"),)


def test_merge_sides_ranks_each_sides_first_page_as_a_first_page() -> None:
    """A comparison's sides are ranked apart and merged by score: the side that matched
    fewer words still has its first page near the top; a page of two sides appears once,
    at its better place; ties go to the side named first."""
    from sourcepage.records import Hit
    from sourcepage.retrieval.routing import merge_sides

    nsw = [Hit(1, "nsw#p44", 0.0328, "c1"), Hit(2, "nsw#p37", 0.0320, "c2"), Hit(3, "both#p1", 0.0300, "c3")]
    us = [Hit(1, "osha#p17", 0.0328, "c4"), Hit(2, "both#p1", 0.0310, "c5"), Hit(3, "osha#p14", 0.0290, "c6")]
    merged = merge_sides([nsw, us], None)
    assert [h.page_id for h in merged] == ["nsw#p44", "osha#p17", "nsw#p37", "both#p1", "osha#p14"]
    assert [h.rank for h in merged] == [1, 2, 3, 4, 5] and merged[3].chunk_id == "c5"
    assert [h.page_id for h in merge_sides([nsw, us], 2)] == ["nsw#p44", "osha#p17"]
