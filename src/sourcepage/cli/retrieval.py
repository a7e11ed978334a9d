"""``sourcepage index`` and ``sourcepage search``: build indexes, rank source pages."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

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
    json_text,
    out,
    progress,
    ray_executor,
    shorten,
    ticker,
)
from sourcepage.cli.answer_notes import desk_lines, folded_line, reviewed_here
from sourcepage.cli.manifest import guessed_line, unconfirmed_note
from sourcepage.cli.quotes import print_quotes
from sourcepage.corpus.structure import last_heading


def index(
    store: StoreOpt = Path(".store"),
    version: Annotated[
        str,
        typer.Option(
            help="raw, cleaned, enriched (comma-separated) or all. Default: raw, the version `search` reads."
        ),
    ] = "raw",
    method: Annotated[
        str | None,
        typer.Option(
            help=f"Comma-separated methods ({METHOD_GRAMMAR}); their base indexes are built. Default: "
            "what `search` needs — bm25 and lsa on each version, dense on raw (when installed), "
            "the methods of a stored answer policy, and the sentence vectors of the answer policy."
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
    workers: Annotated[
        int,
        typer.Option(
            min=0, max=256, metavar="N",
            help="Processes that embed chunks and sentences (one thread each; 0: one a core; at most 256).",
        ),
    ] = 0,
    sentences: Annotated[
        bool,
        typer.Option(
            help="With the default plan, also encode every chunk sentence for the answer policy "
            "(--no-sentences: a faster build; a search then encodes its top passages' sentences)."
        ),
    ] = True,
) -> None:
    """Build (atomically) the indexes of the given methods and text versions.

    With --ray each (version, method) index is built in a Ray task, after the chunks a
    dense index needs are embedded in batches as Ray tasks."""
    from sourcepage.records import TEXT_VERSIONS
    from sourcepage.retrieval.settings import IndexSettings
    from sourcepage.store.db import Store, StoreError

    versions = list(TEXT_VERSIONS) if version == "all" else version.split(",")
    workers = workers or os.cpu_count() or 1
    try:
        settings = IndexSettings().replace("dense", search=dense_search)
        st = Store(store)
        plan = _index_plan(store, versions, method)
    except (StoreError, ValueError) as e:
        fail(str(e))
    t = Table(title="Indexes")
    for col in ("version", "method", "chunks", "seconds", "size"):
        t.add_column(col, justify="right" if col in ("chunks", "seconds", "size") else "left")
    ex = ray_executor(ray, ray_address)
    if ex is not None:
        st.close()
        _build_on_ray(store, versions, plan, settings, ex, t)
        return
    with progress() as prog:
        tick = ticker(prog)  # a bar a build on a terminal, else a line when it starts and ends
        embedded = _embed_in_workers(st, plan, workers, tick, t)
        _build_here(st, plan, settings, tick, t, embedded)
        if method is None and sentences:
            from sourcepage import api

            _sentence_tables(st, api.sentence_plan(versions), tick, t, workers)
    out.print(t)


def _index_plan(store: Path, versions: list[str], method: str | None) -> list[tuple[str, Any]]:
    """(version, base method) pairs to build: the bases of ``method`` on each version, or
    without it what ``search`` needs (``api.index_plan``)."""
    from sourcepage import api
    from sourcepage.retrieval.methods import parse_method, parse_methods

    if method is None:
        return [(v, parse_method(m)) for v, m in api.index_plan(store, versions)]
    bases = list(dict.fromkeys(b for m in parse_methods(method) for b in m.bases()))
    return [(v, b) for v in versions for b in bases]


def _build_on_ray(
    store: Path, versions: list[str], plan: list[tuple[str, Any]], settings: Any, ex: Any, t: Table
) -> None:
    """``index --ray``: each version's indexes built as Ray tasks, then the table printed."""
    import time

    from sourcepage.retrieval.index import build_indexes, index_params, index_size_bytes

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
        seconds = f"{p['build_seconds']:.2f}"
        t.add_row(escape(p["text_version"]), p["method"], str(p["chunks"]), seconds, f"{kb:.0f} KiB")
    out.print(t)
    out.print(f"built on Ray ({ex.workers} CPUs) in {time.perf_counter() - t0:.2f} s", markup=False)


