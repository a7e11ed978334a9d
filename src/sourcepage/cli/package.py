"""``sourcepage export`` (a run's reproducibility package) and ``sourcepage verify`` (re-derive it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sourcepage.cli._common import Text, fail, out


def export(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (sourcepage eval --out, or a sweep cell).")],
    package: Annotated[Path, typer.Option("--out", help="The package zip to write.")],
) -> None:
    """Write a run's reproducibility package (segments, settings, questions, run files, checksums)."""
    from sourcepage.package.export import PackageError
    from sourcepage.package.export import export as export_package

    try:
        info = export_package(run_dir, package)
    except (PackageError, ValueError, OSError) as e:
        fail(str(e))
    out.print(f"package: {package}  ({len(info['files']) + 1} files, {len(info['runs'])} runs)", markup=False)


def verify(
    package: Annotated[Path, typer.Argument(help="A package zip written by sourcepage export.")],
    corpus: Annotated[
        Path | None, typer.Option("--corpus", help="Corpus folder: also re-derive the segments from it.")
    ] = None,
    rerank: Annotated[
        bool, typer.Option("--rerank", help="With --corpus: rebuild the indexes and re-rank every question.")
    ] = False,
) -> None:
    """Re-derive a reproducibility package and report every difference (exit 1 on any)."""
    from sourcepage.package.export import PackageError
    from sourcepage.package.export import verify as verify_package

    if rerank and corpus is None:
        fail("--rerank needs --corpus")
    try:
        checks = verify_package(package, corpus, rerank)
    except (PackageError, ValueError, OSError) as e:
        fail(str(e))
    for c in checks:
        out.print(Text.assemble(("ok  " if c.ok else "DIFF", "green" if c.ok else "bold red"), " ", c.name))
        for d in c.details:
            out.print(Text("      " + d))
    bad = [c for c in checks if not c.ok]
    if bad:
        out.print(f"{len(bad)} of {len(checks)} checks found differences", markup=False)
        raise typer.Exit(1)
    out.print(f"all {len(checks)} checks hold", markup=False)
