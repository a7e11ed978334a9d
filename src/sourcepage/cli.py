"""The ``sourcepage`` command: a thin shell over the public API (parse, call, print)."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path
from typing import Annotated

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import typer  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402
from rich.table import Table  # noqa: E402
from rich.text import Text  # noqa: E402

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Find, judge and measure the exact source pages that support a safety answer.",
)
# a pipe or a file gets a wide table rather than rich's 80-column default
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True)

StoreOpt = Annotated[Path, typer.Option("--store", help="Store directory.")]


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=False,
        disable=not err.is_terminal,
    )


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


@app.command()
def ingest(
    ctx: typer.Context,
    corpus: Annotated[
        Path | None, typer.Option("--corpus", help="Corpus folder (manifest.csv + pdf/: PDF, .txt, .md).")
    ] = None,
    store: StoreOpt = Path(".store"),
    engine: Annotated[str, typer.Option(help="pypdfium2 (default) or pypdf (the study's).")] = "pypdfium2",
    allow_checksum_mismatch: Annotated[bool, typer.Option(help="Warn instead of failing.")] = False,
    chunk_size: int = 1000,
    chunk_overlap: int = 200,
    chunk_mode: Annotated[str, typer.Option(help="chunk, page or two_page.")] = "chunk",
    chunk_scope: Annotated[str, typer.Option(help="page (chunks stay in a page) or document.")] = "page",
    no_headers_footers: Annotated[bool, typer.Option(help="Keep running headers/footers.")] = False,
    no_dehyphenate: bool = False,
    no_whitespace: bool = False,
    enrich_fields: Annotated[
        str, typer.Option(help="Comma-separated header fields.")
    ] = "title,topic,authority,jurisdiction,year,page",
    workers: Annotated[
        int, typer.Option(help="Extraction processes (0: one per core for corpora over 64 MB, else 1).")
    ] = 0,
    force: Annotated[bool, typer.Option(help="Re-extract every document.")] = False,
    beir: Annotated[
        Path | None,
        typer.Option("--beir", help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/) instead of --corpus."),
    ] = None,
    title_in_text: Annotated[
        bool, typer.Option(help="BEIR: page text = title + text (default: text; title in enriched).")
    ] = False,
) -> None:
    """Validate, extract, audit, clean and chunk a corpus into a store (incremental)."""
    from sourcepage.corpus.manifest import ManifestError
    from sourcepage.ingest import ingest as run
    from sourcepage.text.chunk import ChunkConfig
    from sourcepage.text.clean import CleanConfig
    from sourcepage.text.versions import TextSettings

    try:
        settings = TextSettings(
            CleanConfig(not no_headers_footers, not no_dehyphenate, not no_whitespace),
            ChunkConfig(chunk_size, chunk_overlap, chunk_mode, chunk_scope),
            tuple(f.strip() for f in enrich_fields.split(",") if f.strip()),
        )
    except ValueError as e:
        _fail(str(e))
    if beir is not None:
        from dataclasses import replace

        from sourcepage.corpus.beir import BEIR_ENRICH_FIELDS, BeirError, ingest_beir

        if corpus is not None:
            _fail("give --corpus or --beir, not both")

        # BEIR defaults unless given: one chunk a document, enriched with the title only
        def given(name: str) -> bool:  # typer vendors click: compare the source by name
            return getattr(ctx.get_parameter_source(name), "name", "") != "DEFAULT"

        if not given("chunk_mode"):
            settings = replace(settings, chunk=replace(settings.chunk, mode="page"))
        if not given("enrich_fields"):
            settings = replace(settings, enrich_fields=BEIR_ENRICH_FIELDS)
        with _progress() as prog:
            btask = prog.add_task("corpus.jsonl", total=None)

            def btick(done: int, total: int, label: str) -> None:
                prog.update(btask, completed=done, total=total, description=f"corpus.jsonl (bytes): {label}")

            try:
                brep = ingest_beir(
                    beir, store, settings=settings, title_in_text=title_in_text, force=force, progress=btick
                )
            except (BeirError, ValueError, OSError) as e:
                _fail(str(e))
        out.print(f"[bold]store[/] {brep.store}  BEIR {brep.dataset}")
        if brep.skipped_unchanged_file:
            out.print(f"{brep.documents} documents; corpus.jsonl unchanged since the last ingest")
        else:
            out.print(
                f"{brep.documents} documents: written {brep.written}, unchanged {brep.unchanged}, "
                f"removed {brep.removed}, duplicate ids {brep.duplicates}, empty {brep.empty} "
                f"in {brep.wall_seconds:.2f} s"
            )
        out.print("chunks: " + ", ".join(f"{v} {n}" for v, n in brep.chunks.items()))
        for w in brep.warnings:
            err.print(f"[yellow]warning[/] {w}", highlight=False)
        return
    if corpus is None:
        _fail("give --corpus DIR (or --beir DIR)")
    with _progress() as prog:
        task = prog.add_task("extracting", total=None)

        def tick(done: int, total: int, doc_id: str) -> None:
            prog.update(task, completed=done, total=total, description=f"extracted {doc_id}")

        try:
            rep = run(
                corpus,
                store,
                engine=engine,
                allow_checksum_mismatch=allow_checksum_mismatch,
                settings=settings,
                workers=workers or None,
                force=force,
                progress=tick,
            )
        except ManifestError as e:
            _fail(str(e))
        except ValueError as e:
            _fail(str(e))
    rate = rep.pages_extracted / rep.wall_seconds if rep.wall_seconds else 0.0
    out.print(f"[bold]store[/] {rep.store}  engine {rep.engine}")
    out.print(
        f"extracted {len(rep.extracted)} documents ({rep.pages_extracted} pages, "
        f"{rep.extract_seconds:.2f} s in the extractor, {rate:.0f} pages/s overall), "
        f"rebuilt {len(rep.rebuilt)}, unchanged {len(rep.unchanged)}, failed {len(rep.failed)}, "
        f"removed {len(rep.removed)} in {rep.wall_seconds:.2f} s"
    )
    out.print("chunks: " + ", ".join(f"{v} {n}" for v, n in rep.chunks.items()))
    for doc_id, why in sorted(rep.failed.items()):
        err.print(f"[yellow]skipped[/] {doc_id}: {why}", highlight=False)
    for w in rep.warnings:
        err.print(f"[yellow]warning[/] {w}", highlight=False)


@app.command()
def audit(
    store: StoreOpt = Path(".store"),
    csv_path: Annotated[Path | None, typer.Option("--csv", help="Write the page audit as CSV.")] = None,
    pages: Annotated[bool, typer.Option(help="List every flagged page.")] = False,
) -> None:
    """Per-document layout/quality audit: low-text, image and multi-column pages."""
    from sourcepage.store.db import Store, StoreError
    from sourcepage.store.files import write_text

    try:
        st = Store(store)
    except StoreError as e:
        _fail(str(e))
    rows = st.page_rows()
    docs = {d.doc_id: d for d in st.documents()}
    t = Table(title=f"Page audit — {store}", show_lines=False)
    for col in (
        "document",
        "pages",
        "chars/page",
        "<100",
        "<300",
        "images",
        "multi-col",
        "spacing",
        "contents",
    ):
        t.add_column(col, justify="left" if col == "document" else "right", no_wrap=True)
    by_doc: dict[str, list[dict]] = {}
    for r in rows:
        by_doc.setdefault(r["doc_id"], []).append(r)
    keys = (
        "low_text_100",
        "low_text_300",
        "images",
        "multi_column_risk",
        "spacing_artifact",
        "contents_page",
    )
    totals = dict.fromkeys(keys, 0)
    for doc_id, rs in by_doc.items():
        counts = {k: sum(1 for r in rs if r[k]) for k in keys}
        for k in keys:
            totals[k] += counts[k]
        t.add_row(
            doc_id,
            str(len(rs)),
            f"{sum(r['chars'] for r in rs) / len(rs):.0f}",
            *(str(counts[k]) for k in keys),
        )
    n = len(rows)
    t.add_section()
    t.add_row(
        "all", str(n), f"{sum(r['chars'] for r in rows) / max(n, 1):.0f}", *(str(totals[k]) for k in keys)
    )
    out.print(t)
    out.print(f"{len(docs)} documents. Flags are automated risk indicators, not adjudicated labels.")
    if pages:
        for r in rows:
            flags = [k for k in keys if r[k]]
            if flags:
                out.print(f"  {r['doc_id']}#p{r['page_no']}: {', '.join(flags)} ({r['chars']} chars)")
    if csv_path:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=["page", *rows[0].keys()] if rows else ["page"])
        w.writeheader()
        for r in rows:
            w.writerow({"page": f"{r['doc_id']}#p{r['page_no']}", **r})
        write_text(csv_path, buf.getvalue())
        out.print(f"wrote {csv_path}")


@app.command()
def index(
    store: StoreOpt = Path(".store"),
    version: Annotated[str, typer.Option(help="raw, cleaned, enriched or all.")] = "all",
    method: Annotated[str, typer.Option(help="Comma-separated base methods.")] = "bm25,lsa",
) -> None:
    """Build (atomically) the indexes of the given methods and text versions."""
    import time

    from sourcepage.retrieval.index import build_index, index_size_bytes
    from sourcepage.retrieval.methods import parse_methods
    from sourcepage.store.db import Store, StoreError

    try:
        st = Store(store)
        methods = [b for m in parse_methods(method) for b in m.bases()]
    except (StoreError, ValueError) as e:
        _fail(str(e))
    versions = ["raw", "cleaned", "enriched"] if version == "all" else version.split(",")
    t = Table(title="Indexes")
    for col in ("version", "method", "chunks", "seconds", "size"):
        t.add_column(col, justify="right" if col in ("chunks", "seconds", "size") else "left")
    with _progress() as prog:
        for v in versions:
            for m in dict.fromkeys(methods):
                task = prog.add_task(f"{v} {m.name}", total=None)
                t0 = time.perf_counter()
                try:
                    path = build_index(
                        st, v, m, progress=lambda d, n, task=task: prog.update(task, completed=d, total=n)
                    )
                except ValueError as e:
                    _fail(str(e))
                prog.update(task, completed=1, total=1)
                params = json.loads((path / "params.json").read_text())
                t.add_row(
                    v,
                    m.name,
                    str(params["chunks"]),
                    f"{time.perf_counter() - t0:.2f}",
                    f"{index_size_bytes(path) / 1024:.0f} KiB",
                )
    out.print(t)


def _highlight(passage: str, spans: list[tuple[int, int]], limit: int = 400) -> Text:
    start = max(0, spans[0][0] - 120) if spans else 0
    text = Text(("…" if start else "") + passage[start : start + limit].replace("\n", " "))
    off = 1 if start else 0
    for a, b in spans:
        if a >= start and b <= start + limit:
            text.stylize("bold yellow", a - start + off, b - start + off)
    return text


@app.command()
def search(
    question: Annotated[str, typer.Argument(help="The question.")],
    store: StoreOpt = Path(".store"),
    method: Annotated[str, typer.Option(help="bm25, lsa, dense[:model], rrf:a+b[+c].")] = "bm25",
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
    from sourcepage.api import filters_from_pairs
    from sourcepage.api import search as run
    from sourcepage.store.db import StoreError

    if not 1 <= k <= 100:
        _fail(f"-k must be between 1 and 100, got {k}")
    try:
        res = run(
            question, store, method=method, k=k, version=version, filters=filters_from_pairs(filter_), log=True
        )
    except (StoreError, ValueError, RuntimeError) as e:
        _fail(str(e))
    if as_json:
        sys.stdout.write(json.dumps(res, ensure_ascii=False, indent=2) + "\n")
        return
    t = Table(title=f"{res['method']} · {version} · {question}", title_justify="left")
    for col in ("rank", "page", "score", "title", "authority", "jur.", "year", "type", "role"):
        t.add_column(
            col,
            no_wrap=col != "title",
            overflow="ellipsis",
            justify="right" if col in ("rank", "score") else "left",
        )
    for r in res["results"]:
        t.add_row(
            str(r["rank"]),
            r["page"],
            f"{r['score']:.4g}",
            r["title"][:48],
            r["authority"],
            r["jurisdiction"],
            r["year"],
            r["doc_type"],
            r["role"],
        )
    out.print(t)
    colour = {"answer": "green", "refuse": "red", "review": "yellow"}[res["decision"]]
    out.print(f"[bold {colour}]decision: {res['decision']}[/] — " + " ".join(res["reasons"]), highlight=False)
    if len(res["jurisdictions"]) > 1:
        out.print(
            f"[bold yellow]Note:[/] the top pages come from {len(res['jurisdictions'])} "
            f"jurisdictions ({', '.join(res['jurisdictions'])}); do not treat their requirements "
            "as interchangeable.",
            highlight=False,
        )
    ans = res.get("answer") or {}
    if ans.get("quotes"):
        out.print(Text(f"\nsupporting sentences ({ans['status']}):", style="bold"))
        for q in ans["quotes"]:
            out.print(f"  \u201c{q['text']}\u201d {q['citation']}", highlight=False)
    for r in res["results"][:3]:
        out.print(Text(f"\n[{r['rank']}] {r['page']} ({r['chunk_id']})", style="bold"))
        out.print(_highlight(r["passage"], [tuple(s) for s in r["highlights"]]))


def _page_window(text: str, terms: set[str], limit: int = 1500) -> Text:
    """Up to ``limit`` characters of a page around its densest run of query terms, terms bold."""
    from sourcepage.api import highlight_spans

    spans = highlight_spans(text, terms)
    start = 0
    if len(text) > limit and spans:
        best = -1
        for a, _ in spans:
            s0 = max(0, min(a - 150, len(text) - limit))
            n = sum(1 for x, y in spans if x >= s0 and y <= s0 + limit)
            if n > best:
                best, start = n, s0
    body = text[start : start + limit]
    pre = "…" if start else ""
    t = Text(pre + body + ("…" if start + limit < len(text) else ""))
    for a, b in spans:
        if a >= start and b <= start + limit:
            t.stylize("bold yellow", a - start + len(pre), b - start + len(pre))
    return t


def _ask_grade(prompt: str) -> str:
    """'0', '1', '2', 's' or 'q' (Ctrl-D / Ctrl-C count as 'q')."""
    import click

    while True:
        try:
            ans = typer.prompt(prompt, default="", show_default=False).strip().lower()
        except (click.exceptions.Abort, typer.Abort, EOFError, KeyboardInterrupt):
            return "q"
        if ans in ("0", "1", "2", "s", "q"):
            return ans
        err.print("answer 0, 1, 2, s or q", highlight=False)


def _ask_note() -> str:
    import click

    try:
        return typer.prompt("note (optional)", default="", show_default=False).strip()
    except (click.exceptions.Abort, typer.Abort, EOFError, KeyboardInterrupt):
        return ""


@app.command()
def judge(
    store: StoreOpt = Path(".store"),
    questions: Annotated[Path, typer.Option("--questions", help="questions.jsonl (spec §3).")] = Path(
        "questions.jsonl"
    ),
    reviewer: Annotated[str, typer.Option("--reviewer", help="Your reviewer name.")] = "",
    methods: Annotated[
        str, typer.Option(help="Comma-separated methods whose pages are pooled.")
    ] = "bm25,lsa",
    depth: Annotated[int, typer.Option(help="Pages pooled per method and question.")] = 10,
    version: Annotated[str, typer.Option(help="Text version searched for the pool.")] = "raw",
    db: Annotated[
        Path | None, typer.Option("--db", help="Judgments file (default STORE/judgments.sqlite).")
    ] = None,
    kappa: Annotated[
        str | None, typer.Option("--kappa", help="Other reviewer: print Cohen's kappa and disagreements.")
    ] = None,
    export_to: Annotated[
        Path | None, typer.Option("--export", help="Write the judged questions.jsonl here.")
    ] = None,
    adjudicate_: Annotated[
        bool, typer.Option("--adjudicate", help="Walk the disagreements with --kappa OTHER and settle them.")
    ] = False,
) -> None:
    """Judge pooled pages for each question (resumable); kappa, adjudication and export."""
    from sourcepage import judge as J
    from sourcepage.api import query_terms
    from sourcepage.evaluation.questions import QuestionError, read_questions
    from sourcepage.records import parse_page_id
    from sourcepage.retrieval.search import Searcher
    from sourcepage.store.db import Store, StoreError

    if not reviewer.strip():
        _fail("--reviewer NAME is required")
    if reviewer.startswith(J.ADJUDICATOR):
        _fail(f"reviewer names starting with {J.ADJUDICATOR!r} are reserved")
    if adjudicate_ and not kappa:
        _fail("--adjudicate needs --kappa OTHER (the reviewer to reconcile with)")
    if depth < 1:
        _fail(f"--depth must be at least 1, got {depth}")
    try:
        st = Store(store)
        qs = read_questions(questions, st.page_ids())
    except (StoreError, QuestionError, OSError) as e:
        _fail(str(e))
    by_id = {q.id: q for q in qs}
    conn = J.connect(db or J.default_path(store))

    def show(qid: str, page: str, header: str) -> None:
        q = by_id.get(qid)
        out.rule(header)
        if q is not None:
            out.print(Text(f"{qid}: {q.question}", style="bold"))
            for p in q.answer_points:
                out.print(Text(f"  • {p}"))
        doc_id, n = parse_page_id(page)
        meta = st.page(doc_id, n)
        title = next((d.title for d in st.documents() if d.doc_id == doc_id), "")
        out.print(Text(f"page {page} — {title}", style="bold cyan"))
        text = (meta or {}).get("cleaned", "") or "(no text on this page)"
        out.print(_page_window(text, query_terms(q.question) if q else set()))

    acted = False
    if kappa:
        acted = True
        k = J.cohens_kappa(conn, reviewer, kappa)
        kap = "undefined" if k["kappa"] is None else f"{k['kappa']:.3f}"
        agr = "–" if k["agreement"] is None else f"{k['agreement']:.3f}"
        out.print(f"Cohen's kappa {reviewer} vs {kappa}: {kap} over {k['n']} pairs (agreement {agr})")
        dis = J.disagreements(conn, reviewer, kappa)
        if dis:
            t = Table(title=f"{len(dis)} disagreements", title_justify="left")
            for col in ("question", "page", reviewer, kappa):
                t.add_column(col, no_wrap=True)
            for d in dis:
                t.add_row(d["question_id"], d["page"], str(d[reviewer]), str(d[kappa]))
            out.print(t)
        else:
            out.print("no disagreements")
        if adjudicate_:
            settled = J.current(conn, J.ADJUDICATOR + reviewer)
            todo = [d for d in dis if (d["question_id"], d["page"], J.ADJUDICATOR + reviewer) not in settled]
            for i, d in enumerate(todo, 1):
                show(d["question_id"], d["page"], f"adjudicate {i}/{len(todo)}")
                out.print(f"{reviewer}: {d[reviewer]}   {kappa}: {d[kappa]}", highlight=False)
                ans = _ask_grade("final grade [0/1/2], s=skip, q=quit")
                if ans == "q":
                    break
                if ans == "s":
                    continue
                J.adjudicate(conn, d["question_id"], d["page"], int(ans), reviewer, _ask_note())
    if export_to is not None:
        acted = True
        rep = J.export(conn, qs, export_to, reviewer=reviewer)
        for w in rep.warnings:
            err.print(f"[yellow]warning:[/] {w}", highlight=False)
        out.print(
            f"wrote {rep.questions} questions to {export_to} "
            f"({len(rep.changed)} with changed evidence, {len(rep.warnings)} warnings)",
            highlight=False,
        )
    if acted:
        return
    try:
        searcher = Searcher(st, version)
        pooled = J.pool(searcher, qs, [m.strip() for m in methods.split(",") if m.strip()], depth)
    except (ValueError, RuntimeError) as e:
        _fail(str(e))
    todo_pairs = J.pending(conn, pooled, reviewer)
    total = sum(len(v) for v in pooled.values())
    out.print(f"{reviewer}: {total - len(todo_pairs)}/{total} pooled pages judged, {len(todo_pairs)} to go")
    done = 0
    for i, (qid, page) in enumerate(todo_pairs, 1):
        show(qid, page, f"{i}/{len(todo_pairs)}")
        ans = _ask_grade("grade [0/1/2], s=skip, q=quit")
        if ans == "q":
            break
        if ans == "s":
            continue
        J.record(conn, qid, page, int(ans), reviewer, _ask_note())
        done += 1
    left = len(J.pending(conn, pooled, reviewer))
    out.print(f"recorded {done} judgments; {left} pending (run again to resume)")


@app.command()
def calibrate(
    questions: Annotated[Path, typer.Option("--questions", help="Development questions (spec §3).")],
    store: StoreOpt = Path(".store"),
    version: Annotated[str, typer.Option(help="Text version.")] = "raw",
    sparse: Annotated[str, typer.Option(help="Sparse method.")] = "bm25",
    semantic: Annotated[str, typer.Option(help="Semantic method (dense[:model] or lsa).")] = "dense",
    target_recall: Annotated[float, typer.Option(help="Answerable recall to keep.")] = 0.95,
    target_precision: Annotated[float, typer.Option(help="Precision needed to answer.")] = 0.95,
    seed: int = 42,
) -> None:
    """Fit the answer / review / refuse policy on development questions; store it with the index."""
    from sourcepage.support.calibrate import decision_shares as _shares
    from sourcepage.evaluation.metrics import auroc
    from sourcepage.evaluation.questions import QuestionError, read_questions
    from sourcepage.retrieval.search import Searcher
    from sourcepage.store.db import Store, StoreError
    from sourcepage.support.calibrate import cross_validate, fit_policy, question_features, save_policy

    try:
        st = Store(store)
        qs = read_questions(questions, known_pages=st.page_ids())
        s = Searcher(st, version)
        feats, single_a, single_b = [], [], []
        with _progress() as prog:
            task = prog.add_task("features", total=len(qs))
            for q in qs:
                f, a, b = question_features(s, q.question, sparse, semantic)
                feats.append(f)
                single_a.append(a[0].score if a else float("-inf"))
                single_b.append(b[0].score if b else float("-inf"))
                prog.advance(task)
    except (StoreError, QuestionError, ValueError, RuntimeError) as e:
        _fail(str(e))
    single = {sparse: single_a, semantic: single_b}
    cv = cross_validate(feats, qs, single, target_recall, target_precision, seed=seed)
    pol = fit_policy(
        feats,
        qs,
        single,
        text_version=version,
        sparse=sparse,
        semantic=semantic,
        target_recall=target_recall,
        target_precision=target_precision,
        seed=seed,
        chunk_fingerprint=st.chunk_fingerprint(version),
    )
    path = save_policy(st.path, pol)
    y = cv["labels"]
    t = Table(title=f"Held-out ({cv['folds']}-fold) answerability, {sparse} + {semantic} on {version}")
    for col in ("policy", "AUROC near", "answerable refused", "unsupported refused", "out-of-domain refused"):
        t.add_column(col, justify="left" if col == "policy" else "right")
    near = [i for i, q in enumerate(qs) if q.answerability != "out_of_domain"]

    def row(name: str, scores: list[float], decided: list) -> None:
        sh = _shares(decided, qs)
        a = auroc([scores[i] for i in near if y[i] == 1], [scores[i] for i in near if y[i] == 0])
        t.add_row(
            name,
            f"{a:.3f}",
            *(f"{sh[c]['refuse']:.0%}" for c in ("answerable", "unsupported", "out_of_domain")),
        )

    row("classifier", cv["probability"], cv["decision"])
    for m, sc in single.items():
        row(f"{m} top score", sc, cv["single_answered"][m])
    out.print(t)
    out.print(
        f"policy fitted on {len(qs)} questions: refuse below P={pol.t_refuse:.3f}, answer at or above "
        f"P={pol.t_answer:.3f}; stored in {path}"
    )


@app.command()
def serve(
    store: StoreOpt = Path(".store"),
    host: Annotated[str, typer.Option(help="Address to bind (127.0.0.1: this machine only).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
    corpus: Annotated[
        Path | None,
        typer.Option("--corpus", help="Corpus folder for page images (default: the store's last ingest)."),
    ] = None,
    questions: Annotated[
        Path | None, typer.Option("--questions", help="questions.jsonl to pool and judge on the web page.")
    ] = None,
) -> None:
    """Serve the JSON API and the reviewer web page (http://HOST:PORT/, API docs at /docs)."""
    import uvicorn

    from sourcepage.service.app import create_app
    from sourcepage.store.db import StoreError

    try:
        web = create_app(store, corpus=corpus, questions=questions)
    except (StoreError, ValueError, OSError) as e:
        _fail(str(e))
    if web.state.corpus is None:
        err.print("[yellow]warning:[/] no corpus folder known: page images are off (pass --corpus DIR)")
    out.print(f"serving {store} on http://{host}:{port}/  (API docs: http://{host}:{port}/docs)")
    uvicorn.run(web, host=host, port=port, log_level="info")


@app.command()
def reviews(
    store: StoreOpt = Path(".store"),
    question: Annotated[str | None, typer.Option(help="Record a review of this question.")] = None,
    decision: Annotated[str | None, typer.Option(help="The reviewer's decision: answer or refuse.")] = None,
    page: Annotated[
        list[str] | None, typer.Option("--page", help="Accepted evidence page; repeatable.")
    ] = None,
    reviewer: Annotated[str | None, typer.Option(help="Who reviewed.")] = None,
    note: str = "",
    method: str = "bm25",
    version: str = "raw",
    export: Annotated[Path | None, typer.Option(help="Write the log as questions.jsonl.")] = None,
) -> None:
    """The reviewer log of referred questions: record a decision, list the log, export it."""
    from sourcepage.store.db import Store, StoreError
    from sourcepage.store.files import write_text
    from sourcepage.support import review as R

    try:
        st = Store(store)
        if question:
            from sourcepage.api import search as run

            system = run(question, store, method=method, k=5, version=version, answer=False)["decision"]
            R.record(
                store, question, method, version, system, decision or "", page or [], reviewer or "", note
            )
        log = R.list_reviews(store)
    except (StoreError, ValueError) as e:
        _fail(str(e))
    t = Table(title=f"Reviewer log — {store}")
    for col in ("id", "when", "reviewer", "system", "decision", "pages", "question"):
        t.add_column(col, overflow="fold")
    for r in log:
        t.add_row(
            str(r.id), r.created_at, r.reviewer, r.system_decision, r.decision, " ".join(r.pages), r.question
        )
    out.print(t)
    if export:
        topics = {d.doc_id: d.topic for d in st.documents()}
        write_text(export, R.export_jsonl(log, topics))
        out.print(f"wrote {export}")


def default_corpus() -> Path | None:
    """../shared/corpus where present (the local mirror), else None."""
    for cand in (Path("../shared/corpus"), Path(__file__).resolve().parents[2].parent / "shared" / "corpus"):
        if (cand / "manifest.csv").is_file():
            return cand.resolve()
    return None


@app.command("eval")
def eval_(
    out_dir: Annotated[Path, typer.Option("--out", help="Output folder.")],
    questions: Annotated[Path | None, typer.Option("--questions", help="questions.jsonl (spec §3).")] = None,
    corpus: Annotated[
        Path | None, typer.Option("--corpus", help="Corpus folder; default ../shared/corpus where present.")
    ] = None,
    versions: Annotated[str | None, typer.Option(help="Comma-separated text versions.")] = None,
    methods: Annotated[str | None, typer.Option(help="Comma-separated methods.")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="experiment.yaml (README).")] = None,
    store: Annotated[Path | None, typer.Option("--store", help="Store cache (default OUT/store).")] = None,
    bootstrap: Annotated[int | None, typer.Option(help="Bootstrap resamples (default 20000).")] = None,
    beir: Annotated[
        Path | None, typer.Option("--beir", help="Evaluate on a BEIR folder instead of --questions.")
    ] = None,
    split: Annotated[str, typer.Option(help="BEIR qrels split (qrels/<split>.tsv).")] = "test",
    title_in_text: Annotated[bool, typer.Option(help="BEIR: page text = title + text.")] = False,
    keep_identical_ids: Annotated[
        bool, typer.Option(help="BEIR: keep documents whose id equals the query id.")
    ] = False,
) -> None:
    """Run an experiment design and write metrics.json, ranked.jsonl, report.md and more."""
    from sourcepage.corpus.manifest import ManifestError
    from sourcepage.evaluation.experiment import Design, run_experiment
    from sourcepage.evaluation.questions import QuestionError

    if beir is not None:
        from sourcepage.corpus.beir import BeirError
        from sourcepage.evaluation.beir import run_beir

        if questions is not None or corpus is not None or config is not None:
            _fail("--beir replaces --questions, --corpus and --config")
        with _progress() as prog:
            btasks: dict[str, int] = {}

            def btick(label: str, done: int, total: int) -> None:
                if label not in btasks:
                    btasks[label] = prog.add_task(label, total=total)
                prog.update(btasks[label], completed=done, total=total)

            try:
                bm = run_beir(
                    beir,
                    out_dir,
                    (methods or "bm25").split(","),
                    (versions or "raw").split(","),
                    split,
                    store,
                    btick,
                    title_in_text=title_in_text,
                    ignore_identical_ids=not keep_identical_ids,
                    **({"bootstrap": bootstrap} if bootstrap is not None else {}),
                )
            except (BeirError, ValueError, OSError) as e:
                _fail(str(e))
        q = bm["queries"]
        t = Table(
            title=f"BEIR {bm['dataset']} ({bm['split']}) — {q['evaluated']} queries, "
            f"{bm['skipped_queries']} skipped (no relevant document or no text), depth {bm['depth']}",
            title_justify="left",
        )
        cols = ("ndcg_cut_10", "mrr@10", "recall@100", "hit@10", "ndcg@10")
        for col in ("version", "method", *cols, "ms p50"):
            t.add_column(col, justify="left" if col in ("version", "method") else "right", no_wrap=True)
        for r in bm["runs"]:
            t.add_row(
                r["text_version"], r["method"], *(f"{r[c]:.4f}" for c in cols), f"{r['query_ms']['p50']:.2f}"
            )
        out.print(t)
        out.print(f"report: {out_dir / 'report.md'}  (metrics.json, ranked.jsonl, stats.json, trec/)")
        return
    if questions is None:
        _fail("give --questions FILE (or --beir DIR)")
    corpus = corpus or default_corpus()
    if corpus is None:
        manifest = questions.parent / "manifest.csv"
        if not manifest.is_file():
            _fail(f"no --corpus given, no ../shared/corpus, and no {manifest} to download from")
        from sourcepage.corpus.fetch import fetch_corpus

        err.print(f"no local corpus: downloading the documents of {manifest} (checksums verified)")
        rep = fetch_corpus(manifest)
        for doc_id, why in sorted(rep.problems.items()):
            err.print(f"[yellow]not fetched[/] {doc_id}: {why}", highlight=False)
        if rep.problems:
            _fail(
                f"{len(rep.problems)} of the corpus documents could not be fetched into {rep.corpus}; "
                "pass --corpus with a local copy"
            )
        corpus = rep.corpus
    try:
        design = Design.from_yaml(config) if config else Design()
        if versions or methods:
            v0, m0 = design.blocks[0]
            design.blocks = [
                ((versions.split(",") if versions else v0), (methods.split(",") if methods else m0))
            ]
        if bootstrap is not None:
            design.bootstrap = bootstrap
        design.runs()
    except (ValueError, OSError) as e:
        _fail(str(e))
    with _progress() as prog:
        tasks: dict[str, int] = {}

        def tick(label: str, done: int, total: int) -> None:
            if label not in tasks:
                tasks[label] = prog.add_task(label, total=total)
            prog.update(tasks[label], completed=done, total=total)

        try:
            m = run_experiment(corpus, questions, out_dir, design=design, store=store, progress=tick)
        except (ManifestError, QuestionError, ValueError) as e:
            _fail(str(e))
    t = Table(
        title=f"Page-level retrieval — {m['questions']['answerable']} answerable, "
        f"{m['questions']['unsupported']} unsupported, {m['questions']['out_of_domain']} "
        "out-of-domain questions",
        title_justify="left",
    )
    cols = ("hit@1", "hit@3", "hit@5", "hit@10", "recall@10", "mrr", "ndcg@10", "doc_hit@3")
    for col in ("version", "method", *cols, "AUROC broad", "AUROC near", "ms p50"):
        t.add_column(col, justify="left" if col in ("version", "method") else "right", no_wrap=True)
    for r in m["runs"]:
        t.add_row(
            r["text_version"],
            r["method"],
            *(f"{r[c]:.3f}" for c in cols),
            *(f"{r['auroc'][k]:.3f}" if r["auroc"][k] is not None else "–" for k in ("broad", "near_domain")),
            f"{r['query_ms']['p50']:.2f}",
        )
    out.print(t)
    out.print(f"report: {out_dir / 'report.md'}  (metrics.json, ranked.jsonl, stats.json, run.json, trec/)")


