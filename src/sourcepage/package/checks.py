"""The checks ``verify`` runs on an unpacked reproducibility package (package.export).

:func:`run_checks` needs only the package: question set, qrels, ranked.jsonl against the
run files, metrics.json and stats.json recomputed. :func:`corpus_checks` also needs the
corpus: its checksums, the segment inventory re-derived by a fresh ingest with the
recorded settings, and (``rerank``) every ranking re-derived from that store.
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sourcepage.corpus.manifest import sha256_file
from sourcepage.evaluation.experiment import DEPTH, Design, QuestionsBenchmark, metrics_from_ranked
from sourcepage.evaluation.questions import read_questions
from sourcepage.evaluation.relevance import Qrels, Run, RunHit, run_name
from sourcepage.evaluation.runner import RunResult, score_run, statistics
from sourcepage.evaluation.runs import read_trec_qrels, read_trec_run
from sourcepage.jsonl import jsonl_lines
from sourcepage.records import TEXT_VERSIONS, Question
from sourcepage.store.db import Store

TOL = 1e-6


def segment_rows(store: Store, version: str) -> list[dict[str, Any]]:
    """The segment inventory of one text version: id, document, page, spans, size, SHA-256."""
    return [
        {
            "chunk_id": c.chunk_id,
            "doc_id": c.doc_id,
            "page": c.page,
            "spans": [list(s) for s in c.spans],
            "chars": len(c.text),
            "sha256": hashlib.sha256(c.text.encode()).hexdigest(),
        }
        for c in store.chunks(version)
    ]


@dataclass
class Check:
    """One verification: what was checked, whether it held, and the differences."""

    name: str
    ok: bool = True
    details: list[str] = field(default_factory=list)

    def fail(self, detail: str) -> None:
        self.ok = False
        if len(self.details) < 20:
            self.details.append(detail)
        elif len(self.details) == 20:
            self.details.append("… further differences left out")


def compare_json(a: Any, b: Any, path: str, check: Check) -> None:
    """Compare two JSON values; floats within TOL, NaN equal to NaN."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                check.fail(f"{path}.{k}: present on one side only")
            else:
                compare_json(a[k], b[k], f"{path}.{k}", check)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            check.fail(f"{path}: {len(a)} items vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            compare_json(x, y, f"{path}[{i}]", check)
    elif isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        if not (math.isnan(a) and math.isnan(b)) and not abs(a - b) <= TOL * max(1.0, abs(a), abs(b)):
            check.fail(f"{path}: package {b!r}, re-derived {a!r}")
    elif a != b:
        check.fail(f"{path}: package {b!r}, re-derived {a!r}")


def trec_run(path: Path, version: str, method: str) -> Run:
    """A TREC run file as a Run (docno = page)."""
    return Run(
        {q: [RunHit(d, s, d) for d, s in hits] for q, hits in read_trec_run(path).items()},
        text_version=version,
        method=method,
    )


def qrels_file(path: Path) -> Qrels:
    return Qrels(read_trec_qrels(path))


__all__ = ["corpus_checks", "run_checks"]

Key = tuple[str, str]


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for _, _, line in jsonl_lines(path) if line.strip()]


def _runs(folder: Path, keys: Sequence[Key], check: Check) -> dict[Key, Run]:
    out = {}
    for v, m in keys:
        path = folder / "trec" / f"{run_name(v, m)}.run"
        if not path.is_file():
            check.fail(f"trec/{path.name}: the run file of {v} {m} is missing")
            continue
        try:
            out[(v, m)] = trec_run(path, v, m)
        except ValueError as e:
            check.fail(str(e).replace(str(folder) + "/", ""))
    return out


def _ranked_vs_runs(rows: list[dict[str, Any]], runs: Mapping[Key, Run], qrels: Qrels, check: Check) -> None:
    ranked = Run.from_rows(rows)
    for key in sorted(set(ranked) | set(runs)):
        a, b = ranked.get(key), runs.get(key)
        if a is None or b is None:
            check.fail(f"{key[0]} {key[1]}: in {'the run files' if a is None else 'ranked.jsonl'} only")
            continue
        for qid in sorted(set(a) | set(b)):
            x = [(h.docno, h.score) for h in a.get(qid, [])]
            y = [(h.docno, h.score) for h in b.get(qid, [])]
            if x != y:
                check.fail(f"{key[0]} {key[1]} {qid}: ranked.jsonl and the run file differ")
    for r in rows:
        if r["grade"] != qrels.grade(r["question_id"], r["page"]):
            check.fail(f"ranked.jsonl {r['question_id']} {r['page']}: grade {r['grade']} vs the questions'")


