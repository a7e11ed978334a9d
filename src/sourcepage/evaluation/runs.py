"""TREC run and qrels files, so ranx, ir_measures or trec_eval can re-score any run.

A run file has one line a ranked page, ``qid Q0 docno rank score run_name``; a qrels
file one line a judged page, ``qid 0 docno grade``. Docnos are page ids
(``osha3120#p12``).

Ranks are written exactly as our ranking orders the pages, and scores exactly as
the method gave them (``repr`` of the float, so they read back bit for bit). Our
order is authoritative; outside tools, however, re-sort by score and order *tied*
scores their own way:

- trec_eval, pytrec_eval and ir_measures' pytrec_eval provider (``nDCG@k``, ``R@k``,
  ``Success@k``, ``RR``): score descending, ties by docno **descending**
  (see :func:`trec_eval_order`);
- ir_measures ``RR@k`` (its msmarco provider): ties by docno ascending;
- ranx: ties in the order of an unstable sort.

Scores are never nudged to force our order, so where a ranking holds tied scores
(:func:`tied_queries`) an outside tool may score a different order than ours. That
changes a metric only when a tie group mixes grades or straddles a cutoff.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from sourcepage.store.files import write_text

__all__ = [
    "read_trec_qrels",
    "read_trec_run",
    "tied_queries",
    "trec_eval_order",
    "write_trec_qrels",
    "write_trec_run",
]

Scored = Sequence[tuple[str, float]]
#: a ranked item: a tuple whose first two fields are (docno, score), e.g. a RunHit
Item = TypeVar("Item", bound=tuple)
Encode = Callable[[str], str]


def _same(value: str) -> str:
    return value


def _token(value: str, what: str) -> str:
    """``value`` if it is a usable whitespace-free TREC field, else ValueError."""
    if not value or any(c.isspace() for c in value):
        raise ValueError(f"{what} must be non-empty and free of whitespace: {value!r}")
    return value


def _score_text(score: float) -> str:
    """Shortest text that reads back as the same float (``repr``)."""
    value = float(score)
    if not math.isfinite(value):
        raise ValueError(f"score must be finite, got {score!r}")
    return repr(value)


def _run_lines(qid: str, ranking: Sequence[tuple], run_name: str, encode: Encode) -> Iterable[str]:
    """Lines of one query's ranking, ranks 1.. in the given order."""
    seen: set[str] = set()
    for rank, item in enumerate(ranking, 1):
        docno, score = item[0], item[1]
        if docno in seen:
            raise ValueError(f"query {qid!r}: page {docno!r} ranked twice")
        seen.add(docno)
        yield f"{qid} Q0 {_token(encode(docno), 'docno')} {rank} {_score_text(score)} {run_name}\n"


def write_trec_run(
    path: str | Path,
    rankings: Mapping[str, Sequence[tuple]],
    run_name: str,
    *,
    encode: Encode = _same,
) -> Path:
    """Write ``qid Q0 docno rank score run_name`` lines atomically; returns the path.

    ``rankings``: question id → [(docno, score, ...), ...], e.g. a :class:`Run`.
    Queries keep the mapping's order and pages the ranking's order (never re-sorted).
    A query with an empty ranking writes no line (the format cannot say "nothing").
    ``encode`` turns an id into its TREC token (e.g. BEIR's whitespace escaping).
    """
    _token(run_name, "run name")
    lines: list[str] = []
    for qid, ranking in rankings.items():
        lines.extend(_run_lines(_token(encode(qid), "query id"), ranking, run_name, encode))
    return write_text(path, "".join(lines))


def write_trec_qrels(
    path: str | Path, qrels: Mapping[str, Mapping[str, int]], *, encode: Encode = _same
) -> Path:
    """Write ``qid 0 docno grade`` lines sorted by (qid, docno), atomically; returns the path.

    Sorted by the ids themselves; ``encode`` then turns each into its TREC token.
    """
    lines: list[str] = []
    for qid in sorted(qrels):
        for docno in sorted(qrels[qid]):
            grade = qrels[qid][docno]
            if isinstance(grade, bool) or not isinstance(grade, int):
                raise ValueError(f"query {qid!r}, page {docno!r}: grade must be an int, got {grade!r}")
            lines.append(f"{_token(encode(qid), 'query id')} 0 {_token(encode(docno), 'docno')} {grade}\n")
    return write_text(path, "".join(lines))


def _fields(path: str | Path, n: int) -> Iterable[tuple[str, list[str]]]:
    """(``file:line``, fields) of every non-blank line, each checked to have ``n`` fields."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            where = f"{path}:{lineno}"
            if len(fields) != n:
                raise ValueError(f"{where}: expected {n} fields, got {len(fields)}")
            yield where, fields


def read_trec_run(path: str | Path) -> dict[str, list[tuple[str, float]]]:
    """qid -> [(docno, score), ...] ordered by the file's rank column (file order on equal ranks).

    ValueError naming ``file:line`` for a malformed line or a page ranked twice.
    """
    rows: dict[str, list[tuple[int, str, float]]] = {}
    seen: set[tuple[str, str]] = set()
    for where, (qid, _, docno, rank, score, _name) in _fields(path, 6):
        try:
            row = (int(rank), docno, float(score))
        except ValueError:
            raise ValueError(f"{where}: rank must be an int and score a number") from None
        if (qid, docno) in seen:
            raise ValueError(f"{where}: query {qid!r}: page {docno!r} ranked twice")
        seen.add((qid, docno))
        rows.setdefault(qid, []).append(row)
    return {qid: [(d, s) for _, d, s in sorted(r, key=lambda t: t[0])] for qid, r in rows.items()}


def read_trec_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """qid -> {docno: grade}; ValueError naming ``file:line`` for a malformed line."""
    out: dict[str, dict[str, int]] = {}
    for where, (qid, _, docno, grade) in _fields(path, 4):
        try:
            out.setdefault(qid, {})[docno] = int(grade)
        except ValueError:
            raise ValueError(f"{where}: grade must be an int, got {grade!r}") from None
    return out


def trec_eval_order(ranking: Iterable[Item], encode: Encode = _same) -> list[Item]:
    """The order trec_eval evaluates: score descending, tied scores by docno descending.

    Items are (docno, score, ...) tuples and come back unchanged; ties compare the
    docnos as written to the file, i.e. after ``encode``."""
    by_docno = sorted(ranking, key=lambda t: encode(t[0]), reverse=True)
    return sorted(by_docno, key=lambda t: -t[1])  # stable: keeps docno-descending within ties


def tied_queries(rankings: Mapping[str, Sequence[tuple]]) -> list[str]:
    """Query ids whose ranking holds two equal scores, where an outside tool may re-order."""
    return [qid for qid, ranking in rankings.items() if len({t[1] for t in ranking}) < len(ranking)]
