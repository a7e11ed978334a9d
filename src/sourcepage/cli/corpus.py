"""``sourcepage ingest`` and ``sourcepage audit``: corpus → store, and the page audit."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from sourcepage.cli._common import (
    RayAddressOpt,
    RayOpt,
    StoreOpt,
    err,
    escape,
    fail,
    out,
    progress,
    ray_executor,
)
from sourcepage.limits import EXTRACT_LIMITS

if TYPE_CHECKING:
    from sourcepage.ingest import IngestReport
    from sourcepage.text.versions import TextSettings


CorpusOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--corpus",
        help="Corpus folder (manifest.csv + pdf/: PDF, .txt, .md); repeat it to ingest several "
        "folders as one collection.",
    ),
]
BeirOpt = Annotated[
    Path | None,
    typer.Option("--beir", help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/) instead of --corpus."),
]
MaxMemoryOpt = Annotated[
    int, typer.Option(help="MiB of memory one document's extraction may use (then it is skipped).")
]
MaxSecondsOpt = Annotated[
    float, typer.Option(help="Seconds one document's extraction may take (then it is skipped).")
]
AssetUrlOpt = Annotated[
    str | None,
    typer.Option(
        help="Link every asset_id to this http(s) URL, e.g. "
        "'https://bim.example.com/viewer?guid={asset_id}' (kept in the store until changed; '' removes "
        "the links)."
    ),
]
AcceptDraftOpt = Annotated[
    bool,
    typer.Option(
        help="A --corpus folder of PDFs without manifest.csv: ingest the drafted manifest at once "
        "(without it the draft is written and ingest stops for a person to check it)."
    ),
]


def ingest(
    ctx: typer.Context,
    corpus: CorpusOpt = None,
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
        int,
        typer.Option(
            min=0, max=256, metavar="N",
            help="Extraction processes (0: one a core for corpora over 64 MB, else 1; at most 256).",
        ),
    ] = 0,
    force: Annotated[bool, typer.Option(help="Re-extract every document.")] = False,
    beir: BeirOpt = None,
    title_in_text: Annotated[
        bool, typer.Option(help="BEIR: page text = title + text (default: text; title in enriched).")
    ] = False,
    max_memory: MaxMemoryOpt = EXTRACT_LIMITS.memory_mb,
    max_seconds: MaxSecondsOpt = EXTRACT_LIMITS.seconds,
    max_pages: Annotated[
        int, typer.Option(help="Pages a document may have (more: it is skipped).")
    ] = EXTRACT_LIMITS.pages,
    ray: RayOpt = False,
    ray_address: RayAddressOpt = None,
    asset_url: AssetUrlOpt = None,
    accept_draft: AcceptDraftOpt = False,
) -> None:
    """Validate, extract, audit, clean and chunk a corpus into a store (incremental).

    A --corpus folder of PDFs without manifest.csv gets one drafted first (`sourcepage
    manifest draft`). With --ray each document is extracted and chunked in a Ray task (not under the
    memory and time limits, which need the local worker processes)."""
    from sourcepage.corpus.fields import check_asset_url
    from sourcepage.limits import Limits
    from sourcepage.text.chunk import ChunkConfig
    from sourcepage.text.clean import CleanConfig
    from sourcepage.text.versions import TextSettings

    try:
        limits = Limits(memory_mb=max_memory, seconds=max_seconds, pages=max_pages)
        settings = TextSettings(
            CleanConfig(not no_headers_footers, not no_dehyphenate, not no_whitespace),
            ChunkConfig(chunk_size, chunk_overlap, chunk_mode, chunk_scope),
            tuple(f.strip() for f in enrich_fields.split(",") if f.strip()),
        )
        if asset_url is not None:
            check_asset_url(asset_url)  # before any work
    except ValueError as e:
        fail(str(e))
    if beir is not None:
        if corpus:
            fail("give --corpus or --beir, not both")
        if ray or ray_address:
            fail("--ray extracts the files of a --corpus; a BEIR corpus has none to extract")

        # typer vendors click: compare the parameter source by name
        def given(name: str) -> bool:
            return getattr(ctx.get_parameter_source(name), "name", "") != "DEFAULT"

        _ingest_beir(beir, store, settings, given("chunk_mode"), given("enrich_fields"), title_in_text, force)
        return
    if not corpus:
        fail("give --corpus DIR (or --beir DIR)")
    _draft_missing(corpus, accept_draft)
    options = {"engine": engine, "allow_checksum_mismatch": allow_checksum_mismatch, "settings": settings}
    options |= {"workers": workers or None, "force": force, "limits": limits}
    rep = _ingest_corpus(corpus, store, options, ray, ray_address)
    _print_ingest(rep, store, asset_url)


def _draft_missing(corpus: list[Path], accept: bool) -> None:
    """Draft the manifest of each folder of PDFs that has none; stop (exit 1) unless ``accept``."""
    from sourcepage.cli.manifest import write_and_report
    from sourcepage.corpus.draft import needs_draft

    missing = [c for c in corpus if c.is_dir() and needs_draft(c)]
    for c in missing:
        write_and_report(c, force=False)
    if missing and not accept:
        err.print(
            "[yellow]stopped:[/] check the drafted manifest, then run ingest again "
            "(or give --accept-draft to ingest the guesses as they are)",
            highlight=False,
        )
        raise typer.Exit(1)


def _ingest_corpus(
    corpus: list[Path], store: Path, options: dict[str, Any], ray: bool, ray_address: str | None
) -> IngestReport:
    """``ingest --corpus`` (one folder or several as one collection) with a progress bar;
    ``options``: the keyword arguments of ``sourcepage.ingest.ingest``."""
    from sourcepage.ingest import ingest as run
    from sourcepage.store.db import StoreError

    ex = ray_executor(ray, ray_address)
    with progress() as prog:
        task = prog.add_task("extracting", total=None)

        def tick(done: int, total: int, doc_id: str) -> None:
            prog.update(task, completed=done, total=total, description=f"extracted {escape(doc_id)}")

        try:
            return run(corpus if len(corpus) > 1 else corpus[0], store, progress=tick, executor=ex, **options)
        except (ValueError, StoreError) as e:  # ManifestError, another ingest at work (StoreBusy)
            fail(str(e))
        finally:
            if ex is not None:
                ex.close()


def _print_ingest(rep: IngestReport, store: Path, asset_url: str | None) -> None:
    """What an ingest did (documents, pages, time, chunks), then the asset links when set,
    the skipped documents and the warnings."""
    rate = rep.pages_extracted / rep.wall_seconds if rep.wall_seconds else 0.0
    out.print(f"[bold]store[/] {escape(str(rep.store))}  engine {escape(rep.engine)}")
    out.print(
        f"extracted {len(rep.extracted)} documents ({rep.pages_extracted} pages, "
        f"{rep.extract_seconds:.2f} s in the extractor, {rate:.0f} pages/s overall), "
        f"rebuilt {len(rep.rebuilt)}, unchanged {len(rep.unchanged)}, failed {len(rep.failed)}, "
        f"removed {len(rep.removed)} in {rep.wall_seconds:.2f} s"
    )
    if asset_url is not None:
        from sourcepage import api

        kept = api.set_asset_url(store, asset_url)
        out.print(f"asset links: {escape(kept)}" if kept else "asset links: none")
    out.print("chunks: " + ", ".join(f"{v} {n}" for v, n in rep.chunks.items()), markup=False)
    for doc_id, why in sorted(rep.failed.items()):
        err.print(f"[yellow]skipped[/] {escape(doc_id)}: {escape(why)}", highlight=False)
    for w in rep.warnings:
        err.print(f"[yellow]warning[/] {escape(str(w))}", highlight=False)


def _ingest_beir(
    beir: Path,
    store: Path,
    settings: TextSettings,
    chunk_mode_given: bool,
    enrich_fields_given: bool,
    title_in_text: bool,
    force: bool,
) -> None:
    """``ingest --beir``: BEIR defaults unless given, one chunk a document enriched
    with the title only."""
    from dataclasses import replace

    from sourcepage.corpus.beir import BEIR_ENRICH_FIELDS
    from sourcepage.ingest import ingest_beir
    from sourcepage.store.db import StoreError

    if not chunk_mode_given:
        settings = replace(settings, chunk=replace(settings.chunk, mode="page"))
    if not enrich_fields_given:
        settings = replace(settings, enrich_fields=BEIR_ENRICH_FIELDS)
    with progress() as prog:
        task = prog.add_task("corpus.jsonl", total=None)

        def tick(done: int, total: int, label: str) -> None:
            prog.update(
                task, completed=done, total=total, description=f"corpus.jsonl (bytes): {escape(label)}"
            )

        try:
            rep = ingest_beir(
                beir, store, settings=settings, title_in_text=title_in_text, force=force, progress=tick
            )
        except (ValueError, OSError, StoreError) as e:  # BeirError, StoreBusy among them
            fail(str(e))
    out.print(f"[bold]store[/] {escape(str(rep.store))}  BEIR {escape(rep.dataset)}")
    if rep.skipped_unchanged_file:
        out.print(f"{rep.documents} documents; corpus.jsonl unchanged since the last ingest")
    else:
        out.print(
            f"{rep.documents} documents: written {rep.written}, unchanged {rep.unchanged}, "
            f"removed {rep.removed}, duplicate ids {rep.duplicates}, empty {rep.empty} "
            f"in {rep.wall_seconds:.2f} s"
        )
    out.print("chunks: " + ", ".join(f"{v} {n}" for v, n in rep.chunks.items()), markup=False)
    for w in rep.warnings:
        err.print(f"[yellow]warning[/] {escape(str(w))}", highlight=False)


def audit(
    store: StoreOpt = Path(".store"),
    csv_path: Annotated[Path | None, typer.Option("--csv", help="Write the page audit as CSV.")] = None,
    pages: Annotated[bool, typer.Option(help="List every flagged page.")] = False,
) -> None:
    """Per-document layout/quality audit: low-text, image and multi-column pages."""
    from sourcepage.corpus.audit import AUDIT_FLAGS, audit_csv, page_flags, summarize_audit
    from sourcepage.records import page_id
    from sourcepage.store.db import Store, StoreError
    from sourcepage.store.files import write_text

    try:
        st = Store(store)
    except StoreError as e:
        fail(str(e))
    rows = st.page_rows()
    n_docs = len(st.documents())
    docs, total = summarize_audit(rows)
    t = Table(title=f"Page audit — {escape(str(store))}", show_lines=False)
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
        "ocr",
    ):
        t.add_column(col, justify="left" if col == "document" else "right", no_wrap=True)
    for d in docs:
        t.add_row(
            escape(d.doc_id),
            str(d.pages),
            f"{d.chars_per_page:.0f}",
            *(str(d.counts[k]) for k in AUDIT_FLAGS),
        )
    t.add_section()
    t.add_row(
        "all", str(total.pages), f"{total.chars_per_page:.0f}", *(str(total.counts[k]) for k in AUDIT_FLAGS)
    )
    out.print(t)
    out.print(f"{n_docs} documents. Flags are automated risk indicators, not adjudicated labels.")
    if pages:
        for r in rows:
            flags = page_flags(r)
            if flags:
                pid = page_id(r["doc_id"], r["page_no"])
                out.print(f"  {pid}: {', '.join(flags)} ({r['chars']} chars)", markup=False)
    if csv_path:
        write_text(csv_path, audit_csv(rows))
        out.print(f"wrote {csv_path}", markup=False)
