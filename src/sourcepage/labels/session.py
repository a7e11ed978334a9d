"""The interactive judging loop of ``sourcepage judge``, without a terminal of its own.

The caller injects three functions, so the loop runs the same in a terminal, in a
test or behind any other front end:

- ``ask(prompt) -> str``: one line of input; raising ``EOFError`` (or
  ``KeyboardInterrupt``) ends the session as if the reviewer typed ``q``;
- ``show(card)``: present one :class:`Card` (question, page, text window);
- ``say(message)``: a short hint, e.g. after an answer that is not a grade.

Grades are ``0``, ``1`` or ``2``; ``s`` skips a pair, ``q`` stops (the judgments
recorded so far stay, and a later session resumes with the pairs still pending).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sourcepage.labels.judgments import ADJUDICATOR, adjudicate, current, record
from sourcepage.records import Question, parse_page_id
from sourcepage.store.labels import LabelLog

Ask = Callable[[str], str]
Say = Callable[[str], None]

#: the answers the grade prompt accepts
ANSWERS = ("0", "1", "2", "s", "q")
#: characters of a page shown around its densest run of query terms
WINDOW = 1500


@dataclass(frozen=True)
class Card:
    """What a reviewer sees for one (question, page) pair."""

    header: str
    question_id: str
    question: Question | None  # None when the id is not in the question set
    page: str
    title: str
    text: str  # the page window, with "…" where it was cut
    marks: tuple[tuple[int, int], ...]  # spans of query terms in ``text``
    grades: tuple[tuple[str, int], ...] = ()  # (reviewer, grade) to reconcile, when adjudicating


def page_window(
    text: str, spans: Sequence[tuple[int, int]], limit: int = WINDOW
) -> tuple[str, list[tuple[int, int]]]:
    """Up to ``limit`` characters of a page around its densest run of ``spans`` (a "…"
    marks each cut), and the spans that fall inside, shifted to the window."""
    start = 0
    if len(text) > limit and spans:
        best = -1
        for a, _ in spans:
            s0 = max(0, min(a - 150, len(text) - limit))
            n = sum(1 for x, y in spans if x >= s0 and y <= s0 + limit)
            if n > best:
                best, start = n, s0
    pre = "…" if start else ""
    window = pre + text[start : start + limit] + ("…" if start + limit < len(text) else "")
    shift = len(pre) - start
    return window, [(a + shift, b + shift) for a, b in spans if a >= start and b <= start + limit]


class Cards:
    """Builds the cards of a store's pages for a question set."""

    def __init__(self, store: Any, questions: Sequence[Question], limit: int = WINDOW):
        self.store = store
        self.questions = {q.id: q for q in questions}
        self.limit = limit

    def card(self, qid: str, page: str, header: str, grades: Sequence[tuple[str, int]] = ()) -> Card:
        from sourcepage.retrieval.tokenize import content_terms, highlight_spans

        q = self.questions.get(qid)
        doc_id, n = parse_page_id(page)
        meta = self.store.page(doc_id, n)
        title = next((d.title for d in self.store.documents() if d.doc_id == doc_id), "")
        text = (meta or {}).get("cleaned", "") or "(no text on this page)"
        spans = highlight_spans(text, content_terms(q.question) if q else set())
        window, marks = page_window(text, spans, self.limit)
        return Card(header, qid, q, page, title, window, tuple(marks), tuple(grades))


def ask_grade(ask: Ask, say: Say, prompt: str) -> str:
    """'0', '1', '2', 's' or 'q'; asks again after anything else; end of input is 'q'."""
    while True:
        try:
            ans = ask(prompt).strip().lower()
        except (EOFError, KeyboardInterrupt):
            return "q"
        if ans in ANSWERS:
            return ans
        say("answer 0, 1, 2, s or q")


def ask_note(ask: Ask) -> str:
    """An optional note; end of input gives none."""
    try:
        return ask("note (optional)").strip()
    except (EOFError, KeyboardInterrupt):
        return ""


def judge_pairs(
    conn: LabelLog,
    cards: Cards,
    todo: Sequence[tuple[str, str]],
    reviewer: str,
    *,
    ask: Ask,
    show: Callable[[Card], None],
    say: Say,
) -> int:
    """Ask ``reviewer`` to grade each (question id, page) pair in turn and record each
    grade with its note; returns how many judgments were recorded."""
    done = 0
    for i, (qid, page) in enumerate(todo, 1):
        show(cards.card(qid, page, f"{i}/{len(todo)}"))
        ans = ask_grade(ask, say, "grade [0/1/2], s=skip, q=quit")
        if ans == "q":
            break
        if ans == "s":
            continue
        record(conn, qid, page, int(ans), reviewer, ask_note(ask))
        done += 1
    return done


def adjudicate_pairs(
    conn: LabelLog,
    cards: Cards,
    disagreements: Sequence[Mapping[str, Any]],
    reviewer: str,
    other: str,
    *,
    ask: Ask,
    show: Callable[[Card], None],
    say: Say,
) -> int:
    """Walk the disagreements of ``reviewer`` and ``other`` (``judgments.disagreements``)
    not yet adjudicated by ``reviewer`` and record a final grade for each; returns how
    many were settled."""
    settled = current(conn, ADJUDICATOR + reviewer)
    todo = [d for d in disagreements if (d["question_id"], d["page"], ADJUDICATOR + reviewer) not in settled]
    done = 0
    for i, d in enumerate(todo, 1):
        grades = ((reviewer, d[reviewer]), (other, d[other]))
        show(cards.card(d["question_id"], d["page"], f"adjudicate {i}/{len(todo)}", grades))
        ans = ask_grade(ask, say, "final grade [0/1/2], s=skip, q=quit")
        if ans == "q":
            break
        if ans == "s":
            continue
        adjudicate(conn, d["question_id"], d["page"], int(ans), reviewer, ask_note(ask))
        done += 1
    return done
