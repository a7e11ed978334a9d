"""``sourcepage bench --scale N``: ingest, index and query a collection of N chunks, with
build time, peak memory, disk and query latency beside bm25s on the same tokens.

The collection is a synthetic BEIR folder (``synthetic_beir``: seed 42, ~156-word
documents of Zipf-distributed pseudo-words plus a tail of numbers, one chunk a document;
queries are 3–8 consecutive words of random documents) or an existing BEIR folder. Each
phase runs in a fresh process through the executor seam (``sourcepage.executor``), so its
peak memory (``ru_maxrss``) is its own:

- ``ingest``: the BEIR ingest loop into the store (``ingest_beir``);
- ``index``: the BM25 index of the raw chunks (``build_index``: streamed from the store,
  sharded, memory-mapped);
- ``query``: a new process opens the store and the index (``load_ms``), then times
  ``Searcher.rank(question, "bm25", k)`` — tokenize, score, collapse to pages — per question;
- ``bm25s``: the same chunk tokens (our tokenizer) indexed by plain ``bm25s.BM25()`` in
  memory, and its ``retrieve(k)`` on the pre-tokenized questions: a raw chunk top-k.

Latencies are per-question medians over ``repeats`` after one warm-up query; p50 and p95
are over questions. One run measures everything; the numbers are this machine's. Each
phase's row is also written to ``<work>/<phase>.json`` as soon as it is measured.
"""

from __future__ import annotations

import json
import resource
import shutil
import time
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.executor import ProcessPool

SEED = 42
MEAN_WORDS = 156
#: pseudo-words in the Zipf vocabulary; a share of tokens are numbers (a growing tail)
VOCABULARY = 200_000
NUMBER_SHARE = 0.02
_SYLLABLES = [c + v for c in "bcdfghjklmnprstvz" for v in "aeiou"]


def _word(i: int) -> str:
    """The i-th pseudo-word (distinct for distinct i): syllables in base 85."""
    parts = []
    while True:
        i, r = divmod(i, len(_SYLLABLES))
        parts.append(_SYLLABLES[r])
        if i == 0:
            return "".join(parts)
        i -= 1


def synthetic_beir(folder: str | Path, n: int, queries: int = 100, seed: int = SEED) -> Path:
    """Write a BEIR folder of ``n`` documents and ``queries`` questions (see the module
    docstring); deterministic for a seed. Returns the folder."""
    if n < 1:
        raise ValueError(f"--scale needs at least 1 document, got {n}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    words = np.array([_word(i) for i in range(VOCABULARY)], dtype=object)
    cdf = np.cumsum(1.0 / np.arange(1, VOCABULARY + 1) ** 1.05)
    cdf /= cdf[-1]
    query_docs = set(rng.choice(n, size=min(queries, n), replace=False).tolist())
    picked: list[tuple[int, str]] = []
    tmp = folder / ".corpus.jsonl.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for start in range(0, n, 10_000):
            m = min(10_000, n - start)
            lengths = np.clip(rng.normal(MEAN_WORDS, 40, size=m).astype(int), 20, 400)
            ids = np.searchsorted(cdf, rng.random(int(lengths.sum())))
            toks = words[ids]
            numbers = rng.random(len(toks)) < NUMBER_SHARE
            toks[numbers] = rng.integers(0, 10**6, size=int(numbers.sum())).astype(str)
            pos = 0
            for j, length in enumerate(lengths.tolist()):
                doc = toks[pos : pos + length]
                pos += length
                if start + j in query_docs:
                    q = int(rng.integers(3, 9))
                    a = int(rng.integers(0, max(1, length - q)))
                    picked.append((start + j, " ".join(doc[a : a + q])))
                f.write(json.dumps({"_id": f"d{start + j}", "title": "", "text": " ".join(doc)}) + "\n")
    tmp.replace(folder / "corpus.jsonl")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as f:
        for i, (d, text) in enumerate(sorted(picked)):
            f.write(json.dumps({"_id": f"q{i}", "text": text, "doc": f"d{d}"}) + "\n")
    return folder


def _latency(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms, dtype=np.float64)
    return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)), "max": float(a.max())}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _timed_per_query(fn: Callable[[int], Any], n: int, repeats: int) -> list[float]:
    fn(0)  # warm-up
    per_query = []
    for i in range(n):
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(i)
            runs.append((time.perf_counter() - t0) * 1000)
        per_query.append(float(np.median(runs)))
    return per_query


def _size(path: Path) -> int:
    return (
        path.stat().st_size
        if path.is_file()
        else sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    )


def _ingest_phase(job: tuple[str, str]) -> dict[str, Any]:
    from sourcepage.ingest import ingest_beir

    beir_dir, store = job
    t0 = time.perf_counter()
    report = ingest_beir(beir_dir, store)
    row = {
        "seconds": time.perf_counter() - t0,
        "peak_mb": _peak_mb(),
        "documents": report.as_dict().get("documents"),
        "chunks": report.chunks,
    }
    return _record(store, "ingest", row)


