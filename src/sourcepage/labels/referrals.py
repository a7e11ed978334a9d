"""Referrals: every search the system decides ``review`` on reaches a person, and the
person's answer reaches the asker (the reviewer's desk).

A referral is a row of kind ``referral`` in the store's label log
(:mod:`sourcepage.store.labels`) holding what the asker was shown: the question, the
filters, the method and text version, the evidence pages, the quotes, the reasons, the
jurisdictions and topics, the routing and the system's draft answer. Its subject is
:func:`referral_key` (the normalised question and the filters), so the same question
asked again with the same filters while the referral is open *joins* it (a row of kind
``ask``) instead of opening a second one. A reviewer decides it with a review
(:mod:`sourcepage.labels.reviews`) that names the referral: answer or refuse, the
accepted pages and quotes, an answer written from them, a note and ratings. The latest
such review is the referral's decision; the log is append-only, so a second decision
supersedes the first and both stay.

Once decided, the same question (same key), or a near-duplicate of it (the same
filters and routed jurisdictions, and a Jaccard similarity of stemmed content terms of
at least :data:`NEAR_DUPLICATE`), gets the reviewed answer back beside the fresh ranking
(:func:`reviewed_answer`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sourcepage.labels.reviews import Review, from_label, record
from sourcepage.retrieval.tokenize import content_terms, stem_terms
from sourcepage.store.labels import ACTOR_SYSTEM, Label, LabelLog, normalise_question

#: Jaccard similarity of stemmed content terms at or above which two questions (with the
#: same filters and routed jurisdictions) are the same question. On the dev splits no two
#: distinct questions reach it (the highest pair: 0.50, among 6,491 pairs of
#: benchmarks/osha6/dev and benchmarks/intl20/dev) while the osha6/intl20 rewording
#: "... on a confined space entry permit?" / "... on an OSHA confined space entry permit?"
#: scores 0.857; `python benchmarks/near_duplicates.py` prints both.
NEAR_DUPLICATE = 0.6
STATUSES: tuple[str, ...] = ("pending", "decided")


def referral_key(question: str, filters: Mapping[str, Any] | None) -> str:
    """The normalised question and the filters (values sorted): one open referral each."""
    canon = {k: sorted(map(str, v)) if isinstance(v, list | tuple) else v for k, v in (filters or {}).items()}
    return normalise_question(question) + "\n" + json.dumps(canon, sort_keys=True, ensure_ascii=False)


def terms(question: str) -> set[str]:
    """The stemmed content terms of a question: what near-duplicates are compared on."""
    t = content_terms(question)
    stems = stem_terms(t)
    return {stems[x] for x in t}


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of two questions' stemmed content terms (0..1)."""
    ta, tb = terms(a), terms(b)
    return len(ta & tb) / len(ta | tb) if ta | tb else 0.0


@dataclass
class Referral:
    """A referred question, the times it was asked, and its decision (None: pending)."""

    id: int
    key: str
    created_at: str
    shown: dict[str, Any]
    asks: list[str] = field(default_factory=list)
    decision: Review | None = None

    @property
    def status(self) -> str:
        return "decided" if self.decision is not None else "pending"

    @property
    def question(self) -> str:
        return str(self.shown["question"])

    @property
    def url(self) -> str:
        return f"/questions/{self.id}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "url": self.url,
            "status": self.status,
            "created_at": self.created_at,
            "asked": 1 + len(self.asks),
            "last_asked": self.asks[-1] if self.asks else self.created_at,
            **self.shown,
            "decision": self.decision.as_dict() if self.decision else None,
        }


def _shown(result: Mapping[str, Any]) -> dict[str, Any]:
    """What the asker of a ``review`` search was shown (a spec §5 result dict)."""
    answer = result.get("answer") or {}
    top = result.get("results", [])[:5]
    return {
        "question": result["question"],
        "filters": dict(result.get("filters") or {}),
        "method": result["method"],
        "text_version": result["text_version"],
        "pages": [r["page"] for r in top],
        "quotes": [
            {
                "text": q["text"],
                "page": q["page"],
                "jurisdiction": q.get("jurisdiction", ""),
                "section": q.get("section", ""),
            }
            for q in answer.get("quotes", [])
        ],
        "draft": answer.get("text", ""),
        "reasons": list(result.get("reasons", [])),
        "jurisdictions": list(result.get("jurisdictions", [])),
        "topics": sorted({r["topic"] for r in top if r.get("topic")}),
        "routed": list((result.get("routing") or {}).get("jurisdictions", [])),
    }


def _assemble(log: LabelLog) -> dict[int, Referral]:
    refs = {x.seq: Referral(x.seq, x.subject, x.created_at, x.body) for x in log.labels("referral")}
    for x in log.labels("ask"):
        if int(x.subject) in refs:
            refs[int(x.subject)].asks.append(x.created_at)
    for x in log.labels("review"):
        rid = x.body.get("referral")
        if rid in refs:
            refs[rid].decision = from_label(x)
    return refs


