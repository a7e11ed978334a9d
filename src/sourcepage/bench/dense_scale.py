"""``sourcepage bench --scale N --dense``: approximate nearest-neighbour search against exact
float32 search on N dense vectors — recall@100, build time, memory, disk and latency.

The vectors are synthetic (``clustered_vectors``: seed 42, 384-d, a Gaussian mixture of
``N // 100`` clusters, L2-normalised; queries are fresh points of the same mixture), or the
MiniLM embeddings of a store's dense index with its questions embedded (``--store`` and
``--questions``). Exact search is the float32 matrix-vector product the dense method does
below ``ANN_MIN_CHUNKS``; its top 100 per query are the truth.

Each ANN library is an adapter here (``LIBRARIES``): the one sourcepage uses
(``retrieval.ann``) and, when installed, the others it was chosen against (faiss-cpu,
hnswlib, usearch), all as HNSW graphs with the same parameters (M, ef_construction,
ef_search from ``retrieval.ann``), built and queried on one thread (BLAS and OpenMP
limited to one). Each library builds in a fresh process (``peak_mb``: that process's peak
resident memory, VmHWM, the vectors included) and is queried in another fresh process after
loading its saved index (``query_added_mb``: the peak resident memory added by loading and
querying, memory-mapped file pages included). ``sourcepage`` (the graph path of
``ann.AnnIndex.nearest``) and ``faiss-cpu`` (plain faiss) are the same library.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.executor import ProcessPool

SEED = 42
DIM = 384
TOP = 100  # recall@100


def clustered_vectors(
    n: int, queries: int, dim: int = DIM, seed: int = SEED
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` corpus and ``queries`` query vectors (float32, unit length) from one Gaussian
    mixture of ``max(8, n // 100)`` clusters with unequal spreads: clustered like sentence
    embeddings, so neighbours are not all equidistant as in uniform noise."""
    if n < TOP:
        raise ValueError(f"--dense needs at least {TOP} vectors, got {n}")
    rng = np.random.default_rng(seed)
    k = max(8, n // 100)
    centres = rng.standard_normal((k, dim)).astype(np.float32)
    spread = rng.uniform(0.6, 1.4, size=k).astype(np.float32)

    def draw(m: int) -> np.ndarray:
        out = np.empty((m, dim), dtype=np.float32)
        for a in range(0, m, 50_000):
            b = min(m, a + 50_000)
            c = rng.integers(0, k, size=b - a)
            x = centres[c] + spread[c, None] * rng.standard_normal((b - a, dim)).astype(np.float32)
            out[a:b] = x / np.linalg.norm(x, axis=1, keepdims=True)
        return out

    return draw(n), draw(queries)


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int = TOP) -> np.ndarray:
    """Row ids of each query's ``k`` best inner products (ties by row id), exactly."""
    out = np.empty((len(queries), k), dtype=np.int64)
    for i, q in enumerate(queries):
        s = vectors @ q
        top = np.argpartition(-s, k - 1)[:k]
        out[i] = top[np.lexsort((top, -s[top]))]
    return out


# -- adapters: build(vectors, path) saves an index; open(path, n) returns search(q, k) -> ids


def _ours_build(vectors: np.ndarray, path: Path) -> None:
    from sourcepage.retrieval import ann

    ann.build(vectors, path)


def _ours_open(path: Path, vectors: np.ndarray) -> Callable[[np.ndarray, int], np.ndarray]:
    from sourcepage.retrieval import ann

    index = ann.AnnIndex.load(path, vectors)
    return lambda q, k: index.nearest(q, k)[0]


def _faiss_build(vectors: np.ndarray, path: Path) -> None:
    import faiss

    from sourcepage.retrieval.ann import EF_CONSTRUCTION, M

    faiss.omp_set_num_threads(1)
    index = faiss.IndexHNSWFlat(vectors.shape[1], M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = EF_CONSTRUCTION
    index.add(np.ascontiguousarray(vectors))
    faiss.write_index(index, str(path))


def _faiss_open(path: Path, vectors: np.ndarray) -> Callable[[np.ndarray, int], np.ndarray]:
    import faiss

    from sourcepage.retrieval.ann import EF_SEARCH

    faiss.omp_set_num_threads(1)
    index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC)  # vectors memory-mapped
    index.hnsw.efSearch = EF_SEARCH
    return lambda q, k: index.search(q.reshape(1, -1), k)[1][0]


