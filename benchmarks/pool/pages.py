"""Write the text of every page of the pool's corpora, one file a page, for the authors.

    python benchmarks/pool/pages.py [--shared ../shared] [--out /tmp/pool-text]

``<out>/<corpus>/<doc_id>/p<N>.txt`` holds physical page N as sourcepage extracts it
(``corpus.extract.extract_pdf``, pypdfium2), so an excerpt copied from it is verbatim in
the store. The authors grep these folders for other pages that answer and for absences.
The text stays outside the repository (the PDFs' licences; only excerpts are committed).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from sourcepage.corpus.extract import extract_pdf

CORPORA = ("corpus-intl", "corpus-construction", "corpus-extra")


def dump(shared: Path, out: Path) -> None:
    for corpus in CORPORA:
        with open(shared / corpus / "manifest.csv", encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        for r in rows:
            final = out / corpus / r["doc_id"]
            if final.exists():
                continue
            tmp = out / corpus / (r["doc_id"] + ".tmp")
            tmp.mkdir(parents=True, exist_ok=True)
            for i, text in enumerate(extract_pdf(shared / corpus / "pdf" / r["file"]).texts, 1):
                (tmp / f"p{i}.txt").write_text(text, encoding="utf-8")
            tmp.rename(final)  # a folder appears whole or not at all
            print(corpus, r["doc_id"], flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[3] / "shared")
    ap.add_argument("--out", type=Path, default=Path("/tmp/pool-text"))
    args = ap.parse_args()
    dump(args.shared, args.out)


if __name__ == "__main__":
    main()
