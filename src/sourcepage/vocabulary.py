"""The shared words of evaluation and support, spelled once.

- metric names (``evaluation.metrics`` spelling) and the order in which metrics.json,
  stats.json, per_question.jsonl and the report list them;
- the question classes and the negative classes an answerability AUROC is computed
  against (``broad``: every non-answerable question; ``near_domain``: the unsupported
  ones; ``out_of_domain``: the off-topic ones);
- the text versions (re-exported from :mod:`sourcepage.records`);
- the longest question (``MAX_QUESTION_CHARS``: the web API's, and every question file's).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from sourcepage.records import TEXT_VERSIONS

__all__ = [
    "ANSWERABILITIES",
    "DOC_METRICS",
    "HEADLINE_METRICS",
    "MAX_QUESTION_CHARS",
    "NEGATIVE_CLASSES",
    "NEGATIVES",
    "PAGE_METRICS",
    "TABLE_METRICS",
    "TEXT_VERSIONS",
]

#: the longest question, in characters: what POST /search accepts, and so what a question
#: file may hold (a 20 MB question kept ``calibrate`` busy for 15 minutes at 1.7 GB)
MAX_QUESTION_CHARS = 500

#: page metrics, over the evaluated ranks (any benchmark)
PAGE_METRICS: tuple[str, ...] = (
    "hit@1",
    "hit@3",
    "hit@5",
    "hit@10",
    "recall@5",
    "recall@10",
    "mrr",
    "ndcg@10",
    "ndcg_graded@10",
)
#: document-level hits (any page of a labelled document among the first k documents)
DOC_METRICS: tuple[str, ...] = ("doc_hit@1", "doc_hit@3", "doc_hit@5", "doc_hit@10")
#: the headline metrics of a questions.jsonl benchmark, in report order
HEADLINE_METRICS: tuple[str, ...] = (*PAGE_METRICS, *DOC_METRICS)
#: the columns of the headline table (report.md, ``sourcepage eval``)
TABLE_METRICS: tuple[str, ...] = (
    "hit@1",
    "hit@3",
    "hit@5",
    "hit@10",
    "recall@10",
    "mrr",
    "ndcg@10",
    "doc_hit@3",
)

#: answerability classes of a question (benchmark-format §3)
ANSWERABILITIES: tuple[str, ...] = ("answerable", "unsupported", "out_of_domain")
#: negative class name → the answerabilities it holds; answerable questions are the positives
NEGATIVE_CLASSES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "broad": ("unsupported", "out_of_domain"),
        "near_domain": ("unsupported",),
        "out_of_domain": ("out_of_domain",),
    }
)
#: the negative class names, in report order
NEGATIVES: tuple[str, ...] = tuple(NEGATIVE_CLASSES)
