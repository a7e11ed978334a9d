"""Quotes that answer: quotable units of a page, the kind of fact a question asks for,
the choice of quotes, the rule that an answer needs a quote stating the asked fact, and
tables of contents never ranking first for a content question."""

from __future__ import annotations

from pathlib import Path

from sourcepage.corpus.audit import multi_column_risk
from sourcepage.query import PageHit, Query
from sourcepage.records import MANIFEST_COLUMNS, Decision, Document, Hit, PageLayout
from sourcepage.retrieval.pages import contents_last, navigation_question
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.tokenize import content_terms
from sourcepage.support.answer import extract_answer
from sourcepage.support.decide import gate
from sourcepage.text.clean import clean_pages
from sourcepage.text.facts import WORDS, states
from sourcepage.text.sentences import quotable

PAGE = """17
How often do I need to review my lockout/tagout procedures?
Employees are required to review their procedures at least
once a year to ensure that they provide adequate worker
protection. As part of the review, employers must correct any
deviations identified in the energy-control proce\ufffe
dure or its application.
Figure 4. Lockout devices on a valve
Harnesses and retrieval lines
The certification must specify the following:
\u2022 Machine or equipment on which the procedure was used,
\u2022 Date of the inspection,
\u2022 Name of the person who performed the inspection.
What else do I need to know before
starting a job hazard analysis?
The inspector must be an authorized employee who does not use the procedure.
"""

CONTENTS = """Contents
What is lockout? ............................ 1
Who must comply? ............................ 2
How often must procedures be inspected? ..... 3
"""


def _texts(units):
    return [u.text for u in units]


def test_quotable_drops_headings_captions_questions_and_contents() -> None:
    units = quotable(PAGE)
    texts = _texts(units)
    assert texts[0] == (
        "Employees are required to review their procedures at least once a year to ensure that "
        "they provide adequate worker protection."
    )
    assert units[0].heading == "How often do I need to review my lockout/tagout procedures?"
    # U+FFFE hyphenation repaired, as in the cleaned text
    assert any("energy-control procedure or its application." in t for t in texts)
    assert not any(t.endswith("?") for t in texts)
    assert not any("Figure 4" in t or "Harnesses and retrieval lines" in t for t in texts)
    assert not any(t.startswith("17") for t in texts)
    # the list is quoted whole after its introduction, its items also on their own
    lst = next(u for u in units if u.kind == "list")
    assert lst.text.startswith("The certification must specify the following: \u2022 Machine")
    assert lst.text.endswith("\u2022 Name of the person who performed the inspection.")
    assert "Date of the inspection," in texts
    # a wrapped question heading is a heading, not a sentence
    last = units[-1]
    assert last.text.startswith("The inspector must be an authorized employee")
    assert last.heading == "What else do I need to know before starting a job hazard analysis?"
    assert quotable(CONTENTS) == []


def test_quotes_are_in_the_cleaned_text_of_the_page() -> None:
    flat = " ".join(clean_pages([PAGE])[0].split())
    for u in quotable(PAGE):
        assert u.text in flat, u.text


def test_question_words_are_not_content_words() -> None:
    assert content_terms("How often must energy control procedures be inspected?") == {
        "energy",
        "control",
        "procedures",
        "inspected",
    }
    assert content_terms("What is the capital of Australia?") == {"capital", "australia"}


def _result(page: str = "d#p3") -> PageHit:
    return page_hit(page)


def page_hit(page: str, passage: str = "", rank: int = 1) -> PageHit:
    """A ranked page of document ``page``'s doc id (other provenance fields empty)."""
    doc = Document(**{c: "" for c in MANIFEST_COLUMNS} | {"doc_id": page.split("#")[0]})
    return PageHit(Hit(rank, page, 1.0, page + "#c1"), doc, passage)


def test_the_quote_states_the_asked_fact() -> None:
    q = Query.parse("How often must energy control procedures be reviewed?")
    ans = extract_answer(q, [_result()], "answer", texts={"d#p3": (PAGE, False)})
    assert ans["fact_found"] and ans["status"] == "answer"
    assert "at least once a year" in ans["quotes"][0]["text"]
    assert ans["quotes"][0]["answers"] and ans["quotes"][0]["citation"] == "[d p.3]"
    ((a, b),) = ans["quotes"][0]["stating"]
    assert "at least once a year" in ans["quotes"][0]["text"][a:b]
    assert sum(q["answers"] for q in ans["quotes"]) == 1  # the quote holding the stating sentence
    # the same fact on a page at multi-column risk is quoted but answers nothing
    risky = extract_answer(q, [_result()], "answer", texts={"d#p3": (PAGE, True)})
    assert not risky["fact_found"] and risky["quotes"][0]["layout_risk"]
    assert risky["status"] == "draft for review"