def _statistics(
    folder: Path, info: Mapping[str, Any], questions: list[Question], runs: dict[Key, Run]
) -> dict[str, Any]:
    """stats.json recomputed by the runner's statistics from the run files."""
    keys = [tuple(r) for r in info["runs"]]
    design = Design(
        blocks=[([v], [m]) for v, m in keys], seed=info["seed"], bootstrap=info["bootstrap_resamples"]
    )
    bench = QuestionsBenchmark(folder, folder / "questions.jsonl", design)
    bench.questions = questions
    qrels = Qrels.from_questions(questions)
    evaluated = qrels.relevant_ids()
    queries = {q.id: q.question for q in questions}
    result = RunResult(folder, folder, list(keys), queries, qrels, evaluated, {})  # type: ignore[arg-type]
    result.results = {k: runs[k] for k in keys}  # type: ignore[index]
    result.scores = {k: score_run(runs[k], qrels, evaluated, bench.metrics, bench.depth) for k in keys}  # type: ignore[index]
    return json.loads(json.dumps(statistics(bench, result)))


def run_checks(folder: Path) -> list[Check]:
    """The checks that need only the unpacked package in ``folder``."""
    info = _read_json(folder / "run.json")
    q = Check("question set matches run.json")
    if sha256_file(folder / "questions.jsonl") != info["inputs"]["questions"]["sha256"]:
        q.fail("questions.jsonl: SHA-256 differs from run.json's inputs.questions")
    try:
        questions = read_questions(folder / "questions.jsonl")
    except ValueError as e:
        q.fail(str(e))
        return [q]
    qrels = Qrels.from_questions(questions)
    qr = Check("trec/qrels.txt matches the questions' evidence")
    try:
        packaged = qrels_file(folder / "trec" / "qrels.txt")
        for qid in sorted(set(packaged) | set(qrels)):
            if packaged.get(qid) != qrels.get(qid):
                qr.fail(f"{qid}: qrels.txt {packaged.get(qid)} vs questions {qrels.get(qid)}")
    except (OSError, ValueError) as e:
        qr.fail(str(e))
    metrics = _read_json(folder / "metrics.json")
    keys = [(r["text_version"], r["method"]) for r in metrics["runs"]]
    rk = Check("ranked.jsonl matches the run files")
    runs = _runs(folder, keys, rk)
    rows = _rows(folder / "ranked.jsonl")
    _ranked_vs_runs(rows, runs, qrels, rk)
    mt = Check("metrics.json re-derived from the run files and the questions")
    trec_rows = [
        {
            "question_id": qid,
            "text_version": v,
            "method": m,
            "rank": i,
            "page": h.docno,
            "score": h.score,
            "chunk_id": "",
        }
        for (v, m), run in runs.items()
        for qid, hits in run.items()
        for i, h in enumerate(hits, 1)
    ]
    derived = {(r["text_version"], r["method"]): r for r in metrics_from_ranked(trec_rows, questions)}
    for r in metrics["runs"]:
        key = (r["text_version"], r["method"])
        if key not in derived:
            if key in runs:  # a run file without a single line: every metric 0
                continue
            mt.fail(f"{key[0]} {key[1]}: no run file to re-derive it from")
            continue
        packaged = {k: v for k, v in r.items() if k != "query_ms"}
        compare_json(derived[key], packaged, f"{key[0]} {key[1]}", mt)
    st = Check("stats.json re-derived (bootstrap CIs, Friedman, Wilcoxon + Holm, McNemar)")
    if (folder / "stats.json").is_file() and len(runs) == len(keys):
        compare_json(
            _statistics(folder, info, questions, runs), _read_json(folder / "stats.json"), "stats", st
        )
    else:
        st.fail("stats.json or a run file is missing")
    return [q, qr, rk, mt, st]


