"""Relevance judgments for a benchmark: pool, judge, agree, adjudicate, export (study §3.5).

Judgments are rows of kind ``judgment`` in the label log (:mod:`sourcepage.store.labels`,
default ``<store>/labels.sqlite``), so the store itself is never written. The log is
append-only, enforced by the database: judging the same (question, page, reviewer) again
adds a row; the *current* judgment is the latest row (highest id) and every earlier one
stays as history.

Final grade of a (question, page) pair, as :func:`export` uses it:

1. the latest adjudication (reviewer ``adjudicator:<name>``) if there is one;
2. else the given reviewer's current judgment, if that reviewer judged the pair;
3. else the grade all (non-adjudicator) reviewers agree on; a disagreement with no
   adjudication leaves the pair unresolved (reported as a warning).

A page nobody judged keeps its original label from the question set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sourcepage.evaluation.questions import questions_to_jsonl
from sourcepage.records import Question, parse_page_id
from sourcepage.store.labels import DB_NAME, LabelLog, log_path

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

#: Prefix of the reviewer name under which adjudications are recorded.
ADJUDICATOR = "adjudicator:"

Key = tuple[str, str, str]  # (question id, page, reviewer)


def _page_key(page: str) -> tuple[str, int]:
    return parse_page_id(page)


# --------------------------------------------------------------------------- file


def default_path(store: str | Path) -> Path:
    """``<store>/labels.sqlite``: the store's label log, never inside ``store.sqlite``."""
    return Path(store) / DB_NAME


def connect(path: str | Path) -> LabelLog:
    """Open (creating if needed) a label log: a store folder's, or the file ``path``. An
    older judgments file given as ``path`` is read into the log on first open."""
    return LabelLog(log_path(path), create_dirs=True)


# --------------------------------------------------------------------------- pooling


def _searchers(searchers: Any, method: str) -> list[tuple[Any, str]]:
    """(searcher, method name) pairs a method spec runs on.

    With one Searcher, ``method`` is a method name. With a mapping text version ->
    Searcher, ``method@version`` runs on that version only and a plain method on
    every version of the mapping.
    """
    name, _, version = method.partition("@")
    if isinstance(searchers, Mapping):
        if version:
            if version not in searchers:
                raise ValueError(
                    f"{method!r}: no searcher for version {version!r} (have {', '.join(searchers)})"
                )
            return [(searchers[version], name)]
        return [(searchers[v], name) for v in searchers]
    if version and version != searchers.version:
        raise ValueError(f"{method!r}: the searcher is for version {searchers.version!r}")
    return [(searchers, name)]


def pool(
    searchers: Any, questions: Iterable[Question], methods: Sequence[str], depth: int = 10
) -> dict[str, list[str]]:
    """question id -> the union of the methods' top-``depth`` pages, for answerable questions.

    ``searchers`` is a Searcher or a mapping text version -> Searcher (see
    :func:`_searchers` for ``method@version``). Pages are ordered by their best rank
    across methods, then by page id in natural order, so the pool is deterministic.
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    if not methods:
        raise ValueError("no methods to pool")
    runs = [pair for m in methods for pair in _searchers(searchers, m)]
    out: dict[str, list[str]] = {}
    for q in questions:
        if q.answerability != "answerable":
            continue
        best: dict[str, int] = {}
        for searcher, method in runs:
            for hit in searcher.rank(q.question, method, k=depth).hits:
                best[hit.page_id] = min(best.get(hit.page_id, hit.rank), hit.rank)
        out[q.id] = sorted(best, key=lambda p: (best[p], _page_key(p)))
    return out


# --------------------------------------------------------------------------- recording


def _insert(db: LabelLog, qid: str, page: str, grade: int, reviewer: str, note: str) -> int:
    if not isinstance(qid, str) or not qid.strip():
        raise ValueError(f"empty question id: {qid!r}")
    parse_page_id(page)
    if isinstance(grade, bool) or grade not in (0, 1, 2):
        raise ValueError(f"bad grade {grade!r} (must be 0, 1 or 2)")
    if not reviewer or not reviewer.strip():
        raise ValueError("empty reviewer name")
    return db.append("judgment", qid, reviewer, {"page": page, "grade": int(grade), "note": note or ""}).seq


def record(db: LabelLog, qid: str, page: str, grade: int, reviewer: str, note: str = "") -> int:
    """Append one judgment; returns its row id. Earlier judgments are kept as history."""
    if reviewer.startswith(ADJUDICATOR):
        raise ValueError(f"reviewer names starting with {ADJUDICATOR!r} are reserved: use adjudicate()")
    return _insert(db, qid, page, grade, reviewer, note)


def adjudicate(db: LabelLog, qid: str, page: str, grade: int, adjudicator: str, note: str = "") -> int:
    """Record a final grade as reviewer ``adjudicator:<name>``; it takes precedence in export."""
    return _insert(db, qid, page, grade, ADJUDICATOR + adjudicator, note)


def history(
    db: LabelLog, qid: str | None = None, page: str | None = None, reviewer: str | None = None
) -> list[dict[str, Any]]:
    """Every judgment row (oldest first), optionally for one question / page / reviewer."""
    rows = [
        {
            "id": x.seq,
            "question_id": x.subject,
            "page": x.body["page"],
            "grade": x.body["grade"],
            "reviewer": x.actor,
            "note": x.body.get("note", ""),
            "created_at": x.created_at,
        }
        for x in db.labels("judgment", qid, reviewer)
    ]
    return [r for r in rows if page is None or r["page"] == page]


def _latest(db: LabelLog) -> dict[Key, tuple[int, int]]:
    """(question id, page, reviewer) -> (id, grade) of its latest judgment."""
    return {(x.subject, x.body["page"], x.actor): (x.id, x.body["grade"]) for x in db.labels("judgment")}


def current(db: LabelLog, reviewer: str | None = None) -> dict[Key, int]:
    """(question id, page, reviewer) -> the latest grade, in the order of those latest
    rows; one reviewer's only when given."""
    latest = sorted(_latest(db).items(), key=lambda kv: kv[1][0])
    return {k: g for k, (_, g) in latest if reviewer is None or k[2] == reviewer}


