"""The answer log (``<store>/answers.jsonl``): appended to, rotated above its size cap."""

from __future__ import annotations

import json
from pathlib import Path

from sourcepage.support import answer
from sourcepage.support.answer import LOG_NAME, MAX_LOG_BYTES, log_answer

ANSWER = {"status": "answer", "quotes": [], "text": "quoted"}


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_log_appends(tmp_path: Path) -> None:
    log_answer(tmp_path, "q1?", "bm25", "answer", ANSWER)
    log_answer(tmp_path, "q2?", "lsa", "review", ANSWER)
    rows = _lines(tmp_path / LOG_NAME)
    assert [(r["question"], r["method"], r["decision"]) for r in rows] == [
        ("q1?", "bm25", "answer"),
        ("q2?", "lsa", "review"),
    ]
    assert not (tmp_path / (LOG_NAME + ".1")).exists()


def test_log_over_the_cap_is_rotated(tmp_path: Path) -> None:
    assert MAX_LOG_BYTES == 50 * 1024 * 1024
    log = tmp_path / LOG_NAME
    old = tmp_path / (LOG_NAME + ".1")
    old.write_text("an older rotation\n", encoding="utf-8")
    with open(log, "wb") as f:  # sparse: 50 MiB + 1 byte without writing them
        f.truncate(MAX_LOG_BYTES + 1)
    log_answer(tmp_path, "after the cap?", "bm25", "answer", ANSWER)
    assert old.stat().st_size == MAX_LOG_BYTES + 1  # the full log moved, replacing the older .1
    assert [r["question"] for r in _lines(log)] == ["after the cap?"]


def test_log_at_the_cap_is_kept(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(answer, "MAX_LOG_BYTES", 100)
    log = tmp_path / LOG_NAME
    log.write_bytes(b"x" * 99 + b"\n")
    log_answer(tmp_path, "q?", "bm25", "answer", ANSWER)
    assert not (tmp_path / (LOG_NAME + ".1")).exists()
    assert log.stat().st_size > 100
    log_answer(tmp_path, "next?", "bm25", "answer", ANSWER)  # now over: rotated first
    assert (tmp_path / (LOG_NAME + ".1")).stat().st_size > 100
    assert [r["question"] for r in _lines(log)] == ["next?"]


def test_rotate_without_a_log(tmp_path: Path) -> None:
    assert answer.rotate_log(tmp_path / LOG_NAME, 0) is False
