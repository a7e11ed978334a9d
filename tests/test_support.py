"""Support stage: thresholds, features, the staged decision, extractive answers, and a
calibrated policy used by search."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from sourcepage import api
from sourcepage.cli import app
from sourcepage.records import Document, Hit
from sourcepage.support.answer import extract_answer
from sourcepage.support.calibrate import (
    Classifier,
    load_policy,
    precision_threshold,
    recall_threshold,
)
from sourcepage.support.decide import Calibration, decide
from sourcepage.support.features import FEATURES, features
from sourcepage.text.sentences import split_sentences as sentences


def _doc(doc_id: str, jurisdiction: str = "US") -> Document:
    return Document.from_dict({"doc_id": doc_id, "jurisdiction": jurisdiction, "title": doc_id})


def test_recall_threshold_hand_case() -> None:
    pos = [0.1 * i for i in range(1, 11)]  # 0.1 … 1.0
    # keep ≥ 90%: at most floor(0.1·10) = 1 question below t → t = the 2nd smallest = 0.2
    assert recall_threshold(pos, 0.9) == pytest.approx(0.2)
    assert recall_threshold(pos, 1.0) == pytest.approx(0.1)
    assert np.mean(np.array(pos) >= recall_threshold(pos, 0.95)) >= 0.95
    assert recall_threshold([], 0.95) == -math.inf


def test_precision_threshold_hand_case() -> None:
    scores = [0.9, 0.8, 0.7, 0.6, 0.5]
    y = [1, 1, 0, 1, 0]
    # t=0.5: 3/5; t=0.6: 3/4; t=0.7: 2/3; t=0.8: 2/2 → first reaching 0.95 is 0.8
    assert precision_threshold(scores, y, 0.95) == pytest.approx(0.8)
    assert precision_threshold(scores, y, 0.75) == pytest.approx(0.6)
    assert precision_threshold([0.1], [0], 0.5) == math.inf


def test_features_hand_case() -> None:
    a = [Hit(1, "d#p1", 9.0, "d#p1#c1"), Hit(2, "d#p2", 7.0, "d#p2#c1"), Hit(3, "e#p1", 1.0, "e#p1#c1")]
    b = [Hit(1, "d#p2", 0.8, "d#p2#c1"), Hit(2, "d#p1", 0.7, "d#p1#c1")]
    passages = {"d#p1#c1": "group lockout uses a lockbox", "d#p2#c1": "shift change", "e#p1#c1": ""}
    f = features("group lockbox rules", a, b, passages, {"group": 5, "lockbox": 1, "rules": 0}, 100)
    assert list(f) == list(FEATURES)
    assert f["a_top"] == 9.0 and f["a_margin"] == 2.0
    assert f["b_top"] == 0.8 and f["b_margin"] == pytest.approx(0.1)
    assert f["overlap5"] == pytest.approx(2 / 5)
    assert f["rr_a_in_b"] == pytest.approx(1 / 2)  # a's top page d#p1 is 2nd in b
    assert f["rr_b_in_a"] == pytest.approx(1 / 2)
    assert f["docs_top5"] == 2.0
    w = {
        t: math.log(1 + (100 - df + 0.5) / (df + 0.5))
        for t, df in (("group", 5), ("lockbox", 1), ("rules", 0))
    }
    assert f["coverage"] == pytest.approx((w["group"] + w["lockbox"]) / sum(w.values()))
    assert f["missing_idf"] == pytest.approx(w["rules"])


def test_decide_rules() -> None:
    us, uk = _doc("a", "US"), _doc("b", "UK")
    assert decide("bm25", [], True).decision == "refuse"
    assert decide("bm25", [us], False).decision == "refuse"
    assert decide("bm25", [us], True).decision == "review"  # not calibrated
    cross = decide("bm25", [us, uk], True)
    assert cross.decision == "review" and "US, UK" in cross.reasons[0]
    cal = Calibration(0.9, 0.3, 0.8, 0.95, 40, "bm25 + dense on raw")
    assert decide("bm25", [us], True, cal).decision == "answer"
    assert decide("bm25", [us, uk], True, cal).decision == "review"
    low = Calibration(0.1, 0.3, 0.8, 0.95, 40, "bm25 + dense on raw")
    refused = decide("bm25", [us], True, low)
    assert refused.decision == "refuse" and "0.10" in refused.reasons[0]
    mid = Calibration(0.5, 0.3, 0.8, 0.95, 40, "p")
    assert decide("bm25", [us], True, mid).decision == "review"
    conflict = Calibration(0.9, 0.3, 0.8, 0.95, 40, "p", conflicting=True)
    assert decide("bm25", [us], True, conflict).decision == "review"


def test_classifier_is_plain_logistic() -> None:
    c = Classifier(mean=[0.0, 1.0], scale=[1.0, 2.0], coef=[2.0, -1.0], intercept=0.5)
    x = np.array([[1.0, 3.0]])  # z = (1, 1) → 2 − 1 + 0.5 = 1.5
    assert c.proba(x)[0] == pytest.approx(1 / (1 + math.exp(-1.5)))


def test_extractive_answer_quotes_and_cites() -> None:
    results = [
        {
            "page": "d#p3",
            "doc_id": "d",
            "page_number": 3,
            "passage": "Intro text here that is long enough. Each employee must apply a personal lock to "
            "the group lockbox before work starts. Unrelated sentence about weather and lunch breaks.",
        }
    ]
    ans = extract_answer("Who applies a personal lock to the group lockbox?", results, "answer")
    assert ans["status"] == "answer"
    assert ans["quotes"][0]["text"].startswith("Each employee must apply a personal lock")
    assert ans["quotes"][0]["citation"] == "[d p.3]"
    assert "[d p.3]" in ans["text"]
    assert extract_answer("anything", results, "refuse")["quotes"] == []
    assert extract_answer("Who applies a lock?", results, "review")["status"] == "draft for review"
    assert sentences("First sentence is here for sure. ■ A bullet item that is long enough here.") == [
        "First sentence is here for sure.",
        "A bullet item that is long enough here.",
    ]


QUESTIONS = [
    ("A1", "How does a group lockbox work in group lockout?", "answerable", "loto_energy_control#p2"),
    (
        "A2",
        "What atmospheric testing is needed before entry into a permit-required confined space?",
        "answerable",
        "confined_space_entry#p3",
    ),
    ("A3", "When must hearing protection be worn at work?", "answerable", "hse_ppe_at_work#p2"),
    (
        "A4",
        "How close must the tongue guard be to the abrasive wheel of a bench grinder?",
        "answerable",
        "machine_guarding#p2",
    ),
    (
        "A5",
        "Who removes a lock when the employee who applied it has left the site?",
        "answerable",
        "loto_energy_control#p3",
    ),
    (
        "A6",
        "What is a face-fit test for respiratory protective equipment?",
        "answerable",
        "hse_ppe_at_work#p3",
    ),
    ("U1", "What fine does a company pay for a missing lockout lock?", "unsupported", None),
    ("U2", "Which brand of gas detector is approved for sewer entry?", "unsupported", None),
    ("U3", "What colour must the hearing protection zone sign be painted?", "unsupported", None),
    ("O1", "How long should sourdough bread proof in the fridge?", "out_of_domain", None),
    ("O2", "When is the next total solar eclipse visible from Spain?", "out_of_domain", None),
    ("O3", "What is the offside rule in association football?", "out_of_domain", None),
]


def test_calibrate_cli_stores_a_policy_that_search_uses(fresh_store: Path, tmp_path: Path) -> None:
    qfile = tmp_path / "dev.jsonl"
    qfile.write_text(
        "\n".join(
            json.dumps(
                {
                    "id": i,
                    "question": q,
                    "topic": "loto" if a != "out_of_domain" else "none",
                    "type": "direct",
                    "answerability": a,
                    **({"evidence": [{"page": p, "grade": 2}]} if p else {}),
                }
            )
            for i, q, a, p in QUESTIONS
        )
        + "\n"
    )
    res = CliRunner().invoke(
        app, ["calibrate", "--questions", str(qfile), "--store", str(fresh_store), "--semantic", "lsa"]
    )
    assert res.exit_code == 0, res.output
    assert "Held-out" in res.output and "policy fitted on 12 questions" in res.output
    pol = load_policy(fresh_store, "raw")
    assert pol is not None and pol.semantic == "lsa" and pol.n_questions == {"answerable": 6, "negative": 6}
    assert pol.t_refuse <= pol.t_answer
    out = api.search("How does a group lockbox work in group lockout?", fresh_store, k=3, log=True)
    assert out["support"] is not None and out["support"]["policy"] == "bm25 + lsa on raw"
    assert out["decision"] in ("answer", "review", "refuse")
    assert all(r in out for r in ("question", "method", "text_version", "decision", "reasons", "results"))
    log = (fresh_store / "answers.jsonl").read_text().splitlines()
    assert json.loads(log[-1])["question"].startswith("How does a group lockbox")


def test_decision_shares_hand_case() -> None:
    from sourcepage.evaluation.answerability import decision_shares
    from sourcepage.records import Question

    qs = [
        Question(id=i, question="q?", topic="t", type="direct", answerability=a)
        for i, a in (("A", "answerable"), ("B", "answerable"), ("U", "unsupported"))
    ]
    sh = decision_shares(["answer", "refuse", "answer"], qs)
    assert sh["answerable"] == {"answer": 0.5, "review": 0.0, "refuse": 0.5, "n": 2}
    assert math.isnan(sh["out_of_domain"]["refuse"]) and sh["out_of_domain"]["n"] == 0
    assert sh["answerable_refused"] == ["B"] and sh["unsupported_answered"] == ["U"]
    assert decision_shares([True, np.bool_(False), False], qs)["unsupported"]["refuse"] == 1.0


def test_run_calibration_fits_saves_and_compares(fresh_store: Path) -> None:
    from sourcepage.evaluation.answerability import held_out
    from sourcepage.records import Question
    from sourcepage.support.calibrate import run_calibration

    qs = [
        Question(
            id=i,
            question=q,
            topic="t",
            type="direct",
            answerability=a,
            evidence={p: 2} if p else {},
        )
        for i, q, a, p in QUESTIONS
    ]
    ticks: list[tuple[int, int]] = []
    rep = run_calibration(fresh_store, qs, semantic="lsa", progress=lambda d, n: ticks.append((d, n)))
    assert ticks == [(i, 12) for i in range(1, 13)]
    assert rep.questions == 12 and rep.path == fresh_store / "indexes" / "raw" / "policy.json"
    assert load_policy(fresh_store, "raw") == rep.policy and rep.policy.semantic == "lsa"
    assert set(rep.single_scores) == {"bm25", "lsa"} and len(rep.single_scores["lsa"]) == 12
    rows = held_out(rep.cv, qs, rep.single_scores)
    assert [h.policy for h in rows] == ["classifier", "bm25 top score", "lsa top score"]
    for h in rows:
        assert 0.0 <= h.auroc_near <= 1.0
        assert set(h.refused) == {"answerable", "unsupported", "out_of_domain"}
        assert all(0.0 <= v <= 1.0 for v in h.refused.values())
    assert len(rep.cv["probability"]) == 12


def test_reviews_cli_records_and_exports(fresh_store: Path, tmp_path: Path) -> None:
    from sourcepage.evaluation.questions import read_questions

    runner = CliRunner()
    out = tmp_path / "reviewed.jsonl"
    res = runner.invoke(
        app,
        [
            "reviews",
            "--store",
            str(fresh_store),
            "--question",
            "Who removes a lock?",
            "--decision",
            "answer",
            "--page",
            "loto_energy_control#p3",
            "--reviewer",
            "alice",
            "--export",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    qs = read_questions(out, known_pages={"loto_energy_control#p3"})
    assert qs[0].evidence == {"loto_energy_control#p3": 1} and qs[0].answerability == "answerable"
    bad = runner.invoke(
        app,
        [
            "reviews",
            "--store",
            str(fresh_store),
            "--question",
            "Q?",
            "--decision",
            "maybe",
            "--reviewer",
            "bob",
        ],
    )
    assert bad.exit_code == 2 and "answer or refuse" in bad.output
