"""The ``sourcepage`` command: a thin shell over the public API (parse, call, print).

One module per stage, each only parsing options, calling the library and printing:

- ``corpus``: ingest, audit
- ``manifest``: manifest draft (a folder of PDFs)
- ``document``: document withdraw / restore
- ``retrieval``: index, search
- ``labels``: judge, calibrate, reviews, desk
- ``serve``: serve, reviewer (add / remove / list)
- ``evaluation``: eval, bench
- ``sweep``: sweep
- ``package``: export, verify

``_common`` holds the consoles, the progress bar and ``fail``.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import typer  # noqa: E402

from sourcepage.cli import (  # noqa: E402
    corpus,
    document,
    evaluation,
    labels,
    manifest,
    package,
    retrieval,
    serve,
    sweep,
)

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Find, judge and measure the exact source pages that support a safety answer.",
)
# registered in the order ``sourcepage --help`` lists them
app.command()(corpus.ingest)
app.add_typer(manifest.manifest_app, name="manifest")
app.add_typer(document.document_app, name="document")
app.command()(corpus.audit)
app.command()(retrieval.index)
app.command()(retrieval.search)
app.command()(labels.judge)
app.command()(labels.calibrate)
app.command()(serve.serve)
app.add_typer(serve.reviewer_app, name="reviewer")
app.command()(labels.reviews)
app.command()(labels.desk)
app.command("eval")(evaluation.eval_)
app.command()(evaluation.bench)
app.command()(sweep.sweep)
app.command()(package.export)
app.command()(package.verify)


def main() -> None:
    """The ``sourcepage`` command. A failure that reaches here without a message of its
    own (a damaged or foreign database file, a full disk, a path that is a file where a
    folder is needed, input nested too deeply) ends with one ``error:`` line and exit
    status 2, not a traceback."""
    import errno
    import sqlite3
    import sys

    try:
        app()
    except sqlite3.DatabaseError as e:
        if getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in str(e):
            _exit(f"the disk is full (sqlite: {e}): free some space and run the command again")
        why = f"a database file is damaged or is not a sourcepage database (sqlite: {e})"
        _exit(why)
    except OSError as e:
        # numpy's tofile says "N requested and M written", without an errno, on a full disk
        full = e.errno in (errno.ENOSPC, errno.EDQUOT) or " requested and " in str(e)
        _exit(f"the disk is full: {e}" if full else str(e))
    except RecursionError:
        _exit("the input is nested too deeply to read")
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None


def _exit(message: str) -> None:
    from sourcepage.cli._common import err

    err.print("error: " + message, markup=False, highlight=False, soft_wrap=True)
    raise SystemExit(2)
