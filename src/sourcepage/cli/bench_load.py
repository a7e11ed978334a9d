"""``sourcepage bench --load`` without --questions: a reviewer's mix against ``serve``
(optionally with a re-ingest at half time and a signed-in reviewer's writes)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from sourcepage.cli._common import err, fail, out


def bench_load(
    store: Path,
    clients: int,
    seconds: float,
    workers: int,
    json_out: Path | None,
    reingest: Path | None = None,
    writes: bool = False,
) -> None:
    """Load ``sourcepage serve`` with a reviewer's mix and print requests/s, latency and
    errors by request kind (``run_load``)."""
    from sourcepage.bench.load import run_load
    from sourcepage.store.db import StoreError
    from sourcepage.store.files import write_json

    err.print(f"load: {clients} clients for {seconds:g} s on `sourcepage serve` at 127.0.0.1", markup=False)
    try:
        r = run_load(store, clients, seconds, workers, reingest=reingest, writes=writes)
    except (StoreError, ValueError, RuntimeError, OSError) as e:
        fail(str(e))
    out.print(
        f"Load: {r['clients']} clients for {r['wall_seconds']:.1f} s on 127.0.0.1: {r['requests']} requests, "
        f"{r['requests_per_s']:.1f}/s, p50 {r['p50_ms']:.1f} ms, p95 {r['p95_ms']:.1f} ms, "
        f"max {r['max_ms']:.0f} ms, {r['errors']} errors",
        markup=False,
        soft_wrap=True,
    )
    if "reingest" in r:
        ri = r["reingest"]
        out.print(
            f"re-ingest at half time: exit {ri['exit_code']} in {ri['seconds']:.1f} s; "
            f"server {'still serving' if r['server_alive'] else 'DIED'}",
            markup=False,
        )
    t = Table(title="By request kind", title_justify="left")
    for col in ("request", "count", "errors", "refused", "p50 ms", "p95 ms"):
        t.add_column(col, justify="left" if col == "request" else "right")
    for kind, k in r["by_kind"].items():
        t.add_row(
            kind,
            str(k["requests"]),
            str(k["errors"]),
            str(k["refused"]),
            f"{k['p50_ms']:.1f}",
            f"{k['p95_ms']:.1f}",
        )
    out.print(t)
    if json_out:
        write_json(json_out, r)
        out.print(f"json: {json_out}", markup=False)
    if r["errors"]:
        if r.get("server_log"):  # what the server said: a 5xx's traceback
            err.print("The server's log without its access lines of answered requests:", markup=False)
            err.print(r["server_log"], markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1)
