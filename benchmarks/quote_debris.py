"""Count the quotable units (``text.sentences.quotable``) of every page of one or more stores
that hold page furniture or glyph debris: "Page N of M", a private-use glyph, a soft hyphen
or PDFium's U+FFFE marker. Every quote a search gives is one of these units, so 0 here means
no quote can hold them (issue #27).

    python benchmarks/quote_debris.py STORE [STORE ...]
"""

from __future__ import annotations

import re
import sqlite3
import sys

from sourcepage.text.sentences import quotable

DEBRIS = re.compile(r"[\ue000-\uf8ff\u00ad\ufffe]|\bpage \d+ of \d+", re.IGNORECASE)


def main(stores: list[str]) -> None:
    for store in stores:
        conn = sqlite3.connect(f"file:{store}/store.sqlite?mode=ro", uri=True)
        units = bad = 0
        rows = conn.execute(
            "SELECT p.raw FROM pages p JOIN documents d ON d.doc_id = p.doc_id AND d.status = 'ok'"
            " ORDER BY p.doc_id, p.page_no"
        )
        for (raw,) in rows:
            for u in quotable(raw):
                units += 1
                bad += bool(DEBRIS.search(u.text))
        print(f"{store}: {units} quotable units, {bad} with debris")


if __name__ == "__main__":
    main(sys.argv[1:])
