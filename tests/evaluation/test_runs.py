from __future__ import annotations

import random
from pathlib import Path

import pytest

from sourcepage.evaluation.metrics import evaluate, per_question
from sourcepage.evaluation.questions import qrels as qrels_of
from sourcepage.evaluation.runs import (
    read_trec_qrels,
    read_trec_run,
    tied_queries,
    trec_eval_order,
    write_trec_qrels,
    write_trec_run,
)
from sourcepage.records import Question

RUN = {
    "Q2": [("b#p3", 14.2), ("a#p1", 3.0), ("c#p10", 1e-05)],
    "Q1": [("a#p2", 0.1 + 0.2), ("a#p1", -2.5)],
}


def _pages(run):
    return {q: [p for p, _ in ranking] for q, ranking in run.items()}


# --------------------------------------------------------------------------- files


def test_write_trec_run_lines(tmp_path):
    path = write_trec_run(tmp_path / "run.txt", RUN, "bm25-raw")
    assert path.read_text().splitlines() == [
        "Q2 Q0 b#p3 1 14.2 bm25-raw",
        "Q2 Q0 a#p1 2 3.0 bm25-raw",
        "Q2 Q0 c#p10 3 1e-05 bm25-raw",
        "Q1 Q0 a#p2 1 0.30000000000000004 bm25-raw",
        "Q1 Q0 a#p1 2 -2.5 bm25-raw",
    ]


def test_run_round_trip_keeps_order_and_exact_scores(tmp_path):
    path = write_trec_run(tmp_path / "run.txt", RUN, "x")
    assert read_trec_run(path) == RUN
    # our order is written as given, even where a tool would re-sort by score
    odd = {"Q": [("z#p1", 1.0), ("a#p1", 2.0), ("m#p1", 1.0)]}
    assert read_trec_run(write_trec_run(tmp_path / "odd.txt", odd, "x")) == odd


def test_read_trec_run_orders_by_rank_column(tmp_path):
    path = tmp_path / "run.txt"
    path.write_text("q 0 b#p1 2 1.0 r\n\nq 0 a#p1 1 2.0 r\nq 0 c#p1 10 0.5 r\n")
    assert read_trec_run(path) == {"q": [("a#p1", 2.0), ("b#p1", 1.0), ("c#p1", 0.5)]}


def test_empty_ranking_writes_nothing(tmp_path):
    path = write_trec_run(tmp_path / "run.txt", {"Q1": [], "Q2": [("a#p1", 1.0)]}, "x")
    assert read_trec_run(path) == {"Q2": [("a#p1", 1.0)]}


@pytest.mark.parametrize(
    "rankings, name, message",
    [
        ({"Q1": [("a#p1", 1.0), ("a#p1", 0.5)]}, "x", "ranked twice"),
        ({"Q 1": [("a#p1", 1.0)]}, "x", "query id"),
        ({"Q1": [("a #p1", 1.0)]}, "x", "docno"),
        ({"Q1": [("a#p1", float("nan"))]}, "x", "finite"),
        ({"Q1": [("a#p1", 1.0)]}, "my run", "run name"),
        ({"Q1": [("a#p1", 1.0)]}, "", "run name"),
    ],
)
def test_write_trec_run_rejects_and_keeps_old_file(tmp_path, rankings, name, message):
    path = write_trec_run(tmp_path / "run.txt", RUN, "old")
    before = path.read_text()
    with pytest.raises(ValueError, match=message):
        write_trec_run(path, rankings, name)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run.txt"]  # no temp file left


def test_write_is_atomic_replace(tmp_path):
    path = tmp_path / "sub" / "run.txt"
    write_trec_run(path, RUN, "a")
    write_trec_run(path, {"Q9": [("z#p1", 1.0)]}, "b")
    assert path.read_text() == "Q9 Q0 z#p1 1 1.0 b\n"
    assert [p.name for p in path.parent.iterdir()] == ["run.txt"]


def test_read_trec_run_errors_name_file_and_line(tmp_path):
    path = tmp_path / "run.txt"
    path.write_text("q Q0 a#p1 1 1.0 r\nq Q0 b#p1 2 1.0\n")
    with pytest.raises(ValueError, match=rf"^{path}:2: expected 6 fields, got 5"):
        read_trec_run(path)
    path.write_text("q Q0 a#p1 1 1.0 r\nq Q0 b#p1 two 1.0 r\n")
    with pytest.raises(ValueError, match=rf"^{path}:2: rank must be an int"):
        read_trec_run(path)
    path.write_text("q Q0 a#p1 1 1.0 r\nq Q0 a#p1 2 0.5 r\n")
    with pytest.raises(ValueError, match=rf"^{path}:2: .*ranked twice"):
        read_trec_run(path)


