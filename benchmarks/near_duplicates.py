"""How similar are distinct questions? The measurement behind
``sourcepage.labels.referrals.NEAR_DUPLICATE`` (a reviewed answer is given back to a
near-duplicate question), on the dev splits only.

    PYTHONPATH=src python benchmarks/near_duplicates.py

Prints, for each dev split, its most similar pair of distinct questions (a threshold must
stay above them: two different questions must not share a reviewed answer), and the
most similar pairs across the osha6 and intl20 dev splits, where the same question is
sometimes asked in other words (marked "same evidence" when their first evidence page is
the same).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from sourcepage.labels.referrals import NEAR_DUPLICATE, similarity

ROOT = Path(__file__).resolve().parent
SPLITS = (ROOT / "osha6" / "dev.jsonl", ROOT / "intl20" / "dev.jsonl")


def _questions(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _first_page(q: dict) -> str | None:
    ev = q.get("evidence") or []
    return ev[0]["page"] if ev else None


def main() -> None:
    sets = [_questions(p) for p in SPLITS]
    n_pairs = 0
    for path, qs in zip(SPLITS, sets, strict=True):
        pairs = [(similarity(a["question"], b["question"]), a, b) for a, b in itertools.combinations(qs, 2)]
        n_pairs += len(pairs)
        s, a, b = max(pairs, key=lambda t: (t[0], t[1]["id"], t[2]["id"]))
        print(f"{path.parent.name}/dev: {len(pairs)} pairs of distinct questions; the most similar {s:.3f}:")
        print(f"  {a['id']}: {a['question']}\n  {b['id']}: {b['question']}")
    cross = sorted(
        ((similarity(a["question"], b["question"]), a, b) for a in sets[0] for b in sets[1]),
        key=lambda t: (-t[0], t[1]["id"], t[2]["id"]),
    )
    print("\nmost similar across osha6/dev and intl20/dev:")
    for s, a, b in cross[:5]:
        same = "same evidence" if _first_page(a) and _first_page(a) == _first_page(b) else ""
        print(f"  {s:.3f} {same:13} {a['id']}: {a['question']}\n  {'':19} {b['id']}: {b['question']}")
    caught = sum(s >= NEAR_DUPLICATE for s, _, _ in cross)
    print(
        f"\nNEAR_DUPLICATE = {NEAR_DUPLICATE}: {caught} cross-split pair(s) at or above it; "
        f"{n_pairs} within-split pairs of distinct questions, none may reach it"
    )


if __name__ == "__main__":
    main()
