"""The desk reads by index (issue 51): with 20,000 referrals every desk read scanned the
whole label log (1-2.6 s). Here each read's work, counted in SQLite virtual-machine
steps, stays the same when the log grows fourfold; a page walk by ``after`` returns every
referral once, in order, with the counts and tag filters of a brute-force reading; and a
log written before the indexes existed is indexed, with the same numbers, when opened.
``python benchmarks/desk_scale.py`` times the reads at 100,000 referrals."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from sourcepage.labels import referrals
from sourcepage.store import labels as store_labels
from sourcepage.store.labels import LabelLog

JURIS = ["UK", "US", "NZ", "EU"]
TOPICS = ["loto", "ppe", "noise"]


def _fill(store: Path, start: int, n: int) -> None:
    with LabelLog(store) as log, log.transaction():
        for i in range(start, start + n):
            body = {
                "question": f"question {i}",
                "filters": {},
                "method": "bm25",
                "text_version": "raw",
                "pages": [],
                "quotes": [],
                "draft": "",
                "reasons": [],
                "jurisdictions": [JURIS[i % 4], JURIS[(i + 1) % 4]],
                "topics": [TOPICS[i % 3]],
                "routed": [],
            }
            ref = log.add("referral", f"question {i}\n{{}}", "system", body)
            if i % 4 == 0:
                log.add("ask", str(ref.seq), "system", {"question": body["question"]})
            if i % 3 == 0:
                review = {
                    "question": body["question"],
                    "method": "bm25",
                    "text_version": "raw",
                    "system_decision": "review",
                    "decision": "refuse",
                    "pages": [],
                    "note": "",
                    "topic": "",
                    "referral": ref.seq,
                    "quotes": [],
                    "answer": "",
                    "ratings": {},
                }
                log.add("review", body["question"], "ada", review)


def _steps(monkeypatch: pytest.MonkeyPatch, fn) -> int:
    """SQLite VM steps (in units of 100) that ``fn`` costs, over every log it opens."""
    count = [0]
    real = LabelLog.reader.__func__

    def counting(cls, store):
        log = real(cls, store)
        if log is not None:
            log.conn.set_progress_handler(lambda: count.__setitem__(0, count[0] + 1) or 0, 100)
        return log

    monkeypatch.setattr(LabelLog, "reader", classmethod(counting))
    fn()
    monkeypatch.undo()
    return count[0]


READS = {
    "get": lambda s: referrals.get(s, 300),
    "pending page": lambda s: referrals.page(s, "pending", limit=50),
    "decided page": lambda s: referrals.page(s, "decided", limit=50),
    "a later page": lambda s: referrals.page(s, None, limit=50, after=250),
    "two tags": lambda s: referrals.page(s, "pending", "UK", "noise", limit=50),
    "one tag": lambda s: referrals.page(s, "pending", "UK", None, limit=50),
    "facets": lambda s: referrals.facets(s),
}


@pytest.mark.parametrize("read", list(READS))
def test_a_desk_read_costs_the_same_on_a_log_four_times_larger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    _fill(tmp_path, 1, 400)
    small = _steps(monkeypatch, lambda: READS[read](tmp_path))
    _fill(tmp_path, 401, 1200)
    large = _steps(monkeypatch, lambda: READS[read](tmp_path))
    assert large <= 1.5 * small + 20, (read, small, large)


def _brute(store: Path) -> list[referrals.Referral]:
    with LabelLog(store) as log:
        rows = log.labels("referral")
        decided = {int(x.body["referral"]) for x in log.labels("review") if x.body.get("referral")}
    refs = [referrals.Referral(x.seq, x.subject, x.created_at, x.body) for x in rows]
    for r in refs:
        r.decision = True if r.id in decided else None  # type: ignore[assignment]
    return refs


@pytest.mark.parametrize(
    ("status", "juris", "topic"),
    [(None, None, None), ("pending", "UK", None), ("decided", None, "noise"), ("pending", "NZ", "ppe")],
)
def test_paging_and_counts_match_a_full_reading(tmp_path: Path, status, juris, topic) -> None:
    _fill(tmp_path, 1, 300)
    want = [
        r.id
        for r in _brute(tmp_path)
        if (juris is None or juris in r.shown["jurisdictions"])
        and (topic is None or topic in r.shown["topics"])
    ]
    every = {r.id: r for r in _brute(tmp_path)}
    counts = {
        "pending": sum(every[i].decision is None for i in want),
        "decided": sum(every[i].decision is not None for i in want),
    }
    if status is not None:
        want = [i for i in want if (every[i].decision is not None) == (status == "decided")]
    got, after = [], 0
    while True:
        page, c, after = referrals.page(tmp_path, status, juris, topic, limit=37, after=after)
        assert c == counts
        got += [r.id for r in page]
        if after is None:
            break
    assert got == want
    one = referrals.get(tmp_path, 12)
    assert one is not None and one.status == "decided" and len(one.asks) == 1
    assert referrals.facets(tmp_path) == {"jurisdictions": sorted(JURIS), "topics": sorted(TOPICS)}


def test_a_log_from_before_the_indexes_is_indexed_when_opened(tmp_path: Path) -> None:
    """Rows written without the index tables (an older version) get the same numbers."""
    conn = sqlite3.connect(tmp_path / "labels.sqlite")
    conn.executescript(store_labels._SCHEMA)
    for i in range(1, 31):
        body = {
            "question": f"q{i}",
            "jurisdictions": ["UK"],
            "topics": ["loto"],
            "method": "bm25",
            "text_version": "raw",
        }
        conn.execute(
            "INSERT INTO labels (kind, subject, actor, body, created_at) VALUES (?,?,?,?,?)",
            ("referral", f"q{i}", "system", json.dumps(body), f"2026-01-01T00:00:{i:02d}.000000Z"),
        )
        if i % 2:
            conn.execute(
                "INSERT INTO labels (kind, subject, actor, body, created_at) VALUES (?,?,?,?,?)",
                ("judgment", "Q1", "ada", json.dumps({"page": "d#p1", "grade": 1}), "2026"),
            )
    conn.execute(
        "INSERT INTO labels (kind, subject, actor, body, created_at) VALUES (?,?,?,?,?)",
        (
            "review",
            "q7",
            "ada",
            json.dumps(
                {
                    "question": "q7",
                    "method": "bm25",
                    "text_version": "raw",
                    "system_decision": "review",
                    "decision": "refuse",
                    "pages": [],
                    "referral": 7,
                }
            ),
            "2026",
        ),
    )
    conn.commit()
    conn.close()
    page, counts, _ = referrals.page(tmp_path, None, "UK", "loto", limit=100)
    assert [r.id for r in page] == list(range(1, 31)) and counts == {"pending": 29, "decided": 1}
    assert referrals.get(tmp_path, 7).status == "decided" and referrals.get(tmp_path, 8).question == "q8"
    with LabelLog(tmp_path) as log:
        assert log.add("referral", "q31", "system", {"question": "q31"}).seq == 31
