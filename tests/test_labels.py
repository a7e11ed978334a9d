"""The label log (store/labels.py): one append-only table for judgments, reviews and
referrals, and the one-time import of an older store's judgments.sqlite / reviews.sqlite."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from sourcepage.labels import judgments as J
from sourcepage.labels import reviews as R
from sourcepage.store.labels import LabelLog


def _old_files(store: Path) -> None:
    """The two private databases of stores written before the label log."""
    j = sqlite3.connect(store / "judgments.sqlite")
    j.executescript(
        "CREATE TABLE judgments (id INTEGER PRIMARY KEY AUTOINCREMENT, question_id TEXT NOT NULL,"
        " page TEXT NOT NULL, grade INTEGER NOT NULL, reviewer TEXT NOT NULL,"
        " note TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL);"
        "INSERT INTO judgments VALUES (1, 'Q1', 'a#p1', 2, 'ann', 'full', '2026-01-01T00:00:00.000001Z');"
        "INSERT INTO judgments VALUES (2, 'Q1', 'a#p1', 1, 'ann', 'second look',"
        " '2026-01-02T00:00:00.000001Z');"
    )
    j.commit()
    j.close()
    r = sqlite3.connect(store / "reviews.sqlite")
    r.executescript(
        "CREATE TABLE reviews (id INTEGER PRIMARY KEY AUTOINCREMENT, question TEXT NOT NULL,"
        " method TEXT NOT NULL, text_version TEXT NOT NULL, system_decision TEXT NOT NULL,"
        " decision TEXT NOT NULL, pages TEXT NOT NULL, reviewer TEXT NOT NULL, note TEXT NOT NULL,"
        " topic TEXT NOT NULL, created_at TEXT NOT NULL);"
    )
    r.execute(
        "INSERT INTO reviews VALUES (1, 'Who removes  the lock?', 'bm25', 'raw', 'review', 'answer', ?, 'bo',"
        " 'ok', 'loto', '2026-01-03T00:00:00Z')",
        (json.dumps(["a#p2"]),),
    )
    r.commit()
    r.close()


def test_old_stores_are_read_into_the_log_once(tmp_path: Path) -> None:
    _old_files(tmp_path)
    log = J.connect(tmp_path)
    assert [(h["grade"], h["note"], h["created_at"]) for h in J.history(log, "Q1")] == [
        (2, "full", "2026-01-01T00:00:00.000001Z"),
        (1, "second look", "2026-01-02T00:00:00.000001Z"),
    ]
    assert J.current(log) == {("Q1", "a#p1", "ann"): 1}
    log.close()
    (rv,) = R.list_reviews(tmp_path, "who removes the LOCK?")
    assert (rv.reviewer, rv.pages, rv.topic, rv.created_at) == (
        "bo",
        ("a#p2",),
        "loto",
        "2026-01-03T00:00:00Z",
    )
    R.record(tmp_path, "Who removes the lock?", "bm25", "raw", "review", "refuse", [], "cy")
    with LabelLog(tmp_path) as again:  # opening again imports nothing twice
        assert [x.kind for x in again.labels()] == ["judgment", "judgment", "review", "review"]


def test_the_log_refuses_changes_and_bad_rows(tmp_path: Path) -> None:
    with LabelLog(tmp_path) as log:
        log.append("ask", "7", "system", {"question": "q"})
        with pytest.raises(ValueError, match="unknown label kind"):
            log.append("vote", "7", "system", {})
    raw = sqlite3.connect(tmp_path / "labels.sqlite")
    for sql in ("UPDATE labels SET actor='x'", "DELETE FROM labels"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            raw.execute(sql)
    with pytest.raises(sqlite3.IntegrityError):  # not JSON
        raw.execute(
            "INSERT INTO labels (kind, subject, actor, body, created_at) VALUES ('ask','1','s','{x','t')"
        )
    raw.close()


def test_review_ratings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="rating correctness must be a whole number from 1 to 5"):
        R.record(
            tmp_path, "q?", "bm25", "raw", "review", "refuse", [], "a", referral=1, ratings={"correctness": 6}
        )
    with pytest.raises(ValueError, match="unknown rating 'style'"):
        R.record(tmp_path, "q?", "bm25", "raw", "review", "refuse", [], "a", referral=1, ratings={"style": 3})
    r = R.record(
        tmp_path,
        "q?",
        "bm25",
        "raw",
        "review",
        "answer",
        ["a#p1"],
        "a",
        referral=1,
        quotes=["Each lock is removed by the employee who applied it."],
        answer="The one who applied it.",
        ratings={"correctness": 5, "usefulness": 4},
    )
    (back,) = R.list_reviews(tmp_path)
    assert back == r and back.ratings == {"correctness": 5, "usefulness": 4}
    (q,) = R.export_questions([back])
    assert q["evidence"] == [{"page": "a#p1", "grade": 1}] and q["ratings"]["correctness"] == 5


def test_eval_report_gives_the_means_of_the_ratings_a_set_carries(tmp_path: Path) -> None:
    from sourcepage.evaluation.questions import question_from_dict
    from sourcepage.evaluation.report import ratings_section

    for i, (c, u) in enumerate(((4, 5), (2, 3))):
        R.record(
            tmp_path,
            f"q{i}?",
            "bm25",
            "raw",
            "review",
            "answer",
            ["a#p1"],
            "a",
            referral=i + 1,
            ratings={"correctness": c, "usefulness": u},
        )
    qs = [question_from_dict(d) for d in R.export_questions(R.list_reviews(tmp_path))]
    plain = question_from_dict({**R.export_questions(R.list_reviews(tmp_path))[0], "id": "X1"})
    plain.extra.pop("ratings")
    text = ratings_section([*qs, plain])
    assert "2 of 3 questions carry" in text
    assert "| correctness | 2 | 3.00 | 2 | 4 |" in text and "| usefulness | 2 | 4.00 | 3 | 5 |" in text
    assert ratings_section([plain]) == ""


def test_a_referral_keeps_each_draft_quotes_jurisdiction() -> None:
    """The reviewer's case page marks each draft quote with its jurisdiction when they span
    several (a comparison's sides) and names its section: the referral keeps both."""
    from sourcepage.labels.referrals import _shown

    result = {
        "question": "Compare OSHA's position with the NSW code.",
        "method": "sect:route:rrf:bm25+dense",
        "text_version": "raw",
        "results": [],
        "answer": {
            "text": "…",
            "quotes": [
                {
                    "text": "Only a lock isolates.",
                    "page": "nsw#p44",
                    "jurisdiction": "AU-NSW",
                    "section": "4. Specific control measures › 4.5. Isolating energy sources",
                },
                {"text": "A tag alone may do.", "page": "osha#p17", "jurisdiction": "US"},
            ],
        },
    }
    shown = _shown(result)["quotes"]
    assert [q["jurisdiction"] for q in shown] == ["AU-NSW", "US"]
    assert [q["section"] for q in shown] == [
        "4. Specific control measures › 4.5. Isolating energy sources",
        "",
    ]
