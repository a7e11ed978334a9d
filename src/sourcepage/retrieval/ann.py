"""The approximate nearest-neighbour index of a large dense index: an HNSW graph (faiss).

Below ``ANN_MIN_CHUNKS`` chunks dense search stays exact (a float32 matrix-vector product
over the memory-mapped embeddings, ~16 ms per 100 000 chunks here); from there on a dense
build also writes ``ann.faiss`` beside ``embeddings.npy``. faiss-cpu (MIT) was chosen
against hnswlib and usearch on recall@100, build time, memory and latency (docs/speed.md,
docs/experiments/ann-library.md; ``sourcepage bench --scale N --dense --ann-library all``).

- ``faiss.IndexHNSWFlat`` with inner product (the vectors are unit length: cosine), saved
  in faiss's own format (no pickle) and opened with ``IO_FLAG_MMAP_IFC``: its copy of the
  vectors stays memory-mapped (read on use, shared by processes); the graph is read.
- Built on one OpenMP thread: faiss's HNSW draws node levels from its fixed seed, and one
  thread adds them in order, so equal embeddings give a byte-identical file and identical
  results (tested); labels are chunk positions.
- ``search`` returns the nearest chunks it finds and their cosines (faiss's float32 inner
  products: exact search's values to ~1e-7); asked for a tenth of all chunks or more, it
  searches exactly instead (a filtered ranking that keeps asking for more ends there).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: from this many chunks a dense index gets an approximate index (and "auto" search uses it)
ANN_MIN_CHUNKS = 50_000
#: how dense search may run
DENSE_SEARCH = ("auto", "exact", "ann")


@dataclass(frozen=True)
class DenseSettings:
    """The dense method's settings (its ``settings_type``, experiment.yaml section ``dense``):
    ``search`` "auto" (an approximate index from ``ANN_MIN_CHUNKS`` chunks up, exact below),
    "exact" or "ann" (always). Here beside the approximate index it chooses."""

    search: str = "auto"

    def __post_init__(self) -> None:
        if self.search not in DENSE_SEARCH:
            raise ValueError(f"dense search {self.search!r}: use one of {', '.join(DENSE_SEARCH)}")


#: the file beside embeddings.npy
ANN_FILE = "ann.faiss"
#: the library (PyPI name) and its HNSW parameters: M links per node, candidate-list sizes
#: when adding and when searching (≥ the 100 neighbours of recall@100)
LIBRARY = "faiss-cpu"
M = 16
EF_CONSTRUCTION = 200
EF_SEARCH = 256
#: asked for at least 1/EXACT_FRACTION of all chunks, search exactly
EXACT_FRACTION = 10


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as e:
        raise RuntimeError(
            "an approximate dense index needs the package faiss-cpu (pip install faiss-cpu)"
        ) from e
    return faiss


@contextmanager
def _one_thread(faiss: Any):  # type: ignore[no-untyped-def]
    n = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(n)


def build(vectors: np.ndarray, path: Path) -> None:
    """Write the HNSW index of ``vectors`` (float32, unit length; label = row) to ``path``
    atomically, on one thread (deterministic)."""
    faiss = _faiss()
    index = faiss.IndexHNSWFlat(int(vectors.shape[1]), M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = EF_CONSTRUCTION
    index.hnsw.efSearch = EF_SEARCH
    with _one_thread(faiss):
        for a in range(0, len(vectors), 65_536):  # a memory-mapped matrix is read in parts
            index.add(np.ascontiguousarray(vectors[a : a + 65_536], dtype=np.float32))
    tmp = path.with_name(path.name + ".tmp")
    faiss.write_index(index, str(tmp))
    tmp.replace(path)


def describe(n: int) -> dict[str, object]:
    """What ``ann.json`` records beside the index: library, version and parameters."""
    return {
        "library": LIBRARY,
        "version": _faiss().__version__,
        "index": "IndexHNSWFlat",
        "file": ANN_FILE,
        "vectors": n,
        "metric": "inner product",
        "M": M,
        "ef_construction": EF_CONSTRUCTION,
        "ef_search": EF_SEARCH,
        "threads": 1,
    }


class AnnIndex:
    """A saved HNSW index over the rows of ``vectors``."""

    def __init__(self, index: Any, vectors: np.ndarray):
        self.index, self.vectors = index, vectors
        self.params = _faiss().SearchParametersHNSW(efSearch=EF_SEARCH)

    @classmethod
    def load(cls, path: Path, vectors: np.ndarray) -> AnnIndex:
        faiss = _faiss()
        index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY)
        if index.ntotal != len(vectors) or index.d != vectors.shape[1]:
            raise ValueError(f"{path}: not an approximate index of the {len(vectors)} embeddings beside it")
        return cls(index, vectors)

    def search(self, query: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
        """(chunk positions, cosines as float64) of the ``m`` nearest chunks found."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        n = len(self.vectors)
        m = min(m, n)
        if m * EXACT_FRACTION >= n:
            s = self.vectors @ q
            ids = np.argpartition(-s, m - 1)[:m] if m < n else np.arange(n)
            return ids.astype(np.int64), s[ids].astype(np.float64)
        return self.nearest(q, m)

    def nearest(self, query: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
        """As ``search``, always from the graph (no exact fallback; the benchmark's path).
        The scores are faiss's float32 inner products with its copy of the vectors: equal to
        exact search's to ~1e-7, and the embeddings file is not read at all."""
        q = np.asarray(query, dtype=np.float32).reshape(1, -1)
        dist, labels = self.index.search(q, max(1, min(m, len(self.vectors))), params=self.params)
        keep = labels[0] >= 0
        return labels[0][keep].astype(np.int64), dist[0][keep].astype(np.float64)
