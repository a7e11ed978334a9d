"""Warm whole search (``api.search`` with the default method: ranking, decision, quotes),
per question, in one process after one warm-up search: wall and process-CPU milliseconds
(p50, p95). CPU time is the figure to compare on a shared machine.

    python benchmarks/warm_search.py --store STORE --questions benchmarks/osha6/dev.jsonl -n 20
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
    a = ap.parse_args()
    qs = [q.question for q in read_questions(a.questions)][: a.n]
    api.search("warm-up question about ladders", a.store)
    wall, cpu = [], []
    for q in qs:
        t0, c0 = time.perf_counter(), time.process_time()
        api.search(q, a.store)
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    out = {"store": a.store, "n": len(qs), "load": os.getloadavg()}
    for name, xs in (("wall", wall), ("cpu", cpu)):
        out[f"{name}_p50_ms"] = float(np.percentile(xs, 50))
        out[f"{name}_p95_ms"] = float(np.percentile(xs, 95))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