def pending(db: LabelLog, pool: Mapping[str, Sequence[str]], reviewer: str) -> list[tuple[str, str]]:
    """The pooled (question id, page) pairs ``reviewer`` has not judged yet, in pool order."""
    done = {(q, p) for q, p, _ in current(db, reviewer)}
    return [(qid, page) for qid, pages in pool.items() for page in pages if (qid, page) not in done]


# --------------------------------------------------------------------------- agreement


def _pairs(db: LabelLog, a: str, b: str) -> list[tuple[str, str, int, int]]:
    ga = {(q, p): g for (q, p, _), g in current(db, a).items()}
    gb = {(q, p): g for (q, p, _), g in current(db, b).items()}
    both = sorted(set(ga) & set(gb), key=lambda k: (k[0], _page_key(k[1])))
    return [(q, p, ga[(q, p)], gb[(q, p)]) for q, p in both]


def _kappa(ya: Sequence[int], yb: Sequence[int], labels: Sequence[int]) -> float | None:
    """Unweighted Cohen's kappa of two label lists; None when it is undefined (both
    reviewers used one single label throughout)."""
    from sklearn.metrics import cohen_kappa_score

    if len(set(ya) | set(yb)) < 2:
        return None
    k = float(cohen_kappa_score(ya, yb, labels=list(labels)))
    return None if k != k else k


def cohens_kappa(db: LabelLog, reviewer_a: str, reviewer_b: str) -> dict[str, Any]:
    """Unweighted Cohen's kappa of the pairs both reviewers judged, graded and binary.

    ``kappa`` and ``agreement`` compare grades 0/1/2; ``kappa_binary`` and
    ``agreement_binary`` compare relevance (grade >= 1, the spec's binary relevance),
    which is what retrieval metrics use. A kappa is None when it is undefined (no
    shared pairs, or both reviewers used one single label throughout).
    """
    pairs = _pairs(db, reviewer_a, reviewer_b)
    n = len(pairs)
    if n == 0:
        return {"kappa": None, "n": 0, "agreement": None, "kappa_binary": None, "agreement_binary": None}
    ya = [ga for _, _, ga, _ in pairs]
    yb = [gb for _, _, _, gb in pairs]
    ba = [int(g >= 1) for g in ya]
    bb = [int(g >= 1) for g in yb]
    return {
        "kappa": _kappa(ya, yb, (0, 1, 2)),
        "n": n,
        "agreement": sum(x == y for x, y in zip(ya, yb, strict=True)) / n,
        "kappa_binary": _kappa(ba, bb, (0, 1)),
        "agreement_binary": sum(x == y for x, y in zip(ba, bb, strict=True)) / n,
    }


def disagreements(db: LabelLog, a: str, b: str) -> list[dict[str, Any]]:
    """Pairs both reviewers judged with different grades, by question then page."""
    return [
        {"question_id": q, "page": p, a: ga, b: gb, "grades": (ga, gb)}
        for q, p, ga, gb in _pairs(db, a, b)
        if ga != gb
    ]


# --------------------------------------------------------------------------- export