def referrals(store: str | Path | LabelLog) -> list[Referral]:
    """Every referral, oldest first."""
    if isinstance(store, LabelLog):
        return list(_assemble(store).values())
    log = LabelLog.reader(store)
    if log is None:
        return []
    with log:
        return list(_assemble(log).values())


def _built(log: LabelLog, rows: list[Label]) -> list[Referral]:
    """Referrals from their rows, with their asks and decisions read by index (the rows'
    numbers only: never the whole log)."""
    refs = [Referral(x.seq, x.subject, x.created_at, x.body) for x in rows]
    decisions = {}
    for x in log.deciding(r.id for r in refs):
        decisions[int(x.body["referral"])] = from_label(x)
    asks: dict[str, list[str]] = {}
    if refs:
        for a in log.labels("ask", subjects=[str(r.id) for r in refs]):
            asks.setdefault(a.subject, []).append(a.created_at)
    for r in refs:
        r.asks = asks.get(str(r.id), [])
        r.decision = decisions.get(r.id)
    return refs


def _one(log: LabelLog, referral_id: int) -> Referral | None:
    found = _built(log, log.labels("referral", seqs=[referral_id]))
    return found[0] if found else None


def get(store: str | Path, referral_id: int) -> Referral | None:
    """One referral with its asks and decision (indexed reads, read-only)."""
    reader = LabelLog.reader(store)
    if reader is None:
        return None
    with reader as log:
        return _one(log, referral_id)


#: the largest page of the queue
MAX_PAGE = 500


def page(
    store: str | Path,
    status: str | None = None,
    jurisdiction: str | None = None,
    topic: str | None = None,
    limit: int = 50,
    after: int = 0,
) -> tuple[list[Referral], dict[str, int], int | None]:
    """One page of the queue (oldest first, numbers above ``after``, at most ``limit``),
    the counts by status of the referrals matching the jurisdiction and topic, and the
    ``after`` of the next page (None: this is the last). Indexed reads only."""
    if status is not None and status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be from 1 to {MAX_PAGE}, got {limit}")
    reader = LabelLog.reader(store)
    if reader is None:
        return [], dict.fromkeys(STATUSES, 0), None
    tags = [f"{name}:{value}" for name, value in (("jurisdiction", jurisdiction), ("topic", topic)) if value]
    decided = None if status is None else status == "decided"
    with reader as log:
        rows = log.referral_page(decided, tags, after, limit + 1)
        refs = _built(log, rows[:limit])
        counts = log.referral_counts(tags)
    more = len(rows) > limit
    return refs, counts, (refs[-1].id if more else None)


def facets(store: str | Path) -> dict[str, list[str]]:
    """The jurisdictions and topics the referrals name (the desk's filter menus)."""
    reader = LabelLog.reader(store)
    if reader is None:
        return {"jurisdictions": [], "topics": []}
    with reader as log:
        return {"jurisdictions": log.tags("jurisdiction:"), "topics": log.tags("topic:")}


def _decided(log: LabelLog) -> dict[int, Review]:
    """referral number -> its latest decision (reads the reviews only: few, beside the
    referrals and asks of every review search)."""
    out: dict[int, Review] = {}
    for x in log.labels("review"):
        if x.body.get("referral") is not None:
            out[int(x.body["referral"])] = from_label(x)
    return out


def refer(store: str | Path, result: Mapping[str, Any]) -> Referral:
    """Open a referral for a search decided ``review``, or join the open one with the
    same key; one transaction, so two askers at once open one referral."""
    if result.get("decision") != "review":
        raise ValueError(f"only a search decided review is referred, not {result.get('decision')!r}")
    key = referral_key(result["question"], result.get("filters"))
    with LabelLog(store) as log, log.transaction():
        same = log.labels("referral", key)
        decided = {int(x.body["referral"]) for x in log.deciding(x.seq for x in same)}
        open_ = [x for x in same if x.seq not in decided]
        if open_:
            x = open_[0]
            ref = Referral(x.seq, x.subject, x.created_at, x.body)
            ref.asks = [a.created_at for a in log.labels("ask", str(x.seq))]
            asked = log.add("ask", str(ref.id), ACTOR_SYSTEM, {"question": result["question"]}, None)
            ref.asks.append(asked.created_at)
            return ref
        x = log.add("referral", key, ACTOR_SYSTEM, _shown(result), None)
        return Referral(x.seq, x.subject, x.created_at, x.body)


