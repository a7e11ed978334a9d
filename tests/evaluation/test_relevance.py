"""Typed Qrels and Run, the one TREC writer with an id encoder, and the vocabulary."""

from __future__ import annotations

from sourcepage import records, vocabulary
from sourcepage.evaluation.metrics import evaluate
from sourcepage.evaluation.relevance import Qrels, Run, RunHit, run_name
from sourcepage.evaluation.runs import (
    read_trec_qrels,
    read_trec_run,
    trec_eval_order,
    write_trec_qrels,
    write_trec_run,
)
from sourcepage.records import Question


def _q(qid: str, answerability: str = "answerable", evidence: dict[str, int] | None = None) -> Question:
    return Question(qid, "q?", "loto", "direct", answerability, evidence or {})


def test_qrels_from_questions_and_helpers():
    qs = [_q("A", evidence={"a#p1": 2, "b#p2": 1}), _q("U", "unsupported"), _q("B", evidence={"c#p1": 1})]
    qrels = Qrels.from_questions(qs)
    assert qrels == {"A": {"a#p1": 2, "b#p2": 1}, "B": {"c#p1": 1}} and list(qrels) == ["A", "B"]
    assert qrels.grade("A", "a#p1") == 2 and qrels.grade("A", "z#p1") == 0 and qrels.grade("U", "a#p1") == 0
    judged = Qrels({"q1": {"x": 0}, "q2": {"y": 1, "z": 0}, "q3": {"w": 2}})
    assert judged.relevant_ids() == ["q2", "q3"]  # q1 has only a grade-0 judgement
    assert list(judged.only(["q3", "nope", "q1"])) == ["q3", "q1"]


def test_run_from_rows_orders_by_rank_and_feeds_metrics():
    rows = [
        {
            "question_id": "A",
            "text_version": "raw",
            "method": "rrf:bm25+lsa",
            "rank": r,
            "page": p,
            "score": s,
            "chunk_id": f"{p}#c1",
        }
        for r, p, s in ((2, "a#p1", 0.5), (1, "b#p2", 0.9))
    ]
    runs = Run.from_rows(rows)
    run = runs[("raw", "rrf:bm25+lsa")]
    assert run.name == "raw__rrf-bm25_lsa" == run_name("raw", "rrf:bm25+lsa")
    assert run.ranked("A") == ["b#p2", "a#p1"] and run.ranked("missing") == []
    assert run["A"][0] == RunHit("b#p2", 0.9, "b#p2", "b#p2#c1")
    assert run.scored() == {"A": [("b#p2", 0.9), ("a#p1", 0.5)]}
    qrels = Qrels({"A": {"a#p1": 2}})
    assert evaluate(qrels, run, ["mrr", "hit@1"]) == evaluate(qrels, run.ids(), ["mrr", "hit@1"])
    assert evaluate(qrels, run, ["mrr"])["mrr"] == 0.5


def test_trec_writer_takes_a_run_and_an_encoder(tmp_path):
    def enc(s: str) -> str:
        return s.replace(" ", "%20")

    run = Run({"q 1": [RunHit("d 2", 1.5, "x#p1", "x#p1#c1"), RunHit("d1", 0.5, "y#p1", "y#p1#c1")]})
    path = write_trec_run(tmp_path / "r.run", run, "raw__bm25", encode=enc)
    assert path.read_text().splitlines() == ["q%201 Q0 d%202 1 1.5 raw__bm25", "q%201 Q0 d1 2 0.5 raw__bm25"]
    assert read_trec_run(path) == {"q%201": [("d%202", 1.5), ("d1", 0.5)]}
    # sorted by the raw ids, then encoded
    path = write_trec_qrels(tmp_path / "qrels.txt", Qrels({"q 1": {"d1": 0, "d 2": 1}}), encode=enc)
    assert path.read_text().splitlines() == ["q%201 0 d%202 1", "q%201 0 d1 0"]
    assert read_trec_qrels(path) == {"q%201": {"d%202": 1, "d1": 0}}


def test_trec_eval_order_keeps_items_and_compares_encoded_ids():
    hits = [RunHit("a b", 1.0, "p1"), RunHit("a!b", 1.0, "p2"), RunHit("z", 2.0, "p3")]
    assert [h.page for h in trec_eval_order(hits)] == ["p3", "p2", "p1"]  # '!' > ' '
    assert [h.page for h in trec_eval_order(hits, encode=lambda s: s.replace(" ", "%20"))] == [
        "p3",
        "p1",
        "p2",
    ]


def test_vocabulary():
    assert vocabulary.HEADLINE_METRICS == vocabulary.PAGE_METRICS + vocabulary.DOC_METRICS
    assert set(vocabulary.TABLE_METRICS) <= set(vocabulary.HEADLINE_METRICS)
    assert vocabulary.NEGATIVES == ("broad", "near_domain", "out_of_domain")
    assert set(vocabulary.NEGATIVE_CLASSES["broad"]) == set(vocabulary.ANSWERABILITIES) - {"answerable"}
    assert vocabulary.TEXT_VERSIONS is records.TEXT_VERSIONS