def _build_here(
    st: Any, plan: list[tuple[str, Any]], settings: Any, tick: Any, t: Table, embedded: set[tuple[str, str]]
) -> None:
    """Build each index of ``plan`` in this process, a row of ``t`` each; a dense index whose
    chunks were embedded beforehand (``embedded``: (version, method)) is labelled as built
    from those vectors."""
    import time

    from sourcepage.retrieval.index import build_index, index_params, index_size_bytes

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
            f"{m.name}: build from the vectors" if (v, m.name) in embedded else m.name,
            str(index_params(path)["chunks"]),
            f"{time.perf_counter() - t0:.2f}",
            f"{index_size_bytes(path) / 1024:.0f} KiB",
        )


def _embed_in_workers(
    st: Any, plan: list[tuple[str, Any]], workers: int, tick: Any, t: Table
) -> set[tuple[str, str]]:
    """Embed the chunks of each dense index of ``plan`` in ``workers`` processes of one
    thread each, into the store's embedding cache, before the builds read them: on 2 cores
    two one-thread workers outpace one process of two threads, whose threads wait on each
    other when the machine is busy (docs/speed.md). Each is a row of ``t`` of its own (the
    chunks embedded now and the seconds), so that the dense build's row, which then reads
    the cached vectors, is not read as the time to embed (issue 49: "dense 0.08 s"). Returns
    the (version, method) pairs embedded so."""
    import time

    from sourcepage.executor import ProcessPool
    from sourcepage.retrieval.index import embed_through

    dense = [(v, m) for v, m in plan if m.kind == "dense"]
    if workers <= 1 or not dense:
        return set()
    with ProcessPool(workers) as pool:
        for v, m in dense:
            t0 = time.perf_counter()
            m.spec.encoder(m).warm()  # a missing ONNX export is made here once, not in every worker
            label = f"{m.name} embeddings ({v} text, {workers} workers)"
            tick(label, 0, 0)
            n = embed_through(pool, st, [v], m, progress=lambda d, n, label=label: tick(label, d, n))
            tick(label, 1, 1)
            t.add_row(escape(v), f"{m.name}: embed chunks", str(n), f"{time.perf_counter() - t0:.2f}", "")
    return {(v, m.name) for v, m in dense}


def _sentence_tables(st: Any, versions: list[str], tick: Any, table: Table, workers: int) -> None:
    """Build the sentence vectors of the answer policy (``retrieval.sentvec``) on ``versions``."""
    import time

    from sourcepage.retrieval import sentvec
    from sourcepage.retrieval.index import index_params, index_size_bytes

    for v in versions:
        label = f"sentence vectors ({v} text)"
        tick(label, 0, 0)
        t0 = time.perf_counter()
        path = sentvec.build(st, v, workers or None, progress=lambda d, n, label=label: tick(label, d, n))
        tick(label, 1, 1)
        table.add_row(
            escape(v),
            f"sentences:{sentvec.SENTENCE_MODEL}",
            str(index_params(path)["sentences"]),
            f"{time.perf_counter() - t0:.2f}",
            f"{index_size_bytes(path) / 1024:.0f} KiB",
        )


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


#: the longest value a column of the plain results table shows (the rest ends in "…")
LONGEST = {"authority": 28, "type": 14, "role": 10}


def _tail(r: dict) -> str:
    """A hit's most specific heading (the last of its path) in 40 characters, cut at the end
    so that its number stays ("Article 10 Obligations of manufacturers…", "45 Duties of workers")."""
    return shorten(last_heading(r.get("section") or ""), 40)


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


