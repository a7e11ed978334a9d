"""``sourcepage eval`` (an experiment design, or a BEIR folder) and ``sourcepage bench``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from sourcepage.cli._common import METHOD_GRAMMAR, StoreOpt, err, escape, fail, out, progress, ticker

#: what a benchmark row of a peer package that is not installed says
NOT_INSTALLED = "not installed"


def eval_(
    out_dir: Annotated[Path, typer.Option("--out", help="Output folder.")],
    questions: Annotated[Path | None, typer.Option("--questions", help="questions.jsonl (spec §3).")] = None,
    corpus: Annotated[
        Path | None, typer.Option("--corpus", help="Corpus folder; default ../shared/corpus where present.")
    ] = None,
    versions: Annotated[str | None, typer.Option(help="Comma-separated text versions.")] = None,
    methods: Annotated[str | None, typer.Option(help=f"Comma-separated methods ({METHOD_GRAMMAR}).")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="experiment.yaml (docs/).")] = None,
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
    if beir is not None:
        if questions is not None or corpus is not None or config is not None:
            fail("--beir replaces --questions, --corpus and --config")
        _eval_beir(
            beir, out_dir, methods, versions, split, store, bootstrap, title_in_text, keep_identical_ids
        )
        return
    if questions is None:
        fail("give --questions FILE (or --beir DIR)")
    from sourcepage.corpus.fetch import CorpusUnavailable, locate_corpus
    from sourcepage.evaluation.experiment import Design, run_experiment
    from sourcepage.evaluation.summary import FUSION_MARK, is_fusion

    def downloading(manifest: Path) -> None:
        err.print(
            f"no local corpus: downloading the documents of {manifest} (checksums verified)",
            markup=False,
            soft_wrap=True,  # a path is never cut in two
        )

    try:
        corpus = locate_corpus(questions, corpus, on_download=downloading)
    except CorpusUnavailable as e:
        for doc_id, why in sorted(e.report.problems.items() if e.report else ()):
            line = f"[yellow]not fetched[/] {escape(doc_id)}: {escape(why)}"
            err.print(line, highlight=False, soft_wrap=True)
        fail(str(e))
    try:
        design = Design.from_yaml(config) if config else Design()
        design.override(
            versions.split(",") if versions else None, methods.split(",") if methods else None, bootstrap
        )
    except (ValueError, OSError) as e:
        fail(str(e))
    with progress() as prog:
        try:
            m = run_experiment(corpus, questions, out_dir, design=design, store=store, progress=ticker(prog))
        except ValueError as e:  # ManifestError and QuestionError among them
            fail(str(e))
    hits, other = _run_tables(m)
    out.print(hits)
    out.print()
    out.print(other)
    if any(is_fusion(r["method"]) for r in m["runs"]):
        out.print(
            f"{FUSION_MARK} rank-fusion scores measure rank agreement, not how likely an answer is: "
            "their AUROC is not that of a calibrated score (see the report).",
            markup=False,
        )
    out.print(
        f"report: {out_dir / 'report.md'}  (metrics.json, ranked.jsonl, stats.json, run.json, trec/)",
        markup=False,
    )


def _run_tables(m: dict[str, Any]) -> tuple[Table, Table]:
    """The runs as two tables that fit an 80-column terminal: page-level retrieval, then
    answerability AUROC (rank fusion marked) and speed. Headers as in the report."""
    from rich import box

    from sourcepage.evaluation.summary import FUSION_MARK, is_fusion

    q = m["questions"]

    def table(title: str) -> Table:
        t = Table(
            title=title,
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            collapse_padding=True,
        )
        t.add_column("version", no_wrap=True)
        t.add_column("method", no_wrap=True)
        return t

    hits = table(
        f"Page-level retrieval — {q['answerable']} answerable, {q['unsupported']} unsupported, "
        f"{q['out_of_domain']} out-of-domain questions"
    )
    cols = {
        "hit@1": "Hit\n@1",
        "hit@3": "Hit\n@3",
        "hit@5": "Hit\n@5",
        "hit@10": "Hit\n@10",
        "recall@10": "R\n@10",
        "mrr": "MRR",
        "ndcg@10": "nDCG\n@10",
        "doc_hit@3": "doc\nHit@3",
    }
    for head in cols.values():
        hits.add_column(head, justify="right", no_wrap=True)
    other = table("Answerability AUROC and time to rank")
    for head in ("AUROC broad", "AUROC near", "ms p50"):
        other.add_column(head, justify="right", no_wrap=True)
    for r in m["runs"]:
        names = (escape(r["text_version"]), escape(r["method"]))
        hits.add_row(*names, *(f"{r[c]:.3f}" for c in cols))
        mark = FUSION_MARK if is_fusion(r["method"]) else ""
        auroc = (
            f"{r['auroc'][k]:.3f}{mark}" if r["auroc"][k] is not None else "–"
            for k in ("broad", "near_domain")
        )
        other.add_row(*names, *auroc, f"{r['query_ms']['p50']:.2f}")
    return hits, other


def _eval_beir(
    beir: Path,
    out_dir: Path,
    methods: str | None,
    versions: str | None,
    split: str,
    store: Path | None,
    bootstrap: int | None,
    title_in_text: bool,
    keep_identical_ids: bool,
) -> None:
    from sourcepage.evaluation.beir import run_beir

    with progress() as prog:
        try:
            bm = run_beir(
                beir,
                out_dir,
                (methods or "bm25").split(","),
                (versions or "raw").split(","),
                split,
                store,
                ticker(prog),
                title_in_text=title_in_text,
                ignore_identical_ids=not keep_identical_ids,
                **({"bootstrap": bootstrap} if bootstrap is not None else {}),
            )
        except (ValueError, OSError) as e:  # BeirError among them
            fail(str(e))
    q = bm["queries"]
    t = Table(
        title=escape(
            f"BEIR {bm['dataset']} ({bm['split']}) — {q['evaluated']} queries, "
            f"{bm['skipped_queries']} skipped (no relevant document or no text), depth {bm['depth']}"
        ),
        title_justify="left",
    )
    cols = ("ndcg_cut_10", "mrr@10", "recall@100", "hit@10", "ndcg@10")
    for col in ("version", "method", *cols, "ms p50"):
        t.add_column(col, justify="left" if col in ("version", "method") else "right", no_wrap=True)
    for r in bm["runs"]:
        t.add_row(
            escape(r["text_version"]),
            escape(r["method"]),
            *(f"{r[c]:.4f}" for c in cols),
            f"{r['query_ms']['p50']:.2f}",
        )
    out.print(t)
    out.print(
        f"report: {out_dir / 'report.md'}  (metrics.json, ranked.jsonl, stats.json, trec/)", markup=False
    )


CorpusOpt = Annotated[Path | None, typer.Option("--corpus", help="Corpus folder (manifest.csv + pdf/).")]
ScaleOpt = Annotated[
    int | None,
    typer.Option(help="Instead: a synthetic collection of N chunks, ingested, indexed and queried."),
]
ScaleBeirOpt = Annotated[
    Path | None, typer.Option("--beir", help="With --scale: use this BEIR folder instead of generating.")
]
WorkOpt = Annotated[
    Path | None, typer.Option("--work", help="With --scale: folder for the collection and store.")
]
IngestOpt = Annotated[
    bool, typer.Option(help="With --scale: ingest into a store (--no-ingest: index the texts directly).")
]
LoadOpt = Annotated[
    bool,
    typer.Option(
        "--load",
        help="Instead: load `sourcepage serve --store` on 127.0.0.1; with --questions, searches only, "
        "else a reviewer's mix of searches, pages, images and document lists.",
    ),
]
LoadMethodOpt = Annotated[
    str, typer.Option(help="With --load --questions: the method searched (default: the default method).")
]
ServiceOpt = Annotated[
    bool, typer.Option(help="Also time a cold one-shot search and the web API (--no-service: skip them).")
]
ReingestOpt = Annotated[
    Path | None,
    typer.Option(
        "--reingest",
        help="With --load: at half time, `ingest --force` this corpus folder into the store while the "
        "load goes on.",
    ),
]
WritesOpt = Annotated[
    bool,
    typer.Option(
        "--writes",
        help="With --load: a reviewer (bench-load, created in the store) signs in once and posts reviews "
        "from every client (they go to the store's review log: load a copy).",
    ),
]
DenseOpt = Annotated[
    bool,
    typer.Option(
        "--dense",
        help="With --scale N: approximate vs exact dense search on N clustered 384-d vectors "
        "(recall@100, build, memory, latency); with --store and --questions instead of --scale: "
        "on the store's MiniLM embeddings and its questions.",
    ),
]
AnnLibraryOpt = Annotated[
    str,
    typer.Option(
        help="With --dense: sourcepage (the one used), all, or a comma list of "
        "sourcepage, faiss-cpu, hnswlib, usearch (each if installed)."
    ),
]


def bench(
    corpus: CorpusOpt = None,
    questions: Annotated[Path | None, typer.Option("--questions", help="questions.jsonl to time.")] = None,
    store: StoreOpt = Path(".store"),
    repeats: Annotated[int, typer.Option(help="Repeats per measurement (medians reported).")] = 5,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the results as JSON.")] = None,
    scale: ScaleOpt = None,
    beir: ScaleBeirOpt = None,
    work: WorkOpt = None,
    queries: Annotated[int, typer.Option(help="With --scale: questions to time.")] = 100,
    peer: Annotated[bool, typer.Option(help="With --scale: also index and query bm25s.")] = True,
    ingest: IngestOpt = True,
    load: LoadOpt = False,
    clients: Annotated[int, typer.Option(help="With --load: concurrent clients.")] = 32,
    seconds: Annotated[float, typer.Option(help="With --load and no --questions: how long.")] = 30.0,
    requests: Annotated[int, typer.Option(help="With --load --questions: searches in total.")] = 2000,
    workers: Annotated[int, typer.Option(help="With --load: server worker processes.")] = 2,
    method: LoadMethodOpt = "default",
    service: ServiceOpt = True,
    reingest: ReingestOpt = None,
    writes: WritesOpt = False,
    dense: DenseOpt = False,
    ann_library: AnnLibraryOpt = "sourcepage",
) -> None:
    """Time extraction, BM25 index build and query latency here, next to the study's §3.8;
    with --scale N, build time, peak memory, disk and latency at N chunks beside bm25s; with
    --load, requests/s, latency and errors of the web service under concurrent clients."""
    if load and questions is not None:
        from sourcepage.cli.bench_startup import bench_search_load

        bench_search_load(store, questions, method, workers, clients, requests, json_out)
    elif load:
        from sourcepage.cli.bench_load import bench_load

        bench_load(store, clients, seconds, workers, json_out, reingest, writes)
    elif dense:
        from sourcepage.cli.bench_dense import bench_dense

        bench_dense(scale, store if questions else None, questions, work, queries, ann_library, json_out)
    elif scale is not None or beir is not None:
        _bench_scale(scale, beir, work, queries, min(repeats, 3), peer, json_out, ingest)
    elif corpus is None or questions is None:
        fail("give --corpus DIR and --questions FILE (or --scale N, or --load --store DIR)")
    else:
        _bench_speed(corpus, questions, store, repeats, service, json_out)


def _bench_speed(
    corpus: Path, questions: Path, store: Path, repeats: int, service: bool, json_out: Path | None
) -> None:
    """``bench`` on a corpus: extraction, index build and query latency beside the study's,
    the start-up figures, and BM25's parity with rank_bm25 (exit 1 on a mismatch)."""
    from sourcepage.bench.speed import run_bench

    try:
        r = run_bench(
            corpus,
            questions,
            store,
            repeats,
            progress=lambda s: err.print(f"[dim]timing {s}…[/]"),
            with_service=service,
        )
    except (ValueError, OSError) as e:  # ManifestError and QuestionError among them
        fail(str(e))
    mach = r["machine"]
    pk = ", ".join(f"{k} {v}" for k, v in mach["packages"].items() if v)
    out.print(
        f"[bold]Machine:[/] {escape(mach['cpu'])}, {mach['cpu_count']} CPUs, {escape(mach['platform'])}, "
        f"Python {mach['python']}; {escape(pk)}. Medians over {repeats} repeat(s).",
        highlight=False,
    )
    _print_extraction(r)
    _print_index_build(r)
    _print_query(r)
    if r.get("startup"):
        from sourcepage.cli.bench_startup import print_startup

        print_startup(r["startup"])
    p = r["parity"]
    if p.get("installed", True):
        mark = "[green]ok[/]" if p["ok"] else "[bold red]MISMATCH[/]"
        out.print(
            f"Parity with rank_bm25 BM25Okapi(epsilon=0) over {p['questions']} questions: "
            f"max |Δscore| = {p['max_abs_diff']:.3g} (tolerance {p['tolerance']:g}) {mark}"
        )
    else:
        out.print(f"Parity with rank_bm25 BM25Okapi(epsilon=0): {NOT_INSTALLED} (dev extra)")
    _write_json(json_out, r)
    if p["ok"] is False:
        raise typer.Exit(1)


