"""Typed judgements and rankings, ranx-style: :class:`Qrels` and :class:`Run`.

A :class:`Qrels` maps question id → {docno: grade}; a :class:`Run` maps question id →
its ranked :class:`RunHit` list, best first. Both are dicts, so they go wherever a
plain mapping did. A docno is the id the qrels judge: a page id (``osha3120#p12``) for
a questions.jsonl benchmark, the original document id for a BEIR folder.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from sourcepage.records import Question

__all__ = ["Qrels", "Run", "RunHit", "run_name"]


class RunHit(NamedTuple):
    """One ranked item. ``(docno, score)`` first, so it reads as a TREC pair."""

    docno: str
    score: float
    page: str = ""
    chunk_id: str = ""


class Qrels(dict[str, dict[str, int]]):
    """question id → {docno: grade}; grade >= 1 is relevant, absent is grade 0."""

    @classmethod
    def from_questions(cls, questions: Iterable[Question]) -> Qrels:
        """The answerable questions' evidence, in question order."""
        return cls(
            {q.id: dict(q.evidence) for q in questions if q.answerability == "answerable" and q.evidence}
        )

    def grade(self, qid: str, docno: str) -> int:
        return self.get(qid, {}).get(docno, 0)

    def relevant_ids(self) -> list[str]:
        """Question ids with at least one relevant docno, in qrels order: the ones averaged over."""
        return [q for q, judged in self.items() if any(g >= 1 for g in judged.values())]

    def only(self, qids: Iterable[str]) -> Qrels:
        """The judgements of ``qids``, in that order (ids without judgements skipped)."""
        return Qrels({q: self[q] for q in qids if q in self})


class Run(dict[str, list[RunHit]]):
    """question id → ranked hits of one (text version, method)."""

    def __init__(
        self,
        rankings: Mapping[str, Sequence[RunHit]] | Iterable[tuple[str, Sequence[RunHit]]] = (),
        *,
        text_version: str = "",
        method: str = "",
    ) -> None:
        super().__init__((q, list(h)) for q, h in dict(rankings).items())
        self.text_version = text_version
        self.method = method

    @property
    def name(self) -> str:
        """The TREC run name, also the run file's stem: ``raw__rrf-bm25_lsa``."""
        return run_name(self.text_version, self.method)

    def ranked(self, qid: str) -> list[str]:
        """Docnos of ``qid`` in rank order (empty when the question was not ranked)."""
        return [h.docno for h in self.get(qid, ())]

    def scored(self) -> dict[str, list[tuple[str, float]]]:
        """question id → [(docno, score), ...], the shape TREC writers take."""
        return {q: [(h.docno, h.score) for h in hits] for q, hits in self.items()}

    def ids(self) -> dict[str, list[str]]:
        """question id → docnos in rank order, the shape ``evaluation.metrics`` takes."""
        return {q: self.ranked(q) for q in self}

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]], docno: str = "page") -> dict[tuple[str, str], Run]:
        """(version, method) → Run from ranked.jsonl rows, in order of first appearance;
        ``docno`` names the field the qrels judge (``page``, or ``beir_id`` for BEIR)."""
        grouped: dict[tuple[str, str], dict[str, list[tuple[int, RunHit]]]] = {}
        for r in rows:
            hit = RunHit(r[docno], r["score"], r["page"], r["chunk_id"])
            key = (r["text_version"], r["method"])
            grouped.setdefault(key, {}).setdefault(r["question_id"], []).append((r["rank"], hit))
        return {
            (v, m): cls(
                {q: [h for _, h in sorted(hs, key=lambda t: t[0])] for q, hs in by_q.items()},
                text_version=v,
                method=m,
            )
            for (v, m), by_q in grouped.items()
        }


def run_name(version: str, method: str) -> str:
    """``<version>__<method>`` with ``:`` → ``-`` and ``+`` → ``_`` (safe in a file name)."""
    return f"{version}__{method.replace(':', '-').replace('+', '_')}"