def _hnswlib_build(vectors: np.ndarray, path: Path) -> None:
    import hnswlib

    from sourcepage.retrieval.ann import EF_CONSTRUCTION, M

    index = hnswlib.Index(space="ip", dim=vectors.shape[1])
    index.init_index(max_elements=len(vectors), ef_construction=EF_CONSTRUCTION, M=M, random_seed=SEED)
    index.add_items(vectors, np.arange(len(vectors)), num_threads=1)
    index.save_index(str(path))


def _hnswlib_open(path: Path, vectors: np.ndarray) -> Callable[[np.ndarray, int], np.ndarray]:
    import hnswlib

    from sourcepage.retrieval.ann import EF_SEARCH

    index = hnswlib.Index(space="ip", dim=vectors.shape[1])
    index.load_index(str(path), max_elements=len(vectors))
    index.set_ef(EF_SEARCH)
    index.set_num_threads(1)
    return lambda q, k: index.knn_query(q.reshape(1, -1), k=k, num_threads=1)[0][0].astype(np.int64)


def _usearch_build(vectors: np.ndarray, path: Path) -> None:
    from usearch.index import Index

    from sourcepage.retrieval.ann import EF_CONSTRUCTION, M

    index = Index(
        ndim=vectors.shape[1], metric="ip", dtype="f32", connectivity=M, expansion_add=EF_CONSTRUCTION
    )
    index.add(np.arange(len(vectors), dtype=np.uint64), vectors, threads=1)
    index.save(str(path))


def _usearch_open(path: Path, vectors: np.ndarray) -> Callable[[np.ndarray, int], np.ndarray]:
    from usearch.index import Index

    from sourcepage.retrieval.ann import EF_SEARCH

    index = Index.restore(str(path), view=True)
    index.expansion_search = EF_SEARCH
    return lambda q, k: index.search(q, k, threads=1).keys.astype(np.int64)


#: name → (importable module, build, open); "sourcepage" is ``retrieval.ann`` (the dependency)
LIBRARIES: dict[str, tuple[str, Callable[..., Any], Callable[..., Any]]] = {
    "sourcepage": ("faiss", _ours_build, _ours_open),
    "faiss-cpu": ("faiss", _faiss_build, _faiss_open),
    "hnswlib": ("hnswlib", _hnswlib_build, _hnswlib_open),
    "usearch": ("usearch", _usearch_build, _usearch_open),
}


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _rss_mb() -> float:
    return _status_mb("VmRSS")


