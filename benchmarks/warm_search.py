"""Warm whole search (``api.search`` with the default method: ranking, decision, quotes),
per question, in one process after one warm-up search: wall and process-CPU milliseconds
(p50, p95). CPU time is the figure to compare on a shared machine.

    python benchmarks/warm_search.py --store STORE --questions benchmarks/osha6/dev.jsonl -n 20 [--encodings]

``--encoders`` also times each question encoder alone on the same questions (MiniLM for the
dense ranking, e5-small for the answer policy; no cache), the floor under a search's wall time:
the two run side by side, and ≥ 100 searches/s on 2 cores would need < 20 ms of CPU each.
``--encodings`` also counts the sentences each model encoded during the timed searches
(none when the index's sentence table holds every unit a search reads) and their milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from sourcepage import api
from sourcepage.evaluation.questions import read_questions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("-n", type=int, default=20, help="questions timed (the first n)")
    ap.add_argument("--encoders", action="store_true", help="time each question encoder alone")
    ap.add_argument("--encodings", action="store_true", help="count the sentences encoded per model")
    a = ap.parse_args()
    qs = [q.question for q in read_questions(a.questions)][: a.n]
    encoded = _count_encodings() if a.encodings else None
    api.search("warm-up question about ladders", a.store)
    if encoded is not None:
        encoded.clear()
    wall, cpu = [], []
    for q in qs:
        t0, c0 = time.perf_counter(), time.process_time()
        api.search(q, a.store)
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    out = {"store": a.store, "n": len(qs), "load": os.getloadavg()}
    if encoded is not None:
        out["encoded"] = encoded
    for name, xs in (("wall", wall), ("cpu", cpu)):
        out[f"{name}_p50_ms"] = float(np.percentile(xs, 50))
        out[f"{name}_p95_ms"] = float(np.percentile(xs, 95))
    if a.encoders:
        out["encoders_p50_ms"] = _encoders(qs)
    print(json.dumps(out))


def _encoders(qs: list[str]) -> dict[str, float]:
    """p50 milliseconds of one question's vector, per model, through the runtime in force
    (the uncached functions behind ``dense.MODELS``' query encoders)."""
    from sourcepage.retrieval import dense

    out = {}
    for name, encode in (("minilm", dense._minilm_query), ("e5-small", dense._e5_query)):
        encode("warm-up question about ladders")
        ms = []
        for q in qs:
            t0 = time.perf_counter()
            encode(q)
            ms.append((time.perf_counter() - t0) * 1000)
        out[f"{name} ({dense.runtime(name)})"] = float(np.percentile(ms, 50))
    return out


def _count_encodings() -> dict[str, dict[str, float]]:
    """Wrap each dense model's passage encoder to tally {model: {"texts", "ms"}}."""
    import dataclasses

    from sourcepage.retrieval import dense

    tally: dict[str, dict[str, float]] = {}
    for name, enc in list(dense.MODELS.items()):

        def passages(texts: list[str], name: str = name, inner=enc.passages) -> np.ndarray:
            t0 = time.perf_counter()
            try:
                return inner(texts)
            finally:
                row = tally.setdefault(name, {"texts": 0, "ms": 0.0})
                row["texts"] += len(texts)
                row["ms"] += (time.perf_counter() - t0) * 1000

        dense.MODELS[name] = dataclasses.replace(enc, passages=passages)
    return tally


if __name__ == "__main__":
    main()