def _index_phase(job: tuple[str]) -> dict[str, Any]:
    from sourcepage.retrieval.index import build_index, index_params
    from sourcepage.retrieval.methods import parse_method
    from sourcepage.store.db import Store

    st = Store(job[0])
    try:
        t0 = time.perf_counter()
        path = build_index(st, "raw", parse_method("bm25"))
        sec = time.perf_counter() - t0
        shards = json.loads((path / "postings.json").read_text())["shards"]
        row = {
            "seconds": sec,
            "peak_mb": _peak_mb(),
            "disk_bytes": _size(path),
            "chunks": index_params(path)["chunks"],
            "shards": len(shards),
            "postings": sum(s["postings"] for s in shards),
        }
        return _record(job[0], "index", row)
    finally:
        st.close()


def _query_phase(job: tuple[str, list[str], int, int]) -> dict[str, Any]:
    from sourcepage.retrieval.methods import parse_method
    from sourcepage.retrieval.search import Searcher

    store, queries, k, repeats = job
    t0 = time.perf_counter()
    searcher = Searcher(store, "raw", auto_build=False)
    searcher.index(parse_method("bm25"))
    load_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    searcher.rank(queries[0], "bm25", k=k)
    first_ms = (time.perf_counter() - t0) * 1000
    ms = _timed_per_query(lambda i: searcher.rank(queries[i], "bm25", k=k), len(queries), repeats)
    row = {"load_ms": load_ms, "first_query_ms": first_ms, **_latency(ms), "peak_mb": _peak_mb()}
    return _record(store, "query", row)


def _bm25s_phase(job: tuple[str, list[str], int, int]) -> dict[str, Any]:
    import bm25s

    from sourcepage.retrieval.tokenize import tokenize

    store, queries, k, repeats = job
    # the tokens as ids (bm25s's (ids, vocabulary) input): a million chunks of ~156 tokens as
    # lists of str would take ~18 GB, as int32 arrays 0.6 GB; the index is the same
    vocab: defaultdict[str, int] = defaultdict()
    vocab.default_factory = vocab.__len__
    t0 = time.perf_counter()
    ids = [array("i", map(vocab.__getitem__, tokenize(text))) for text in _texts(store)]
    tok_sec = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = bm25s.BM25()
    model.index((ids, dict(vocab)), show_progress=False)
    sec = time.perf_counter() - t0
    n_tokens = sum(map(len, ids))
    del ids
    qt = [tokenize(q) for q in queries]
    ms = _timed_per_query(
        lambda i: model.retrieve([qt[i]], k=k, show_progress=False, n_threads=1), len(queries), repeats
    )
    row = {
        "tokenize_seconds": tok_sec,
        "index_seconds": sec,
        "tokens": n_tokens,
        **_latency(ms),
        "peak_mb": _peak_mb(),
    }
    return _record(store, "bm25s", row)


def _texts(source: str) -> Iterator[str]:
    """The raw chunk texts of a store, or the texts of a BEIR folder's corpus.jsonl (one
    chunk a document: what BEIR ingest makes of them), streamed."""
    if (Path(source) / "corpus.jsonl").exists():
        with open(Path(source) / "corpus.jsonl", encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)["text"]
        return
    from sourcepage.store.db import Store

    st = Store(source)
    try:
        for _, text in st.iter_chunk_texts("raw"):
            yield text
    finally:
        st.close()


def _direct_index_phase(job: tuple[str, str]) -> dict[str, Any]:
    """Without ingest: the BM25 index of a BEIR folder's texts, built as the registered
    method builds it (streamed, sharded, written and memory-mapped)."""
    from sourcepage.retrieval import bm25
    from sourcepage.retrieval.tokenize import tokenize

    beir_dir, folder = job
    shutil.rmtree(folder, ignore_errors=True)
    Path(folder).mkdir(parents=True)
    t0 = time.perf_counter()
    index = bm25.build_into((tokenize(t) for t in _texts(beir_dir)), Path(folder))
    sec = time.perf_counter() - t0
    row = {
        "seconds": sec,
        "peak_mb": _peak_mb(),
        "disk_bytes": _size(Path(folder)),
        "chunks": index.n_docs,
        "shards": len(index.postings.shards),
        "postings": sum(len(sh.docs) for sh in index.postings.shards),
    }
    return _record(folder, "index", row)


class _PageIds:
    """``d<i>#p1`` for chunk i, made on demand (one chunk a document, one page each)."""

    def __init__(self, n: int, suffix: str):
        self.n, self.suffix = n, suffix

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> str:
        return f"d{i}#p1{self.suffix}"


