"""Extractive answers: the sentences of the accepted pages that state what was asked,
quoted with citations.

Separate from retrieval (study §5.5, §5.7): it runs after the decision, only on the top
pages, never paraphrases, and writes its own log. Nothing is produced when the decision
is ``refuse``; for ``review`` the quotes are a draft for the reviewer.

What is quoted: the page's quotable units (``text.sentences.quotable``: body sentences,
list items and introduced lists in their cleaned form — never contents lines, headings,
captions or questions), whatever text version was searched. Which: the question says what
kind of fact it asks for (``asked_facts``: a frequency for "how often", a duration for
"how long", a number for "how many", a list for "what are the steps", a condition for
"when must", a person for "who may"); a unit *answers* when it carries a fact of that kind
(``carries``) and is about the question — the idf-weighted share of the question's content
words (stemmed) it holds, plus half the share its heading adds, is at least
``MIN_RELEVANCE``. A question of no recognised kind is answered by a unit whose relevance is
at least ``STATEMENT_RELEVANCE``. The answers are quoted, best first; without one the most relevant
units are quoted as a draft and ``fact_found`` is false, which turns an ``answer`` decision
into ``review`` (``support.decide.require_fact``). No model: a quote must be verifiable on
the cited page.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sourcepage.retrieval.tokenize import content_terms, stem_terms
from sourcepage.text.sentences import Quotable, quotable, split_sentences

__all__ = ["ASKED", "asked_facts", "carries", "extract_answer", "log_answer", "split_sentences"]

LOG_NAME = "answers.jsonl"
#: size above which the answer log is moved to ``answers.jsonl.1`` before the next line
MAX_LOG_BYTES = 50 * 1024 * 1024
_log_lock = threading.Lock()
#: the least relevance (see the module docstring) of a unit that answers a question
MIN_RELEVANCE = 0.25
#: the relevance a unit needs to answer a question whose kind of fact is not recognised
STATEMENT_RELEVANCE = 0.4

_NUMWORD = (
    r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|"
    r"forty|fifty|sixty|hundred|thousand|half|once|twice)"
)
_UNIT = (
    r"(?:%|percent|feet|foot|ft|inch(?:es)?|in\.|meters?|metres?|cm|mm|pounds?|lbs?|kg|ppm|degrees?|"
    r"°|db|dba|volts?|v|amps?|psi|mph|seconds?|minutes?|hours?|days?|weeks?|months?|years?)"
)
_PERIOD = r"(?:year|month|week|day|shift|hour|minute|time|use|entry|job|task)s?"

#: kind of fact → (how the question asks for it, how a sentence states it, what to call it)
ASKED: dict[str, tuple[re.Pattern[str], re.Pattern[str], str]] = {
    "frequency": (
        re.compile(
            r"\bhow (?:often|frequently|regularly)\b|\bhow many times\b|\bat what (?:interval|frequency)"
        ),
        re.compile(
            rf"\b(?:annual(?:ly)?|yearly|daily|weekly|monthly|quarterly|hourly|"
            rf"(?:once|twice|\d+ times) (?:a|an|per|each|every) {_PERIOD}|every (?:\w+ )?{_PERIOD}|"
            rf"each {_PERIOD}|per {_PERIOD}|at least (?:once|twice|annually|every)|"
            rf"(?:before|after|at the (?:start|beginning|end) of) (?:each|every) \w+)\b",
            re.IGNORECASE,
        ),
        "how often",
    ),
    "duration": (
        re.compile(
            r"\bhow long\b|\bhow much time\b|\bfor how many (?:seconds|minutes|hours|days|weeks|months|years)"
        ),
        re.compile(
            rf"\b(?:\d+(?:\.\d+)?|{_NUMWORD})[\s-]+(?:seconds?|minutes?|hours?|days?|weeks?|months?|years?)\b|"
            r"\b(?:until|throughout|for the duration|as long as|no longer than|not exceed)\b",
            re.IGNORECASE,
        ),
        "how long",
    ),
    "number": (
        re.compile(
            r"\bhow (?:many|much|far|high|deep|wide|heavy|close|large|big|low|loud)\b|"
            r"\bwhat (?:percent|percentage|concentration|level|distance|height|depth|temperature|weight)\b|"
            r"\b(?:minimum|maximum)\b"
        ),
        re.compile(
            rf"\b\d+(?:[.,/]\d+)?\s*{_UNIT}(?!\w)|\b{_NUMWORD}\s+{_UNIT}\b|"
            rf"\b(?:at least|no (?:more|less) than|more than|less than|up to|minimum of|maximum of)\s+"
            rf"(?:\d|{_NUMWORD})",
            re.IGNORECASE,
        ),
        "the number",
    ),
    "actor": (
        re.compile(
            r"^\s*who\b|\bwho (?:may|must|can|should|is|are|has|will|does)\b|\bwhich (?:person|employee)"
        ),
        re.compile(
            r"\b(?:employers?|employees?|workers?|persons?|supervisors?|attendants?|entrants?|inspectors?|"
            r"authorized|qualified|competent|managers?|operators?|contractors?|team|individuals?|"
            r"rescuers?|he or she|only the)\b",
            re.IGNORECASE,
        ),
        "who",
    ),
    "list": (
        re.compile(
            r"\bwhat (?:are|were) the (?:steps|elements|parts|types|kinds|components|requirements|duties|"
            r"responsibilities|hazards|causes|signs|methods|controls|criteria)\b|\b(?:which|what) "
            r"(?:kinds|types|sorts|parts|steps|items|information|properties|elements|components|jobs|"
            r"hazards|methods|measures|duties|controls)\b|\bsteps\b|\blist\b|\binclude\b"
        ),
        # a sentence that enumerates: three separators, or "including A, B" / "the following …"
        re.compile(
            r"(?:[^,;]+[,;]){3,}|:\s*[•■▪●]|\b(?:includes?|including|such as)\b[^.]*,|\bthe following\b",
            re.IGNORECASE,
        ),
        "the list",
    ),
    "condition": (
        re.compile(
            r"\bwhen (?:must|do|does|is|are|should|can|may|am|will|would)\b|\bunder what (?:conditions|"
            r"circumstances)\b|\bin what (?:cases|situations)\b|\b(?:is|are) (?:it|they|we|a|an|the)\b.*"
            r"\b(?:required|necessary|acceptable|allowed|permitted|enough|exempt)\b|"
            r"\bdo (?:i|we|they|you) (?:have|need) to\b|\b(?:count|qualify) as\b|\bobliged\b"
        ),
        re.compile(
            r"\b(?:if|when|whenever|unless|only|where|provided|except|before|after|until|in lieu)\b",
            re.IGNORECASE,
        ),
        "the condition",
    ),
}


def asked_facts(question: str) -> list[str]:
    """The kinds of fact ``question`` asks for (keys of ``ASKED``), in the order the
    question asks them; empty when it asks for none that is recognised."""
    q = question.lower()
    found = [(m.start(), kind) for kind, (ask, _, _) in ASKED.items() if (m := ask.search(q))]
    return [kind for _, kind in sorted(found)]


def carries(text: str, kind: str, unit: str = "sentence") -> bool:
    """True when ``text`` states a fact of ``kind`` (a frequency, a duration, ...); a list
    is stated by a quoted list or list item (``unit``, see ``Quotable.kind``) too."""
    if kind == "list" and unit in ("list", "item"):
        return True
    return ASKED[kind][1].search(text) is not None


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
    kinds = asked_facts(question)
    asked = ", ".join(ASKED[k][2] for k in kinds) or "a statement"
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
                fact = rel >= MIN_RELEVANCE and any(carries(u.text, k, u.kind) for k in kinds)
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
            "citation": f"[{r['doc_id']} p.{r['page_number']}]",
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
