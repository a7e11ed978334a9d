"""``sourcepage index`` and ``sourcepage search``: build indexes, rank source pages."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from sourcepage.cli._common import (
    METHOD_GRAMMAR,
    RayAddressOpt,
    RayOpt,
    StoreOpt,
    Text,
    err,
    escape,
    fail,
    out,
    progress,
    ray_executor,
    ticker,
)


def index(
    store: StoreOpt = Path(".store"),
    version: Annotated[str, typer.Option(help="raw, cleaned, enriched or all.")] = "all",
    method: Annotated[
        str | None,
        typer.Option(
            help=f"Comma-separated methods ({METHOD_GRAMMAR}); their base indexes are built. Default: "
            "what `search` needs — bm25 and lsa on each version, dense on raw (when installed) and "
            "the methods of a stored answer policy."
        ),
    ] = None,
    ray: RayOpt = False,
    ray_address: RayAddressOpt = None,
    dense_search: Annotated[
        str,
        typer.Option(
            help="Dense indexes: auto (an approximate nearest-neighbour index from 50 000 chunks up), "
            "exact (none) or ann (always)."
        ),
    ] = "auto",
) -> None:
    """Build (atomically) the indexes of the given methods and text versions.

    With --ray each (version, method) index is built in a Ray task, after the chunks a
    dense index needs are embedded in batches as Ray tasks."""
    import time

    from sourcepage import api
    from sourcepage.retrieval.index import build_index, build_indexes, index_params, index_size_bytes
    from sourcepage.retrieval.methods import parse_method, parse_methods
    from sourcepage.retrieval.settings import IndexSettings
    from sourcepage.store.db import Store, StoreError

    versions = ["raw", "cleaned", "enriched"] if version == "all" else version.split(",")
    try:
        settings = IndexSettings(dense_search=dense_search)
        st = Store(store)
        if method is None:
            plan = [(v, parse_method(m)) for v, m in api.index_plan(store, versions)]
        else:
            bases = list(dict.fromkeys(b for m in parse_methods(method) for b in m.bases()))
            plan = [(v, b) for v in versions for b in bases]
    except (StoreError, ValueError) as e:
        fail(str(e))
    t = Table(title="Indexes")
    for col in ("version", "method", "chunks", "seconds", "size"):
        t.add_column(col, justify="right" if col in ("chunks", "seconds", "size") else "left")
    ex = ray_executor(ray, ray_address)
    if ex is not None:
        st.close()
        t0 = time.perf_counter()
        try:
            paths = [
                path
                for v in versions
                for path in build_indexes(store, [v], [b for w, b in plan if w == v], settings, executor=ex)
            ]
        except ValueError as e:
            fail(str(e))
        finally:
            ex.close()
        for path in paths:
            p = index_params(path)
            kb = index_size_bytes(path) / 1024
            t.add_row(
                escape(p["text_version"]),
                p["method"],
                str(p["chunks"]),
                f"{p['build_seconds']:.2f}",
                f"{kb:.0f} KiB",
            )
        out.print(t)
        out.print(f"built on Ray ({ex.workers} CPUs) in {time.perf_counter() - t0:.2f} s", markup=False)
        return
    with progress() as prog:
        tick = ticker(prog)  # a bar a build on a terminal, else a line when it starts and ends
        for v, m in plan:
            label = f"{m.name} index ({v} text)"
            tick(label, 0, 0)
            t0 = time.perf_counter()
            try:
                path = build_index(st, v, m, settings, progress=lambda d, n, label=label: tick(label, d, n))
            except ValueError as e:
                fail(str(e))
            tick(label, 1, 1)
            t.add_row(
                escape(v),
                m.name,
                str(index_params(path)["chunks"]),
                f"{time.perf_counter() - t0:.2f}",
                f"{index_size_bytes(path) / 1024:.0f} KiB",
            )
    out.print(t)


def _highlight(passage: str, spans: list[tuple[int, int]], limit: int = 400) -> Text:
    """Up to ``limit`` characters of a passage from shortly before its first query term,
    on one line, the terms bold."""
    start = max(0, spans[0][0] - 120) if spans else 0
    shown = passage[start : start + limit].replace("\n", " ").replace("\ufffe", "-")  # PDFium's hyphen
    text = Text(("…" if start else "") + shown)
    off = 1 if start else 0
    for a, b in spans:
        if a >= start and b <= start + limit:
            text.stylize("bold yellow", a - start + off, b - start + off)
    return text


def _fields_line(r: dict) -> str:
    """A hit's extra manifest fields on one line (``phase: structure · work package:
    precast_tiltup, lifting · asset: 2O2Fr$t4X7Zf8NOew3FLOH <url>``); '' without any."""
    from sourcepage.corpus.fields import FIELD_LABELS

    urls = {a["asset_id"]: a["url"] for a in r.get("asset_links", [])}
    parts = []
    for name, values in r.get("fields", {}).items():
        shown = [f"{v} <{urls[v]}>" if name == "asset_id" and v in urls else v for v in values]
        parts.append(f"{FIELD_LABELS.get(name, name).lower()}: {', '.join(shown)}")
    return " · ".join(parts)


#: the widest the authority column of the results table gets (then an ellipsis), and the
#: narrowest its title may get before the table drops to the narrow layout
AUTHORITY_WIDTH = 32
TITLE_MIN_WIDTH = 20


def _table_fields(fields: dict[str, list[str]]) -> str:
    """What the results table shows of a hit's fields, under its title: phase, work package
    and project (``phase=structure work_package=precast_tiltup,lifting``); the top passages
    below the table and ``--json`` show every field."""
    return " ".join(f"{n}={','.join(fields[n])}" for n in ("phase", "work_package", "project") if n in fields)


def _results_table(res: dict, version: str, question: str, width: int) -> Table:
    """The ranked pages; on a terminal under 120 columns, or where the other columns would
    leave the title under ``TITLE_MIN_WIDTH``, only what identifies and dates a page (rank,
    page, score, title, jurisdiction, year), so no column is squeezed away."""
    fields = {
        "rank": "rank",
        "page": "page",
        "score": "score",
        "title": "title",
        "authority": "authority",
        "jur.": "jurisdiction",
        "year": "year",
        "type": "doc_type",
        "role": "role",
    }
    values = [{**r, "score": f"{r['score']:.4g}", "title": r["title"][:48]} for r in res["results"]]
    caps = {"authority": AUTHORITY_WIDTH}  # corpus-construction's authorities run to 90 characters

    def others(cols: dict[str, str], pad: int) -> int:
        """The width of every column but the title, each with ``pad`` for padding and rules."""
        return sum(
            min(caps.get(c, width), max([len(c)] + [len(str(v[f])) for v in values])) + pad
            for c, f in cols.items()
            if c != "title"
        )

    narrow = width < 120 or width - others(fields, 3) - 4 < TITLE_MIN_WIDTH
    if narrow:  # one line a page, without borders
        fields = {c: f for c, f in fields.items() if c not in ("authority", "type", "role")}
    t = Table(
        title=escape(f"{res['method']} · {version} · {question}"),
        title_justify="left",
        **(
            {"box": box.SIMPLE_HEAD, "show_edge": False, "pad_edge": False, "collapse_padding": True}
            if narrow
            else {}
        ),
    )
    # the title takes what the other columns leave (rich would squeeze short columns to nothing)
    widths = {**caps, **({"title": max(10, width - others(fields, 2) - 4)} if narrow else {})}
    for col in fields:
        t.add_column(
            col,
            no_wrap=narrow or col != "title",
            overflow="ellipsis",
            justify="right" if col in ("rank", "score") else "left",
            max_width=widths.get(col),
        )
    for v in values:
        cells: list[str | Text] = [escape(str(v[f])) for f in fields.values()]
        if _table_fields(v.get("fields", {})):  # phase, work package, project under the title
            cells[list(fields).index("title")] = Text(v["title"]).append(
                "\n" + _table_fields(v["fields"]), style="cyan"
            )
        t.add_row(*cells)
    return t


def search(
    question: Annotated[str, typer.Argument(help="The question.")],
    store: StoreOpt = Path(".store"),
    method: Annotated[
        str | None,
        typer.Option(help=f"{METHOD_GRAMMAR}. Default: route:rrf:bm25+dense (route:bm25 without MiniLM)."),
    ] = None,
    k: Annotated[int, typer.Option("-k", "--k", help="Pages to return (1-100).")] = 10,
    version: Annotated[str, typer.Option(help="raw, cleaned or enriched.")] = "raw",
    filter_: Annotated[
        list[str] | None,
        typer.Option(
            "--filter", help="field=value[,value]; repeatable. year_from=YYYY / year_to=YYYY bound the year."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON (README documents the schema).")
    ] = False,
) -> None:
    """Rank the source pages that support a question, with provenance and a decision."""
    from sourcepage import api
    from sourcepage.store.db import StoreError

    if not 1 <= k <= 100:
        fail(f"-k must be between 1 and 100, got {k}")
    with progress() as prog:  # a bar for an index built on first use
        try:
            filters = api.filters_from_pairs(filter_)
            res = api.search(
                question,
                store,
                method=method,
                k=k,
                version=version,
                filters=filters,
                log=True,
                notify=lambda note: err.print(Text(note + " …", style="dim")),
                progress=ticker(prog),
            )
        except (StoreError, ValueError, RuntimeError) as e:
            fail(str(e))
    if as_json:
        sys.stdout.write(json.dumps(res, ensure_ascii=False, indent=2) + "\n")
        return
    out.print(_results_table(res, version, question, out.width))
    colour = {"answer": "green", "refuse": "red", "review": "yellow"}[res["decision"]]
    out.print(
        f"[bold {colour}]decision: {res['decision']}[/] — " + escape(" ".join(res["reasons"])),
        highlight=False,
    )
    if len(res["jurisdictions"]) > 1:
        out.print(
            f"[bold yellow]Note:[/] the top pages come from {len(res['jurisdictions'])} "
            f"jurisdictions ({escape(', '.join(res['jurisdictions']))}); do not treat their requirements "
            "as interchangeable.",
            highlight=False,
        )
    tm = res.get("timings_ms")
    if tm:
        out.print(
            Text(
                f"{res['query_ms']:.0f} ms: load {tm['load']:.0f} (indexes and models)"
                f" · rank {tm['rank']:.1f} · decide {tm['decide']:.1f} (decision and quotes)",
                style="dim",
            )
        )
    ans = res.get("answer") or {}
    if ans.get("quotes"):
        label = "supporting sentences" if ans["status"] == "answer" else "draft quotes for the reviewer"
        found = "" if ans.get("fact_found", True) else f" — none states what was asked: {ans['asked']}"
        out.print(Text(f"\n{label}{found}:", style="bold"))
        for q in ans["quotes"]:
            out.print(f"  \u201c{q['text']}\u201d {q['citation']}", highlight=False, markup=False)
    for r in res["results"][:3]:
        out.print(Text(f"\n[{r['rank']}] {r['page']} ({r['chunk_id']})", style="bold"))
        if _fields_line(r):
            out.print(Text(_fields_line(r), style="cyan"))
        out.print(_highlight(r["passage"], [tuple(s) for s in r["highlights"]]))
