"""The seven walkthrough questions of issue #22, over the real corpus-intl page texts: each
gets a quote that states its answer, or no quote likely enough to state it (so the answer
gate sends it to review). Quotes read as text: no running header, no paragraph number, no
private-use glyph, no sentence cut inside a parenthesis.

The pages are ranked as search ranks them without a dense index (``route:bm25``); the
quote selector gets its real e5 and MiniLM cosines. Skipped, with the reason, where
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
    texts = s.store.raw_pages([p.page for p in pages[:3]])
    return extract_answer(query, pages, "answer", texts=texts, cosines=svc.cosines(query))


@pytest.mark.parametrize("question", list(WALKTHROUGH))
def test_a_stating_quote_or_review(service: api.SearchService, question: str) -> None:
    ans = _quote(service, question)
    expected = WALKTHROUGH[question]
    for q in ans["quotes"]:
        assert not _HEADER.search(q["text"]), q["text"]
        assert not re.search("[\ue000-\uf8ff]", q["text"]), q["text"]
        assert not re.match(r"\(?\d{1,3}[.)]?\s+[A-Z]", q["text"]), q["text"]
        assert q["text"].count("(") <= q["text"].count(")"), q["text"]
    if not ans["fact_found"]:
        return  # the gate sends it to review: honest
    assert expected is not None, f"nothing in the corpus says it, yet quoted as the answer: {ans['quotes']}"
    assert any(re.search(expected, q["text"], re.IGNORECASE) for q in ans["quotes"] if q["answers"]), ans