def test_answer_needs_a_quote_that_states_the_fact() -> None:
    q = Query.parse("How many minutes must we wait before re-entry?")
    ans = extract_answer(q, [_result()], "answer", texts={"d#p3": (PAGE, False)})
    assert not ans["fact_found"] and ans["asked"] == WORDS["duration"]
    checked, d = gate(q, ans, Decision("answer", ("P = 0.99",)))
    assert d.decision == "review" and d.reasons[1:] == ("P = 0.99",)
    assert "likely enough to state the answer" in d.reasons[0] and WORDS["duration"] in d.reasons[0]
    assert checked["status"] == "none" and not checked["check"]["supported"]  # nothing quoted
    assert gate(q, ans, Decision("refuse", ("no",)))[1].decision == "refuse"
    assert extract_answer(q, [_result()], "refuse", texts={"d#p3": (PAGE, False)})["quotes"] == []


def test_a_person_asked_needs_a_quote_naming_one() -> None:
    """A non-value kind: the fact found by the quote choice is what lets an answer stand."""
    q = Query.parse("Who must perform the inspection of the procedure?")
    ans = extract_answer(q, [_result()], "answer", texts={"d#p3": (PAGE, False)})
    assert ans["fact_found"] and ans["asked"] == WORDS["actor"]
    assert all(states(x["text"], "actor", "list") for x in ans["quotes"])
    # the one sentence the answer rests on is marked in the one quote that answers
    (answering,) = [x for x in ans["quotes"] if x["answers"]]
    ((start, end),) = answering["stating"]
    assert answering["text"][start:end] in answering["sentences"]
    checked, d = gate(q, ans, Decision("answer", ("P = 0.99",)))
    assert d.decision == "answer" and checked["check"]["supported"] and checked["check"]["asked"] is None


def test_contents_pages_rank_last_unless_the_question_is_about_navigation(safety_store: Path) -> None:
    hits = [Hit(1, "d#p3", 9.0, "c1"), Hit(2, "d#p7", 5.0, "c2"), Hit(3, "d#p8", 4.0, "c3")]
    out = contents_last(hits, {"d#p3"})
    assert [h.page_id for h in out] == ["d#p7", "d#p8", "d#p3"]
    assert [h.rank for h in out] == [1, 2, 3] and out[2].score == 9.0
    assert navigation_question("Which section of the booklet covers group lockout?")
    assert not navigation_question("Who removes a group lock?")
    s = Searcher(safety_store, "raw")
    assert isinstance(s.contents_pages(), set)


def test_interleaved_columns_are_a_multi_column_risk() -> None:
    narrow = PageLayout(images=0, lines=60, side_by_side_lines=0, text_lines=60, wide_lines=0)
    assert not multi_column_risk(narrow)
    interleaved = PageLayout(images=0, lines=60, side_by_side_lines=0, text_lines=60, wide_lines=12)
    assert multi_column_risk(interleaved)
    few = PageLayout(images=0, lines=60, side_by_side_lines=0, text_lines=60, wide_lines=2)
    assert not multi_column_risk(few)  # a full-width title over two columns


def test_index_plan_covers_what_search_needs(safety_store: Path) -> None:
    from sourcepage import api
    from sourcepage.retrieval.methods import available_methods

    plan = api.index_plan(safety_store, ["raw", "cleaned"])
    assert {("raw", "bm25"), ("raw", "lsa"), ("cleaned", "bm25"), ("cleaned", "lsa")} <= set(plan)
    assert (("raw", "dense") in plan) == ("dense" in available_methods())
    assert ("cleaned", "dense") not in plan


def test_tidy_drops_furniture_but_keeps_the_sentence() -> None:
    """What ``tidy`` removes from the start of a quote: a running header, a paragraph
    number, an opening "(See …)" cross-reference — the sentence itself stays whole."""
    from sourcepage.text.sentences import tidy

    see = (
        "(See Sections 6(e) and (f) of 29 CFR Part 1910.147 for specific requirements.) In the rare "
        "situation in which the employee who placed the device is unable to remove it, another person "
        "may remove it under the direction of the employer."
    )
    assert tidy(see).startswith("In the rare situation")
    assert tidy("Code of Practice Page 47 of 72 You should ensure that loads are light.") == (
        "You should ensure that loads are light."
    )
    assert tidy("53 Employers should provide a first aider.") == "Employers should provide a first aider."
    kept = "(Unless the employer says otherwise.) The rule applies."
    assert tidy(kept) == kept


