"""``sourcepage document withdraw|restore DOC``: take a document out of search, or put it
back (``corpus.library.set_withdrawn``), then build the indexes again."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Annotated

import typer

from sourcepage.cli._common import StoreOpt, escape, fail, out

document_app = typer.Typer(
    no_args_is_help=True,
    help="One document of a store: withdraw it from search, or restore it.",
)

ByOpt = Annotated[str, typer.Option("--by", help="Who withdraws it (default: your user name).")]
IndexOpt = Annotated[
    bool,
    typer.Option(
        "--index/--no-index",
        help="Build the indexes again at once (--no-index: run `sourcepage index` later).",
    ),
]


def _change(doc_id: str, store: Path, withdrawn: bool, by: str, reason: str, reindex: bool) -> None:
    from sourcepage.corpus.library import set_withdrawn
    from sourcepage.store.db import StoreError

    try:
        note = set_withdrawn(store, doc_id, withdrawn, by or getpass.getuser(), reason)
    except StoreError as e:
        fail(str(e))
    what = f"{escape(doc_id)} {escape(note)}" if withdrawn else f"{escape(doc_id)} restored"
    out.print(what + " — its pages, history and reviews are kept", highlight=False)
    if reindex:
        from sourcepage.cli.retrieval import index

        index(store=store)
    else:
        out.print(f"searches still find it until `sourcepage index --store {escape(str(store))}`")


@document_app.command("withdraw")
def withdraw(
    doc_id: Annotated[str, typer.Argument(help="The document's doc_id.")],
    store: StoreOpt = Path(".store"),
    reason: Annotated[str, typer.Option(help="Why (kept with the document and in the run log).")] = "",
    by: ByOpt = "",
    reindex: IndexOpt = True,
) -> None:
    """Withdraw a document: no longer searched (nor re-ingested from the manifest), kept in
    the store with its history; reviews citing its pages stay in the label log."""
    _change(doc_id, store, True, by, reason, reindex)


@document_app.command("restore")
def restore(
    doc_id: Annotated[str, typer.Argument(help="The withdrawn document's doc_id.")],
    store: StoreOpt = Path(".store"),
    by: ByOpt = "",
    reindex: IndexOpt = True,
) -> None:
    """Put a withdrawn document back into search."""
    _change(doc_id, store, False, by, "", reindex)
