"""The reviewer log: what a person decided about a question the system referred.

The log is ``<store>/reviews.sqlite``, append-only: a record is never changed or
deleted (SQLite triggers refuse it); a later record on the same question supersedes
an earlier one when the log is exported. Each record holds the question, the method
and text version that retrieved the pages, what the system said (``answer``,
``refuse`` or ``review``), what the reviewer decided (``answer`` or ``refuse``), the
pages the reviewer accepted as evidence, who, a note and when.

:func:`export_questions` turns the log into benchmark questions (benchmark-format.md
§3): an accepted answer becomes an ``answerable`` question whose evidence is the
accepted pages (grade 1), a refusal an ``unsupported`` question.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sourcepage.records import parse_page_id
from sourcepage.store.db import now
from sourcepage.vocabulary import TEXT_VERSIONS

DB_NAME = "reviews.sqlite"
SYSTEM_DECISIONS: tuple[str, ...] = ("answer", "refuse", "review")
REVIEWER_DECISIONS: tuple[str, ...] = ("answer", "refuse")
MAX_QUESTION = 500
MAX_NOTE = 5000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reviews (
  id INTEGER PRIMARY KEY AUTOINCREMENT, question TEXT NOT NULL, method TEXT NOT NULL,
  text_version TEXT NOT NULL, system_decision TEXT NOT NULL, decision TEXT NOT NULL,
  pages TEXT NOT NULL, reviewer TEXT NOT NULL, note TEXT NOT NULL, topic TEXT NOT NULL,
  created_at TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS reviews_no_update BEFORE UPDATE ON reviews
  BEGIN SELECT RAISE(ABORT, 'the review log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS reviews_no_delete BEFORE DELETE ON reviews
  BEGIN SELECT RAISE(ABORT, 'the review log is append-only'); END;
"""

_lock = threading.Lock()


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

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pages"] = list(self.pages)
        return d


def _connect(store: str | Path) -> sqlite3.Connection:
    path = Path(store)
    if not path.is_dir():
        raise FileNotFoundError(f"no store folder at {path}")
    conn = sqlite3.connect(path / DB_NAME, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    with conn:
        conn.executescript(_SCHEMA)
    return conn


def normalise_question(question: str) -> str:
    """The key that makes two spellings of one question the same: case and spacing."""
    return re.sub(r"\s+", " ", question).strip().lower()


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
    if len(note) > MAX_NOTE:
        problems.append(f"the note is longer than {MAX_NOTE} characters")
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
) -> Review:
    """Append one review (one SQLite transaction); ValueError lists every problem."""
    pages = list(pages)
    problems = validate(question, method, text_version, system_decision, decision, pages, reviewer, note)
    if problems:
        raise ValueError("; ".join(problems))
    row = (
        question.strip(),
        method.strip(),
        text_version,
        system_decision,
        decision,
        json.dumps(pages),
        reviewer.strip(),
        note.strip(),
        topic.strip(),
        created_at or now(),
    )
    with _lock:
        conn = _connect(store)
        try:
            with conn:
                cur = conn.execute(
                    "INSERT INTO reviews (question, method, text_version, system_decision, decision,"
                    " pages, reviewer, note, topic, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    row,
                )
            rid = int(cur.lastrowid or 0)
        finally:
            conn.close()
    return Review(rid, row[0], row[1], row[2], row[3], row[4], tuple(pages), *row[6:])


def list_reviews(store: str | Path, question: str | None = None) -> list[Review]:
    """Every record in the order written; with ``question``, only that question's."""
    if not (Path(store) / DB_NAME).exists():
        return []
    conn = _connect(store)
    try:
        rows = conn.execute(
            "SELECT id, question, method, text_version, system_decision, decision, pages, reviewer,"
            " note, topic, created_at FROM reviews ORDER BY id"
        ).fetchall()
    finally:
        conn.close()
    out = [Review(*r[:6], tuple(json.loads(r[6])), *r[7:]) for r in rows]
    if question is not None:
        key = normalise_question(question)
        out = [r for r in out if normalise_question(r.question) == key]
    return out


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
        out.append(obj)
    return out


def export_jsonl(reviews: Iterable[Review], topics: Mapping[str, str] | None = None) -> str:
    """:func:`export_questions` as ``questions.jsonl`` text."""
    return "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in export_questions(reviews, topics))