def test_a_quote_is_a_passage_of_whole_units_around_the_chosen_one() -> None:
    """Each chosen unit is quoted with the unit after and before it on the page; chosen units
    whose passages meet become one quote (nothing quoted twice); neighbours stop at
    ``MAX_PASSAGE`` characters."""
    from sourcepage.query import Query
    from sourcepage.support.answer import MAX_PASSAGE, passages
    from sourcepage.support.select import candidates

    text = " ".join(
        [
            "Locks are applied by each authorized employee.",  # 0
            "Each lock must be removed by the employee who applied it.",  # 1
            "If that employee is not at the facility, the employer may direct its removal.",  # 2
            "The employer must first verify that the employee is not at the facility.",  # 3
            "Records of every removal are kept for a year by the site office.",  # 4
            "Lunch breaks are taken in the canteen on the ground floor.",  # 5
            "Visitors sign the book at the gate and wear a badge.",  # 6
            "Tags are attached to the energy isolating device itself.",  # 7
            "A tag warns against energizing the machine while it is serviced.",  # 8
        ]
    )
    q = Query.parse("Who may remove a lock when the employee is not at the facility?")
    cands = candidates(q, [page_hit("d#p3")], {"d#p3": (text, False)})
    at = {c.position: c for c in cands}
    assert sorted(at) == list(range(9))
    one = passages([at[2]], cands)
    assert [u.position for u in one[0].parts] == [1, 2, 3]
    assert one[0].text.startswith("Each lock must be removed")
    assert one[0].text.endswith("not at the facility.")
    # 2 and 3 meet: one quote holding both, best first; 7 is elsewhere: a quote of its own
    two = passages([at[2], at[3], at[7]], cands)
    assert [[u.position for u in p.units] for p in two] == [[2, 3], [7]]
    assert [u.position for u in two[0].parts] == [1, 2, 3, 4]
    assert [u.position for u in two[1].parts] == [6, 7, 8]
    assert sum(p.text.count("removed by the employee") for p in two) == 1
    # a neighbour that would pass MAX_PASSAGE stays out
    long2 = "If that employee is away, the employer may direct its removal" + ", by day" * 52 + "."
    long3 = "The employer must keep a record of it" + ", with the date" * 30 + "."
    assert len(long2) + len(long3) > MAX_PASSAGE
    page = text.replace(at[2].text, long2).replace(at[3].text, long3)
    cands = candidates(q, [page_hit("d#p3")], {"d#p3": (page, False)})
    at = {c.position: c for c in cands}
    assert (at[2].text, at[3].text) == (long2, long3)
    assert [u.position for u in passages([at[2]], cands)[0].parts] == [1, 2]


def test_no_text_is_quoted_twice_across_quotes() -> None:
    """A list quoted whole and a sentence after its last item: the item, a neighbour of the
    sentence, is already in the list's quote and is not repeated."""
    from sourcepage.query import Query
    from sourcepage.support.answer import passages
    from sourcepage.support.select import candidates

    text = (
        "Before removing the devices, the employees must take the following steps:\n"
        "\u2022 Inspect the machines to assure that they are operationally intact and safe;\n"
        "\u2022 Check to assure that everyone is positioned safely and away from machines.\n"
        "After removing the devices, the employer must tell all employees that the devices are gone.\n"
        "Another person may remove the device under the direction of the employer."
    )
    q = Query.parse("Who may remove a lockout device?")
    cands = candidates(q, [page_hit("d#p3")], {"d#p3": (text, False)})
    at = {c.position: c for c in cands}
    assert at[0].unit.kind == "list" and at[3].unit.kind == "item"
    quotes = passages([at[0], at[4]], cands)  # 4's neighbours: item 3 (in the list) and 5
    assert len(quotes) == 2
    assert sum(q.text.count("Check to assure that everyone") for q in quotes) == 1
    assert quotes[1].text.startswith("After removing the devices")
    assert quotes[1].text.endswith("direction of the employer.")