def _table_fields(fields: dict[str, list[str]]) -> str:
    """What the results table shows of a hit's fields, under its title: phase, work package
    and project (``phase=structure work_package=precast_tiltup,lifting``); the top passages
    below the table and ``--json`` show every field."""
    return " ".join(f"{n}={','.join(fields[n])}" for n in ("phase", "work_package", "project") if n in fields)


def _results_table(res: dict, version: str, question: str, width: int) -> Table:
    """The ranked pages; on a terminal under 120 columns only what identifies and dates a
    page (rank, page, score, title, jurisdiction, year), so no column is squeezed away; the
    heading path (``section``) shows from 120 columns."""
    fields = {
        "rank": "rank",
        "page": "page",
        "score": "score",
        "title": "title",
        "section": "section",
        "authority": "authority",
        "jur.": "jurisdiction",
        "year": "year",
        "type": "doc_type",
        "role": "role",
    }
    narrow = width < 120
    if narrow:  # one line a page, without borders
        fields = {c: f for c, f in fields.items() if c not in ("authority", "type", "role", "section")}
    t = Table(
        title=escape(f"{res['method']} · {version} · {question}"),
        title_justify="left",
        **(
            {"box": box.SIMPLE_HEAD, "show_edge": False, "pad_edge": False, "collapse_padding": True}
            if narrow
            else {}
        ),
    )

    def cells(r: dict) -> dict[str, str]:
        return {
            c: shorten(str({**r, "score": f"{r['score']:.4g}", "section": _tail(r)}[f]), LONGEST.get(c))
            for c, f in fields.items()
        }

    # the title takes what the other columns leave, in one or two lines; columns go (role,
    # type, authority, section) until it has room (rich would squeeze short columns to nothing, and
    # a long authority name took nine lines)
    while True:
        rows = [cells(r) for r in res["results"]]
        widths = {c: max([len(c)] + [len(row[c]) for row in rows]) for c in fields if c != "title"}
        overhead = 2 * (len(fields) - 1) if narrow else 3 * len(fields) + 1
        title_width = max(10, width - sum(widths.values()) - overhead - 1)
        dropped = next((c for c in ("role", "type", "authority", "section") if c in fields), None)
        if title_width >= 24 or dropped is None:
            break
        del fields[dropped]
    room = title_width if narrow else 2 * title_width - 8  # two lines, with room for word breaks
    for row in rows:
        row["title"] = shorten(row["title"], min(48, room))

    for col in fields:
        t.add_column(
            col,
            no_wrap=narrow or col != "title",
            overflow="ellipsis",
            justify="right" if col in ("rank", "score") else "left",
            min_width=widths.get(col),
            max_width=title_width if col == "title" else None,
        )
    for r, row in zip(res["results"], rows, strict=True):
        line: list[str | Text] = [escape(v) for v in row.values()]
        if _table_fields(r.get("fields", {})):  # phase, work package, project under the title
            line[list(fields).index("title")] = Text(row["title"]).append(
                "\n" + _table_fields(r["fields"]), style="cyan"
            )
        t.add_row(*line)
    return t


