"""The first searches of a new service, many at once (issue 51, point 9).

A service is new at start-up when its warm-up could not load (``app.warm``) and after every
ingest (``api.service`` builds another for the new content while requests keep coming):
its first searches load the indexes and fill the searcher's caches and the label log
together. A guard, not the fix of a found cause: it passed on the code of 2026-12-07, as did
every load run of that day (docs/reliability.md, "The 50-client test under load").
"""

from __future__ import annotations

import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sourcepage import api
from sourcepage.bench.load import QUESTIONS
from sourcepage.labels.referrals import referrals
from sourcepage.retrieval.index import build_indexes
from sourcepage.store.labels import DB_NAME

THREADS = 8


@pytest.fixture
def often() -> Iterator[None]:
    """Threads change places every 10 µs (the default is 5 ms): interleavings come often."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


def test_first_searches_of_a_new_service_at_once(safety_store: Path, tmp_path: Path, often: None) -> None:
    # the shared store may hold other tests' referrals: this test's own label log starts empty
    fresh = shutil.ignore_patterns(f"{DB_NAME}*")
    store = Path(shutil.copytree(safety_store, tmp_path / "store", ignore=fresh))
    build_indexes(store, "raw", ["bm25"])
    start = threading.Barrier(THREADS)
    answers: dict[int, Any] = {}
    errors: list[str] = []

    def ask(i: int) -> None:
        start.wait()
        try:  # refer=True: a review decision writes a referral, as POST /search does
            answers[i] = api.search(QUESTIONS[i % len(QUESTIONS)], store, method="bm25", build=False)
        except Exception as e:  # noqa: BLE001 - every failure is the finding
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert errors == [] and len(answers) == THREADS
    # the same answers as one at a time on the now warm service
    for i, got in answers.items():
        again = api.search(QUESTIONS[i % len(QUESTIONS)], store, method="bm25", build=False)
        assert [r["page"] for r in got["results"]] == [r["page"] for r in again["results"]]
        assert got["decision"] == again["decision"]
    # each question decided review was referred once, its repeats joined it
    reviewed = {got["question"] for got in answers.values() if got["decision"] == "review"}
    assert reviewed and sorted(r.question for r in referrals(store)) == sorted(reviewed)
