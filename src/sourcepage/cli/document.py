"""``sourcepage document add FILE``: add a PDF to a store (or a new edition of a document
with ``--replaces``), kept in the store's own library folder (``sourcepage.editions``);
``sourcepage document withdraw|restore DOC``: take a document out of search, or put it back
(``corpus.library.set_withdrawn``). Each then builds the indexes again."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Annotated

import typer

from sourcepage.cli._common import StoreOpt, escape, fail, out

document_app = typer.Typer(
    no_args_is_help=True,
    help="One document of a store: add a PDF (or a new edition), withdraw it from search, or restore it.",
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


FieldOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--field",
        metavar="NAME=VALUE",
        help="A manifest field instead of the drafted one (doc_id, title, topic, authority, jurisdiction, "
        "year, doc_type, role, source_url, license); repeat it. A field given is no longer a guess.",
    ),
]


@document_app.command("add")
def add(
    file: Annotated[Path, typer.Argument(help="The PDF to add.", exists=True, dir_okay=False)],
    store: StoreOpt = Path(".store"),
    field: FieldOpt = None,
    replaces: Annotated[
        str, typer.Option(help="The doc_id this PDF is a new edition of (added earlier with this command).")
    ] = "",
    by: ByOpt = "",
) -> None:
    """Add a PDF: its manifest row drafted from it (the guessed fields stay marked), kept in
    the store's own folder (<store>/library), ingested alone and indexed. A bad file or
    field leaves the store as it was."""
    from sourcepage import editions
    from sourcepage.store.db import Store, StoreError

    given: dict[str, str] = {}
    for pair in field or []:
        name, eq, value = pair.partition("=")
        if not eq or name.strip() not in editions.EDITABLE:
            fail(f"--field {pair!r}: NAME=VALUE with NAME one of {', '.join(editions.EDITABLE)}")
        given[name.strip()] = value.strip()

    def say(phase: str, percent: int, message: str) -> None:
        if message:
            out.print(f"{percent:3d}% {escape(phase)}: {escape(message)}", highlight=False)

    try:
        Store(store).close()  # no store: say so before anything is written
        editions.check_pdf(file.name, file.read_bytes()[:8], file.stat().st_size)
        staged = editions.stage_upload(store, file.name, file.read_bytes())
        doc = editions.add_document(store, staged, given, by or getpass.getuser(), replaces, say)
    except (editions.EditError, StoreError, OSError) as e:
        fail(str(e))
    guessed = f" — guessed, check them: {', '.join(doc.guessed)}" if doc.guessed else ""
    out.print(f"{escape(doc.doc_id)} {'replaced' if replaces else 'added'}: {escape(doc.title)}{guessed}")


@document_app.command("recover")
def recover(store: StoreOpt = Path(".store")) -> None:
    """Finish or undo a change of the library that a stopped process left (an upload, a new
    edition, a withdrawal): the store as before it or as after it. The next change does
    this too."""
    from sourcepage import editions
    from sourcepage.store.db import Store, StoreError

    try:
        Store(store).close()
        what = editions.finish_or_undo(store)
    except StoreError as e:
        fail(str(e))
    out.print(escape(what) if what else "nothing to recover: no change was left midway", highlight=False)