def search(
    question: Annotated[str, typer.Argument(help="The question.")],
    store: StoreOpt = Path(".store"),
    method: Annotated[
        str | None,
        typer.Option(
            help=f"{METHOD_GRAMMAR}. Default: sect:route:rrf:bm25+dense (route:bm25 without MiniLM)."
        ),
    ] = None,
    k: Annotated[int, typer.Option("-k", "--k", help="Pages to return (1-100).")] = 10,
    version: Annotated[str, typer.Option(help="raw, cleaned or enriched.")] = "raw",
    filter_: Annotated[
        list[str] | None,
        typer.Option(
            "--filter",
            help="field=value[,value] (a comma in a value: \\,); repeatable. year_from=YYYY / year_to=YYYY "
            "bound the year; section='Article 10' keeps the pages under a heading that holds those words.",
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
    api.one_question_process()
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
        sys.stdout.write(json_text(res) + "\n")
        return
    out.print(_results_table(res, version, question, out.width))
    folded_line(res)
    if unconfirmed_note(res):
        out.print(Text(unconfirmed_note(res), style="yellow"))
    _print_decision(res)
    if not reviewed_here(res):  # a reviewed question's answer is the reviewer's, not the draft
        print_quotes(res)
    _print_passages(res)


def _print_decision(res: dict) -> None:
    """The decision with its reasons, a mixed-jurisdiction note, routing, the reviewer's
    desk and the timings of a search."""
    colour = {"answer": "green", "refuse": "red", "review": "yellow"}[res["decision"]]
    reviewed = reviewed_here(res)
    if reviewed:  # the reviewed answer is the answer; the system's decision follows as its own
        desk_lines(res)
        colour = "dim"
    said = "the system's own decision, before the review" if reviewed else "decision"
    out.print(
        f"[bold {colour}]{said}: {res['decision']}[/] — " + escape(" ".join(res["reasons"])),
        highlight=False,
    )
    if len(res["jurisdictions"]) > 1:
        out.print(
            f"[bold yellow]Note:[/] the top pages come from {len(res['jurisdictions'])} "
            f"jurisdictions ({escape(', '.join(res['jurisdictions']))}); do not treat their requirements "
            "as interchangeable.",
            highlight=False,
        )
    _routing_line(res)
    _cited_line(res)
    if not reviewed:
        desk_lines(res)
    tm = res.get("timings_ms")
    if tm:
        out.print(
            Text(
                f"{res['query_ms']:.0f} ms: load {tm['load']:.0f} (indexes and models)"
                f" · rank {tm['rank']:.1f} · decide {tm['decide']:.1f} (decision and quotes)",
                style="dim",
            )
        )


def _print_passages(res: dict) -> None:
    """The first three pages' passages under their section paths, the query terms highlighted."""
    for r in res["results"][:3]:
        plabel = r.get("page_label") or ""
        printed = f", printed p. {plabel}" if plabel and plabel != str(r["page_number"]) else ""
        ocr = f", read by OCR {r['ocr_confidence']:.0f}%" if r.get("ocr_confidence") is not None else ""
        out.print(Text(f"\n[{r['rank']}] {r['page']} ({r['chunk_id']}{printed}{ocr})", style="bold"))
        if r.get("section"):  # the heading the passage stands under (the table may drop the column)
            out.print(Text(r["section"], style="dim"))
        if _fields_line(r):
            out.print(Text(_fields_line(r), style="cyan"))
        if guessed_line(r):
            out.print(Text(guessed_line(r), style="yellow"))
        out.print(_highlight(r["passage"], [tuple(s) for s in r["highlights"]]))


def _cited_line(res: dict) -> None:
    """The provisions the question cites and where they are among the pages (nothing when it
    cites none)."""
    for c in res.get("cited") or []:
        where = ", ".join(p.rpartition("#")[2] for p in c["pages"])
        line = (
            f"cites {c['citation']}: its pages first ({where})"
            if c["pages"]
            else f"cites {c['citation']}: no page shown stands under it"
        )
        out.print(Text(line, style="cyan"))


def _routing_line(res: dict) -> None:
    """Which jurisdictions the search was limited to, and why (nothing when the question
    names none)."""
    rt = res.get("routing") or {}
    if not rt.get("jurisdictions"):
        return
    codes, names = ", ".join(rt["jurisdictions"]), ", ".join(rt["matched"])
    if rt.get("applied"):
        line = f"routing: searched only {codes} documents (the question names {names})"
    elif "jurisdiction" in (res.get("filters") or {}):
        line = f"routing: the question names {names} ({codes}); the jurisdiction filter decides instead"
    else:
        line = f"routing: the question names {names} ({codes}); {res['method']} does not route: all searched"
    out.print(Text(line, style="cyan"))
