"""Merge the authors' label files into each pool's question set and split it, once.

    python benchmarks/pool/build.py [--seed 42]

Reads ``labels/L*.jsonl`` (each line checked by ``validate.check_line``; a line with a
problem stops the build, naming file and line), orders the questions by id and writes
``<pool>/questions.jsonl`` for each pool (intl, construction, extra) and its split:
``train.jsonl`` 50%, ``dev.jsonl`` 25%, ``test.jsonl`` 25%, stratified by (answerability,
source document, kind): within each stratum ids are sorted, shuffled with
``random.Random(seed)`` and dealt round-robin from a seeded offset in the order test, dev,
train, train, so small strata still reach every split in proportion over the pool.
Prints each file's count and SHA-256 (the README records the test files'). Standard
library only; the same labels and seed give byte-identical files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

from validate import POOL_CORPUS, check_line

HERE = Path(__file__).resolve().parent
DEAL = ("test", "dev", "train", "train")


def _load(pages: Path) -> list[dict]:
    rows: list[dict] = []
    cache: dict[str, str | None] = {}
    bad = []
    for f in sorted((HERE / "labels").glob("L*.jsonl")):
        if f.name.endswith("-skipped.jsonl"):
            continue
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            q = json.loads(line)
            errs = check_line(q, pages, cache)
            if errs:
                bad.append(f"{f.name}:{i}: {q.get('id')}: {'; '.join(errs)}")
            rows.append(q)
    if bad:
        sys.exit("label problems:\n  " + "\n  ".join(bad))
    ids = [q["id"] for q in rows]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        sys.exit(f"duplicate ids: {sorted(dup)}")
    return sorted(rows, key=lambda q: q["id"])


def split(rows: list[dict], seed: int) -> dict[str, str]:
    """Each question's split, stratified by (class, source document, kind)."""
    strata: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for q in rows:
        doc = (q.get("source_page") or "").split("#")[0] or "-"
        strata[(q["answerability"], doc, q["kind"])].append(q["id"])
    rng = random.Random(seed)
    out: dict[str, str] = {}
    for key in sorted(strata):
        ids = sorted(strata[key])
        rng.shuffle(ids)
        start = rng.randrange(len(DEAL))
        for j, qid in enumerate(ids):
            out[qid] = DEAL[(start + j) % len(DEAL)]
    return out


def _write(path: Path, rows: list[dict]) -> str:
    data = "".join(json.dumps(q, ensure_ascii=False, sort_keys=True) + "\n" for q in rows).encode()
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return hashlib.sha256(data).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--pages", type=Path, default=Path("/tmp/pool-text"))
    args = ap.parse_args()
    rows = _load(args.pages)
    for pool in POOL_CORPUS:
        mine = [q for q in rows if q["pool"] == pool]
        if not mine:
            continue
        (HERE / pool).mkdir(exist_ok=True)
        which = split(mine, args.seed)
        sha = _write(HERE / pool / "questions.jsonl", mine)
        print(f"{pool}/questions.jsonl {len(mine)} {sha}")
        for name in ("train", "dev", "test"):
            part = [q for q in mine if which[q["id"]] == name]
            sha = _write(HERE / pool / f"{name}.jsonl", part)
            print(f"{pool}/{name}.jsonl {len(part)} {sha}")


if __name__ == "__main__":
    main()
