"""How the drafted manifest's guesses compare with a hand-written manifest (issue 50).

Copies a corpus's PDFs (without manifest.csv) into a temporary folder, drafts the manifest
there (``corpus.draft``) and prints, for each guessed field, how many rows equal the
hand-written value, then every row that differs. Nothing is written to the corpus.

    .venv/bin/python benchmarks/draft_check.py ../shared/corpus-intl
"""

from __future__ import annotations

import csv
import shutil
import sys
import tempfile
from pathlib import Path

from sourcepage.corpus.draft import draft_manifest

FIELDS = ("jurisdiction", "authority", "year", "doc_type", "topic", "role", "title")


def main(corpus: Path) -> None:
    with (corpus / "manifest.csv").open(encoding="utf-8") as f:
        truth = {r["file"]: r for r in csv.DictReader(f)}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "pdfs"
        folder.mkdir()
        for name in truth:
            shutil.copy(corpus / "pdf" / name, folder / name)
        draft = draft_manifest(folder)
    rows = {r.doc.file: r.doc for r in draft.rows}
    print(f"{len(rows)} of {len(truth)} PDFs drafted ({corpus})")
    for field in FIELDS:
        same = [f for f, d in rows.items() if d.get(field) == truth[f][field]]
        print(f"{field:13s} {len(same):3d} / {len(rows)} equal to the manifest")
    for field in FIELDS:
        for f, d in sorted(rows.items()):
            if d.get(field) != truth[f][field]:
                print(f"  {field}: {f}: drafted {d.get(field)!r}, manifest {truth[f][field]!r}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/corpus-intl"))
