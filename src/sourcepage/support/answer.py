"""Extractive answers: the sentences of the accepted pages that state what was asked,
quoted with citations.

Separate from retrieval (study §5.5, §5.7): it runs after the decision, only on the top
pages, never paraphrases, and writes its own log. Nothing is produced when the decision
is ``refuse``; for ``review`` the quotes are a draft for the reviewer.

What is quoted: the page's quotable units (``text.sentences.quotable``: body sentences,
list items and introduced lists in their cleaned form — never contents lines, headings,
captions or questions), whatever text version was searched. Which: the question says what
kind of fact it asks for (``support.facts.asked_facts``: a frequency for "how often", a
duration for "how long", a number for "how many", a list for "what are the steps", a
condition for "when must", a person for "who may" …); a unit *answers* when it states a
fact of that kind (``support.facts.states``) and is about the question — the idf-weighted
share of the question's content words (stemmed) it holds, plus half the share its heading
adds, is at least ``MIN_RELEVANCE``. A question of no recognised kind is answered by a
unit whose relevance is at least ``STATEMENT_RELEVANCE``. The answers are quoted, best
first; without one the most relevant units are quoted as a draft and ``fact_found`` is
false, which turns an ``answer`` decision into ``review`` (``support.decide.gate``). No
model: a quote must be verifiable on the cited page.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sourcepage.retrieval.tokenize import content_terms, stem_terms
from sourcepage.support.facts import asked_facts, states
from sourcepage.text.sentences import Quotable, quotable, split_sentences

__all__ = ["extract_answer", "log_answer", "split_sentences"]

LOG_NAME = "answers.jsonl"
#: size above which the answer log is moved to ``answers.jsonl.1`` before the next line
MAX_LOG_BYTES = 50 * 1024 * 1024
_log_lock = threading.Lock()
#: the least relevance (see the module docstring) of a unit that answers a question
MIN_RELEVANCE = 0.25
#: the relevance a unit needs to answer a question whose kind of fact is not recognised
STATEMENT_RELEVANCE = 0.4


def _stems(text: str) -> set[str]:
    return set(stem_terms(content_terms(text)).values())


def extract_answer(
    question: str,
    results: Sequence[Mapping[str, Any]],
    decision: str,
    weights: Mapping[str, float] | None = None,
    max_sentences: int = 3,
    pages: int = 3,
    texts: Mapping[str, tuple[str, bool]] | None = None,
) -> dict[str, Any]:
    """Quote up to ``max_sentences`` units of the first ``pages`` results.

    ``results`` are search results (spec §5: page, doc_id, page_number, chunk_id,
    passage); ``texts`` maps a page id to its raw page text and whether the audit found its
    columns interleaved in that text (``Store.raw_pages``; the units are made from the raw
    text, else from the result's passage); ``weights`` maps a content word to its idf
    (uniform when None). A unit of an interleaved page may run two columns' text together:
    it is quoted (``layout_risk``) but does not count as an answer. Returns ``{"status", "asked",
    "fact_found", "quotes": [{"text", "page", "chunk_id", "citation", "score", "answers",
    "layout_risk"}], "text"}``.
    """
    facts = asked_facts(question)
    kinds = [a.kind for a in facts]
    asked = ", ".join(a.describe() for a in facts) or "a statement"
    if decision == "refuse":
        return {
            "status": "none",
            "reason": "the decision is refuse: no answer is produced",
            "asked": asked,
            "fact_found": False,
            "quotes": [],
            "text": "",
        }
    terms = content_terms(question)
    stem_of = stem_terms(terms)
    w: dict[str, float] = {}
    for t in terms:  # a stem weighs as its heaviest word
        w[stem_of[t]] = max(w.get(stem_of[t], 0.0), (weights or {}).get(t, 1.0))
    pages_units = []
    heads: dict[str, set[str]] = {}
    for r in results[:pages]:
        raw, risk = (texts or {}).get(r["page"]) or (r.get("passage", ""), False)
        units = [(u, _stems(u.text), heads.setdefault(u.heading, _stems(u.heading))) for u in quotable(raw)]
        pages_units.append((r, risk, units))
    total = sum(w.values()) or 1.0
    cands: list[tuple[bool, bool, float, int, int, Quotable, Mapping[str, Any], bool]] = []
    seen: set[str] = set()
    for order, (r, risk, units) in enumerate(pages_units):
        for j, (u, own, head) in enumerate(units):
            if u.text in seen:  # the same sentence on several pages (a repeated form)
                continue
            seen.add(u.text)
            rel = (
                sum(v for s, v in w.items() if s in own)
                + 0.5 * sum(v for s, v in w.items() if s in head and s not in own)
            ) / total
            if rel <= 0:
                continue
            if kinds:
                fact = rel >= MIN_RELEVANCE and any(states(u.text, k, u.kind) for k in kinds)
            else:
                fact = rel >= STATEMENT_RELEVANCE
            cands.append((fact and not risk, fact, rel, order, j, u, r, risk))
    # answers first, then facts from pages at layout risk, then the most relevant others
    cands.sort(key=lambda c: (not c[0], not c[1], -c[2], c[3], c[4]))
    fact_found = bool(cands) and cands[0][0]
    chosen: list[tuple[bool, bool, float, int, int, Quotable, Mapping[str, Any], bool]] = []
    for c in cands:
        if len(chosen) == max_sentences or (fact_found and not c[0]):
            break
        if any(c[5].text in o[5].text or o[5].text in c[5].text for o in chosen if o[6] is c[6]):
            continue  # an item of a list already quoted, or the list of a quoted item
        chosen.append(c)
    quotes = [
        {
            "text": u.text,
            "page": r["page"],
            "chunk_id": r.get("chunk_id", ""),
            "citation": r.get("citation") or f"[{r['doc_id']} p.{r['page_number']}]",
            "score": round(rel, 4),
            "answers": ok,
            "layout_risk": risk,
        }
        for ok, _, rel, _, _, u, r, risk in chosen
    ]
    status = "answer" if decision == "answer" and fact_found else "draft for review"
    return {
        "status": status if quotes else "none",
        "asked": asked,
        "fact_found": fact_found,
        "quotes": quotes,
        "text": " ".join(f"\u201c{q['text']}\u201d {q['citation']}" for q in quotes),
    }


def log_answer(
    store: str | Path, question: str, method: str, decision: str, answer: Mapping[str, Any]
) -> None:
    """Append one line to ``<store>/answers.jsonl`` (the answer log, apart from retrieval logs).

    A log over ``MAX_LOG_BYTES`` (50 MiB) is first renamed to ``answers.jsonl.1``
    (atomically, replacing an older ``.1``), so the log starts again empty."""
    line = json.dumps(
        {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "question": question,
            "method": method,
            "decision": decision,
            **answer,
        },
        ensure_ascii=False,
    )
    path = Path(store) / LOG_NAME
    with _log_lock:
        rotate_log(path)
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def rotate_log(path: Path, max_bytes: int | None = None) -> bool:
    """Rename ``path`` to ``<path>.1`` when it is over ``max_bytes`` (default
    ``MAX_LOG_BYTES``); True when it did. ``os.replace`` is atomic: a reader sees the old
    log or none, never a half-moved one; a writer in another process that rotated first
    leaves nothing to move."""
    limit = MAX_LOG_BYTES if max_bytes is None else max_bytes
    try:
        if path.stat().st_size <= limit:
            return False
        os.replace(path, path.with_name(path.name + ".1"))
    except FileNotFoundError:
        return False
    return True
