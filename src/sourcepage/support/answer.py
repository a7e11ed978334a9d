"""Extractive answers: the sentences of the accepted pages that state what was asked,
quoted with citations.

Separate from retrieval (study §5.5, §5.7): it runs after the decision, only on the top
pages, never paraphrases, and writes its own log. Nothing is produced when the decision
is ``refuse``; for ``review`` the quotes are a draft for the reviewer.

What is quoted: the page's quotable units (``text.sentences.quotable``: body sentences,
list items and introduced lists — a procedure is quoted as its list — never contents
lines, headings, captions or questions), tidied (``tidy``: no running header "Page 47 of
72", no paragraph number, no private-use glyph). Which: the learned selector
(``support.select``) gives each unit of the first three pages P(it states the answer);
the best is quoted first, then up to three more that are nearly as likely and say
something else (``choose``: no two quotes share most of their words), in page order; an
answer (not a draft for review) shows the best and only those of the rest that carry it by
themselves (``carrying``: at ``t_quote``, not another party's duty). Each
is quoted as a passage (``passages``): with the units just before and after it on the page,
so a condition or exception in the next sentence, or the subject in the one before, comes
with it; ``sentences`` names the chosen units inside it. A quote *answers* when the best
quote's P(states) (``stated``) reaches the model's ``t_quote`` and its page's columns are
not at risk of running together; ``fact_found`` says whether the quotes do — the answer
gate (``support.decide.gate``) needs it.
No generation: a quote must be verifiable on the cited page.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.corpus.structure import section_at
from sourcepage.query import PageHit, Query
from sourcepage.store.schema import now
from sourcepage.support.select import (
    EMBEDDING_FEATURES,
    RULE_THRESHOLD,
    XENC_FEATURES,
    Candidate,
    QuoteModel,
    add_cosines,
    add_xenc,
    candidates,
    featurise,
    quote_model,
    score,
)
from sourcepage.text.roles import roles_in
from sourcepage.text.sentences import ELIDED, locate, split_sentences

__all__ = ["carrying", "choose", "extract_answer", "log_answer", "split_sentences", "stated"]

LOG_NAME = "answers.jsonl"
#: size above which the answer log is moved to ``answers.jsonl.1`` before the next line
MAX_LOG_BYTES = 50 * 1024 * 1024
_log_lock = threading.Lock()
#: the most quotes an answer gives
MAX_QUOTES = 4
#: a further quote needs at least this share of the best quote's P(states)
FURTHER_SHARE = 0.5
#: two quotes sharing more than this share of the smaller one's content words say the same
REDUNDANT = 0.6
#: a quote is a passage: its unit with up to this many units before and after it on the page
CONTEXT = 1
#: neighbours join a passage while it stays within this many characters
MAX_PASSAGE = 900


#: a unit that ends opening something it does not finish ("… when necessary (see"): no
#: quote ends on it
_DANGLING = re.compile(r"(?:\(|\b(?:see|refer to|e\.g\.|i\.e\.|including|such as))\s*$", re.IGNORECASE)


@dataclass
class Passage:
    """One quote: the chosen units (``units``, best first) and their neighbours on the page,
    in page order (``parts``), all under one heading."""

    units: list[Candidate]
    parts: list[Candidate]

    def kept(self) -> list[Candidate]:
        """The parts quoted: a part that another holds (a list and its items) is left out."""
        kept: list[Candidate] = []
        for c in self.parts:
            if any(c.text in k.text for k in kept):
                continue
            kept = [k for k in kept if k.text not in c.text] + [c]
        return kept

    @property
    def text(self) -> str:
        """The kept parts joined in page order; where the page has text between two of them
        that is no part (a cross-reference under five words, a caption) ``ELIDED`` stands
        for it, and a cross-reference ``tidy`` took from a part's start is put back when
        the part is not the first ("… reenergized. (See Sections 6(e) and (f) …) In the
        rare situation …")."""
        out: list[str] = []
        end = None
        for c in sorted(self.kept(), key=lambda c: (c.unit.first, c.position)):
            if end is not None and c.unit.first > end + 1:
                out.append(ELIDED)
            if out and c.unit.lead:
                out.append(c.unit.lead)
            out.append(c.text)
            end = max(end if end is not None else -1, c.unit.last)
        return " ".join(out)


def choose(
    cands: Sequence[Candidate], max_quotes: int = MAX_QUOTES, sides: Sequence[Sequence[str]] = ()
) -> list[Candidate]:
    """The quotes of an answer: the most likely unit first, then up to ``max_quotes`` − 1
    more with at least ``FURTHER_SHARE`` of its probability that repeat no chosen quote
    (nor are contained in one: an item of a quoted list), these in page order. A unit cut
    inside a parenthesis, or holding none of the question's words (nor its heading), is
    never quoted. ``sides``: the jurisdictions a question compares (``Route.groups``);
    each side without a quote gets its most likely unit too, however unlikely, beyond
    ``max_quotes`` (the reviewer compares the sides' own words)."""
    order = sorted(cands, key=lambda c: (-c.p, c.order, c.position))
    chosen: list[Candidate] = []
    for c in order:
        if len(chosen) == max_quotes or (chosen and c.p < FURTHER_SHARE * chosen[0].p):
            break
        if _quotable(c, chosen):
            chosen.append(c)
    if chosen and chosen[0].features.get("value_asked") and not any(_states_value(c) for c in chosen):
        # the question asks for a value ("how often") that no quote states: the most likely
        # unit that states one is quoted too (last in, if the quotes are full), for the reader
        value = next((c for c in order if _states_value(c) and _quotable(c, chosen)), None)
        if value is not None:
            chosen = chosen[: max_quotes - 1] + [value]
    for side in sides:
        if chosen and not any(c.page.document.jurisdiction in side for c in chosen):
            best = next(
                # another side saying the same in the same words is what a comparison shows
                (c for c in order if c.page.document.jurisdiction in side and _quotable(c, [])),
                None,
            )
            if best is not None:  # beside the others: a side's quote takes no other's place
                chosen.append(best)
    return chosen[:1] + sorted(chosen[1:], key=lambda c: (c.order, c.position))


def _states_value(c: Candidate) -> bool:
    return bool(c.features.get("value_stated"))


def _quotable(c: Candidate, chosen: Sequence[Candidate]) -> bool:
    """A whole unit (not cut inside a parenthesis) holding a question word (or under a
    heading that does), repeating no chosen quote."""
    return (
        c.text.count("(") <= c.text.count(")")
        and bool(c.features.get("share") or c.features.get("heading"))
        and not any(_redundant(c, o) for o in chosen)
    )


def stated(quotes: Sequence[Candidate]) -> float:
    """P(the quotes state the answer), read as the best P(states) among the quotes whose page
    is not at layout risk and that do not set out another party's duty
    (``Candidate.other_party``: the question asks about manufacturers, the unit opens with
    importers). Not 1 − Π(1 − p): the quotes of one answer are not independent (four
    near-misses from the importers' article do not add up to the manufacturers' duty), and
    with quotes as passages the best quote's p kept ≥ 90% precision on the dev splits at the
    same recall; leaving out the other party's units raised precision and recall there
    (README, ``benchmarks/fit_quotes.py``)."""
    return max((c.p for c in quotes if not c.risk and not c.other_party), default=0.0)


def _redundant(a: Candidate, b: Candidate) -> bool:
    if a.text in b.text or b.text in a.text:
        return True
    small = min(len(a.stems), len(b.stems)) or 1
    return len(a.stems & b.stems) / small > REDUNDANT


def passages(chosen: Sequence[Candidate], cands: Sequence[Candidate]) -> list[Passage]:
    """The quotes of ``chosen`` as passages: each unit with the units just before and after
    it on its page (``CONTEXT``; the one after first, while the passage stays within
    ``MAX_PASSAGE`` characters), whole units only, none from a page of another layout
    risk, none that leaves a bracket open or ends on "(see" (``_DANGLING``) unless the quoted
    unit closes it ("… 7 feet in height. (When these stacks reach …" before "… level.)"), and only from
    under the same heading (the end of s 57 is no context for the first sentence of s 58,
    nor "You must use a lockout program", under "When do I use lockout?", for the sentence
    before that heading); passages of one page and heading that meet are merged, and
    a neighbour another quote holds is left out (nothing is quoted twice). Why: the sentence
    that states an answer leans on its neighbours (the subject before it, the exception,
    value or list after it) — on the dev splits a stating passage is among the quotes for 82%
    of answerable questions against 72% for the lone sentences (``benchmarks/fit_quotes.py``).
    The unit after was kept across a heading until issue 49 (a refitted selector's nested
    answer recall fell from 0.404 to 0.232 without it), but a quote that runs on into the
    next section misquotes it; the selector is not refitted, so the decisions stay as they
    were (docs/experiments/quote-sentences.md)."""
    by_place = {(c.page.page, c.position): c for c in cands}
    out: list[Passage] = []
    for c in chosen:
        parts = [c]
        size = len(c.text)
        for k in (d * s for d in range(1, CONTEXT + 1) for s in (1, -1)):
            nb = by_place.get((c.page.page, c.position + k))
            if nb is None or nb.risk != c.risk or nb.text in c.text or c.text in nb.text:
                continue
            pair = f"{nb.text} {c.text}" if k < 0 else f"{c.text} {nb.text}"
            if nb.unit.heading != c.unit.heading or (_dangling(nb.text) and _dangling(pair)):
                continue  # another section's text, or a bracket it opens and nothing closes
            if size + len(nb.text) + 1 > MAX_PASSAGE:
                continue
            parts.append(nb)
            size += len(nb.text) + 1
        places = {p.position for p in parts}
        near = next(
            (
                q
                for q in out
                if q.units[0].page.page == c.page.page
                and q.units[0].unit.heading == c.unit.heading
                and places & {p.position + d for p in q.parts for d in (-1, 0, 1)}
            ),
            None,
        )
        if near is not None:
            near.units.append(c)
            merged = {p.position: p for p in near.parts + parts}
            near.parts = [merged[k] for k in sorted(merged)]
        else:
            out.append(Passage([c], sorted(parts, key=lambda p: p.position)))
    for q in out:  # a neighbour that another quote already holds (a list and its item) is left out
        others = [o.text for o in out if o is not q]
        q.parts = [p for p in q.parts if p in q.units or not any(p.text in t for t in others)]
    return out


def _dangling(text: str) -> bool:
    """A unit that leaves a bracket open (or closes one it did not open) or ends opening a
    cross-reference ("… when necessary (see"): text that goes on beyond it."""
    return text.count("(") != text.count(")") or _DANGLING.search(text) is not None


def _carries(u: Candidate, threshold: float) -> bool:
    """The unit may carry an answer by itself: P(states) at the threshold, or the asked value
    stated (``choose`` adds it for that), from a page not at layout risk, and not another
    party's duty."""
    return (u.p >= threshold or _states_value(u)) and not u.risk and not u.other_party


def carrying(quotes: Sequence[Passage], threshold: float) -> list[Passage]:
    """The quotes an *answer* shows: the most likely one, then those holding a unit that
    carries the answer by itself (``_carries``); the asked value's quote first when the most
    likely one does not state it. A draft for review keeps every quote (the reviewer weighs
    them). Why: a person reads an answer's quotes as the answer, and a further quote under
    the threshold the answer needed, or another party's duty (a distributor's under "what
    must the manufacturer do"), misleads. The most likely quote stays even when the role
    rule flags it: on dev that rule also flags stating quotes ("Workers engaged in
    residential construction …" for what the employer must show). Chosen on the dev splits
    out of fold (``benchmarks/answer_quotes.py``; README, "Which quotes an answer shows")."""
    kept = list(quotes[:1]) + [q for q in quotes[1:] if any(_carries(u, threshold) for u in q.units)]
    if kept and not any(_states_value(u) for u in kept[0].units):
        kept.sort(key=lambda q: not any(_states_value(u) for u in q.units))
    return kept


def extract_answer(
    query: Query,
    results: Sequence[PageHit],
    decision: str,
    max_quotes: int = MAX_QUOTES,
    texts: Mapping[str, tuple[str, bool]] | None = None,
    cosines: Callable[[Sequence[str]], Mapping[str, np.ndarray]] | None = None,
    model: QuoteModel | None | bool = True,
    cands: Sequence[Candidate] | None = None,
) -> dict[str, Any]:
    """Quote up to ``max_quotes`` units of the first three results (and, for a question
    comparing jurisdictions, of each side's best page: ``select.quoted_pages``).

    ``query``: the parsed question (``Query``: parsed once, by the caller);
    ``results``: the ranked pages; ``texts`` maps a page id to its raw page text and
    whether the audit found its columns interleaved in that text (``Searcher.quote_texts``: the
    raw page without running headers and footers; the units are made from the raw text, else
    from the result's passage); ``cosines``: the units' cosines with the question
    (``support.select.featurise``); ``model``: the selector (True: the shipped one; None — or
    no ``cosines`` — the rule of before, ``support.select.score``); ``cands``:
    ``candidates(query, results, texts)`` made and ``select.prepare``d beforehand (the search
    does it while the question's e5 vector is encoded). A unit of an interleaved page may run
    two columns' text together: it is quoted (``layout_risk``) but does not count as an
    answer. Returns ``{"status", "asked", "fact_found", "quotes": [``_quote``], "text"}`` and
    ``first_quote`` when the first quote is not the top page's (``first_quote``).
    """
    asked = query.describe_asked()
    if decision == "refuse":
        return {
            "status": "none",
            "reason": "the decision is refuse: no answer is produced",
            "asked": asked,
            "fact_found": False,
            "quotes": [],
            "text": "",
        }
    # the model reads the cosines: without them, the rule
    mdl = (quote_model() if model is True else (model or None)) if cosines is not None else None
    # sentences are encoded only when the model reads their cosines (seconds when uncached)
    embedded = mdl is not None and any(f in mdl.features for f in EMBEDDING_FEATURES)
    if cands is None:
        cands = candidates(query, results, texts)
        featurise(query, cands, cosines if embedded else None)
    else:
        add_cosines(cands, cosines if embedded else None)
    if mdl is not None and set(mdl.features) & set(XENC_FEATURES):
        add_xenc(query.text, cands, mdl.features, lambda c: passages([c], cands)[0].text)
    score(cands, mdl)
    threshold = mdl.t_quote if mdl is not None else RULE_THRESHOLD
    sides = query.route.groups if query.route is not None and query.route.compares else ()
    chosen = choose(cands, max_quotes, sides)
    if mdl is not None:
        # the model's P(states) of each quote, combined: P(some quote states the answer)
        fact_found = bool(chosen) and stated(chosen) >= threshold
    else:  # the rule: its best quote decides
        fact_found = bool(chosen) and chosen[0].p >= threshold and not chosen[0].risk
    status = "answer" if decision == "answer" and fact_found else "draft for review"
    shown = passages(chosen, cands)
    if status == "answer":
        shown = carrying(shown, threshold)
    best = stating_unit(chosen, threshold, mdl is not None) if fact_found else None
    quotes = [_quote(p, best, texts) for p in shown]
    out = {
        "status": status if quotes else "none",
        "asked": asked,
        "fact_found": fact_found,
        "quotes": quotes,
        "text": " ".join(f"\u201c{x['text']}\u201d {x['citation']}" for x in quotes),
    }
    if shown and results and shown[0].units[0].page.page != results[0].page:
        out["first_quote"] = first_quote(shown[0], results, cands, best)
    other = [c for c in chosen if not c.risk and c.other_party and c.p >= threshold]
    if mdl is not None and not fact_found and other:  # why not, in words (``support.check``)
        out["other_party"] = {
            "asked": sorted(set(query.roles)),
            "quoted": sorted({roles_in(c.text)[0] for c in other}),
        }
    return out


def stating_unit(chosen: Sequence[Candidate], threshold: float, learned: bool) -> Candidate | None:
    """The sentence the answer rests on: of the chosen units ``stated`` reads (not on a page
    at layout risk nor setting out another party's duty) that reach ``threshold``, the most
    likely one that states the value asked ("at least once a year" for "how often", which
    ``carrying`` puts first), else the most likely one; under the rule, the first; None when
    none reaches it."""
    if not learned:
        return chosen[0] if chosen and chosen[0].p >= threshold and not chosen[0].risk else None
    fit = [c for c in chosen if not c.risk and not c.other_party and c.p >= threshold]
    return max(fit, key=lambda c: (_states_value(c), c.p), default=None)


def _quote(
    p: Passage, best: Candidate | None, texts: Mapping[str, tuple[str, bool]] | None = None
) -> dict[str, Any]:
    """A quote of the answer: the passage, its chosen units and their spans, the span of the
    sentence judged to state the answer (``stating``: in this quote only, then ``answers``),
    the spans of the ``ELIDED`` marks, its citation, and the heading path its first chosen
    unit stands under (``quote_section``)."""
    c = p.units[0]
    text = p.text
    raw = ((texts or {}).get(c.page.page) or ("", False))[0]
    at = text.find(best.text) if best is not None and best in p.units else -1
    return {
        "text": text,
        "sentences": [u.text for u in p.units],
        "spans": sorted([i, i + len(u.text)] for u in p.units if (i := text.find(u.text)) >= 0),
        "stating": [[at, at + len(best.text)]] if best is not None and at >= 0 else [],
        "elided": [[m.start(), m.end()] for m in re.finditer(re.escape(ELIDED), text)],
        "page": c.page.page,
        "chunk_id": c.page.hit.chunk_id,
        "citation": c.page.citation,
        "jurisdiction": c.page.document.jurisdiction,
        "score": round(max(u.p for u in p.units), 4),
        "answers": at >= 0,
        "layout_risk": c.risk,
        "section": quote_section(raw, c.text, c.page),
    }


def first_quote(
    first: Passage, results: Sequence[PageHit], cands: Sequence[Candidate], best: Candidate | None
) -> dict[str, Any]:
    """Why the first quote is not from the top page: its page and rank, the top page, the
    best P(states) of each, and the reason in words. The first quote holds the sentence the
    answer rests on (``stating_unit``), else the asked value, else the closest sentence."""
    top = results[0].page
    page = first.units[0].page
    on_top = [c.p for c in cands if c.page.page == top]
    p = max(u.p for u in first.units)
    if best is not None and best in first.units:
        why = "its sentence is the one judged most likely to state what is asked"
    elif any(_states_value(u) for u in first.units):
        why = "it states the value asked, which the most likely sentence does not"
    else:
        why = "its sentence is the closest to stating what is asked (none is likely enough)"
    beside = (
        f"the top page's best sentence {max(on_top):.2f}"
        if on_top
        else "the top page has no quotable sentence (a contents page, a table, a figure, another section)"
    )
    return {
        "page": page.page,
        "rank": page.hit.rank,
        "top": top,
        "p_states": round(p, 4),
        "top_p_states": round(max(on_top), 4) if on_top else None,
        "why": f"{why} (P(states) {p:.2f}; {beside})",
    }


def quote_section(raw: str, unit: str, page: PageHit) -> str:
    """The heading path of the stretch of the page (``corpus.structure.page_spans``) where
    ``unit`` begins in its raw text ``raw``: "45 Duties of workers" for a quote of s 45 on a
    page filed under s 47. The hit's section where the page holds one path, or the unit is not
    found in the text."""
    at = locate(raw, unit) if len(page.sections) > 1 else -1
    return (section_at(raw, page.sections, at, at + 1) if at >= 0 else "") or page.section


def under_section(
    cands: Sequence[Candidate],
    texts: Mapping[str, tuple[str, bool]] | None,
    test: Callable[[Sequence[str]], bool],
) -> list[Candidate]:
    """The candidates that stand under a heading that passes ``test`` (``retrieval.filters``:
    the ``section`` filter's ``section_test``, or ``heading_test`` of the provisions a
    question cites): the filter keeps whole pages, and a page of Article 10 may also hold
    the start of Article 11, which is no quote of Article 10."""
    out = []
    for c in cands:
        raw = (texts or {}).get(c.page.page, (c.page.passage, False))[0]
        if test([quote_section(raw, c.text, c.page)]):
            out.append(c)
    return out


def log_answer(
    store: str | Path, question: str, method: str, decision: str, answer: Mapping[str, Any]
) -> None:
    """Append one line to ``<store>/answers.jsonl`` (the answer log, apart from retrieval logs).

    A log over ``MAX_LOG_BYTES`` (50 MiB) is first renamed to ``answers.jsonl.1``
    (atomically, replacing an older ``.1``), so the log starts again empty."""
    line = json.dumps(
        {
            "time": now(),
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