def test_qrels_sorted_and_round_trip(tmp_path):
    qrels = {"Q2": {"b#p1": 1, "a#p10": 2, "a#p9": 1}, "Q1": {"z#p1": 2}}
    path = write_trec_qrels(tmp_path / "qrels.txt", qrels)
    assert path.read_text().splitlines() == [
        "Q1 0 z#p1 2",
        "Q2 0 a#p10 2",
        "Q2 0 a#p9 1",
        "Q2 0 b#p1 1",
    ]
    assert read_trec_qrels(path) == qrels


def test_qrels_errors(tmp_path):
    with pytest.raises(ValueError, match="grade must be an int"):
        write_trec_qrels(tmp_path / "q.txt", {"Q1": {"a#p1": 1.5}})
    path = tmp_path / "q.txt"
    path.write_text("Q1 0 a#p1 1\nQ1 0 b#p1 high\n")
    with pytest.raises(ValueError, match=rf"^{path}:2: grade must be an int"):
        read_trec_qrels(path)
    path.write_text("Q1 0 a#p1\n")
    with pytest.raises(ValueError, match=rf"^{path}:1: expected 4 fields"):
        read_trec_qrels(path)


# --------------------------------------------------------------------------- outside tools


def _toy(seed: int = 7, n: int = 30, depth: int = 30, round_to: int | None = None):
    """Seeded questions (1-4 evidence pages, grades 1-2) and rankings of ``depth`` pages over 6
    documents, best first. Scores are distinct unless ``round_to`` rounds them into ties,
    in which case ties are ordered by page id like our rankers."""
    rnd = random.Random(seed)
    pages = [f"doc{d}#p{p}" for d in range(6) for p in range(1, 11)]
    questions: list[Question] = []
    run: dict[str, list[tuple[str, float]]] = {}
    for i in range(n):
        qid = f"Q{i:03d}"
        evidence = {p: rnd.choice([1, 2]) for p in rnd.sample(pages, rnd.randint(1, 4))}
        questions.append(Question(qid, "q?", "loto", "direct", "answerable", evidence=evidence))
        scores = sorted((rnd.uniform(0.0, 30.0) for _ in range(depth)), reverse=True)
        if round_to is not None:
            scores = [round(s, round_to) for s in scores]
        ranked = rnd.sample(pages, depth)
        run[qid] = [(p, s) for p, s in zip(ranked, scores, strict=True)]
        if round_to is not None:
            run[qid].sort(key=lambda t: (-t[1], t[0]))
    # unanswerable questions are in the run but not in the qrels
    run["U001"] = [(p, 1.0 / r) for r, p in enumerate(pages[:20], 1)]
    questions.append(Question("U001", "q?", "loto", "direct", "unsupported"))
    return questions, run


def _binary(qrels):
    return {q: {p: 1 for p, g in judged.items() if g >= 1} for q, judged in qrels.items()}


OURS_VS_IR_MEASURES = {"ndcg_graded@10": "nDCG@10", "mrr": "RR@20", "recall@10": "R@10", "hit@3": "Success@3"}
OURS_VS_RANX = {"ndcg_graded@10": "ndcg@10", "mrr": "mrr@20", "recall@10": "recall@10", "hit@3": "hit_rate@3"}


def _write_files(tmp_path: Path, questions, run):
    qrels = qrels_of(questions)
    run_path = write_trec_run(tmp_path / "run.trec", run, "toy")
    graded = write_trec_qrels(tmp_path / "qrels.trec", qrels)
    binary = write_trec_qrels(tmp_path / "qrels-binary.trec", _binary(qrels))
    return qrels, run_path, graded, binary


def test_ir_measures_rescores_written_files(tmp_path):
    """ir_measures (trec_eval via pytrec_eval; msmarco for RR@k) on our files equals our metrics.

    Our ``mrr`` is RR over the first 20 ranks (RR@20); ir_measures nDCG has linear graded
    gains, so it matches ``ndcg_graded@10`` on graded qrels and binary ``ndcg@10`` on
    binarised qrels.
    """
    ir_measures = pytest.importorskip("ir_measures")
    questions, run = _toy()
    assert not tied_queries(run)
    qrels, run_path, graded, binary = _write_files(tmp_path, questions, run)
    ours = evaluate(qrels, _pages(read_trec_run(run_path)), [*OURS_VS_IR_MEASURES, "ndcg@10"])

    def calc(qrels_path, names):
        measures = [ir_measures.parse_measure(n) for n in names]
        got = ir_measures.calc_aggregate(
            measures, ir_measures.read_trec_qrels(str(qrels_path)), ir_measures.read_trec_run(str(run_path))
        )
        return {str(m): v for m, v in got.items()}

    theirs = calc(graded, OURS_VS_IR_MEASURES.values())
    for our_name, their_name in OURS_VS_IR_MEASURES.items():
        assert ours[our_name] == pytest.approx(theirs[their_name], abs=1e-9), our_name
    assert ours["ndcg@10"] == pytest.approx(calc(binary, ["nDCG@10"])["nDCG@10"], abs=1e-9)
    assert ours["ndcg@10"] != pytest.approx(ours["ndcg_graded@10"], abs=1e-6)  # the two really differ


