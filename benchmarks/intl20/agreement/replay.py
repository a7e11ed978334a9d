"""Replay the intl20 agreement judgments into a fresh judgments file and print the agreement.

    PYTHONPATH=src python benchmarks/intl20/agreement/replay.py [--db /tmp/intl20-judgments.sqlite]

``judgments.tsv`` holds every judgment of the second labelling pass in the order it was
recorded (reviewer ``second``: the independent pass; ``first``: the original labels of the
pooled pages; ``adjudicator:second``: the settled disagreements). The rows go through the
judge's own functions (``record`` and ``adjudicate``), then the script prints what
``sourcepage judge --kappa first --reviewer second`` prints: Cohen's kappa (graded and
binary), agreement and the disagreements with their final grades. The judgments file must
not exist yet, so nothing is appended to an older one.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from sourcepage.labels import judgments as J

HERE = Path(__file__).parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=Path("/tmp/intl20-judgments.sqlite"))
    ap.add_argument("--tsv", type=Path, default=HERE / "judgments.tsv")
    args = ap.parse_args()
    if args.db.exists():
        sys.exit(f"{args.db} exists: give a new path")
    conn = J.connect(args.db)
    with args.tsv.open(encoding="utf-8", newline="") as f:
        for line, row in enumerate(csv.DictReader(f, delimiter="\t"), 2):
            qid, page, grade, reviewer = row["question_id"], row["page"], int(row["grade"]), row["reviewer"]
            try:
                if reviewer.startswith(J.ADJUDICATOR):
                    J.adjudicate(conn, qid, page, grade, reviewer.removeprefix(J.ADJUDICATOR), row["note"])
                else:
                    J.record(conn, qid, page, grade, reviewer, row["note"])
            except ValueError as e:
                sys.exit(f"{args.tsv}:{line}: {e}")
    k = J.cohens_kappa(conn, "second", "first")
    print(
        f"Cohen's kappa second vs first: {k['kappa']:.3f} over {k['n']} pairs "
        f"(agreement {k['agreement']:.3f}); binary relevance (grade >= 1): {k['kappa_binary']:.3f} "
        f"(agreement {k['agreement_binary']:.3f})"
    )
    final, unresolved = J.final_grades(conn)
    dis = J.disagreements(conn, "second", "first")
    print(f"{len(dis)} disagreements, {len(unresolved)} unresolved")
    for d in dis:
        key = (d["question_id"], d["page"])
        print(f"{key[0]}\t{key[1]}\tsecond {d['second']}\tfirst {d['first']}\tfinal {final[key]}")


if __name__ == "__main__":
    main()
