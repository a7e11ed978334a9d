"""Do the quotes state the answer? The quotes of each question, checked against the
benchmark's evidence (inside ``sourcepage eval``, next to the held-out decisions).

A question's **key facts** are its labelled evidence excerpts: verbatim sentences of the
pages that support the reference answer (benchmark-format.md §3). The quotes **contain the
key fact** when one quote holds at least ``KEY_FACT_SHARE`` of the content words (stemmed)
of one excerpt that has at least ``MIN_EXCERPT_WORDS`` of them. The quotes are made as
``sourcepage search`` makes them (``support.answer.extract_answer`` on the cleaned form of
the first three pages of the sparse ranking), and an ``answer`` decision whose quotes
state no fact of the asked kind becomes ``review`` (``support.decide.gate``, as in search).

Reported: how many held-out ``answer`` decisions the quote rule turned into ``review``,
and the share of the remaining ``answer`` decisions (answerable questions with excerpts)
whose quotes contain the key fact — also over every answerable question, whatever its
decision, as the quotes' ceiling.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sourcepage.query import PageHit, Query
from sourcepage.records import Decision, Hit, Question, parse_page_id
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.tokenize import content_terms, stem_terms
from sourcepage.support.answer import extract_answer
from sourcepage.support.decide import gate

#: share of an excerpt's content words one quote must hold
KEY_FACT_SHARE = 0.6
#: excerpts with fewer content words (fragments such as "may be performed without") are not key facts
MIN_EXCERPT_WORDS = 3
#: pages quoted, as ``sourcepage search`` does
QUOTE_PAGES = 3


def _stems(text: str) -> set[str]:
    return set(stem_terms(content_terms(text.replace("\ufffe", ""))).values())


def contains_key_fact(quotes: Sequence[str], q: Question) -> bool:
    """True when one of ``quotes`` holds ``KEY_FACT_SHARE`` of the content words of one of
    the question's evidence excerpts (see the module docstring)."""
    facts = [s for s in (_stems(e) for e in q.excerpts.values()) if len(s) >= MIN_EXCERPT_WORDS]
    quoted = [_stems(t) for t in quotes]
    return any(len(f & qs) >= KEY_FACT_SHARE * len(f) for f in facts for qs in quoted)


def quote_answers(searcher: Searcher, q: Question, hits: Sequence[Hit], decision: str) -> dict[str, Any]:
    """The answer ``sourcepage search`` would quote for ``q`` from the ranked ``hits``
    (the decision given), with the rule's decision and the key-fact check."""
    results = [PageHit(h, searcher.documents[parse_page_id(h.page_id)[0]]) for h in hits[:QUOTE_PAGES]]
    query = Query.of(searcher, q.question)
    ans = extract_answer(query, results, decision, texts=searcher.quote_texts([r.page for r in results]))
    final = gate(query, ans, Decision(decision, ()))[1].decision
    texts = [x["text"] for x in ans["quotes"]]
    return {
        "decision": final,
        "asked": ans["asked"],
        "fact_found": ans["fact_found"],
        "key_fact": contains_key_fact(texts, q) if q.excerpts else None,
        "quotes": texts,
    }


def evaluate_quotes(
    searcher: Searcher,
    qs: Sequence[Question],
    hits: Mapping[str, Sequence[Hit]],
    decisions: Sequence[str],
) -> dict[str, Any]:
    """Quote every question (``hits``: question id → the sparse ranking; ``decisions``:
    the held-out decisions in question order) and summarise (see the module docstring)."""
    rows = [
        {"question_id": q.id, "answerability": q.answerability, "held_out": d}
        | quote_answers(searcher, q, hits.get(q.id, []), "review" if d == "refuse" else d)
        for q, d in zip(qs, decisions, strict=True)
    ]
    for r, d in zip(rows, decisions, strict=True):
        if d == "refuse":  # quoted only for the ceiling below: a refusal shows no quote
            r["decision"] = "refuse"
    answered = [r for r in rows if r["decision"] == "answer"]
    checked = [r for r in answered if r["key_fact"] is not None]
    answerable = [r for r in rows if r["key_fact"] is not None]

    def share(rs: Sequence[Mapping[str, Any]]) -> float:
        return sum(bool(r["key_fact"]) for r in rs) / len(rs) if rs else math.nan

    return {
        "key_fact_share": KEY_FACT_SHARE,
        "answer_before_rule": sum(d == "answer" for d in decisions),
        "answer_after_rule": len(answered),
        "turned_to_review": [
            r["question_id"] for r in rows if r["held_out"] == "answer" and r["decision"] != "answer"
        ],
        "answers_checked": len(checked),
        "answers_with_key_fact": round(share(checked), 6),
        "answered_negatives": [r["question_id"] for r in answered if r["answerability"] != "answerable"],
        "answerable_quoted": len(answerable),
        "answerable_with_key_fact": round(share(answerable), 6),
        "per_question": rows,
    }


