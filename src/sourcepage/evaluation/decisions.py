"""What the search decides, for every question of every run of ``sourcepage eval``.

eval does not decide by itself: each question goes through the one search pipeline
(``pipeline.SearchService.respond``, as ``sourcepage search`` runs it, with the store's
policy and ``k`` = ``SEARCH_K``), given the run's own ranking (and the version's other
runs, so the policy's two methods are not ranked again). Kept per (run, question): what
``pipeline.outline`` reads from the response (decision, P(supported), quote ids, the
pages returned), the quotes' texts and the reasons. per_question.jsonl carries the
outline, answerability.json the summary (``summarise``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sourcepage.evaluation import metrics as M
from sourcepage.evaluation.answerability import decision_shares, risk_coverage
from sourcepage.evaluation.answers import contains_key_fact
from sourcepage.evaluation.relevance import Run
from sourcepage.pipeline import SearchService, outline
from sourcepage.records import Hit, Question
from sourcepage.retrieval.search import Searcher
from sourcepage.support.check import point_covered
from sourcepage.vocabulary import NEGATIVE_CLASSES

#: pages a search returns (``sourcepage search``'s default -k)
SEARCH_K = 10
#: the outline fields per_question.jsonl carries (``pipeline.outline``)
FIELDS = ("decision", "p_supported", "quote_ids", "pages")

Key = tuple[str, str]  # (text version, method)


def _hits(run: Run, qid: str) -> list[Hit]:
    """A run's ranking of one question as the searcher's hits."""
    return [Hit(i, h.page, float(h.score), h.chunk_id) for i, h in enumerate(run.get(qid, []), 1)]


def search_runs(
    store: str | Path,
    results: Mapping[Key, Run],
    qs: Sequence[Question],
    searchers: Mapping[str, Searcher],
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[Key, dict[str, dict[str, Any]]]:
    """(version, method) → question id → the search's outline, with its ``quotes`` (texts)
    and ``reasons``: every run of a version in ``searchers`` searched through the pipeline
    on that version's searcher, each question from the run's own ranking."""
    out: dict[Key, dict[str, dict[str, Any]]] = {}
    services = {v: SearchService(store, v, searcher=s) for v, s in searchers.items()}
    for version, method in results:
        svc = services.get(version)
        if svc is None:
            continue
        same = {m: r for (v, m), r in results.items() if v == version}
        rows = out[(version, method)] = {}
        for i, q in enumerate(qs, 1):
            ranked = {m: _hits(r, q.id) for m, r in same.items()}
            resp = svc.respond(q.question, method, k=SEARCH_K, ranked=ranked)
            quotes = (resp.get("answer") or {}).get("quotes", [])
            rows[q.id] = outline(resp) | {"quotes": [x["text"] for x in quotes], "reasons": resp["reasons"]}
            if progress:
                progress(f"search decisions {version} {method}", i, len(qs))
    return out


def annotate(
    per_question: list[dict[str, Any]], searched: Mapping[Key, Mapping[str, Mapping[str, Any]]]
) -> None:
    """Add the search's outline (``FIELDS``) to each per_question.jsonl row of a searched run."""
    for row in per_question:
        got = searched.get((row["text_version"], row["method"]), {}).get(row["question_id"])
        if got is not None:
            row.update({f: got[f] for f in FIELDS})


def summarise(rows: Mapping[str, Mapping[str, Any]], qs: Sequence[Question]) -> dict[str, Any]:
    """One run's search decisions over ``qs``: the counts and shares per class, the AUROC
    of P(supported) against each negative class, how many answers quote a labelled key
    fact (``answers.contains_key_fact``), the answer points the quotes cover and the
    risk–coverage curve of P(supported)."""
    dec = [rows[q.id]["decision"] for q in qs]
    prob = {q.id: rows[q.id]["p_supported"] for q in qs}
    auroc: dict[str, float | None] = {}
    for name, neg in NEGATIVE_CLASSES.items():
        pos = [prob[q.id] for q in qs if q.answerability == "answerable" and prob[q.id] is not None]
        ng = [prob[q.id] for q in qs if q.answerability in neg and prob[q.id] is not None]
        auroc[name] = round(M.auroc(pos, ng), 6) if pos and ng else None
    answered = [q for q in qs if rows[q.id]["decision"] == "answer" and q.answerability == "answerable"]
    checked = [q for q in answered if q.excerpts]
    stating = [q.id for q in checked if contains_key_fact(rows[q.id]["quotes"], q)]
    points = [
        [point_covered(p, " ".join(rows[q.id]["quotes"])) for p in q.answer_points]
        for q in qs
        if q.answerability == "answerable" and q.answer_points
    ]
    scored = [q for q in qs if prob[q.id] is not None]
    curve = risk_coverage(
        [prob[q.id] for q in scored], [int(q.answerability == "answerable") for q in scored]
    )
    return {
        "counts": {d: dec.count(d) for d in ("answer", "review", "refuse")},
        "decisions": decision_shares(dec, qs),
        "auroc": auroc,
        "risk_coverage": [[round(c, 4), round(r, 4)] for c, r in curve] if scored else [],
        "answered_negatives": [
            q.id for q in qs if rows[q.id]["decision"] == "answer" and q.answerability != "answerable"
        ],
        "answers_checked": len(checked),
        "answers_with_key_fact": round(len(stating) / len(checked), 6) if checked else None,
        "answer_points": {
            "questions": len(points),
            "mean_points_covered": round(sum(sum(p) / len(p) for p in points) / len(points), 4)
            if points
            else None,
            "all_points_covered": round(sum(all(p) for p in points) / len(points), 4) if points else None,
        },
    }
