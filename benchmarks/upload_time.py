"""How long one PDF takes from upload to searchable (issue 50): a store is built from a
corpus folder without that PDF (ingest, the default indexes and the sentence vectors, as
``sourcepage index`` builds them), then the PDF is added as the library page's editor adds
it (``editions.add_document``: draft, ingest, indexes again) and the new indexes loaded.
Prints the seconds at which each phase began and the total.

    .venv/bin/python benchmarks/upload_time.py ../shared/corpus osha3120-lockout-tagout.pdf

``--into STORE`` adds the PDF (from ``corpus``, which then need not be the store's) to a copy
of an indexed store instead, e.g. a 73-page guide to the corpus-intl store:

    .venv/bin/python benchmarks/upload_time.py ../shared/corpus-extra \
        osha3150-scaffold-use-construction.pdf --into STORE_OF_../shared/corpus-intl

Everything is written under a temporary folder, removed at the end (``--keep`` keeps it).
"""

from __future__ import annotations

import argparse
import csv
import shutil
import tempfile
import time
from contextlib import closing
from pathlib import Path

from sourcepage import api, editions
from sourcepage.ingest import ingest
from sourcepage.retrieval import sentvec
from sourcepage.retrieval.index import build_indexes
from sourcepage.store.db import Store


def corpus_without(corpus: Path, name: str, into: Path) -> Path:
    """A copy of ``corpus`` (manifest.csv and pdf/) without the row and file ``name``."""
    (into / "pdf").mkdir(parents=True)
    with (corpus / "manifest.csv").open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        rows = [r for r in reader if r["file"] != name]
        fields = reader.fieldnames or []
    with (into / "manifest.csv").open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    for r in rows:
        shutil.copyfile(corpus / "pdf" / r["file"], into / "pdf" / r["file"])
    return into


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", type=Path, help="a corpus folder (manifest.csv, pdf/)")
    ap.add_argument("pdf", help="the file name, under pdf/, of the PDF to add")
    ap.add_argument("--into", type=Path, help="add to a copy of this indexed store")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="upload_time."))
    try:
        store = tmp / "store"
        t = time.perf_counter()
        if args.into:
            shutil.copytree(args.into, store, ignore=shutil.ignore_patterns("*.lock", ".ready"))
        else:
            ingest(corpus_without(args.corpus, args.pdf, tmp / "corpus"), store, workers=1)
            build_indexes(store, "raw", [m for v, m in api.index_plan(store, ["raw"])])
        with closing(Store(store)) as st:
            if not args.into:
                sentvec.build(st, "raw")
            pages = sum(int(r["n_pages"] or 0) for r in st.document_rows().values())
        api.search("warm-up", store, build=False, answer=False, refer=False)
        made = "copied" if args.into else "built"
        print(f"store of {pages} pages {made} in {time.perf_counter() - t:.0f} s")

        began: dict[str, float] = {}
        t0 = time.perf_counter()

        def note(phase: str, percent: int, message: str) -> None:
            what = message.split(" (")[0] if phase == "indexing" else phase
            began.setdefault(what, time.perf_counter() - t0)

        pdf = args.corpus / "pdf" / args.pdf
        staged = editions.stage_upload(store, pdf.name, pdf.read_bytes())
        doc = editions.add_document(store, staged, {}, "benchmark", progress=note)
        began["loading"] = time.perf_counter() - t0
        api.search("warm-up", store, build=False, answer=False, refer=False)
        total = time.perf_counter() - t0
        for what, at in began.items():
            print(f"{at:7.1f} s  {what}")
        print(f"{doc.doc_id} ({doc.pages} pages): searchable {total:.1f} s after the upload")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