def test_lead_role_is_the_first_role_named() -> None:
    from sourcepage.text.roles import lead_role, roles_in

    q = set(roles_in("What must the manufacturer do before placing machinery on the market?"))
    assert q == {"manufacturer"}
    importers = roles_in("Before placing machinery on the market, importers shall check the manufacturer")
    assert importers == ["importer", "manufacturer"]
    assert lead_role(importers, q) == -1.0
    assert lead_role(roles_in("The manufacturer shall draw up the technical documentation."), q) == 1.0
    assert lead_role(roles_in("Machinery shall bear the CE marking."), q) == 0.0
    assert lead_role(importers, set()) == 0.0


def test_roles_are_words_not_stems() -> None:
    """The stemmer makes "regulation" the regulator's, "employed" the employer's and
    "operation" the operator's: roles are matched on words."""
    from sourcepage.text.roles import roles_in

    assert roles_in("Under the EU machinery regulation, the operation of plant by employed persons") == []
    assert roles_in("Authorised employees and self-employed persons; the PCBU's workers") == [
        "authorized",
        "employee",
        "self-employed",
        "pcbu",
        "worker",
    ]


def test_a_quote_of_another_partys_duty_does_not_make_an_answer() -> None:
    """The importers' article does not state the manufacturer's duty, however likely its
    units look to the selector: ``stated`` leaves them out, and the check says why."""
    from sourcepage.query import Query
    from sourcepage.support.answer import stated
    from sourcepage.support.check import check_answer
    from sourcepage.support.select import candidates, featurise

    q = Query.parse("What must the manufacturer do before placing machinery on the market?")
    text = (
        "Before placing machinery on the market, importers shall ensure that the manufacturer has "
        "drawn up the technical documentation.\n"
        "Before placing machinery on the market, manufacturers shall ensure that it has been "
        "designed and constructed in accordance with the essential requirements."
    )
    cands = candidates(q, [page_hit("d#p1")], {"d#p1": (text, False)})
    featurise(q, cands)
    importers, makers = cands
    assert importers.features["lead_role"] == -1.0 and makers.features["lead_role"] == 1.0
    assert importers.other_party and not makers.other_party
    importers.p, makers.p = 0.9, 0.3
    assert stated([importers, makers]) == 0.3
    assert stated([importers]) == 0.0
    ans = {
        "quotes": [{"text": importers.text}],
        "fact_found": False,
        "asked": "a statement",
        "other_party": {"asked": ["manufacturer"], "quoted": ["importer"]},
    }
    summary = check_answer(q, ans)["summary"]
    assert "duty of importers, not of manufacturers as asked" in summary


def test_a_pcbu_is_the_employers_party() -> None:
    """Australian and New Zealand law put the employer's duties on the PCBU and call
    employees workers: a PCBU's duty is not another party's for a question about employers."""
    from sourcepage.text.roles import lead_role, role_features, roles_in

    q = set(roles_in("What must an employer do after a notifiable event?"))
    assert lead_role(roles_in("A PCBU must ensure that the regulator is notified."), q) == 1.0
    assert lead_role(roles_in("The importer must keep the declaration."), q) == -1.0
    f = role_features(roles_in("Workers must take care."), set(roles_in("What must employees do?")))
    assert f == {"role_match": 1.0, "role_other": 0.0, "lead_role": 1.0}


def test_a_comparison_quotes_each_side_from_its_own_pages() -> None:
    """ "Compare OSHA's position with the NSW code": the first three pages are all OSHA's,
    the NSW page ranks fifth; the draft still quotes the NSW code's own sentence, marked
    with its jurisdiction, beside OSHA's (a reviewer compares the sides' words)."""
    from sourcepage.query import Query
    from sourcepage.retrieval.routing import Router
    from sourcepage.support.select import quoted_pages

    def doc(doc_id: str, jurisdiction: str, authority: str) -> Document:
        fields = {c: "" for c in MANIFEST_COLUMNS}
        return Document(**fields | {"doc_id": doc_id, "jurisdiction": jurisdiction, "authority": authority})

    osha = doc("osha", "US", "US OSHA (Department of Labor)")
    nsw = doc("nsw", "AU-NSW", "SafeWork NSW")
    pages = [
        PageHit(Hit(r, f"{d.doc_id}#p{r}", 1.0, f"{d.doc_id}#p{r}#c1"), d)
        for r, d in enumerate([osha, osha, osha, osha, nsw, osha], 1)
    ]
    texts = {
        p.page: (
            "A danger tag may be used alone only when the energy isolating device cannot be "
            "locked out and the tagout program gives full employee protection.\n"
            if p.document is osha
            else "A tag should not be used on its own as an isolation device; only a lock is effective.\n",
            False,
        )
        for p in pages
    }
    text = "Can a danger tag alone be used to isolate a machine? Compare OSHA's position with the NSW code."
    query = Query.parse(text, route=Router([osha, nsw]).route(text))
    assert [p.page for p in quoted_pages(query, pages)] == ["osha#p1", "osha#p2", "osha#p3", "nsw#p5"]
    ans = extract_answer(query, pages, "review", texts=texts)
    assert {q["jurisdiction"] for q in ans["quotes"]} == {"US", "AU-NSW"}
    assert any("only a lock is effective" in q["text"] for q in ans["quotes"])
    # a question that compares nothing quotes the first three pages only
    plain = Query.parse("Can a danger tag alone be used to isolate a machine?")
    assert [p.page for p in quoted_pages(plain, pages)] == ["osha#p1", "osha#p2", "osha#p3"]
    assert {q["jurisdiction"] for q in extract_answer(plain, pages, "review", texts=texts)["quotes"]} == {
        "US"
    }