def _direct_query_phase(job: tuple[str, list[str], int, int]) -> dict[str, Any]:
    """Without a store: load the index, then tokenize, score and collapse to pages."""
    from sourcepage.retrieval import bm25
    from sourcepage.retrieval.pages import collapse
    from sourcepage.retrieval.tokenize import tokenize

    folder, queries, k, repeats = job
    t0 = time.perf_counter()
    index = bm25.load(Path(folder), bm25.Bm25Params())
    n = index.n_docs
    pages = np.arange(n, dtype=np.int64)
    page_ids, chunk_ids = _PageIds(n, ""), _PageIds(n, "#c0")
    load_ms = (time.perf_counter() - t0) * 1000

    def rank(i: int) -> Any:
        return collapse(index.score_parts(tokenize(queries[i])), pages, page_ids, chunk_ids, depth=k)  # type: ignore[arg-type]

    t0 = time.perf_counter()
    rank(0)
    first_ms = (time.perf_counter() - t0) * 1000
    ms = _timed_per_query(rank, len(queries), repeats)
    row = {"load_ms": load_ms, "first_query_ms": first_ms, **_latency(ms), "peak_mb": _peak_mb()}
    return _record(folder, "query", row)


def _in_fresh_process(fn: Callable[[Any], dict[str, Any]], job: Any) -> dict[str, Any]:
    with ProcessPool(1) as pool:
        return pool.map(fn, [job])[0]


def _record(store: str, phase: str, row: dict[str, Any]) -> dict[str, Any]:
    """Write a phase's row to ``<work>/<phase>.json`` as soon as it is measured (a long run
    that is stopped keeps what it measured)."""
    (Path(store).parent / f"{phase}.json").write_text(json.dumps(row, indent=2) + "\n")
    return row


def read_queries(beir_dir: Path, limit: int) -> list[str]:
    with open(beir_dir / "queries.jsonl", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()][:limit]


def run_scale_bench(
    n: int | None,
    work: str | Path,
    beir: str | Path | None = None,
    queries: int = 100,
    k: int = 10,
    repeats: int = 3,
    peer: bool = True,
    progress: Callable[[str], None] | None = None,
    ingest: bool = True,
) -> dict[str, Any]:
    """Every phase in one run (see the module docstring). ``work`` holds the generated
    collection (``work/beir``, unless ``beir`` is given) and the store (``work/store``)."""
    from sourcepage.bench.speed import machine_info

    say = progress or (lambda _m: None)
    work = Path(work)
    if beir is None:
        if n is None:
            raise ValueError("give --scale N or a BEIR folder")
        beir_dir = work / "beir"
        if not (beir_dir / "queries.jsonl").exists() or _lines(beir_dir / "corpus.jsonl") != n:
            say(f"generating {n} documents")
            shutil.rmtree(beir_dir, ignore_errors=True)
            t0 = time.perf_counter()
            synthetic_beir(beir_dir, n, queries)
            gen_sec = time.perf_counter() - t0
        else:
            gen_sec = None
    else:
        beir_dir, gen_sec = Path(beir), None
    qs = read_queries(beir_dir, queries)
    if not qs:
        raise ValueError(f"{beir_dir}/queries.jsonl holds no queries")
    store = work / "store"
    if ingest:
        say("ingest")
        ingested = _in_fresh_process(_ingest_phase, (str(beir_dir), str(store)))
        ingested["store_bytes"] = _size(store / "store.sqlite")
        say("index")
        index = _in_fresh_process(_index_phase, (str(store),))
        say("queries")
        query = _in_fresh_process(_query_phase, (str(store), qs, k, repeats))
        source = str(store)
    else:  # the BM25 index of the collection's texts, without a store
        ingested = None
        folder = str(work / "bm25-direct")
        say("index (no ingest)")
        index = _in_fresh_process(_direct_index_phase, (str(beir_dir), folder))
        say("queries (no ingest)")
        query = _in_fresh_process(_direct_query_phase, (folder, qs, k, repeats))
        source = str(beir_dir)
    peer_row = None
    if peer:
        say("bm25s")
        peer_row = _in_fresh_process(_bm25s_phase, (source, qs, k, repeats))
        peer_row["x_ours_p50"] = query["p50"] / peer_row["p50"]
        peer_row["x_ours_p95"] = query["p95"] / peer_row["p95"]
    return {
        "machine": machine_info(),
        "settings": {
            "scale": n,
            "beir": str(beir_dir),
            "store": str(store),
            "queries": len(qs),
            "k": k,
            "repeats": repeats,
            "ingest": ingest,
            "statistic": "per-question median over repeats; p50/p95 over questions",
        },
        "collection": {"generate_seconds": gen_sec, "corpus_bytes": _size(beir_dir / "corpus.jsonl")},
        "ingest": ingested,
        "index": index,
        "query": query,
        "bm25s": peer_row,
    }


def _lines(path: Path) -> int:
    if not path.exists():
        return -1
    with open(path, "rb") as f:
        return sum(1 for _ in _blocks(f))


def _blocks(f: Any) -> Iterator[bytes]:
    for line in f:
        if line.strip():
            yield line
