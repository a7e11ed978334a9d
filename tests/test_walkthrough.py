"""The seven walkthrough questions of issue #22, over the real corpus-intl page texts.

In the default run: quotes read as text (no running header, paragraph number or
private-use glyph, no sentence cut inside a parenthesis), the pages ranked without a dense
index (``route:bm25``) and the quote selector given its real e5 cosines.
Marked ``heavy`` (``make test-all``: it builds the dense index of 1,161 pages): the whole
search as a user gets it — an ``answer`` quotes what states it, or the question goes to
review or is refused. The answer gate reads P(supported) as well as the quotes' P(states),
so this needs the default method's indexes. Skipped, with the reason, where
../shared/corpus-intl is absent (it is never committed here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sourcepage import api
from sourcepage.ingest import ingest
from sourcepage.query import Query
from sourcepage.support.answer import extract_answer

ROOT = Path(__file__).resolve().parents[1]
# ../shared beside the checkout (a worktree one level deeper finds it one level up)
CORPUS = next(
    (
        c
        for c in (ROOT.parent / "shared" / "corpus-intl", ROOT.parents[1] / "shared" / "corpus-intl")
        if c.is_dir()
    ),
    ROOT.parent / "shared" / "corpus-intl",
)

pytestmark = [
    pytest.mark.skipif(
        not (CORPUS / "manifest.csv").is_file(),
        reason=f"the corpus-intl mirror {CORPUS} is not present on this machine",
    ),
    pytest.mark.slow,
]

#: question → what a quote stating its answer holds (None: nothing in the corpus says it)
WALKTHROUGH: dict[str, str | None] = {
    "Who may remove a lockout device when the employee who applied it is not at the facility?": (
        r"direction of the employer"
    ),
    "How often must energy control procedures be inspected?": r"annual|once a year|every year",
    "How many first aiders are needed in a low-hazard workplace in the UK?": r"\b(?:25|50)\b",
    "Under the EU machinery regulation, what must the manufacturer do before placing machinery on "
    "the market?": r"\bmanufacturers?\b",
    "What is the maximum weight a worker should lift in Australia?": r"\bkg\b|weight limit|no safe",
    "How do I calibrate a gas detector for hydrogen sulfide?": None,
    "What must a confined space entry permit include under the NSW code?": r"permit",
}
_HEADER = re.compile(r"\bPage \d+ of \d+\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> api.SearchService:
    path = tmp_path_factory.mktemp("intl") / "store"
    report = ingest(CORPUS, path)
    assert not report.failed, report.failed
    return api.SearchService(path)


def _quote(svc: api.SearchService, question: str) -> dict:
    s = svc.searcher
    query = Query.of(s, question)
    ranked = s.ranked(api.parse_method("route:bm25"), question, 20, {})
    pages = svc.pages(query, ranked, 10)
    texts = s.quote_texts([p.page for p in pages[:3]])
    return extract_answer(query, pages, "answer", texts=texts, cosines=svc.cosines(query))


@pytest.mark.parametrize("question", list(WALKTHROUGH))
def test_quotes_read_as_text(service: api.SearchService, question: str) -> None:
    """Whatever is quoted reads as text: no running header, private-use glyph, paragraph
    number or sentence cut inside a parenthesis; each chosen sentence is in its passage."""
    ans = _quote(service, question)
    assert ans["quotes"], question
    for q in ans["quotes"]:
        assert not _HEADER.search(q["text"]), q["text"]
        assert not re.search("[\ue000-\uf8ff]", q["text"]), q["text"]
        assert not re.match(r"\(?\d{1,3}[.)]?\s+[A-Z]", q["text"]), q["text"]
        assert q["text"].count("(") <= q["text"].count(")"), q["text"]
        assert [q["text"][a:b] for a, b in q["spans"]] == sorted(q["sentences"], key=q["text"].find)


@pytest.fixture(scope="module")
def full_service(tmp_path_factory: pytest.TempPathFactory) -> api.SearchService:
    """A store of corpus-intl with the default method's indexes (dense: minutes of CPU)."""
    from sourcepage.retrieval.index import build_indexes

    path = tmp_path_factory.mktemp("intl-full") / "store"
    assert not ingest(CORPUS, path).failed
    build_indexes(path, "raw", ["bm25", "dense"])  # what sect:route:rrf:bm25+dense reads
    return api.SearchService(path)


@pytest.mark.heavy
@pytest.mark.parametrize("question", list(WALKTHROUGH))
def test_an_answer_quotes_what_states_it_or_goes_to_review(
    full_service: api.SearchService, question: str
) -> None:
    """The whole search, as a user gets it (default method and policy): an ``answer`` has a
    quote stating what was asked; otherwise the decision is review or refuse. (The EU
    manufacturer question still ranks the manufacturers' article below the importers' and
    distributors', issue #23; their units open with another party, so no answer is given
    from them: ``support.answer.stated``.)"""
    res = full_service.respond(question, k=10)
    if res["decision"] != "answer":
        return  # an honest review or refusal
    expected = WALKTHROUGH[question]
    assert expected is not None, f"nothing in the corpus says it, yet answered: {res['answer']['quotes']}"
    assert any(re.search(expected, q["text"], re.IGNORECASE) for q in res["answer"]["quotes"]), res["answer"]