def _apart(*sentences: str) -> str:
    """The sentences as lines of one page, three unrelated lines between any two (so that
    each is quoted as a passage of its own)."""
    filler = [
        f"Room {i} of the {where} is cleaned on {day} before the site closes down."
        for i, (where, day) in enumerate(
            [(w, d) for w in ("office", "canteen", "store") for d in ("Monday", "Tuesday", "Friday")]
        )
    ]
    return "\n".join(line for i, s in enumerate(sentences) for line in (s, *filler[3 * i : 3 * i + 3]))


def _unit(cands: list, start: str):
    return next(c for c in cands if c.text.startswith(start))


def test_an_answer_shows_only_the_quotes_that_carry_it() -> None:
    """An answer keeps its most likely quote, then only quotes that reach the threshold by
    themselves and set out the asked party's duty. (A draft for review is not trimmed: the
    reviewer weighs every quote.)"""
    from sourcepage.query import Query
    from sourcepage.support.answer import carrying, passages
    from sourcepage.support.select import candidates, featurise

    q = Query.parse("What must the manufacturer do before placing machinery on the market?")
    text = _apart(
        "Before placing machinery on the market, manufacturers shall ensure that it has been "
        "designed and constructed in accordance with the essential requirements.",
        "Before making machinery available on the market, distributors shall verify that it "
        "bears the CE marking.",
        "Manufacturers shall keep the technical documentation for ten years after the machinery "
        "has been placed on the market.",
        "Manufacturers shall indicate their name and postal address on the machinery.",
    )
    cands = candidates(q, [page_hit("d#p1")], {"d#p1": (text, False)})
    featurise(q, cands)
    makers, distributors, keeps, name = (
        _unit(cands, s)
        for s in ("Before placing", "Before making", "Manufacturers shall keep", "Manufacturers shall ind")
    )
    assert distributors.features["lead_role"] == -1.0 and keeps.features["lead_role"] == 1.0
    makers.p, distributors.p, keeps.p, name.p = 0.9, 0.8, 0.5, 0.1
    quotes = passages([makers, distributors, keeps, name], cands)
    assert [p.units for p in quotes] == [[makers], [distributors], [keeps], [name]]
    # the distributors' duty and the quote under the threshold are not part of the answer
    assert [p.units[0] for p in carrying(quotes, 0.3)] == [makers, keeps]
    # the most likely quote stays even when it falls under the threshold itself
    makers.p = 0.2
    assert [p.units[0] for p in carrying(quotes, 0.3)] == [makers, keeps]


def test_an_answer_quotes_the_asked_value_first() -> None:
    """A "how often" question: the quote stating a frequency goes before a more likely one that
    states none, and stays in the answer under the threshold (``choose`` added it for it)."""
    from sourcepage.query import Query
    from sourcepage.support.answer import carrying, passages
    from sourcepage.support.select import candidates, featurise

    q = Query.parse("How often must energy control procedures be inspected?")
    text = _apart(
        "The inspector must determine whether employees are following the steps of the "
        "energy control procedure.",
        "Inspect these energy control procedures at least annually.",
    )
    cands = candidates(q, [page_hit("d#p1")], {"d#p1": (text, False)})
    featurise(q, cands)
    checklist, annual = _unit(cands, "The inspector"), _unit(cands, "Inspect these")
    assert annual.features["value_stated"] == 1.0 and checklist.features["value_stated"] == 0.0
    checklist.p, annual.p = 0.6, 0.05
    shown = carrying(passages([checklist, annual], cands), 0.3)
    assert [p.units[0] for p in shown] == [annual, checklist]


