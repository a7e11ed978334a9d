"""A cross-encoder second stage a search can afford, chosen on the pool's TRAIN splits.

    python benchmarks/xenc_train.py --split pool/intl=/work/stores/intl \\
        --split pool/construction=/work/stores/construction --split pool/extra=/work/stores/extra \\
        [--file train] [--budget-ms 150] [--cache out/xenc-train]

The blend of 20 pages (docs/experiments/cross-encoder.md) gains on fresh questions but reads
~60 (question, chunk) pairs a search, ~2 s of CPU. A pair's cost is about linear in its word
pieces (one thread: 11 ms at 64, 22 ms at 128, 50 ms at 256), so a cheaper reading is one of
fewer pages (``pages``), fewer windows a page (``hit``: only the chunk the base ranked the page
by; ``all``: the best of its chunks) and shorter windows (``tokens``: the pair cut to 128 or
256 word pieces). Every such variant is scored here from cached per-chunk logits
(``vxmodels.cross_encoder``, pairs alone and unpadded: what the method computes), with its
cost measured as the CPU time of its pairs (one thread) per question. The chosen variant is
the one with the highest pooled MRR (then Hit@1, then lower cost) among those whose median
cost is within ``--budget-ms``; the dev splits are read with ``--file dev`` only to confirm
that one choice (``--only NAME``), and the test splits never here.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from xenc_dev import DEFAULT, ROOT, cell, scores  # noqa: E402

from sourcepage import api  # noqa: E402
from sourcepage.evaluation.questions import read_questions  # noqa: E402
from sourcepage.records import Hit, Question  # noqa: E402
from sourcepage.retrieval.xenc import XencSettings, blend  # noqa: E402

MAX_PAGES = 10


@dataclass(frozen=True)
class Variant:
    """One cheaper reading: ``pages`` re-read, ``windows`` (hit | all), ``tokens`` a pair,
    blended with ``weight`` at offset 2."""

    pages: int
    windows: str
    tokens: int
    weight: float

    @property
    def name(self) -> str:
        return f"pages={self.pages} windows={self.windows} tokens={self.tokens} weight={self.weight}"


GRID = [
    Variant(p, w, t, wt)
    for p, w, t, wt in itertools.product((3, 4, 5, 8, 10), ("hit", "all"), (128, 256), (0.5, 0.75))
    if w == "hit" or t == 128
]


def chunk_logits(s, qs: list[Question], base: dict[str, list[Hit]], tokens: int, path: Path) -> dict:  # noqa: ANN001
    """question id → chunk id → [logit, CPU seconds] for the chunks of the base's first
    ``MAX_PAGES`` pages, pairs cut to ``tokens`` word pieces (cached in ``path``): every chunk
    at 128 word pieces, only each page's hit chunk at more (the longer pairs cost twice as
    much, so only the one-pair-a-page reading can afford them)."""
    from sourcepage.retrieval.vxmodels import cross_encoder

    got = json.loads(path.read_text()) if path.exists() else {}
    path.parent.mkdir(parents=True, exist_ok=True)
    ce = cross_encoder()
    for i, q in enumerate(qs, 1):
        have = got.setdefault(q.id, {})
        chunks = [
            (cid, text)
            for h in base[q.id][:MAX_PAGES]
            for cid, text in s.store.page_chunks(s.version, h.page_id)
            if tokens <= 128 or cid == h.chunk_id
        ]
        todo = [(cid, text) for cid, text in chunks if cid not in have]
        if not todo:
            continue
        for cid, text in todo:  # what the method computes: the pair alone, cut to ``tokens``
            t0 = time.process_time()
            x = float(ce.scores(q.question, [text], tokens)[0])
            have[cid] = [x, time.process_time() - t0]
        if i % 10 == 0 or i == len(qs):
            path.write_text(json.dumps(got))
    path.write_text(json.dumps(got))
    return got


def page_logits(s, v: Variant, hits: list[Hit], cache: dict) -> tuple[dict[str, tuple[float, str]], float]:  # noqa: ANN001
    """The variant's page logits over its first pages, and their CPU seconds."""
    out: dict[str, tuple[float, str]] = {}
    cost = 0.0
    for h in hits[: v.pages]:
        cids = (
            [h.chunk_id] if v.windows == "hit" else [c for c, _ in s.store.page_chunks(s.version, h.page_id)]
        )
        for cid in cids:
            if cid not in cache:
                continue
            x, sec = cache[cid]
            cost += sec
            if h.page_id not in out or x > out[h.page_id][0]:
                out[h.page_id] = (x, cid)
    return out, cost


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", action="append", required=True, help="NAME=STORE (NAME: a benchmarks/ folder)")
    ap.add_argument("--file", default="train", choices=("train", "dev"))
    ap.add_argument("--cache", default="out/xenc-train")
    ap.add_argument("--budget-ms", type=float, default=150.0, help="median CPU ms a question (one thread)")
    ap.add_argument("--tokens", type=int, default=0, help="only the variants of this many word pieces")
    ap.add_argument(
        "--only", default="", help="score one variant (its name as printed), e.g. to confirm on dev"
    )
    a = ap.parse_args()
    grid = [v for v in GRID if (not a.only or v.name == a.only) and a.tokens in (0, v.tokens)]
    if not grid:
        sys.exit(f"--only {a.only!r} is no variant of the grid")
    data = []  # (split name, searcher, questions, base hits, {tokens: cache})
    for spec in a.split:
        name, _, store = spec.partition("=")
        s = api.searcher(store, build=False)
        qs = read_questions(ROOT / "benchmarks" / name / f"{a.file}.jsonl")
        qs = [q for q in qs if q.answerability == "answerable" and q.evidence]
        base = {q.id: list(s.rank(q.question, DEFAULT, k=50).hits) for q in qs}
        caches = {}
        for t in sorted({v.tokens for v in grid}):
            path = Path(a.cache) / f"{name.replace('/', '-')}-{a.file}-{t}.json"
            caches[t] = chunk_logits(s, qs, base, t, path)
            print(f"<!-- {name} {a.file}: {len(qs)} questions, tokens {t} cached -->", flush=True)
        data.append((name, s, qs, base, caches))
    rows = []
    for v in grid:
        pooled: list[list[float]] = [[], [], [], []]
        costs, per = [], []
        for name, s, qs, base, caches in data:
            runs, ref = {}, {}
            for q in qs:
                logits, sec = page_logits(s, v, base[q.id], caches[v.tokens][q.id])
                costs.append(sec * 1000)
                st = XencSettings(pages=v.pages, weight=v.weight, offset=2.0)
                runs[q.id] = [h.page_id for h in blend(base[q.id], logits, st)]
                ref[q.id] = [h.page_id for h in base[q.id]]
            h, r = scores(runs, qs)
            h0, r0 = scores(ref, qs)
            per.append(f"{name} {sum(h) / len(qs):.3f}")
            for acc, x in zip(pooled, (h, r, h0, r0), strict=True):
                acc.extend(x)
        n = len(pooled[0])
        rows.append((v, sum(pooled[1]) / n, sum(pooled[0]) / n, statistics.median(costs), pooled, per))
    print(
        f"\n| variant | median CPU ms | pooled {a.file} Δ vs default | Hit@1 per split |\n|---|---|---|---|"
    )
    for v, _, _, ms, pooled, per in rows:
        print(f"| {v.name} | {ms:.0f} | {cell(*pooled)} | {', '.join(per)} |")
    n = len(rows[0][4][0])
    print(f"\ndefault pooled ({n}): Hit@1 {sum(rows[0][4][2]) / n:.3f} MRR {sum(rows[0][4][3]) / n:.3f}")
    fit = [r for r in rows if r[3] <= a.budget_ms]
    if fit:
        best = max(fit, key=lambda r: (round(r[1], 6), round(r[2], 6), -r[3]))
        print(f"chosen within {a.budget_ms:.0f} ms: {best[0].name} (MRR {best[1]:.3f}, Hit@1 {best[2]:.3f})")


if __name__ == "__main__":
    main()
