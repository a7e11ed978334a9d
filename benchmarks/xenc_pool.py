"""The cross-encoder blend chosen on the old dev splits, replicated on the pool's dev splits.

    python benchmarks/xenc_pool.py --split pool/intl=/work/stores/intl \\
        --split pool/construction=/work/stores/construction --split pool/extra=/work/stores/extra

The blend of docs/experiments/cross-encoder.md (``xenc:<default>``, 20 pages, weight 0.5,
offset 2) was chosen among 48 on the old dev splits; a choice made on much-read splits is
only believed when it holds on questions it was not chosen on. This runs that one blend,
no other, against the shipped default on each pool dev split and pooled: page Hit@1 and
MRR over the answerable questions, the paired difference with its 95% bootstrap interval.
The logits come from ``xenc_dev.cached_logits`` (the same code the method ranks with),
cached under ``--cache``. ``--file test`` reads the test splits instead (once per release,
with ``--reason``; each read is logged in ``benchmarks/test_reads.jsonl``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from readlog import log_read  # noqa: E402
from xenc_dev import DEFAULT, ROOT, cached_logits, cell, scores, xenc_runs  # noqa: E402

from sourcepage import api  # noqa: E402
from sourcepage.evaluation.questions import read_questions  # noqa: E402
from sourcepage.retrieval.xenc import XencSettings  # noqa: E402

CHOSEN = XencSettings(pages=20, weight=0.5, offset=2)


def hit_window_logits(s, qs: list, base: dict) -> tuple[dict, float]:  # noqa: ANN001
    """The cost probe: per page of a base's first ``CHOSEN.pages``, the logit of the one chunk
    the base ranked it by (one pair a page instead of every chunk of it), and the median CPU
    seconds a question of that scoring."""
    import statistics
    import time

    from sourcepage.retrieval.vxmodels import cross_encoder

    out, cpu = {}, []
    for q in qs:
        hits = base[q.id][: CHOSEN.pages]
        texts = {}
        for h in hits:
            texts.update(dict(s.store.page_chunks(s.version, h.page_id)))
        pairs = [(h.page_id, h.chunk_id) for h in hits if h.chunk_id in texts]
        t0 = time.process_time()
        logits = cross_encoder().scores(q.question, [texts[c] for _, c in pairs])
        cpu.append(time.process_time() - t0)
        out[q.id] = {p: (float(x), c) for (p, c), x in zip(pairs, logits.tolist(), strict=True)}
    return out, statistics.median(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", action="append", required=True, help="NAME=STORE (NAME: a benchmarks/ folder)")
    ap.add_argument("--cache", default="out/xenc-pool")
    ap.add_argument("--file", default="dev", choices=("dev", "test"), help="the split file read")
    ap.add_argument("--reason", default="", help="why a test split is read (logged)")
    ap.add_argument(
        "--windows",
        default="all",
        choices=("all", "hit"),
        help="all: each page's best chunk window (the method); hit: only the chunk the base ranked it by "
        "(a cost probe)",
    )
    ap.add_argument("--pages", type=int, default=CHOSEN.pages, help="pages re-read (the chosen blend: 20)")
    a = ap.parse_args()
    chosen = XencSettings(pages=a.pages, weight=CHOSEN.weight, offset=CHOSEN.offset)
    if a.file == "test" and not a.reason.strip():
        sys.exit("reading a test split needs --reason (it is logged in benchmarks/test_reads.jsonl)")
    pooled: list[list[float]] = [[], [], [], []]
    print(f"| split | {DEFAULT} Hit@1 / MRR | xenc Hit@1 / MRR (Δ Hit@1 [95%]; Δ MRR [95%]) |\n|---|---|---|")
    for spec in a.split:
        name, _, store = spec.partition("=")
        s = api.searcher(store, build=False)
        path = ROOT / "benchmarks" / name / f"{a.file}.jsonl"
        if a.file == "test":
            log_read(path, a.reason)
        qs = [q for q in read_questions(path) if q.answerability == "answerable" and q.evidence]
        base = {q.id: list(s.rank(q.question, DEFAULT, k=50).hits) for q in qs}
        if a.windows == "hit":
            logits, cpu = hit_window_logits(s, qs, base)
            print(f"<!-- {name}: {cpu:.2f} s CPU a question for the second stage -->", flush=True)
        else:
            cache = Path(a.cache) / f"{name.replace('/', '-')}-{a.file}.json"
            logits = cached_logits(s, qs, {DEFAULT: base}, cache)
        ref = {qid: [h.page_id for h in hits] for qid, hits in base.items()}
        h0, r0 = scores(ref, qs)
        h, r = scores(xenc_runs(base, logits, chosen), qs)
        for acc, v in zip(pooled, (h, r, h0, r0), strict=True):
            acc.extend(v)
        print(
            f"| {name} ({len(qs)}) | {sum(h0) / len(qs):.3f} / {sum(r0) / len(qs):.3f} "
            f"| {cell(h, r, h0, r0)} |",
            flush=True,
        )
    n = len(pooled[0])
    print(f"| pooled ({n}) | {sum(pooled[2]) / n:.3f} / {sum(pooled[3]) / n:.3f} | {cell(*pooled)} |")


if __name__ == "__main__":
    main()