@pytest.mark.slow
def test_ranx_rescores_written_files(tmp_path):
    """ranx, loading the same files, equals our metrics (ranx ``ndcg`` has linear gains)."""
    ranx = pytest.importorskip("ranx")
    questions, run = _toy()
    qrels, run_path, graded, binary = _write_files(tmp_path, questions, run)
    ours = evaluate(qrels, _pages(read_trec_run(run_path)), [*OURS_VS_RANX, "ndcg@10"])
    ranx_run = ranx.Run.from_file(str(run_path), kind="trec")
    ranx_qrels = ranx.Qrels.from_file(str(graded), kind="trec")
    # make_comparable drops the unsupported question, which is in the run but not the qrels
    theirs = ranx.evaluate(ranx_qrels, ranx_run, list(OURS_VS_RANX.values()), make_comparable=True)
    for our_name, their_name in OURS_VS_RANX.items():
        assert ours[our_name] == pytest.approx(theirs[their_name], abs=1e-9), our_name
    binary_qrels = ranx.Qrels.from_file(str(binary), kind="trec")
    their_binary = ranx.evaluate(binary_qrels, ranx_run, "ndcg@10", make_comparable=True)
    assert ours["ndcg@10"] == pytest.approx(their_binary, abs=1e-9)


def test_trec_eval_order_breaks_ties_by_docno_descending():
    ranking = [("a#p1", 2.0), ("b#p1", 1.0), ("c#p1", 1.0), ("d#p1", 0.5), ("e#p1", 1.0)]
    assert trec_eval_order(ranking) == [
        ("a#p1", 2.0),
        ("e#p1", 1.0),
        ("c#p1", 1.0),
        ("b#p1", 1.0),
        ("d#p1", 0.5),
    ]
    assert tied_queries({"x": ranking, "y": ranking[:2], "z": []}) == ["x"]


def test_tied_scores_trec_eval_reorders_and_metrics_can_change(tmp_path):
    """Scores are written as given, not nudged: where they tie, trec_eval scores its own order.

    pytrec_eval on the file equals our metrics on :func:`trec_eval_order` of each ranking
    for every question, and for some tied questions that differs from our order's value.
    """
    ir_measures = pytest.importorskip("ir_measures")
    questions, run = _toy(seed=11, round_to=0)  # scores 0..30 in whole numbers: many ties
    qrels, run_path, graded, _ = _write_files(tmp_path, questions, run)
    assert read_trec_run(run_path) == run  # the file still holds our order and scores
    tied = set(tied_queries(run))
    assert tied >= set(qrels)

    names = {"ndcg_graded@10": "nDCG@10", "recall@10": "R@10", "hit@3": "Success@3", "mrr": "RR"}
    measures = [ir_measures.parse_measure(n) for n in names.values()]
    theirs: dict[tuple[str, str], float] = {}
    for m in ir_measures.pytrec_eval.iter_calc(
        measures, ir_measures.read_trec_qrels(str(graded)), ir_measures.read_trec_run(str(run_path))
    ):
        theirs[(str(m.measure), m.query_id)] = m.value
    # RR (no cutoff) looks at all 30 ranks; compare with our mrr at that depth
    as_trec_eval = per_question(
        qrels, {q: [p for p, _ in trec_eval_order(r)] for q, r in run.items()}, list(names), depth=30
    )
    as_ours = per_question(qrels, _pages(run), list(names), depth=30)
    changed = 0
    for our_name, their_name in names.items():
        for qid, value in as_trec_eval[our_name].items():
            assert value == pytest.approx(theirs[(their_name, qid)], abs=1e-9), (our_name, qid)
            changed += abs(as_ours[our_name][qid] - value) > 1e-9
    assert changed > 0  # ties do change some per-question values: see runs.py docstring


@pytest.mark.slow
def test_ranx_keeps_distinct_score_order(tmp_path):
    """With distinct scores every tool sees exactly our order."""
    ranx = pytest.importorskip("ranx")
    _, run = _toy()
    run_path = write_trec_run(tmp_path / "run.trec", run, "toy")
    loaded = ranx.Run.from_file(str(run_path), kind="trec").to_dict()
    for qid, ranking in run.items():
        assert sorted(loaded[qid].items(), key=lambda t: -t[1]) == ranking
        assert trec_eval_order(ranking) == ranking
