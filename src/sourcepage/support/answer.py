"""Extractive answers: the supporting sentences of accepted evidence, quoted with citations.

Separate from retrieval (study §5.5, §5.7): it runs after the decision, only on the
pages the decision accepted, never paraphrases, and writes its own log. Nothing is
produced when the decision is ``refuse``; for ``review`` the quotes are a draft for the
reviewer. Sentences are scored by the idf-weighted share of the question's content words
they contain (no model: a quote must be verifiable on the cited page).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sourcepage.retrieval.tokenize import content_terms
from sourcepage.text.sentences import split_sentences

LOG_NAME = "answers.jsonl"
#: size above which the answer log is moved to ``answers.jsonl.1`` before the next line
MAX_LOG_BYTES = 50 * 1024 * 1024
_log_lock = threading.Lock()


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
