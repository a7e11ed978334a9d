"""Do the quotes state the answer? The key-fact test of a question's quotes and what a
person is told over a question set (``answer_metrics``).

A question's **key facts** are its labelled evidence excerpts: verbatim sentences of the
pages that support the reference answer (benchmark-format.md §3). The quotes **contain the
key fact** when one quote holds at least ``KEY_FACT_SHARE`` of the content words (stemmed)
of one excerpt that has at least ``MIN_EXCERPT_WORDS`` of them. The quotes are the search's
own (``evaluation.decisions`` in ``sourcepage eval``, ``benchmarks/decisions.py``): this
module decides and quotes nothing itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sourcepage.records import Question
from sourcepage.retrieval.tokenize import content_terms, stem_terms

#: share of an excerpt's content words one quote must hold
KEY_FACT_SHARE = 0.6
#: excerpts with fewer content words (fragments such as "may be performed without") are not key facts
MIN_EXCERPT_WORDS = 3


def _stems(text: str) -> set[str]:
    return set(stem_terms(content_terms(text.replace("\ufffe", ""))).values())


def contains_key_fact(quotes: Sequence[str], q: Question) -> bool:
    """True when one of ``quotes`` holds ``KEY_FACT_SHARE`` of the content words of one of
    the question's evidence excerpts (see the module docstring)."""
    facts = [s for s in (_stems(e) for e in q.excerpts.values()) if len(s) >= MIN_EXCERPT_WORDS]
    quoted = [_stems(t) for t in quotes]
    return any(len(f & qs) >= KEY_FACT_SHARE * len(f) for f in facts for qs in quoted)


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