def quote_matches(quotes: Sequence[str], q: Question) -> list[bool]:
    """Per quote: does it hold ``KEY_FACT_SHARE`` of one evidence excerpt's content words."""
    return [contains_key_fact([t], q) for t in quotes]


def answer_metrics(rows: Sequence[Mapping[str, Any]], resamples: int = 2000) -> dict[str, Any]:
    """What a person is told, over a question set (issue #22). ``rows``: per question its
    ``class`` (answerability), ``decision``, ``stating`` (a quote holds an evidence excerpt;
    None without excerpts), ``matches`` (per quote, the same test), ``points`` (answer
    points covered, 0/1 each) and ``confidence`` (the order in which the search would
    answer: P(supported) × the best quote's P(states)).

    Answer rate = answers ÷ questions; answer precision = answers with a stating quote ÷
    answers; answer recall = answers with a stating quote ÷ answerable questions (with
    excerpts); each with a 95% percentile bootstrap CI over questions. Also: unsupported
    and out-of-domain questions answered, answerable questions refused, out-of-domain
    refused, the share of quotes holding an excerpt, answer-point coverage, and the
    risk–coverage curve (answering the most confident first; risk = answers without a
    stating quote, a negative question's answer always counting as one)."""
    from sourcepage.evaluation.stats import bootstrap_ci

    def ci(values: Sequence[float]) -> dict[str, float]:
        m, lo, hi = bootstrap_ci(values, resamples)
        return {"value": round(m, 4), "low": round(lo, 4), "high": round(hi, 4), "n": len(values)}

    answered = [r for r in rows if r["decision"] == "answer"]
    labelled = [r for r in rows if r["class"] == "answerable" and r["stating"] is not None]
    neg = [r for r in rows if r["class"] != "answerable"]
    ood = [r for r in rows if r["class"] == "out_of_domain"]
    answerable = [r for r in rows if r["class"] == "answerable"]
    good = [r["decision"] == "answer" and bool(r["stating"]) for r in labelled]
    matches = [m for r in answerable for m in r.get("matches", [])]
    points = [sum(r["points"]) / len(r["points"]) for r in answerable if r.get("points")]
    order = sorted(rows, key=lambda r: -float(r.get("confidence") or 0.0))
    curve, bad = [], 0
    for i, r in enumerate(order, 1):
        bad += not (r["class"] == "answerable" and r["stating"])
        curve.append([round(i / len(order), 4), round(bad / i, 4)])
    return {
        "questions": len(rows),
        "answer_rate": ci([float(r["decision"] == "answer") for r in rows]),
        "answer_precision": ci(
            [float(bool(r["stating"])) for r in answered if r["class"] == "answerable"]
            + [0.0 for r in answered if r["class"] != "answerable"]
        ),
        "answer_recall": ci([float(g) for g in good]),
        "unsupported_answered": ci([float(r["decision"] == "answer") for r in neg]),
        "answerable_refused": ci([float(r["decision"] == "refuse") for r in answerable]),
        "ood_refused": ci([float(r["decision"] == "refuse") for r in ood]),
        "quote_match": ci([float(m) for m in matches]),
        "point_coverage": ci(points),
        "risk_coverage": curve,
    }