def _write_json(json_out: Path | None, r: Any) -> None:
    """A benchmark's results as JSON at ``json_out`` (when given), and say where."""
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(r, indent=2) + "\n", encoding="utf-8")
        out.print(f"json: {json_out}", markup=False)


def _print_extraction(r: dict[str, Any]) -> None:
    ref = r["reference"]
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


def _print_index_build(r: dict[str, Any]) -> None:
    ix = r["index_build"]
    t = Table(
        title=f"BM25 index build — {ix['chunks']} raw chunks, {ix['tokens']} tokens "
        f"(tokenizing them: {r['chunks']['tokenize_seconds']:.3f} s)",
        title_justify="left",
    )
    for col in ("index", "seconds", "÷ study 0.074 s"):
        t.add_column(col, justify="left" if col == "index" else "right")
    for name, b in ix["builds"].items():
        if b.get("installed", True):
            t.add_row(name, f"{b['seconds']:.4f}", f"{b['x_study']:.2f}")
        else:
            t.add_row(name, NOT_INSTALLED, "")
    out.print(t)


def _print_query(r: dict[str, Any]) -> None:
    q = r["query"]
    t = Table(
        title=f"BM25 query latency (ms) — {q['questions']} questions, after one warm-up query",
        title_justify="left",
    )
    for col in ("path", "mean", "p50", "p95", "max", "p50 ÷ rank_bm25", "p50 ÷ study 0.671"):
        t.add_column(col, justify="left" if col == "path" else "right", no_wrap=True)
    for name, s in q["paths"].items():
        if not s.get("installed", True):
            t.add_row(name, NOT_INSTALLED, "", "", "", "", "")
            continue
        ratio = s["x_rank_bm25_p50"]
        t.add_row(
            name,
            *(f"{s[k]:.3f}" for k in ("mean", "p50", "p95", "max")),
            "–" if ratio is None else f"{ratio:.3f}",
            f"{s['x_study_p50']:.3f}",
        )
    rq = r["reference"]["query_ms"]
    t.add_row("study", *(f"{rq[k]:.3f}" for k in ("mean", "p50", "p95", "max")), "", "1.000", style="dim")
    out.print(t)


