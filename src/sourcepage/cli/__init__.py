"""The ``sourcepage`` command: a thin shell over the public API (parse, call, print).

One module per stage, each only parsing options, calling the library and printing:

- ``corpus``: ingest, audit
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

from sourcepage.cli import corpus, evaluation, labels, package, retrieval, serve, sweep  # noqa: E402

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Find, judge and measure the exact source pages that support a safety answer.",
)
# registered in the order ``sourcepage --help`` lists them
app.command()(corpus.ingest)
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
    app()
