"""Benchmark judging: pool candidate pages, record graded judgments, measure agreement,
adjudicate and export a judged ``questions.jsonl`` (study §3.5)."""

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

__all__ = [
    "ADJUDICATOR",
    "DB_NAME",
    "ExportReport",
    "adjudicate",
    "cohens_kappa",
    "connect",
    "current",
    "default_path",
    "disagreements",
    "export",
    "final_grades",
    "history",
    "pending",
    "pool",
    "record",
]