def _peak_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ``ru_maxrss``, not carried over
    from the parent that spawned it)."""
    return _status_mb("VmHWM")


def _build_phase(job: tuple[str, str, str]) -> dict[str, Any]:
    lib, vec_path, out = job
    vectors = np.load(vec_path)
    importlib.import_module(LIBRARIES[lib][0])
    before = _rss_mb()
    t0 = time.perf_counter()
    LIBRARIES[lib][1](vectors, Path(out))
    sec = time.perf_counter() - t0
    disk = sum(f.stat().st_size for f in Path(out).parent.glob(Path(out).name + "*"))
    return {
        "build_seconds": sec,
        "peak_mb": _peak_mb(),
        "build_added_mb": _peak_mb() - before,
        "disk_bytes": disk,
    }


def _query_phase(job: tuple[str, str, str, str, int]) -> dict[str, Any]:
    lib, vec_path, q_path, out, repeats = job
    vectors = np.load(vec_path, mmap_mode="r").view(np.ndarray)
    queries = np.load(q_path)
    importlib.import_module(LIBRARIES[lib][0])
    base = _rss_mb()
    t0 = time.perf_counter()
    search = LIBRARIES[lib][2](Path(out), vectors)
    load_ms = (time.perf_counter() - t0) * 1000
    search(queries[0], TOP)  # warm-up
    ids, ms = [], []
    for q in queries:
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            found = search(q, TOP)
            runs.append((time.perf_counter() - t0) * 1000)
        ms.append(float(np.median(runs)))
        ids.append(np.asarray(found, dtype=np.int64)[:TOP])
    peak = _peak_mb()
    return {
        "load_ms": load_ms,
        "ms": ms,
        "ids": [i.tolist() for i in ids],
        "query_peak_mb": peak,
        "query_added_mb": peak - base,
    }


def _exact_phase(job: tuple[str, str, int]) -> dict[str, Any]:
    vec_path, q_path, repeats = job
    vectors = np.load(vec_path, mmap_mode="r").view(np.ndarray)
    queries = np.load(q_path)
    truth = exact_top(vectors, queries)
    ms = []
    for q in queries:
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            s = vectors @ q
            np.argpartition(-s, TOP - 1)[:TOP]
            runs.append((time.perf_counter() - t0) * 1000)
        ms.append(float(np.median(runs)))
    return {"truth": truth.tolist(), "ms": ms, "query_peak_mb": _peak_mb()}


def _one_thread(job: tuple[Callable[[Any], dict[str, Any]], Any]) -> dict[str, Any]:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # BLAS and OpenMP: every row on one thread, as the title says
        return job[0](job[1])


def _fresh(fn: Callable[[Any], dict[str, Any]], job: Any) -> dict[str, Any]:
    with ProcessPool(1) as pool:
        return pool.map(_one_thread, [(fn, job)])[0]


def _latency(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95))}


def installed(lib: str) -> bool:
    return importlib.util.find_spec(LIBRARIES[lib][0]) is not None


def run_dense_bench(
    vectors: np.ndarray,
    queries: np.ndarray,
    work: str | Path,
    libraries: list[str] | None = None,
    repeats: int = 3,
    source: str = "synthetic",
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Exact search and each installed library in ``libraries`` (default: ours) on
    ``vectors`` / ``queries``; rows as described in the module docstring."""
    from sourcepage.bench.speed import machine_info
    from sourcepage.retrieval.ann import EF_CONSTRUCTION, EF_SEARCH, LIBRARY, M

    say = progress or (lambda _m: None)
    work = Path(work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    vec_path, q_path = work / "vectors.npy", work / "queries.npy"
    np.save(vec_path, np.ascontiguousarray(vectors, dtype=np.float32))
    np.save(q_path, np.ascontiguousarray(queries, dtype=np.float32))
    say("exact search")
    exact = _fresh(_exact_phase, (str(vec_path), str(q_path), repeats))
    truth = np.asarray(exact["truth"])
    rows: dict[str, Any] = {
        "exact": {
            "build_seconds": 0.0,
            "recall_at_100": 1.0,
            "query_peak_mb": exact["query_peak_mb"],
            "disk_bytes": vec_path.stat().st_size,
            **_latency(exact["ms"]),
        }
    }
    for lib in libraries or ["sourcepage"]:
        if lib not in LIBRARIES:
            raise ValueError(f"unknown ANN library {lib!r}; known: {', '.join(LIBRARIES)}")
        if not installed(lib):
            rows[lib] = {"installed": False}
            continue
        say(f"{lib}: build")
        out = work / lib / "ann.index"
        out.parent.mkdir()
        built = _fresh(_build_phase, (lib, str(vec_path), str(out)))
        say(f"{lib}: queries")
        q = _fresh(_query_phase, (lib, str(vec_path), str(q_path), str(out), repeats))
        recall = np.mean([len(set(i) & set(t)) / TOP for i, t in zip(q["ids"], truth.tolist(), strict=True)])
        rows[lib] = {
            **built,
            "load_ms": q["load_ms"],
            "query_peak_mb": q["query_peak_mb"],
            "query_added_mb": q["query_added_mb"],
            "recall_at_100": float(recall),
            **_latency(q["ms"]),
        }
    return {
        "machine": machine_info(),
        "settings": {
            "vectors": len(vectors),
            "dim": int(vectors.shape[1]),
            "queries": len(queries),
            "source": source,
            "k": TOP,
            "repeats": repeats,
            "M": M,
            "ef_construction": EF_CONSTRUCTION,
            "ef_search": EF_SEARCH,
            "library": LIBRARY,
            "threads": 1,
        },
        "rows": rows,
    }


def store_vectors(store: str | Path, questions: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """The MiniLM chunk embeddings of a store's current raw dense index and its questions'
    MiniLM query vectors (the real-embedding case)."""
    from sourcepage.evaluation.questions import read_questions
    from sourcepage.retrieval.dense import MODELS
    from sourcepage.retrieval.index import current_build
    from sourcepage.retrieval.methods import parse_method
    from sourcepage.store.db import Store

    st = Store(store)
    try:
        path = current_build(st, "raw", parse_method("dense"))
    finally:
        st.close()
    if path is None:
        raise ValueError(f"{store} has no dense index of the raw text: run `sourcepage index --method dense`")
    vectors = np.load(path / "embeddings.npy")
    qs = np.stack([MODELS["minilm"].query(q.question) for q in read_questions(questions)])
    return vectors, qs


def write_json(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
