"""Fit the default answer policy shipped in the package, on the benchmarks' dev splits.

    python benchmarks/fit_policy.py --bench osha6=STORE_OF_../shared/corpus \
        --bench intl20=STORE_OF_../shared/corpus-intl \
        [--bench construction=STORE_OF_../shared/corpus-construction] \
        [--out src/sourcepage/support/default_policy.json] [--oof OOF.json]

Each store must be ingested from the benchmark's corpus (raw text; bm25 and dense indexes
are built if missing). For every question of ``benchmarks/<name>/dev.jsonl`` the features
(``support.features``) of bm25 + dense are computed; one logistic classifier is fitted on
all of them and its thresholds set on out-of-fold probabilities (``calibrate.fit_policy``:
at most 5% of answerable questions refused, no negative answered). The test splits are
never read. Writes the policy JSON and prints the held-out (out-of-fold) decisions;
``--oof`` also writes each question's out-of-fold P(supported) (and the fitted policy's
P(supported) of the ``--held-out`` splits' questions, which it never saw), on which
``fit_quotes.py --probabilities`` sets the answer gate's thresholds (the shipped policy's
own P(supported) of a dev question it was fitted on is in-sample: too sure).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np

from sourcepage.evaluation.questions import read_questions
from sourcepage.retrieval.search import Searcher
from sourcepage.store.files import write_json
from sourcepage.support.calibrate import fit_policy, out_of_fold, question_features
from sourcepage.support.features import CLASSIFIER_FEATURES, matrix

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "src" / "sourcepage" / "support" / "default_policy.json"


def _rows(
    spec: str, sparse: str, semantic: str, xenc: bool = False, cache: Path | None = None
) -> tuple[str, Path, list[dict]]:
    """(name, questions file, a feature row per question) of ``NAME=STORE`` (the
    benchmark's dev split) or ``STORE=QUESTIONS`` (a questions file: NAME is its folder's
    name, e.g. ``benchmarks/pool/intl/train.jsonl`` → intl); with ``xenc`` the rows hold
    the cross-encoder's features too. Rows are kept in ``cache`` (a folder) and read from
    there when made before with the same arguments."""
    left, _, right = spec.partition("=")
    if right.endswith(".jsonl"):
        store, qfile = left, Path(right)
        name = qfile.parent.name
    else:
        name, store, qfile = left, right, HERE / left / "dev.jsonl"
    digest = hashlib.sha256(f"{store}|{qfile.resolve()}|{sparse}|{semantic}|{xenc}".encode()).hexdigest()[:12]
    kept = cache / f"{name}-{qfile.stem}-{digest}.json" if cache else None
    if kept and kept.exists():
        return name, qfile, json.loads(kept.read_text())
    searcher = Searcher(store, "raw")
    rows = []
    qs = read_questions(qfile, known_pages=searcher.store.page_ids())
    for i, q in enumerate(qs, 1):
        f, _, _ = question_features(searcher, q.question, sparse, semantic, xenc=xenc)
        rows.append(
            {
                "id": f"{name}:{q.id}",
                "label": int(q.answerability == "answerable"),
                "class": q.answerability,
                "features": f,
            }
        )
        print(f"{name}: {i}/{len(qs)}", end="\r", flush=True)
    print()
    if kept:
        write_json(kept, rows)
    return name, qfile, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--bench",
        action="append",
        required=True,
        help="NAME=STORE (benchmarks/NAME/dev.jsonl) or STORE=QUESTIONS (e.g. a pool train.jsonl)",
    )
    ap.add_argument("--xenc", action="store_true", help="compute the cross-encoder's features too")
    ap.add_argument(
        "--features",
        default=",".join(CLASSIFIER_FEATURES),
        help="the classifier's features, comma-separated (default: CLASSIFIER_FEATURES)",
    )
    ap.add_argument("--cache", type=Path, help="keep the feature rows in this folder")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--sparse", default="bm25")
    ap.add_argument("--semantic", default="dense")
    ap.add_argument(
        "--oof",
        type=Path,
        help="write each dev question's out-of-fold P(supported) here ({'NAME:ID': p}, for fit_quotes.py)",
    )
    ap.add_argument(
        "--held-out",
        action="append",
        default=[],
        help="NAME=STORE: a dev split not fitted on, whose P(supported) --oof also writes",
    )
    args = ap.parse_args()
    rows, fitted_on = [], []
    names = [f for f in args.features.split(",") if f]
    for spec in args.bench:
        name, qfile, bench_rows = _rows(spec, args.sparse, args.semantic, args.xenc, args.cache)
        rows += bench_rows
        fitted_on.append(
            {
                "questions": str(qfile.resolve().relative_to(HERE.parent)),
                "sha256": hashlib.sha256(qfile.read_bytes()).hexdigest(),
                "n": len(bench_rows),
            }
        )
    pol = fit_policy(
        rows,
        text_version="raw",
        sparse=args.sparse,
        semantic=args.semantic,
        origin="default",
        fitted_on=fitted_on,
        names=names,
    )
    write_json(args.out, pol.to_json())
    y = np.array([r["label"] for r in rows])
    oof, _, k = out_of_fold(matrix([r["features"] for r in rows], names), y)
    if args.oof:
        probs = {r["id"]: round(float(p), 6) for r, p in zip(rows, oof, strict=True)}
        for spec in args.held_out:
            for r in _rows(spec, args.sparse, args.semantic, args.xenc, args.cache)[2]:
                probs[r["id"]] = round(float(pol.classifier.predict([r["features"]])[0]), 6)
        write_json(args.oof, probs)
    for label, cls in (("answerable", 1), ("negative", 0)):
        p = oof[y == cls]
        answer, refuse = np.mean(p >= pol.t_answer), np.mean(p < pol.t_refuse)
        print(
            f"{label} (n={p.size}, {k}-fold held-out): answer {answer:.0%}, "
            f"review {1 - answer - refuse:.0%}, refuse {refuse:.0%}"
        )
    print(f"t_refuse {pol.t_refuse:.4f}, t_answer {pol.t_answer:.4f}; wrote {args.out}")


if __name__ == "__main__":
    main()
