"""The reviewer log: what a person decided about a question the system referred.

A review is a row of kind ``review`` in the store's label log
(:mod:`sourcepage.store.labels`), append-only: a record is never changed or deleted
(SQLite triggers refuse it); a later record on the same question supersedes an
earlier one when the log is exported. Each record holds the question, the method
and text version that retrieved the pages, what the system said (``answer``,
``refuse`` or ``review``), what the reviewer decided (``answer`` or ``refuse``), the
pages the reviewer accepted as evidence, who, a note and when; a decision on a referral
(:mod:`sourcepage.labels.referrals`) adds the referral's id, the accepted quotes, the
answer written from them and the reviewer's ratings (1-5 for each of
:data:`RATINGS`).

:func:`export_questions` turns the log into benchmark questions (benchmark-format.md
§3): an accepted answer becomes an ``answerable`` question whose evidence is the
accepted pages (grade 1), a refusal an ``unsupported`` question.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sourcepage.records import parse_page_id
from sourcepage.store.labels import Label, LabelLog, normalise_question
from sourcepage.store.reviewers import check_name
from sourcepage.vocabulary import TEXT_VERSIONS

SYSTEM_DECISIONS: tuple[str, ...] = ("answer", "refuse", "review")
REVIEWER_DECISIONS: tuple[str, ...] = ("answer", "refuse")
MAX_QUESTION = 500
MAX_NOTE = 5000
MAX_ANSWER = 5000
MAX_QUOTE = 2000
#: what a reviewer rates an answer on, 1 (poor) to 5 (excellent), study §3.6
RATINGS: tuple[str, ...] = ("correctness", "completeness", "faithfulness", "traceability", "usefulness")


@dataclass(frozen=True)
class Review:
    """One record of the log."""

    id: int
    question: str
    method: str
    text_version: str
    system_decision: str
    decision: str
    pages: tuple[str, ...]
    reviewer: str
    note: str
    topic: str
    created_at: str
    referral: int | None = None
    quotes: tuple[str, ...] = ()
    answer: str = ""
    ratings: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pages"] = list(self.pages)
        d["quotes"] = list(self.quotes)
        return d


def validate(
    question: str,
    method: str,
    text_version: str,
    system_decision: str,
    decision: str,
    pages: Iterable[str],
    reviewer: str,
    note: str = "",
) -> list[str]:
    """Every problem with a record, in words a reviewer reads ([] when it is fine)."""
    problems: list[str] = []
    if not question.strip():
        problems.append("the question is empty")
    elif len(question) > MAX_QUESTION:
        problems.append(f"the question is longer than {MAX_QUESTION} characters")
    if not method.strip():
        problems.append("the method is empty")
    if text_version not in TEXT_VERSIONS:
        problems.append(f"unknown text version {text_version!r}; choose from {', '.join(TEXT_VERSIONS)}")
    if system_decision not in SYSTEM_DECISIONS:
        problems.append(
            f"system decision must be one of {', '.join(SYSTEM_DECISIONS)}, got {system_decision!r}"
        )
    if decision not in REVIEWER_DECISIONS:
        problems.append(f"the reviewer's decision must be answer or refuse, got {decision!r}")
    pages = list(pages)
    for p in pages:
        try:
            parse_page_id(p)
        except ValueError as e:
            problems.append(str(e))
    if len(set(pages)) != len(pages):
        problems.append("a page is listed twice")
    if decision == "answer" and not pages:
        problems.append("an answer needs at least one evidence page")
    if decision == "refuse" and pages:
        problems.append("a refusal cannot list evidence pages")
    if not reviewer.strip():
        problems.append("the reviewer's name is empty")
    else:  # the names `reviewer add` accepts, and no other (issue 51)
        try:
            check_name(reviewer.strip())
        except ValueError as e:
            problems.append(str(e))
    if len(note) > MAX_NOTE:
        problems.append(f"the note is longer than {MAX_NOTE} characters")
    return problems


def check_extras(quotes: Iterable[str], answer: str, ratings: Mapping[str, int]) -> list[str]:
    """Problems with a referral decision's quotes, answer text and ratings."""
    problems = [f"a quote is longer than {MAX_QUOTE} characters" for q in quotes if len(q) > MAX_QUOTE]
    if len(answer) > MAX_ANSWER:
        problems.append(f"the answer is longer than {MAX_ANSWER} characters")
    for name, value in ratings.items():
        if name not in RATINGS:
            problems.append(f"unknown rating {name!r}; rate {', '.join(RATINGS)}")
        elif isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
            problems.append(f"rating {name} must be a whole number from 1 to 5, got {value!r}")
    return problems


