"""Cohen's kappa between the first pass's grades (questions.jsonl) and a second-pass file.

    python benchmarks/construction/kappa.py SECOND_PASS.jsonl [--questions questions.jsonl]

SECOND_PASS.jsonl has the shape of second_pass/blind.jsonl with a grade (0, 1 or 2) on every
candidate: {"id": ..., "question": ..., "candidates": [{"page": ..., "grade": 0|1|2}, ...]}.
The first-pass grade of a candidate is its evidence grade in questions.jsonl, 0 when the page
is not evidence. Prints n, agreement and unweighted kappa over grades 0/1/2 and over binary
relevance (grade >= 1, what retrieval metrics use), the 3x3 confusion table and every
disagreement; --json prints the numbers as JSON. A missing or bad grade is an error naming
file, line and page. Kappa via scikit-learn (already a dependency).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sklearn.metrics import cohen_kappa_score

HERE = Path(__file__).resolve().parent


def first_pass(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for ln in path.read_text(encoding="utf-8").splitlines():
        if ln.strip() and not ln.startswith("//"):
            q = json.loads(ln)
            out[q["id"]] = {e["page"]: e["grade"] for e in q.get("evidence") or []}
    return out


def second_pass(path: Path, known: dict[str, dict[str, int]]) -> list[tuple[str, str, int]]:
    pairs: list[tuple[str, str, int]] = []
    for i, ln in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not ln.strip():
            continue
        row = json.loads(ln)
        if row.get("id") not in known:
            sys.exit(f"{path}:{i}: question id {row.get('id')!r} is not in the first pass")
        for c in row.get("candidates", []):
            g = c.get("grade")
            if isinstance(g, bool) or g not in (0, 1, 2):
                sys.exit(
                    f"{path}:{i}: {row['id']} page {c.get('page')!r}: grade must be 0, 1 or 2, got {g!r}"
                )
            pairs.append((row["id"], c["page"], g))
    return pairs


def kappa(a: list[int], b: list[int], labels: list[int]) -> float | None:
    """Unweighted kappa; None when undefined (both passes used a single label throughout)."""
    if len(set(a) | set(b)) < 2:
        return None
    k = float(cohen_kappa_score(a, b, labels=labels))
    return None if k != k else k


def compare(first: dict[str, dict[str, int]], pairs: list[tuple[str, str, int]]) -> dict:
    a = [first[q].get(p, 0) for q, p, _ in pairs]
    b = [g for _, _, g in pairs]
    ba, bb = [int(x >= 1) for x in a], [int(x >= 1) for x in b]
    n = len(pairs)
    table = [
        [sum(1 for x, y in zip(a, b, strict=True) if x == i and y == j) for i in range(3)] for j in range(3)
    ]
    return {
        "n": n,
        "kappa": kappa(a, b, [0, 1, 2]),
        "agreement": sum(x == y for x, y in zip(a, b, strict=True)) / n if n else None,
        "kappa_binary": kappa(ba, bb, [0, 1]),
        "agreement_binary": sum(x == y for x, y in zip(ba, bb, strict=True)) / n if n else None,
        "confusion_second_by_first": table,
        "disagreements": [
            {"id": q, "page": p, "first": x, "second": g}
            for (q, p, g), x in zip(pairs, a, strict=True)
            if x != g
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("second", type=Path)
    ap.add_argument("--questions", type=Path, default=HERE / "questions.jsonl")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = compare(first := first_pass(args.questions), second_pass(args.second, first))
    if args.json:
        print(json.dumps(result, indent=1))
        return
    fmt = lambda v: "undefined" if v is None else f"{v:.3f}"  # noqa: E731
    print(f"pairs {result['n']}")
    print(f"grades 0/1/2: kappa {fmt(result['kappa'])}, agreement {fmt(result['agreement'])}")
    print(f"binary (>=1): kappa {fmt(result['kappa_binary'])}, agreement {fmt(result['agreement_binary'])}")
    print("            first 0  first 1  first 2")
    for j, row in enumerate(result["confusion_second_by_first"]):
        print(f"second {j}  " + "".join(f"{v:>9}" for v in row))
    for d in result["disagreements"]:
        print(f"  {d['id']} {d['page']}: first {d['first']}, second {d['second']}")


if __name__ == "__main__":
    main()