#: the end of New Zealand's Act p.49 and p.68 as PDFium reads them (heading before "(1)",
#: U+2010 hyphens at line ends, a four-line running footer)
NZ_PAGES = [
    """Compare: Model Work Health and Safety Act (Aust) s 49
Worker participation practices
61 Duty to have worker participation practices
(1) A PCBU must have practices that provide reasonable opportunities for workers
to participate effectively in improving work health and safety in the business on an
ongoing basis.
(2) If the workers are represented by a health and safety representative, the engage\u2010
ment must involve that representative.
Version as at
5 April 2025 Health and Safety at Work Act 2015 Part 3 s 61
49""",
    """While at work, a worker must\u2014
(a) take reasonable care for his or her own health and safety; and
(b) comply, as far as the worker is reasonably able, with any reasonable instruction
Part 2 s 45 Health and Safety at Work Act 2015
Version as at
5 April 2025
50""",
] + [
    f"Text of section {n} must be read with the regulations.\n"
    + (
        f"Part 2 s {n} Health and Safety at Work Act 2015\nVersion as at\n5 April 2025\n{n}"
        if n % 2 == 0
        else f"Version as at\n5 April 2025 Health and Safety at Work Act 2015 Part 2 s {n}\n{n}"
    )
    for n in range(51, 57)
] + [
    """(b) the exemption is in effect on the commencement of this clause; and
Version as at
5 April 2025 Health and Safety at Work Act 2015 Schedule 1
133"""
]


def test_a_section_heading_before_a_numbered_paragraph_is_no_part_of_the_quote() -> None:
    from sourcepage.text.sentences import quote_text, quote_units, running_lines

    running = running_lines(NZ_PAGES)
    units = [u for _, u in quote_units(quote_text(NZ_PAGES[0], running))]
    first = units[0]
    assert first.text.startswith("A PCBU must have practices")
    assert first.heading == "61 Duty to have worker participation practices"
    assert "the engagement must involve that representative." in _texts(units)[-1]
    assert not any("Version as at" in u.text or "Part 3 s 61" in u.text for u in units)
    # a lead-in ending in a dash stays with its items: it is no heading
    (lead,) = [u for _, u in quote_units(quote_text(NZ_PAGES[1], running))]
    assert lead.text.startswith("While at work, a worker must\u2014 (a) take reasonable care")
    assert not lead.text.endswith("2015") and "Version as at" not in lead.text
    # a variant of a running line (a schedule's footer, on few pages) goes too
    (last,) = [u for _, u in quote_units(quote_text(NZ_PAGES[-1], running))]
    assert last.text.endswith("commencement of this clause; and")
    # without the document's running lines the footer runs into the last sentence
    assert "Version as at" in quote_units(NZ_PAGES[1])[-1][1].text


def test_the_end_of_the_section_before_is_no_context_of_a_quote() -> None:
    """A chosen unit that opens a section is quoted with the unit after it, not with the
    last sentence of the section before (s 57's offence before s 58's duty)."""
    from sourcepage.query import Query
    from sourcepage.support.answer import passages
    from sourcepage.support.select import candidates

    page = "\n".join(
        [
            "(3) A person who contravenes subsection (1) commits an offence and is liable to a fine.",
            "58 Duty to engage with workers",
            "(1) A PCBU must, so far as is reasonably practicable, engage with workers who carry out work.",
            "(2) The engagement must be in accordance with the procedures agreed with the workers.",
        ]
    )
    q = Query.parse("What must a PCBU do to engage with workers?")
    cands = candidates(q, [page_hit("d#p48")], {"d#p48": (page, False)})
    duty = next(c for c in cands if c.text.startswith("A PCBU must"))
    assert duty.unit.heading == "58 Duty to engage with workers"
    (quote,) = passages([duty], cands)
    assert quote.text.startswith("A PCBU must") and "contravenes" not in quote.text
    assert quote.text.endswith("agreed with the workers.")
    # nor is the unit after across a heading (issue 49): a quote is one section's sentences
    offence = next(c for c in cands if "contravenes" in c.text)
    assert passages([offence], cands)[0].text == offence.text
