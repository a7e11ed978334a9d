"""Extractive answers: the supporting sentences of accepted evidence, quoted with citations.

Separate from retrieval (study §5.5, §5.7): it runs after the decision, only on the
pages the decision accepted, never paraphrases, and writes its own log. Nothing is
produced when the decision is ``refuse``; for ``review`` the quotes are a draft for the
reviewer. Sentences are scored by the idf-weighted share of the question's content words
they contain (no model: a quote must be verifiable on the cited page).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sourcepage.retrieval.tokenize import content_terms
from sourcepage.text.sentences import split_sentences

LOG_NAME = "answers.jsonl"


def extract_answer(
    question: str,
    results: Sequence[Mapping[str, Any]],
    decision: str,
    weights: Mapping[str, float] | None = None,
    max_sentences: int = 3,
    pages: int = 3,
) -> dict[str, Any]:
    """Quote up to ``max_sentences`` sentences from the first ``pages`` results.

    ``results`` are search results (spec §5: page, doc_id, page_number, passage);
    ``weights`` maps a term to its idf (uniform when None). Returns ``{"status",
    "quotes": [{"text", "page", "citation", "score"}], "text"}``.
    """
    if decision == "refuse":
        return {
            "status": "none",
            "reason": "the decision is refuse: no answer is produced",
            "quotes": [],
            "text": "",
        }
    terms = content_terms(question)
    w = {t: (weights or {}).get(t, 1.0) for t in terms}
    total = sum(w.values()) or 1.0
    cands = []
    for order, r in enumerate(results[:pages]):
        for j, s in enumerate(split_sentences(r.get("passage", ""))):
            toks = content_terms(s)
            score = sum(v for t, v in w.items() if t in toks) / total
            if score > 0:
                cands.append((-score, order, j, s, r))
    cands.sort(key=lambda c: c[:3])
    quotes = [
        {
            "text": s,
            "page": r["page"],
            "citation": f"[{r['doc_id']} p.{r['page_number']}]",
            "score": round(-neg, 4),
        }
        for neg, _, _, s, r in cands[:max_sentences]
    ]
    status = "answer" if decision == "answer" else "draft for review"
    return {
        "status": status if quotes else "none",
        "quotes": quotes,
        "text": " ".join(f"\u201c{q['text']}\u201d {q['citation']}" for q in quotes),
    }


def log_answer(
    store: str | Path, question: str, method: str, decision: str, answer: Mapping[str, Any]
) -> None:
    """Append one line to ``<store>/answers.jsonl`` (the answer log, apart from retrieval logs)."""
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
    with open(Path(store) / LOG_NAME, "a", encoding="utf-8") as f:
        f.write(line + "\n")