def corpus_checks(folder: Path, corpus: Path, rerank: bool) -> list[Check]:
    """The checks that re-derive from ``corpus``: checksums, segments and, with
    ``rerank``, the rankings."""
    from sourcepage.ingest import ingest
    from sourcepage.store.db import Store
    from sourcepage.text.versions import TextSettings

    cs = Check("corpus matches the packaged manifest and checksums")
    man = corpus / "manifest.csv"
    if not man.is_file():
        cs.fail(f"{man}: missing")
    elif sha256_file(man) != sha256_file(folder / "corpus" / "manifest.csv"):
        cs.fail(f"{man}: differs from the packaged manifest.csv")
    for name, sha in _read_json(folder / "corpus" / "files.json").items():
        p = corpus / "pdf" / name
        if not p.is_file():
            cs.fail(f"{p}: missing")
        elif sha256_file(p) != sha:
            cs.fail(f"{p}: SHA-256 differs from the package")
    settings = _read_json(folder / "settings.json")
    sg = Check("segments re-derived from the corpus (fresh ingest, recorded settings)")
    checks = [cs, sg]
    with tempfile.TemporaryDirectory(prefix="sourcepage-verify-store-") as tmp:
        store = Path(tmp) / "store"
        try:
            rep = ingest(
                corpus,
                store,
                engine=settings.get("engine", "pypdfium2"),
                settings=TextSettings.from_dict(settings["text_settings"]),
                workers=1,
            )
        except (ValueError, OSError) as e:
            sg.fail(f"cannot ingest {corpus}: {e}")
            return checks
        for doc_id, why in rep.failed.items():
            sg.fail(f"{doc_id}: extraction failed: {why}")
        st = Store(store)
        try:
            for version in TEXT_VERSIONS:
                _segments(
                    _rows(folder / "segments" / f"{version}.jsonl"), segment_rows(st, version), version, sg
                )
            if rerank:
                checks.append(_rerank(folder, st, settings))
        finally:
            st.close()
    return checks


def _segments(
    packaged: list[dict[str, Any]], fresh: list[dict[str, Any]], version: str, check: Check
) -> None:
    a = {r["chunk_id"]: r for r in packaged}
    b = {r["chunk_id"]: r for r in fresh}
    for cid in sorted(set(a) - set(b)):
        check.fail(f"{version} {cid}: in the package, not re-derived")
    for cid in sorted(set(b) - set(a)):
        check.fail(f"{version} {cid}: re-derived, not in the package")
    for cid in sorted(set(a) & set(b)):
        diff = [k for k in ("doc_id", "page", "spans", "chars", "sha256") if a[cid][k] != b[cid][k]]
        if diff:
            check.fail(f"{version} {cid}: {', '.join(diff)} differ")


def _rerank(folder: Path, st: Any, settings: Mapping[str, Any]) -> Check:
    """Every question ranked again with the recorded settings, against the run files."""
    from sourcepage.retrieval.search import Searcher

    check = Check("rankings re-derived from the corpus (indexes rebuilt)")
    if "experiment" not in settings:
        check.fail("settings.json has no experiment design (a run made before packages existed)")
        return check
    design = Design.from_dict(settings["experiment"], "settings.json")
    depth = int(settings.get("depth", DEPTH))
    questions = read_questions(folder / "questions.jsonl")
    keys = [tuple(r) for r in settings["runs"]]
    runs = _runs(folder, keys, check)  # type: ignore[arg-type]
    searchers: dict[str, Searcher] = {}
    for (v, m), run in runs.items():
        s = searchers.setdefault(v, Searcher(st, v, design.index))
        for q in questions:
            got = [(h.page_id, h.score) for h in s.rank(q.question, m, k=depth).hits]
            want = [(h.docno, h.score) for h in run.get(q.id, [])]
            same = [x[0] for x in got] == [y[0] for y in want] and all(
                math.isclose(x[1], y[1], rel_tol=1e-6, abs_tol=1e-9) for x, y in zip(got, want, strict=False)
            )
            if not same:
                check.fail(f"{v} {m} {q.id}: the ranking differs from the run file")
    return check