def queue(
    refs: Iterable[Referral],
    status: str | None = None,
    jurisdiction: str | None = None,
    topic: str | None = None,
) -> tuple[list[Referral], dict[str, int]]:
    """The referrals matching the filters, oldest first, and counts by status of those
    matching the jurisdiction and topic filters."""
    if status is not None and status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    picked = [
        r
        for r in refs
        if (jurisdiction is None or jurisdiction in r.shown.get("jurisdictions", []))
        and (topic is None or topic in r.shown.get("topics", []))
    ]
    counts = {s: sum(r.status == s for r in picked) for s in STATUSES}
    return [r for r in picked if status is None or r.status == status], counts


def decide(
    store: str | Path,
    referral_id: int,
    reviewer: str,
    decision: str,
    pages: Iterable[str] = (),
    quotes: Iterable[str] = (),
    answer: str = "",
    note: str = "",
    ratings: Mapping[str, int] | None = None,
) -> Review:
    """Record a reviewer's decision on a referral (a review naming it). KeyError: no such
    referral; ValueError: every problem with the decision."""
    with LabelLog(store) as log, log.transaction():
        ref = _one(log, referral_id)
        if ref is None:
            raise KeyError(referral_id)
        topics = ref.shown.get("topics", [])
        return record(
            store,
            ref.question,
            ref.shown["method"],
            ref.shown["text_version"],
            "review",
            decision,
            pages,
            reviewer,
            note,
            topics[0] if len(topics) == 1 else "",
            referral=referral_id,
            quotes=quotes,
            answer=answer,
            ratings=ratings,
            log=log,
        )


def reviewed_answer(store: str | Path, result: Mapping[str, Any]) -> dict[str, Any] | None:
    """The reviewed answer for a search result's question: the decided referral with the
    same key, else the most similar decided near-duplicate (same filters and routed
    jurisdictions, similarity >= NEAR_DUPLICATE); None when there is none."""
    reader = LabelLog.reader(store)
    if reader is None:
        return None
    with reader as log:
        decisions = _decided(log)
        if not decisions:  # most searches: no reviewed question yet, nothing more to read
            return None
        rows = log.labels("referral", seqs=decisions)
    decided = [Referral(x.seq, x.subject, x.created_at, x.body, decision=decisions[x.seq]) for x in rows]
    key = referral_key(result["question"], result.get("filters"))
    exact = [r for r in decided if r.key == key]
    if exact:
        return _given(exact[-1], 1.0, "same question")
    filters = referral_key("", result.get("filters"))
    routed = list((result.get("routing") or {}).get("jurisdictions", []))
    best: tuple[float, int, Referral] | None = None
    for r in decided:
        if referral_key("", r.shown.get("filters")) != filters or r.shown.get("routed", []) != routed:
            continue
        s = similarity(result["question"], r.question)
        if s >= NEAR_DUPLICATE and (best is None or (s, r.id) > best[:2]):
            best = (s, r.id, r)
    return _given(best[2], best[0], "near-duplicate") if best else None


def _given(ref: Referral, sim: float, match: str) -> dict[str, Any]:
    d = ref.decision
    assert d is not None
    return {
        "referral": ref.id,
        "url": ref.url,
        "question": ref.question,
        "match": match,
        "similarity": round(sim, 3),
        "decision": d.decision,
        "answer": d.answer,
        "quotes": list(d.quotes),
        "pages": list(d.pages),
        "note": d.note,
        "ratings": dict(d.ratings),
        "reviewer": d.reviewer,
        "decided_at": d.created_at,
    }


def open_referral(store: str | Path, result: Mapping[str, Any]) -> Referral | None:
    """The open (pending) referral of a search result's question and filters, read only."""
    reader = LabelLog.reader(store)
    if reader is None:
        return None
    key = referral_key(result["question"], result.get("filters"))
    with reader as log:
        same = log.labels("referral", key)
        decided = {int(x.body["referral"]) for x in log.deciding(x.seq for x in same)}
        x = next((x for x in same if x.seq not in decided), None)
    return None if x is None else Referral(x.seq, x.subject, x.created_at, x.body)


def attach(store: str | Path, result: dict[str, Any], write: bool = True) -> dict[str, Any]:
    """A search result with what the desk knows: ``reviewed`` (a reviewed answer, marked
    as such) when there is one, and ``referral`` ({"id", "url"}) when the search was
    decided ``review``: the reviewed question's referral, or a new or joined open one.
    ``write=False`` (a GET: another site's link or image must not write) reads only: the
    open referral when there is one, else ``refer: true`` (the page offers a POST)."""
    reviewed = reviewed_answer(store, result)
    if reviewed is not None:
        result["reviewed"] = reviewed
    if result.get("decision") == "review":
        if reviewed is not None:
            result["referral"] = {"id": reviewed["referral"], "url": reviewed["url"]}
        elif write:
            ref = refer(store, result)
            result["referral"] = {"id": ref.id, "url": ref.url}
        elif (found := open_referral(store, result)) is not None:
            result["referral"] = {"id": found.id, "url": found.url}
        else:
            result["refer"] = True
    return result
