"""Second-stage ideas for issue #23 measured on a dev split and not kept (README, "Three more
second-stage ideas"): each reorders the default ranking and prints Hit@1 / Hit@3 / MRR /
Recall@10 over the answerable questions.

    python benchmarks/rank_probes.py STORE benchmarks/<set>/dev.jsonl [--probe NAME …]

Probes (all by default):

- ``neighbours``: the first 1 or 3 pages of the default kept, then the pages next to them
  (±1, same document; optionally same section) among the first 20 or 50 moved up behind them;
- ``dense-sections``: + w/(60 + rank of the page's section by the cosine of the question's
  MiniLM vector with the mean of the section's chunk vectors, or with its best chunk);
- ``named-headings``: + w/(60 + rank among the pages one of whose heading titles the question
  names whole: stemmed content words, number left out; forms by weight, title, words, the
  section's length in pages, and as a phrase not all in the document's title);
- ``dense-weight``: ``route:bm25`` and ``route:dense`` fused as 1/(60 + r) + w_d/(60 + r),
  without the section stage, by question type;
- ``e5-tail``: the default's first 1 or 3 pages kept, the rest in the order of the three-way
  fusion ``sect:route:rrf:bm25+dense+dense:e5-small`` (builds the e5 chunk index if missing);
  ``e5-tail-mean`` the same with each e5 chunk vector replaced by the mean of its sentences'
  vectors from the sentence table (``benchmarks/e5_fusion.py --mean``);
- ``rrf-k``: the default with RRF's k at 10, 20, 30 and 100 instead of 60;
- ``page-bm25``: + w/(60 + rank of the page by BM25 over its whole text, or by its chunks'
  BM25 scores as max + λ·(sum of the others)).

Tune on dev only.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

import numpy as np

from sourcepage.corpus.structure import SEP
from sourcepage.evaluation.metrics import hit_at, recall_at, reciprocal_rank
from sourcepage.evaluation.mined import strip_number
from sourcepage.evaluation.questions import read_questions
from sourcepage.query import Query
from sourcepage.records import Question
from sourcepage.retrieval import sections as SX
from sourcepage.retrieval.fusion import RRF_K, RrfSettings
from sourcepage.retrieval.index import build_indexes
from sourcepage.retrieval.methods import default_method, parse_method
from sourcepage.retrieval.search import Searcher
from sourcepage.retrieval.settings import IndexSettings
from sourcepage.retrieval.tokenize import TokenizerConfig, tokenize

TOKENS = TokenizerConfig(stopwords=True, stem=True)
BASE = parse_method("route:rrf:bm25+dense")  # the default's base, under its section stage
ANY = 10**9  # no limit on a section's pages


def scores(runs: dict[str, list[str]], qs: Sequence[Question]) -> str:
    n = len(qs)
    vals = [
        sum(hit_at(runs[q.id], q.evidence, 1) for q in qs) / n,
        sum(hit_at(runs[q.id], q.evidence, 3) for q in qs) / n,
        sum(reciprocal_rank(runs[q.id], q.evidence) for q in qs) / n,
        sum(recall_at(runs[q.id], q.evidence, 10) for q in qs) / n,
    ]
    return " / ".join(f"{v:.3f}" for v in vals)


def staged(s: Searcher, q: str, extra: Callable[[list[str]], dict[str, float]]) -> list[str]:
    """The default (``sect:`` over ``route:rrf:bm25+dense``) with ``extra(top pages)`` added."""
    base = s.ranked(BASE, q, None, {})
    top = [h.page_id for h in base[: SX.SETTINGS.depth]]
    return [h.page_id for h in SX.section_rank(s, q, base, SX.SETTINGS, extra(top))]


def neighbours(s: Searcher, qs: Sequence[Question]) -> None:
    runs = {q.id: [h.page_id for h in s.rank(q.question, default_method(), k=None).hits] for q in qs}

    def pulled(ranked: list[str], top: int, same: bool, depth: int) -> list[str]:
        pos = {p: i for i, p in enumerate(ranked)}
        want: list[str] = []
        for p in ranked[:top]:
            doc, _, n = p.rpartition("#p")
            for m in (int(n) + 1, int(n) - 1):
                c = f"{doc}#p{m}"
                near = c in pos and top <= pos[c] < depth and c not in want
                if near and (not same or s.page_section(c)[0] == s.page_section(p)[0]):
                    want.append(c)
        want.sort(key=lambda c: pos[c])
        return ranked[:top] + want + [p for p in ranked[top:] if p not in want]

    print(f"neighbours  default  {scores(runs, qs)}")
    for top in (1, 3):
        for same in (False, True):
            for depth in (20, 50):
                got = {k: pulled(r, top, same, depth) for k, r in runs.items()}
                print(f"neighbours  top {top}, same section {int(same)}, depth {depth}  {scores(got, qs)}")


def dense_sections(s: Searcher, qs: Sequence[Question]) -> None:
    dm = parse_method("dense")
    idx, enc = s.index(dm), dm.spec.encoder(dm)
    vectors = np.asarray(idx.model.vectors, dtype=np.float32)
    structure = s.structure()

    def key(pid: str) -> tuple[str, str]:
        return pid.rpartition("#p")[0], structure.get(pid, ("", "", ""))[0]

    chunk_key = [key(idx.page_ids[i]) for i in idx.chunk_pages]
    keys = sorted(set(chunk_key))
    kpos = {k: i for i, k in enumerate(keys)}
    of_chunk = np.array([kpos[k] for k in chunk_key])
    mean = np.stack([vectors[of_chunk == i].mean(0) for i in range(len(keys))])
    mean /= np.linalg.norm(mean, axis=1, keepdims=True) + 1e-9

    def extra(q: str, w: float, form: str) -> Callable[[list[str]], dict[str, float]]:
        def add(top: list[str]) -> dict[str, float]:
            if not w:
                return {}
            qv = enc.query(Query.of(s, q).route.query or q)
            cand = sorted({kpos[key(p)] for p in top if key(p) in kpos})
            cos = vectors @ qv if form == "max" else None
            sc = {k: float(mean[k] @ qv) if cos is None else float(cos[of_chunk == k].max()) for k in cand}
            rank = {k: r for r, k in enumerate(sorted(cand, key=lambda k: (-sc[k], k)), 1)}
            return {p: w / (RRF_K + rank[kpos[key(p)]]) for p in top if key(p) in kpos and key(p)[1]}

        return add

    for w, form in ((0.0, "mean"), (0.25, "mean"), (0.5, "mean"), (0.25, "max")):
        runs = {q.id: staged(s, q.question, extra(q.question, w, form)) for q in qs}
        print(f"dense-sections  w {w}, {form}  {scores(runs, qs)}")


def named_headings(s: Searcher, qs: Sequence[Question]) -> None:
    structure = s.structure()
    length: Counter[tuple[str, str]] = Counter()  # (document, last title) → pages
    for pid in s.store.page_ids():
        for path in s.page_sections(pid):
            length[(pid.rpartition("#p")[0], path.split(SEP)[-1])] += 1

    def titles(pid: str, last: bool, max_pages: int) -> list[str]:
        doc = pid.rpartition("#p")[0]
        sec = structure.get(pid, ("", "", ""))[0]
        out = []
        for path in s.page_sections(pid) or ((sec,) if pid in structure else ()):
            parts = [p for p in path.split(SEP) if p]
            out += [t for t in (parts[-1:] if last else parts) if length[(doc, t)] <= max_pages]
        return out

    def extra(q: str, w: float, least: int, last: bool, max_pages: int, phrase: bool):
        words = tokenize(q, TOKENS)
        asked, seq = set(words), f" {' '.join(words)} "

        def add(top: list[str]) -> dict[str, float]:
            named: dict[str, int] = {}
            for p in top:
                doc_title = set(tokenize(s.documents[p.rpartition("#p")[0]].title, TOKENS))
                for t in titles(p, last, max_pages):
                    tl = tokenize(strip_number(t), TOKENS)
                    if phrase:
                        said = f" {' '.join(tl)} " in seq and not set(tl) <= doc_title
                    else:
                        said = set(tl) <= asked
                    if len(set(tl)) >= least and said:
                        named[p] = max(named.get(p, 0), len(set(tl)))
            order = sorted(named, key=lambda p: (-named[p], p))
            return {p: w / (RRF_K + r) for r, p in enumerate(order, 1)}

        return add

    forms = [  # (weight, least words, last title only, most pages of the section, as a phrase)
        (0.25, 2, True, ANY, False),
        (0.5, 2, True, ANY, False),
        (0.25, 2, False, ANY, False),
        (0.25, 1, True, ANY, False),
        (0.25, 2, True, 3, False),
        (0.1, 2, True, 3, False),
        (0.25, 2, True, 1, False),
        (0.25, 2, True, 99, True),
        (0.1, 2, True, 99, True),
    ]
    for form in forms:
        runs = {q.id: staged(s, q.question, extra(q.question, *form)) for q in qs}
        label = f"w {form[0]}, words {form[1]}, last {int(form[2])}, pages {form[3]}, phrase {int(form[4])}"
        print(f"named-headings  {label}  {scores(runs, qs)}")


def dense_weight(s: Searcher, qs: Sequence[Question]) -> None:
    pairs = {
        q.id: [[h.page_id for h in s.rank(q.question, m, k=None).hits] for m in ("route:bm25", "route:dense")]
        for q in qs
    }
    for wd in (1.0, 1.5, 2.0, 3.0):
        runs = {}
        for qid, (b, d) in pairs.items():
            sc: dict[str, float] = defaultdict(float)
            for w, ranked in ((1.0, b), (wd, d)):
                for r, p in enumerate(ranked, 1):
                    sc[p] += w / (RRF_K + r)
            runs[qid] = sorted(sc, key=lambda p: (-sc[p], p))
        by_type = " | ".join(
            f"{t} ({len(g)}) {scores(runs, g)}"
            for t, g in sorted({t: [q for q in qs if q.type == t] for t in {q.type for q in qs}}.items())
        )
        print(f"dense-weight  w_d {wd}  all {scores(runs, qs)} | {by_type}")


def e5_tail(s: Searcher, qs: Sequence[Question], mean: bool = False) -> None:
    three = "sect:route:rrf:bm25+dense+dense:e5-small"
    build_indexes(s.store.path, "raw", [parse_method("dense:e5-small")])  # kept when current
    if mean:
        from e5_fusion import sentence_means  # benchmarks/, the script's own folder

        s = Searcher(s.store.path, "raw", auto_build=False)  # vectors swapped in this one only
        sentence_means(s)
    pairs = {
        q.id: [[h.page_id for h in s.rank(q.question, m, k=None).hits] for m in (default_method(), three)]
        for q in qs
    }
    print(f"e5-tail  default          {scores({i: d for i, (d, _) in pairs.items()}, qs)}")
    print(f"e5-tail  three-way        {scores({i: t for i, (_, t) in pairs.items()}, qs)}")
    for head in (1, 3):
        runs = {i: d[:head] + [p for p in t if p not in d[:head]] for i, (d, t) in pairs.items()}
        print(f"e5-tail  head {head} + tail   {scores(runs, qs)}")


def rrf_k(s: Searcher, qs: Sequence[Question]) -> None:
    for k in (60, 10, 20, 30, 100):
        settings = IndexSettings(methods={"rrf": RrfSettings(k=k)})
        other = Searcher(s.store.path, "raw", settings, auto_build=False)
        runs = {q.id: other.rank(q.question, default_method(), k=None).pages() for q in qs}
        print(f"rrf-k  k = {k:<3}  {scores(runs, qs)}")


def page_bm25(s: Searcher, qs: Sequence[Question]) -> None:
    """A second granularity: the top pages re-ranked by BM25 over whole page texts (the
    same tokens and formula as the chunk index; rank_bm25 ``BM25Okapi`` equals it),
    added at w/(60 + rank); and the chunk index's page score as max + λ·(sum of the
    page's other chunks), the same way."""
    from rank_bm25 import BM25Okapi

    pids, toks = [], []
    for doc in sorted(s.documents):
        for n, text in enumerate(s.store.page_texts(doc), 1):
            pids.append(f"{doc}#p{n}")
            toks.append(tokenize(text))
    assert set(pids) == s.store.page_ids(), "page numbers are not 1..n"
    bm, pos = BM25Okapi(toks, k1=1.5, b=0.75, epsilon=0), {p: i for i, p in enumerate(pids)}
    idx = s.index(parse_method("bm25"))
    chunk_pages = np.asarray(idx.chunk_pages)

    def extra(q: str, w: float, lam: float | None) -> Callable[[list[str]], dict[str, float]]:
        routed = Query.of(s, q).route.query or q
        qt = tokenize(routed)

        def add(top: list[str]) -> dict[str, float]:
            if not w:
                return {}
            if lam is None:
                sc = bm.get_scores(qt)
                val = {p: float(sc[pos[p]]) for p in top}
            else:
                cs = np.concatenate(list(idx.score_parts(routed)))
                ip = {p: i for i, p in enumerate(idx.page_ids)}
                val = {}
                for p in top:
                    c = np.sort(cs[chunk_pages == ip[p]])[::-1]
                    val[p] = float(c[0] + lam * c[1:].sum()) if c.size else 0.0
            order = sorted(top, key=lambda p: (-val[p], p))
            return {p: w / (RRF_K + r) for r, p in enumerate(order, 1)}

        return add

    for w, lam in ((0.0, None), (0.5, None), (1.0, None), (0.5, 0.5), (1.0, 0.5), (1.0, 0.2)):
        runs = {q.id: staged(s, q.question, extra(q.question, w, lam)) for q in qs}
        form = "whole page" if lam is None else f"max + {lam}·rest"
        print(f"page-bm25  w {w}, {form}  {scores(runs, qs)}")


PROBES = {
    "neighbours": neighbours,
    "dense-sections": dense_sections,
    "named-headings": named_headings,
    "dense-weight": dense_weight,
    "e5-tail": e5_tail,
    "e5-tail-mean": lambda s, qs: e5_tail(s, qs, mean=True),
    "rrf-k": rrf_k,
    "page-bm25": page_bm25,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("questions")
    ap.add_argument("--probe", action="append", choices=list(PROBES))
    a = ap.parse_args()
    s = Searcher(a.store, auto_build=False)
    qs = [q for q in read_questions(a.questions) if q.answerability == "answerable" and q.evidence]
    for name in a.probe or list(PROBES):
        PROBES[name](s, qs)


if __name__ == "__main__":
    main()
