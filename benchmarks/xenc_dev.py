"""The cross-encoder second stage (``xenc:``) and ``dense:bge-small`` on the dev splits
(issue #47; docs/experiments/cross-encoder.md): page Hit@1 and MRR over the answerable
questions, each variant's paired difference from the shipped default with its 95%
bootstrap interval (``evaluation.stats.paired_bootstrap_ci``), per split and pooled.

    python benchmarks/xenc_dev.py --split osha6=/work/stores/osha6 \\
        --split intl20=/work/stores/intl --split construction=/work/stores/construction \\
        [--cache out/xenc] [--latency intl20]

Each store needs the default's indexes and ``dense:bge-small`` (``sourcepage index --method
dense:bge-small``). The cross-encoder's page logits (``xenc.page_logits``: best chunk window)
of every page in a base's first ``MAX_DEPTH`` are computed once and cached in ``--cache``;
the blends are then ``xenc.blend`` over them, exactly what the method ranks. The blend is
chosen on the pooled dev questions (highest MRR, then Hit@1, then ``simpler``); the test
splits are never read. ``--latency`` times the chosen blend's second stage on the first 20
questions of a split.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from pathlib import Path

import numpy as np

from sourcepage.evaluation.metrics import hit_at, reciprocal_rank
from sourcepage.evaluation.questions import read_questions
from sourcepage.evaluation.stats import paired_bootstrap_ci
from sourcepage.records import Question
from sourcepage.retrieval.methods import default_method, parse_method
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.xenc import XencSettings, blend, page_logits

ROOT = Path(__file__).resolve().parents[1]
MAX_DEPTH = 20
#: the base the cross-encoder re-reads: the default method without its own xenc stage
DEFAULT = default_method().removeprefix("xenc:")
BGE_FUSED = "sect:route:rrf:bm25+dense:bge-small"
BGE_THREE = "sect:route:rrf:bm25+dense+dense:bge-small"
BASES = (DEFAULT, "dense", "dense:bge-small", BGE_FUSED, BGE_THREE)
XENC_OVER = [DEFAULT]  # the bases the cross-encoder re-reads (--xenc-bge adds BGE_FUSED)
GRID = {"depth": (10, 15, 20), "weight": (0.25, 0.5, 0.75, 1.0), "offset": (2.0, 5.0, 20.0, 60.0)}

Runs = dict[str, list[str]]  # question id → ranked page ids


def questions(split: str) -> list[Question]:
    qs = read_questions(ROOT / "benchmarks" / split / "dev.jsonl")
    return [q for q in qs if q.answerability == "answerable" and q.evidence]


def base_runs(s: Searcher, qs: list[Question]) -> dict[str, dict[str, list]]:
    """base method → question id → its hits (k = 50)."""
    return {b: {q.id: list(s.rank(q.question, b, k=50).hits) for q in qs} for b in BASES}


def cached_logits(
    s: Searcher, qs: list[Question], runs: dict[str, dict[str, list]], path: Path
) -> dict[str, dict[str, tuple[float, str]]]:
    """question id → page → (best window logit, chunk) for the first ``MAX_DEPTH`` pages of
    each base in ``XENC_OVER`` (read from ``path`` where computed before)."""
    got: dict[str, dict[str, tuple[float, str]]] = {}
    if path.exists():
        got = {k: {p: tuple(v) for p, v in d.items()} for k, d in json.loads(path.read_text()).items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    for i, q in enumerate(qs, 1):
        want = {h.page_id: h for b in XENC_OVER for h in runs[b][q.id][:MAX_DEPTH]}
        have = got.setdefault(q.id, {})
        todo = sorted(set(want) - set(have))
        if todo:
            have.update(page_logits(s, q.question, [want[p] for p in todo]))
            for p in todo:  # a page without chunks: remembered as such
                have.setdefault(p, (float("-inf"), ""))
        if i % 10 == 0 or i == len(qs):  # kept as it goes: minutes of CPU a split
            path.write_text(json.dumps(got))
    return got


def scores(runs: Runs, qs: list[Question]) -> tuple[list[float], list[float]]:
    """(Hit@1, reciprocal rank) per question, in ``qs`` order."""
    return (
        [hit_at(runs[q.id], q.evidence, 1) for q in qs],
        [reciprocal_rank(runs[q.id], q.evidence) for q in qs],
    )


def xenc_runs(base: dict[str, list], logits: dict, st: XencSettings) -> Runs:
    return {qid: [h.page_id for h in blend(hits, logits[qid], st)] for qid, hits in base.items()}


def variants(data: dict[str, dict]) -> dict[str, dict[str, Runs]]:
    """variant name → split → runs: the bases, then every blend of the grid over each base
    of ``XENC_OVER``."""
    out: dict[str, dict[str, Runs]] = {}
    for b in BASES:
        out[b] = {
            sp: {qid: [h.page_id for h in hits] for qid, hits in d["runs"][b].items()}
            for sp, d in data.items()
        }
    for over, (depth, w, k) in itertools.product(XENC_OVER, itertools.product(*GRID.values())):
        st = XencSettings(pages=depth, weight=w, offset=k)
        name = f"xenc:{over} depth={depth} weight={w} offset={k:g}"
        out[name] = {sp: xenc_runs(d["runs"][over], d["logits"], st) for sp, d in data.items()}
    return out


def row(name: str, runs: dict[str, Runs], data: dict[str, dict], ref: dict[str, Runs]) -> str:
    """One table row: per split and pooled, Hit@1 / MRR and the paired differences from
    ``ref`` (the default) with 95% intervals."""
    cells, pooled = [], ([], [], [], [])
    for sp, d in data.items():
        h, r = scores(runs[sp], d["qs"])
        h0, r0 = scores(ref[sp], d["qs"])
        for acc, v in zip(pooled, (h, r, h0, r0), strict=True):
            acc.extend(v)
        cells.append(cell(h, r, h0, r0))
    cells.append(cell(*pooled))
    return f"| {name} | " + " | ".join(cells) + " |"


def cell(h: list[float], r: list[float], h0: list[float], r0: list[float]) -> str:
    dh, lh, hh = paired_bootstrap_ci(h, h0)
    dr, lr, hr = paired_bootstrap_ci(r, r0)
    return (
        f"{np.mean(h):.3f} / {np.mean(r):.3f} (Δ {dh:+.3f} [{lh:+.3f}, {hh:+.3f}]; "
        f"{dr:+.3f} [{lr:+.3f}, {hr:+.3f}])"
    )


def pooled_mrr(runs: dict[str, Runs], data: dict[str, dict]) -> tuple[float, float]:
    h, r = [], []
    for sp, d in data.items():
        a, b = scores(runs[sp], d["qs"])
        h += a
        r += b
    return float(np.mean(r)), float(np.mean(h))


def simpler(name: str) -> tuple[float, ...]:
    """Among equal blends the cheaper and gentler first: smaller depth, smaller weight,
    larger offset (as a key to maximise)."""
    depth, weight, offset = (float(x.split("=")[1]) for x in name.split(" ")[1:])
    return (-depth, -weight, offset)


def latency(s: Searcher, qs: list[Question], st: XencSettings) -> str:
    """Warm p50 / p90 (ms) of the second stage alone (``page_logits`` + ``blend`` over the
    default's ranking, computed before the clock starts): wall time, and this process's
    CPU time (on a loaded machine the wall time is mostly waiting), with the pairs a question."""
    base = parse_method(DEFAULT)
    page_logits(s, "warm up", s.ranked(base, "warm up", 50, {})[:2], st)
    wall, cpu, pairs = [], [], []
    for q in qs:
        hits = s.ranked(base, q.question, 50, {})
        pages = [h.page_id for h in hits[: st.pages]]
        t, c = time.perf_counter(), time.process_time()
        blend(hits, page_logits(s, q.question, hits[: st.pages], st), st)
        wall.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
        pairs.append(sum(len(s.store.page_chunks(s.version, p)) for p in pages))
    w, c = statistics.quantiles(wall, n=10), statistics.quantiles(cpu, n=10)
    return (
        f"{len(qs)} questions, {statistics.median(pairs):.0f} pairs a question (median): wall p50 "
        f"{statistics.median(wall):.0f} ms, p90 {w[-1]:.0f} ms; CPU p50 {statistics.median(cpu):.0f} ms, "
        f"p90 {c[-1]:.0f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", action="append", required=True, help="NAME=STORE (NAME: a benchmarks/ folder)")
    ap.add_argument("--cache", default="out/xenc")
    ap.add_argument("--latency", default="", help="the split whose store times the second stage")
    ap.add_argument("--xenc-bge", action="store_true", help=f"also the cross-encoder over {BGE_FUSED}")
    a = ap.parse_args()
    if a.xenc_bge:
        XENC_OVER.append(BGE_FUSED)
    data: dict[str, dict] = {}
    for item in a.split:
        sp, store = item.split("=", 1)
        s = Searcher(store, auto_build=False)
        qs = questions(sp)
        runs = base_runs(s, qs)
        logits = cached_logits(s, qs, runs, Path(a.cache) / f"{sp}-logits.json")
        data[sp] = {"qs": qs, "runs": runs, "logits": logits, "searcher": s}
        print(f"{sp}: {len(qs)} answerable dev questions", flush=True)
    table = variants(data)
    ref = table[DEFAULT]
    blends = [n for n in table if n.startswith(f"xenc:{DEFAULT} ")]
    best = max(blends, key=lambda n: (*pooled_mrr(table[n], data), *simpler(n)))
    print(f"\n{len(blends)} blends over the default tried (x{len(XENC_OVER)} bases); chosen: {best}\n")
    head = " | ".join([*data, "pooled"])
    print(f"| variant | {head} |\n|---|" + "---|" * (len(data) + 1))
    shown = [*BASES, best, f"xenc:{DEFAULT} depth=20 weight=1.0 offset=60"]
    shown += [best.replace(f"xenc:{DEFAULT} ", f"xenc:{BGE_FUSED} ")] if a.xenc_bge else []
    for name in dict.fromkeys(shown):
        print(row(name, table[name], data, ref))
    print("\npooled MRR / Hit@1 of every blend:")
    for n in sorted(blends, key=lambda n: pooled_mrr(table[n], data), reverse=True):
        print(f"  {n}: " + " / ".join(f"{v:.3f}" for v in pooled_mrr(table[n], data)))
    if a.latency:
        d = data[a.latency]
        depth, w, k = (float(x.split("=")[1]) for x in best.split(" ")[1:])
        st = XencSettings(int(depth), w, k)
        print(f"\nsecond stage on {a.latency}: " + latency(d["searcher"], d["qs"][:20], st))


if __name__ == "__main__":
    main()
