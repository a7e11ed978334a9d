"""Benchmark judging: pool candidate pages, record graded judgments, measure agreement,
adjudicate and export a judged ``questions.jsonl`` (study §3.5); ``session`` is the
interactive judging loop with injectable input and output."""

from sourcepage.judge.judgments import (
    ADJUDICATOR,
    DB_NAME,
    ExportReport,
    adjudicate,
    cohens_kappa,
    connect,
    current,
    default_path,
    disagreements,
    export,
    final_grades,
    history,
    pending,
    pool,
    record,
)
from sourcepage.judge.session import Card, Cards, adjudicate_pairs, judge_pairs, page_window

__all__ = [
    "ADJUDICATOR",
    "DB_NAME",
    "Card",
    "Cards",
    "ExportReport",
    "adjudicate",
    "adjudicate_pairs",
    "cohens_kappa",
    "connect",
    "current",
    "default_path",
    "disagreements",
    "export",
    "final_grades",
    "history",
    "judge_pairs",
    "page_window",
    "pending",
    "pool",
    "record",
]