@app.command()
def bench(
    corpus: Annotated[Path, typer.Option("--corpus", help="Corpus folder (manifest.csv + pdf/).")],
    questions: Annotated[Path, typer.Option("--questions", help="questions.jsonl to time.")],
    store: StoreOpt = Path(".store"),
    repeats: Annotated[int, typer.Option(help="Repeats per measurement (medians reported).")] = 5,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the results as JSON.")] = None,
) -> None:
    """Time extraction, BM25 index build and query latency here, next to the study's §3.8."""
    from sourcepage.corpus.manifest import ManifestError
    from sourcepage.evaluation.bench import run_bench
    from sourcepage.evaluation.questions import QuestionError

    try:
        r = run_bench(corpus, questions, store, repeats, progress=lambda s: err.print(f"[dim]timing {s}…[/]"))
    except (ManifestError, QuestionError, ValueError, OSError) as e:
        _fail(str(e))
    ref, mach = r["reference"], r["machine"]
    pk = ", ".join(f"{k} {v}" for k, v in mach["packages"].items() if v)
    out.print(
        f"[bold]Machine:[/] {mach['cpu']}, {mach['cpu_count']} CPUs, {mach['platform']}, "
        f"Python {mach['python']}; {pk}. Medians over {repeats} repeat(s).",
        highlight=False,
    )
    t = Table(title=f"Extraction — {r['extraction']['documents']} PDFs, serial", title_justify="left")
    for col in ("engine", "pages", "seconds", "pages/s", "× study"):
        t.add_column(col, justify="left" if col == "engine" else "right")
    for name, e in r["extraction"]["engines"].items():
        t.add_row(
            name, str(e["pages"]), f"{e['seconds']:.3f}", f"{e['pages_per_s']:.1f}", f"{e['x_study']:.2f}"
        )
    t.add_row(
        "study (pypdf)",
        str(ref["extract_pages"]),
        f"{ref['extract_seconds']:.3f}",
        f"{ref['extract_pages_per_s']:.1f}",
        "1.00",
        style="dim",
    )
    out.print(t)
    ix = r["index_build"]
    t = Table(
        title=f"BM25 index build — {ix['chunks']} raw chunks, {ix['tokens']} tokens "
        f"(tokenizing them: {r['chunks']['tokenize_seconds']:.3f} s)",
        title_justify="left",
    )
    for col in ("index", "seconds", "÷ study 0.074 s"):
        t.add_column(col, justify="left" if col == "index" else "right")
    for name, b in ix["builds"].items():
        t.add_row(name, f"{b['seconds']:.4f}", f"{b['x_study']:.2f}")
    out.print(t)
    q = r["query"]
    t = Table(
        title=f"BM25 query latency (ms) — {q['questions']} questions, after one warm-up query",
        title_justify="left",
    )
    for col in ("path", "mean", "p50", "p95", "max", "p50 ÷ rank_bm25", "p50 ÷ study 0.671"):
        t.add_column(col, justify="left" if col == "path" else "right", no_wrap=True)
    for name, s in q["paths"].items():
        t.add_row(
            name,
            *(f"{s[k]:.3f}" for k in ("mean", "p50", "p95", "max")),
            f"{s['x_rank_bm25_p50']:.3f}",
            f"{s['x_study_p50']:.3f}",
        )
    rq = ref["query_ms"]
    t.add_row("study", *(f"{rq[k]:.3f}" for k in ("mean", "p50", "p95", "max")), "", "1.000", style="dim")
    out.print(t)
    p = r["parity"]
    mark = "[green]ok[/]" if p["ok"] else "[bold red]MISMATCH[/]"
    out.print(
        f"Parity with rank_bm25 BM25Okapi(epsilon=0) over {p['questions']} questions: "
        f"max |Δscore| = {p['max_abs_diff']:.3g} (tolerance {p['tolerance']:g}) {mark}"
    )
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(r, indent=2) + "\n", encoding="utf-8")
        out.print(f"json: {json_out}")
    if not p["ok"]:
        raise typer.Exit(1)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
