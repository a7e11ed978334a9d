"""Split a question set into dev and test halves, fixed before any method is tuned on it.

    python benchmarks/split.py benchmarks/intl20/questions.jsonl [--seed 42] [--test-share 0.5]

Stratified by (answerability, topic): within each stratum the questions are ordered by id,
shuffled with ``random.Random(seed)`` and the first round(share * n) go to test. Writes
dev.jsonl and test.jsonl beside the input (original lines, original order) and prints the
SHA-256 of both files, which the benchmark README records. Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections import defaultdict
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", type=Path)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--test-share", type=float, default=0.5)
    args = ap.parse_args()
    lines = [ln for ln in args.questions.read_text(encoding="utf-8").splitlines() if ln.strip()]
    rows = [(ln, json.loads(ln)) for ln in lines if not ln.startswith("//")]
    strata: dict[tuple[str, str], list[str]] = defaultdict(list)
    for _, q in rows:
        strata[(q["answerability"], q["topic"])].append(q["id"])
    rng = random.Random(args.seed)
    test: set[str] = set()
    for key in sorted(strata):
        ids = sorted(strata[key])
        rng.shuffle(ids)
        test.update(ids[: round(args.test_share * len(ids))])
    for name, keep in (("dev", False), ("test", True)):
        out = args.questions.parent / f"{name}.jsonl"
        out.write_text("".join(ln + "\n" for ln, q in rows if (q["id"] in test) == keep), encoding="utf-8")
        n = sum(1 for _, q in rows if (q["id"] in test) == keep)
        print(f"{out}: {n} questions, sha256 {hashlib.sha256(out.read_bytes()).hexdigest()}")


if __name__ == "__main__":
    main()