def final_grades(
    db: LabelLog, reviewer: str | None = None
) -> tuple[dict[tuple[str, str], int], list[tuple[str, str]]]:
    """(question id, page) -> final grade (module docstring), and the unresolved pairs."""
    latest_adj: dict[tuple[str, str], tuple[int, int]] = {}
    for x in db.labels("judgment"):
        if x.actor.startswith(ADJUDICATOR):
            latest_adj[(x.subject, x.body["page"])] = (x.id, x.body["grade"])
    by_pair: dict[tuple[str, str], dict[str, int]] = {}
    for (q, p, r), g in current(db).items():
        if not r.startswith(ADJUDICATOR):
            by_pair.setdefault((q, p), {})[r] = g
    final: dict[tuple[str, str], int] = {k: g for k, (_, g) in latest_adj.items()}
    unresolved: list[tuple[str, str]] = []
    for key, grades in by_pair.items():
        if key in final:
            continue
        if reviewer is not None and reviewer in grades:
            final[key] = grades[reviewer]
        elif len(set(grades.values())) == 1:
            final[key] = next(iter(grades.values()))
        else:
            unresolved.append(key)
    unresolved.sort(key=lambda k: (k[0], _page_key(k[1])))
    return final, unresolved


@dataclass
class ExportReport:
    """What :func:`export` did: question counts and every warning."""

    path: Path
    questions: int = 0
    changed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def export(
    db: LabelLog,
    questions: Sequence[Question],
    out_path: str | Path,
    reviewer: str | None = None,
) -> ExportReport:
    """Write ``questions`` as ``questions.jsonl`` with evidence taken from the judgments.

    An answerable question's evidence becomes the pages whose final grade is 1 or 2
    (plus its original evidence pages that nobody judged), keeping each existing
    excerpt. A question whose judged pages all have final grade 0 keeps its original
    evidence, with a warning; no question is ever dropped.
    """
    final, unresolved = final_grades(db, reviewer)
    report = ExportReport(path=Path(out_path), questions=len(questions))
    judged: dict[str, dict[str, int]] = {}
    for (q, p), g in final.items():
        judged.setdefault(q, {})[p] = g
    unresolved_by_q: dict[str, list[str]] = {}
    for q, p in unresolved:
        unresolved_by_q.setdefault(q, []).append(p)
    ids = {q.id for q in questions}
    for qid in sorted((set(judged) | set(unresolved_by_q)) - ids):
        report.warnings.append(f"{qid}: judged, but not in the question set (ignored)")
    out: list[Question] = []
    for q in questions:
        grades = judged.get(q.id, {})
        for p in unresolved_by_q.get(q.id, []):
            report.warnings.append(
                f"{q.id}: reviewers disagree on {p} and nobody adjudicated it"
                + (" (original label kept)" if p in q.evidence else " (left out)")
            )
        if q.answerability != "answerable":
            relevant = sorted((p for p, g in grades.items() if g >= 1), key=_page_key)
            if relevant:
                report.warnings.append(
                    f"{q.id}: {q.answerability} question has pages judged relevant "
                    f"({', '.join(relevant)}); evidence not added — review its answerability"
                )
            out.append(q)
            continue
        if not grades:
            report.kept.append(q.id)
            out.append(q)
            continue
        if not any(g >= 1 for g in grades.values()):
            report.warnings.append(
                f"{q.id}: every judged page ({len(grades)}) was graded 0; original evidence kept"
            )
            report.kept.append(q.id)
            out.append(q)
            continue
        evidence: dict[str, int] = {}
        for p, g in q.evidence.items():  # original order first
            g2 = grades.get(p, g)
            if g2 >= 1:
                evidence[p] = g2
        new = sorted(
            (p for p, g in grades.items() if g >= 1 and p not in evidence),
            key=lambda p: (-grades[p], _page_key(p)),
        )
        evidence.update({p: grades[p] for p in new})
        excerpts = {p: x for p, x in q.excerpts.items() if p in evidence}
        if evidence != q.evidence:
            report.changed.append(q.id)
        else:
            report.kept.append(q.id)
        out.append(_replace(q, evidence, excerpts))
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(questions_to_jsonl(out), encoding="utf-8")
    return report


def _replace(q: Question, evidence: dict[str, int], excerpts: dict[str, str]) -> Question:
    from dataclasses import replace

    from sourcepage.evaluation.questions import EVIDENCE_EXTRA

    extra = dict(q.extra)
    if EVIDENCE_EXTRA in extra:
        kept = {p: v for p, v in extra[EVIDENCE_EXTRA].items() if p in evidence}
        if kept:
            extra[EVIDENCE_EXTRA] = kept
        else:
            del extra[EVIDENCE_EXTRA]
    return replace(q, evidence=evidence, excerpts=excerpts, extra=extra)
