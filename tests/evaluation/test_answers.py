"""The key-fact check of quotes (evaluation.answers) and the report's summary lines."""

from __future__ import annotations

from sourcepage.evaluation.answers import contains_key_fact
from sourcepage.evaluation.summary import summary_lines
from sourcepage.records import Question


def _q(excerpts: dict[str, str]) -> Question:
    return Question("Q1", "How often?", "loto", "direct", "answerable", {p: 2 for p in excerpts}, excerpts)


def test_key_fact_needs_most_content_words_of_one_excerpt_in_one_quote() -> None:
    q = _q({"d#p2": "Inspect energy control procedures at least annually.", "d#p3": "may be performed"})
    # 5 content words (inspect energy control procedures annually); stems match "inspected"
    assert contains_key_fact(["Energy control procedures must be inspected annually."], q)
    assert contains_key_fact(["Inspect energy control procedures."], q)  # 4 of 5 = 80%
    assert not contains_key_fact(["Energy procedures exist."], q)  # 2 of 5
    # words spread over two quotes do not count; a fragment excerpt is never a key fact
    assert not contains_key_fact(["Inspect energy.", "Control annually."], q)  # 4 of 5, split
    assert not contains_key_fact(["It may be performed."], _q({"d#p3": "may be performed"}))
    # PDFium's U+FFFE hyphen marker in an excerpt does not split its word
    assert contains_key_fact(["Employees apply locks."], _q({"d#p1": "Employ\ufffeees apply locks."}))


def test_summary_names_best_run_holm_survivors_refuser_quotes() -> None:
    metrics = {
        "questions": {"answerable": 2, "unsupported": 1, "out_of_domain": 1},
        "runs": [
            {"text_version": "raw", "method": "bm25", "mrr": 0.9, "hit@3": 1.0},
            {"text_version": "raw", "method": "lsa", "mrr": 0.5, "hit@3": 0.5},
        ],
    }
    stats = {
        "n_answerable": 2,
        "ci": {"raw bm25": {"mrr": [0.9, 0.8, 1.0]}},
        "pairwise": [
            {
                "family": "methods within raw",
                "comparisons": [{"a": "bm25", "b": "lsa", "mean_diff": 0.4, "p_holm": 0.01}],
            }
        ],
    }
    shares = {
        "answerable": {"answer": 1.0, "review": 0.0, "refuse": 0.0},
        "unsupported": {"answer": 0.0, "review": 0.0, "refuse": 1.0},
        "out_of_domain": {"answer": 0.0, "review": 0.0, "refuse": 1.0},
    }
    support = {
        "versions": {
            "raw": {
                "sparse": "bm25",
                "semantic": "lsa",
                "classifier_decisions": shares,
                "single_method": {},
            }
        },
        "search": {
            "raw bm25": {"counts": {"answer": 1, "review": 1, "refuse": 0}, "answers_with_key_fact": 1.0}
        },
    }
    lines = summary_lines(metrics, stats, support)
    assert len(lines) == 5
    assert "bm25 on raw text — MRR 0.900 [95% CI 0.800, 1.000]" in lines[0]
    assert "bm25 vs lsa (methods within raw, ΔMRR +0.400, Holm p 0.010)" in lines[1]
    assert "refuses 100% of unsupported" in lines[2]
    assert "raw bm25: 1 answers, 100% of those checked quote the key fact" in lines[3]
