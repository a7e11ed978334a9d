"""benchmarks/paired_answers.py: two variants' decisions files paired per question."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "paired_answers.py"


def _load():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("paired_answers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(path: Path, rows: list[tuple[str, str, str, bool | None]]) -> Path:
    """A decisions.py --out file of (id, class, decision, stating) rows."""
    out = [{"id": i, "class": c, "decision": d, "stating": s} for i, c, d, s in rows]
    path.write_text(json.dumps({"questions": "benchmarks/osha6/dev.jsonl", "rows": out}), encoding="utf-8")
    return path


def test_a_lost_answer_and_an_answered_negative_are_counted_and_named(tmp_path: Path) -> None:
    m = _load()
    base = _write(
        tmp_path / "a.json",
        [("Q1", "answerable", "answer", True), ("Q2", "answerable", "answer", False),
         ("Q3", "unsupported", "refuse", None), ("Q4", "answerable", "review", True)],
    )
    new = _write(
        tmp_path / "b.json",
        [("Q1", "answerable", "review", True), ("Q2", "answerable", "answer", False),
         ("Q3", "unsupported", "answer", None), ("Q4", "answerable", "review", True)],
    )
    res = m.compare([(base, new)], ("fp32", "int8"))
    assert res["labelled_answerable"] == 3 and res["questions"] == 4
    assert res["fp32"] == {"answers": 2, "good": 1, "wrong": 1}
    assert res["int8"] == {"answers": 2, "good": 0, "wrong": 2}
    assert res["recall_difference"][0] == pytest.approx(-1 / 3, abs=1e-4)
    assert res["mcnemar_good"]["b10"] == 1 and res["mcnemar_good"]["b01"] == 0
    assert [c["id"] for c in res["changed"]] == ["osha6/Q1", "osha6/Q3"]


def test_pairs_of_other_questions_are_refused(tmp_path: Path) -> None:
    m = _load()
    a = _write(tmp_path / "a.json", [("Q1", "answerable", "answer", True)])
    b = _write(tmp_path / "b.json", [("Q2", "answerable", "answer", True)])
    with pytest.raises(SystemExit, match="different questions"):
        m.compare([(a, b)], ("a", "b"))
