"""``sourcepage manifest draft DIR``: a manifest drafted from a folder of PDFs, with what
was guessed and how (``corpus.draft``); ``ingest --corpus`` calls the same on a folder
without ``manifest.csv``. Also how ``search`` says a hit's fields were guessed."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from sourcepage.cli._common import err, escape, fail, out

if TYPE_CHECKING:
    from sourcepage.corpus.draft import Draft

manifest_app = typer.Typer(
    no_args_is_help=True,
    help="The corpus manifest: draft one from a folder of PDFs.",
)


#: the order a hit's guessed fields are said in: what decides whether a page applies first
_GUESS_ORDER = ("jurisdiction", "year", "authority", "doc_type", "role", "topic", "title")


def guessed_line(r: dict) -> str:
    """A hit's fields that its drafted manifest guessed from the text, said so (``jurisdiction:
    US · year: 2002 (guessed from the text)``); '' when none was guessed."""
    guessed = set(r.get("guessed", []))
    shown = [f for f in _GUESS_ORDER if f in guessed and r.get(f)]
    return " · ".join(f"{f}: {r[f]}" for f in shown) + " (guessed from the text)" if shown else ""


def unconfirmed_note(res: dict) -> str:
    """Under the table: which shown documents carry guessed fields ('' when none does)."""
    docs = {r["doc_id"]: r["guessed"] for r in res["results"] if r.get("guessed")}
    if not docs:
        return ""
    named = ", ".join(f"{d} ({', '.join(g)})" for d, g in docs.items())
    return f"guessed from the text, not checked by a person: {named}"


def draft_table(draft: Draft) -> Table:
    """One line a guess: document, field, value, evidence."""
    t = Table(title=f"Drafted from {escape(str(draft.corpus_dir))} — check every guess", show_lines=False)
    for col in ("document", "field", "value", "evidence"):
        t.add_column(col, overflow="fold")
    for row in draft.rows:
        for i, g in enumerate(row.guesses):
            t.add_row(escape(row.doc.doc_id) if i == 0 else "", g.field, escape(g.value), escape(g.evidence))
        t.add_section()
    return t


def write_and_report(corpus: Path, force: bool) -> Draft:
    """Draft ``corpus``'s manifest, write it, print the table and what a person checks next."""
    from sourcepage.corpus.draft import DraftError, draft_manifest, write_draft

    try:
        draft = draft_manifest(corpus)
        path = write_draft(draft, force=force)
    except DraftError as e:
        fail(str(e))
    if draft.linked:
        out.print(f"linked {draft.linked} PDFs into {escape(str(corpus / 'pdf'))} (the originals stay)")
    out.print(draft_table(draft))
    for name, why in sorted(draft.unreadable.items()):
        err.print(f"[yellow]not drafted[/] {escape(name)}: {escape(why)}", highlight=False)
    n = len(draft.rows)
    out.print(
        f"wrote {escape(str(path))}: {n} documents; the column 'guessed' names each row's guessed "
        'fields (hits show them as guessed). Check them, and license ("unknown — check") and '
        "source_url, then ingest; see docs/own-documents.md.",
        highlight=False,
    )
    return draft


@manifest_app.command("draft")
def draft(
    corpus: Annotated[Path, typer.Argument(help="The folder of PDFs (in it or under pdf/).")],
    force: Annotated[bool, typer.Option(help="Replace an existing manifest.csv.")] = False,
) -> None:
    """Draft manifest.csv from a folder of PDFs: ids from file names, pages and SHA-256
    computed, title, authority, jurisdiction, year, type and topic guessed from the text."""
    write_and_report(corpus, force)
