"""Sample the pages the development pool's questions are written from, before any is written.

    python benchmarks/pool/sample.py [--seed 42] [--shared ../shared] [--out benchmarks/pool/slots.jsonl]

Why a sampler: questions written from what a search returns favour the pages that search
already finds. Here the pages are drawn at random first, and a question is then written
from its slot's page, whatever the search makes of it.

Each unique document belongs to one pool (the first corpus below that holds it), so no page
is drawn twice: ``intl`` (../shared/corpus-intl, whose first six documents are the OSHA
corpus), ``construction`` (corpus-construction's documents not in intl) and ``extra``
(corpus-extra's documents not in either). A pool's question count is split over its
documents in proportion to their page counts (largest remainder, at least one each);
within a document pages are drawn uniformly without replacement with
``numpy.random.default_rng(seed)``, plus a reserve of about a quarter more, used in order
when a drawn page holds nothing to ask about (a cover, a blank, a contents page). Each slot
is assigned its class before writing: answerable, unsupported (a near-miss in the page's
vocabulary that no page of the corpus answers) or out_of_domain (no page). Standard library
and numpy only; the same seed gives byte-identical output.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np

POOLS = {
    "intl": ("corpus-intl", 245),
    "construction": ("corpus-construction", 190),
    "extra": ("corpus-extra", 205),
}
SHARES = {"unsupported": 0.22, "out_of_domain": 0.06}  # the rest answerable
RESERVE = 0.25


def _documents(shared: Path) -> dict[str, list[tuple[str, int]]]:
    """Each pool's (doc_id, pages), a document in the first pool that holds it."""
    seen: set[str] = set()
    out: dict[str, list[tuple[str, int]]] = {}
    for pool, (corpus, _) in POOLS.items():
        with open(shared / corpus / "manifest.csv", encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        out[pool] = [(r["doc_id"], int(r["pages"])) for r in rows if r["doc_id"] not in seen]
        seen.update(r["doc_id"] for r in rows)
    return out


def _allocate(n: int, sizes: list[int]) -> list[int]:
    """n split in proportion to sizes by largest remainder, every part at least one."""
    total = sum(sizes)
    exact = [n * s / total for s in sizes]
    parts = [max(1, int(e)) for e in exact]
    order = sorted(range(len(sizes)), key=lambda i: (-(exact[i] - int(exact[i])), i))
    i = 0
    while sum(parts) < n:
        parts[order[i % len(order)]] += 1
        i += 1
    return parts


def sample(shared: Path, seed: int = 42) -> list[dict]:
    rng = np.random.default_rng(seed)
    slots: list[dict] = []
    for pool, docs in _documents(shared).items():
        corpus, n = POOLS[pool]
        n_ood = round(n * SHARES["out_of_domain"])
        n_paged = n - n_ood
        counts = _allocate(n_paged, [p for _, p in docs])
        paged: list[dict] = []
        for (doc_id, pages), k in zip(docs, counts, strict=True):
            take = min(pages, k + max(1, round(k * RESERVE)))
            drawn = rng.choice(pages, size=take, replace=False) + 1
            for j, page in enumerate(drawn.tolist()):
                paged.append({"pool": pool, "corpus": corpus, "doc_id": doc_id, "page": f"{doc_id}#p{page}",
                              "reserve": j >= k})
        primary = [s for s in paged if not s["reserve"]]
        classes = np.array(["answerable"] * len(primary), dtype=object)
        n_uns = round(n * SHARES["unsupported"])
        classes[rng.choice(len(primary), size=n_uns, replace=False)] = "unsupported"
        for s, c in zip(primary, classes.tolist(), strict=True):
            s["target"] = c
        for s in paged:
            s.setdefault("target", "reserve")
        ood = [{"pool": pool, "corpus": corpus, "doc_id": "", "page": "", "reserve": False,
                "target": "out_of_domain"} for _ in range(n_ood)]
        for i, s in enumerate(paged + ood, 1):
            slots.append({"slot": f"{pool}-{i:04d}", **s})
    return slots


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[3] / "shared")
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("slots.jsonl"))
    args = ap.parse_args()
    slots = sample(args.shared, args.seed)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(s, sort_keys=True) + "\n" for s in slots), encoding="utf-8")
    tmp.replace(args.out)
    by = {}
    for s in slots:
        by.setdefault((s["pool"], s["target"]), 0)
        by[(s["pool"], s["target"])] += 1
    for k in sorted(by):
        print(*k, by[k])


if __name__ == "__main__":
    main()
