"""What ``sourcepage bench`` prints about the time to an answer (``bench.startup``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sourcepage.cli._common import escape, fail, out


def print_startup(s: dict[str, Any]) -> None:
    """Cold one-shot search, first web search and web API throughput, beside the figures of
    issue #24 (``bench.startup.BEFORE``)."""
    b, o, w = s["before"], s["one_shot"], s["web"]
    t = o["timings_ms"]
    load = ", ".join(f"{x:.1f}" for x in s["load_average"] or ())
    lines = [
        f"[bold]Time to an answer[/] (load average {load}; before: {escape(b['source'])})",
        f"  one-shot `sourcepage search --json` (default method, decision, quotes): median "
        f"[bold]{o['median_s']:.2f} s[/] wall (min {o['min_s']:.2f}, max {o['max_s']:.2f}, "
        f"{o['runs']} runs); load {t.get('load', 0):.0f} ms, rank {t.get('rank', 0):.0f} ms, "
        f"decide {t.get('decide', 0):.0f} ms — before {b['one_shot_s']} s "
        f"(load {b['one_shot_load_ms']} ms, decide {b['one_shot_decide_ms']} ms)",
        f"  first web search after `serve` answered /health: [bold]{w['first_search_ms']:.0f} ms[/] "
        f"— before {b['first_web_search_s']} s",
        f"  web API, {escape(w['method'])} with decisions, {w['workers']} workers, {w['clients']} "
        f"clients: [bold]{w['requests_per_s']:.0f} requests/s[/], p50 {w['p50_ms']:.0f} ms, "
        f"p95 {w['p95_ms']:.0f} ms, errors {w['errors']}, server CPU "
        f"{w['server_cpu_ms_per_request']:.1f} ms a request — before {b['web_requests_per_s']} "
        f"requests/s, p95 {b['web_p95_ms']} ms ({escape(b['web_method'])})",
    ]
    out.print("\n".join(lines), highlight=False)


def bench_search_load(
    store: Path,
    questions: Path,
    method: str,
    workers: int,
    clients: int,
    requests: int,
    json_out: Path | None,
) -> None:
    """``bench --load --questions``: the web API's searches/s under ``clients`` clients."""
    from sourcepage.bench.load import serve_and_load
    from sourcepage.evaluation.questions import read_questions
    from sourcepage.retrieval.methods import default_method

    method = default_method() if method == "default" else method
    try:
        qs = [q.question for q in read_questions(questions)]
        r = serve_and_load(store, qs, method, workers, clients, requests)
    except (ValueError, OSError, RuntimeError) as e:
        fail(str(e))
    out.print(
        f"POST /search {method} on {escape(str(store))}: {r['workers']} worker(s), {r['clients']} clients, "
        f"{r['requests']} requests in {r['seconds']:.1f} s = [bold]{r['requests_per_s']:.0f} requests/s[/]; "
        f"latency p50 {r['p50_ms']:.1f} ms, p95 {r['p95_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, "
        f"max {r['max_ms']:.0f} ms; errors {r['errors']} {escape(str(r['error_examples']))}; "
        f"server CPU {r['server_cpu_ms_per_request']:.2f} ms a request; the first search after "
        f"/health answered {r['first_search_ms']:.0f} ms",
        highlight=False,
    )
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(r, indent=2) + "\n", encoding="utf-8")