def _bench_scale(
    n: int | None,
    beir: Path | None,
    work: Path | None,
    queries: int,
    repeats: int,
    peer: bool,
    json_out: Path | None,
    ingest: bool = True,
) -> None:
    from sourcepage.bench.scale import run_scale_bench

    work = work or Path("out") / f"scale-{n if n is not None else beir.name if beir else 'beir'}"
    try:
        r = run_scale_bench(
            n,
            work,
            beir,
            queries,
            repeats=repeats,
            peer=peer,
            progress=lambda s: err.print(f"[dim]{s}…[/]"),
            ingest=ingest,
        )
    except (ValueError, OSError) as e:
        fail(str(e))
    ing, ix, q, b = r["ingest"], r["index"], r["query"], r["bm25s"]
    t = Table(
        title=f"BM25 at scale — {ix['chunks']} chunks, {r['settings']['queries']} questions, "
        f"k={r['settings']['k']}",
        title_justify="left",
    )
    for col in ("phase", "seconds", "peak MB", "disk MB", "p50 ms", "p95 ms"):
        t.add_column(col, justify="left" if col == "phase" else "right")
    mb = 1024 * 1024
    if ing:
        row = (f"{ing['seconds']:.1f}", f"{ing['peak_mb']:.0f}", f"{ing['store_bytes'] / mb:.0f}", "", "")
        t.add_row("ingest (store)", *row)
    t.add_row(
        f"BM25 index ({ix['shards']} shards)",
        f"{ix['seconds']:.1f}",
        f"{ix['peak_mb']:.0f}",
        f"{ix['disk_bytes'] / mb:.0f}",
        "",
        "",
    )
    t.add_row(
        f"query, page-level (load {q['load_ms']:.0f} ms)",
        "",
        f"{q['peak_mb']:.0f}",
        "",
        f"{q['p50']:.2f}",
        f"{q['p95']:.2f}",
    )
    if b:
        t.add_row("bm25s index (in memory)", f"{b['index_seconds']:.1f}", f"{b['peak_mb']:.0f}", "", "", "")
        t.add_row("bm25s retrieve, chunk top-k", "", "", "", f"{b['p50']:.2f}", f"{b['p95']:.2f}")
    out.print(t)
    if b:
        out.print(f"ours ÷ bm25s: p50 {b['x_ours_p50']:.2f}×, p95 {b['x_ours_p95']:.2f}×")
    _write_json(json_out, r)
