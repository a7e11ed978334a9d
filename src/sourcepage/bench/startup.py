"""Time to the first answer (issue #24): a cold one-shot ``sourcepage search``, the first web
search after ``serve`` reports ready, and the web API's throughput with the default method
and its decision — each beside the figures measured before this work (``BEFORE``).

- ``one_shot``: ``sourcepage search Q --store S --json`` in a fresh process (imports,
  index and model loading, ranking, decision, quotes), wall time per run, and the
  ``timings_ms`` the search reports of itself.
- ``web``: ``bench.load.serve_and_load`` with the default method: requests/s,
  latency percentiles, errors, server CPU a request, and the first search after ``/health``
  answered (the service answers only once its models are loaded).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: issue #24's measurements on corpus-intl before this work (machine at load 3.5–6, 2 cores),
#: and the idle warm figure of docs/experiments/time-to-answer.md
BEFORE: dict[str, Any] = {
    "source": "issue #24 (corpus-intl, 2 cores, load 3.5-6) and docs/experiments/time-to-answer.md (warm)",
    "one_shot_s": "8.8-11.4",
    "one_shot_load_ms": 6100,
    "one_shot_decide_ms": 1360,
    "first_web_search_s": "7.6-11.5",
    "web_requests_per_s": 9.5,
    "web_p95_ms": 5800,
    "web_method": "bm25 with the policy's decision",
    "warm_whole_search_p50_ms": 108,
    "warm_whole_search_p95_ms": 136,
    "index_seconds": 656,
    "dense_seconds": 587,
}


def one_shot(store: str | Path, question: str, runs: int = 3) -> dict[str, Any]:
    """Wall seconds of ``runs`` one-shot CLI searches (each a new process) and the
    ``timings_ms`` of the last; the store's indexes are built before (not timed)."""
    cmd = [sys.executable, "-m", "sourcepage.cli", "search", question, "--store", str(store), "--json"]
    walls: list[float] = []
    timings: dict[str, Any] = {}
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    for _ in range(runs + 1):  # the first builds what is missing and fills the OS page cache
        t0 = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
        walls.append(time.perf_counter() - t0)
        if res.returncode != 0:
            raise RuntimeError(f"sourcepage search failed: {res.stderr.strip()[-800:]}")
        out = json.loads(res.stdout)
        timings = dict(out.get("timings_ms", {}), decision=out.get("decision"))
    walls = walls[1:]
    return {
        "question": question,
        "runs": runs,
        "median_s": statistics.median(walls),
        "min_s": min(walls),
        "max_s": max(walls),
        "timings_ms": timings,
    }


def run_startup(
    store: str | Path, questions: list[str], runs: int = 3, requests: int = 1000, workers: int = 2
) -> dict[str, Any]:
    """``one_shot`` on the first question and the web API under load, default method."""
    from sourcepage.bench.load import serve_and_load
    from sourcepage.retrieval.methods import default_method

    if not questions:
        raise ValueError("no questions to time")
    return {
        "before": BEFORE,
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "one_shot": one_shot(store, questions[0], runs),
        "web": serve_and_load(store, questions, default_method(), workers=workers, requests=requests),
    }