def record(
    store: str | Path,
    question: str,
    method: str,
    text_version: str,
    system_decision: str,
    decision: str,
    pages: Iterable[str],
    reviewer: str,
    note: str = "",
    topic: str = "",
    created_at: str | None = None,
    *,
    referral: int | None = None,
    quotes: Iterable[str] = (),
    answer: str = "",
    ratings: Mapping[str, int] | None = None,
    log: LabelLog | None = None,
) -> Review:
    """Append one review (one SQLite transaction); ValueError lists every problem.
    ``log``: an open label log to write to (inside its transaction), else the store's."""
    pages = list(pages)
    quotes = [q.strip() for q in quotes if q.strip()]
    ratings = dict(ratings or {})
    problems = validate(question, method, text_version, system_decision, decision, pages, reviewer, note)
    problems += check_extras(quotes, answer, ratings)
    if problems:
        raise ValueError("; ".join(problems))
    body: dict[str, Any] = {
        "question": question.strip(),
        "method": method.strip(),
        "text_version": text_version,
        "system_decision": system_decision,
        "decision": decision,
        "pages": pages,
        "note": note.strip(),
        "topic": topic.strip(),
    }
    if referral is not None:
        body.update(referral=referral, quotes=quotes, answer=answer.strip(), ratings=ratings)
    subject = normalise_question(question)
    if log is not None:
        return from_label(log.add("review", subject, reviewer.strip(), body, created_at))
    with LabelLog(store) as own:
        return from_label(own.append("review", subject, reviewer.strip(), body, created_at))


def from_label(x: Label) -> Review:
    """The review a ``review`` row of the label log holds."""
    b = x.body
    return Review(
        x.seq,
        b["question"],
        b["method"],
        b["text_version"],
        b["system_decision"],
        b["decision"],
        tuple(b["pages"]),
        x.actor,
        b.get("note", ""),
        b.get("topic", ""),
        x.created_at,
        b.get("referral"),
        tuple(b.get("quotes", ())),
        b.get("answer", ""),
        dict(b.get("ratings", {})),
    )


def list_reviews(store: str | Path | LabelLog, question: str | None = None) -> list[Review]:
    """Every record in the order written; with ``question``, only that question's."""
    subject = normalise_question(question) if question is not None else None
    if isinstance(store, LabelLog):
        return [from_label(x) for x in store.labels("review", subject)]
    if not Path(store).is_dir():
        raise FileNotFoundError(f"no store folder at {store}")
    with LabelLog.read(store) as log:  # a read never creates or changes the log
        return [from_label(x) for x in log.labels("review", subject)]


def latest(reviews: Iterable[Review]) -> list[Review]:
    """The last record of each question, in the order the questions were first reviewed."""
    by_q: dict[str, Review] = {}
    for r in reviews:
        by_q[normalise_question(r.question)] = r  # insertion order = first review
    return list(by_q.values())


def export_questions(
    reviews: Iterable[Review],
    topics: Mapping[str, str] | None = None,
    id_prefix: str = "R",
) -> list[dict[str, Any]]:
    """Benchmark questions (spec §3) from the latest review of each question.

    ``topics`` maps doc_id to topic, to name an answerable question's topic after its
    evidence when the reviewer gave none; otherwise the topic is ``unlabelled``.
    """
    reviews = list(reviews)
    out: list[dict[str, Any]] = []
    for i, r in enumerate(latest(reviews), 1):
        topic = r.topic
        if not topic and r.decision == "answer" and topics:
            found = [topics.get(parse_page_id(p)[0], "") for p in r.pages]
            topic = next((t for t in found if t), "")
        obj: dict[str, Any] = {
            "id": f"{id_prefix}{i:04d}",
            "question": r.question,
            "topic": topic or "unlabelled",
            "type": "direct",
            "answerability": "answerable" if r.decision == "answer" else "unsupported",
        }
        if r.decision == "answer":
            obj["evidence"] = [{"page": p, "grade": 1} for p in r.pages]
        obj["review"] = {
            "id": r.id,
            "reviewer": r.reviewer,
            "note": r.note,
            "method": r.method,
            "text_version": r.text_version,
            "system_decision": r.system_decision,
            "created_at": r.created_at,
        }
        if r.referral is not None:
            obj["review"].update(referral=r.referral, quotes=list(r.quotes), answer=r.answer)
        if r.ratings:
            obj["ratings"] = dict(r.ratings)
        out.append(obj)
    return out


def export_jsonl(reviews: Iterable[Review], topics: Mapping[str, str] | None = None) -> str:
    """:func:`export_questions` as ``questions.jsonl`` text."""
    return "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in export_questions(reviews, topics))
