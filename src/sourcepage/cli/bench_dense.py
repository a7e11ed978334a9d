"""``sourcepage bench --dense``: approximate against exact dense search (the table)."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from sourcepage.cli._common import err, escape, fail, out


def bench_dense(
    n: int | None,
    store: Path | None,
    questions: Path | None,
    work: Path | None,
    queries: int,
    libraries: str,
    json_out: Path | None,
) -> None:
    """Run ``bench.dense_scale`` on synthetic or a store's vectors and print its table."""
    from sourcepage.bench import dense_scale as ds

    names = list(ds.LIBRARIES) if libraries == "all" else [x.strip() for x in libraries.split(",")]
    try:
        if store is not None and questions is not None:
            vectors, qs = ds.store_vectors(store, questions)
            source = f"{store} (MiniLM), {questions.name}"
        elif n is not None:
            vectors, qs = ds.clustered_vectors(n, queries)
            source = "synthetic, clustered"
        else:
            fail("--dense needs --scale N, or --store DIR and --questions FILE")
        work = work or Path("out") / f"dense-{len(vectors)}"
        r = ds.run_dense_bench(
            vectors, qs, work, names, source=source, progress=lambda s: err.print(f"[dim]{s}…[/]")
        )
    except (ValueError, OSError) as e:
        fail(str(e))
    st = r["settings"]
    t = Table(
        title=f"Dense search — {st['vectors']} vectors ({escape(st['source'])}), {st['queries']} queries, "
        f"HNSW M={st['M']} ef_construction={st['ef_construction']} ef_search={st['ef_search']}, 1 thread",
        title_justify="left",
    )
    for col in (
        "search",
        "recall@100",
        "build s",
        "build peak MB",
        "query +MB",
        "disk MB",
        "p50 ms",
        "p95 ms",
    ):
        t.add_column(col, justify="left" if col == "search" else "right")
    mb = 1024 * 1024
    for name, row in r["rows"].items():
        label = f"{name} ({st['library']})" if name == "sourcepage" else name
        if not row.get("installed", True):
            t.add_row(escape(label), "not installed", *[""] * 6)
            continue
        t.add_row(
            escape(label),
            f"{row['recall_at_100']:.4f}",
            f"{row['build_seconds']:.1f}",
            f"{row['peak_mb']:.0f}" if "peak_mb" in row else "",
            f"{row['query_added_mb']:.0f}" if "query_added_mb" in row else "",
            f"{row['disk_bytes'] / mb:.0f}",
            f"{row['p50']:.3f}",
            f"{row['p95']:.3f}",
        )
    out.print(t)
    if json_out:
        ds.write_json(json_out, r)
        out.print(f"json: {json_out}", markup=False)
