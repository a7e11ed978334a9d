"""An inverted index of precomputed term weights, in document-aligned shards, built in
bounded memory and memory-mapped at query time (BM25's storage; the formula is the
caller's, see retrieval.bm25).

Build, two passes over the token lists of the documents, streamed once:

1. each document's tokens get provisional term ids; every ``shard_docs`` documents the
   shard's (document, term, term frequency) triples and document lengths are spilled to
   disk and the global document frequencies updated;
2. with the global statistics known (document frequency, document count, mean length:
   global IDF is exact, not per shard), terms are renumbered in sorted order and each
   shard's weights are computed by ``weigh`` and written as column-sorted arrays.

Memory holds one shard's triples and the vocabulary, never the collection. Layout::

    postings.json               documents, shards, mean length, vocabulary size
    vocab.bin, vocab.offsets.npy  the sorted terms (UTF-8), looked up by binary search
    df.npy                      document frequency per term id
    shard-NNNN/terms.npy        term ids present in the shard (sorted, int32)
    shard-NNNN/indptr.npy       postings of terms[i]: indptr[i]:indptr[i+1] (int64)
    shard-NNNN/docs.npy         document index within the shard per posting (int32, ascending per term)
    shard-NNNN/weights.npy      the term's weight in that document per posting (float64)

A query adds, shard by shard, each query term's weights to its documents' scores, in
query order (so sums are bit-identical to a single in-memory matrix).
"""

from __future__ import annotations

import bisect
import json
import mmap
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.store.files import load_array

#: documents per shard: ~110 postings a 156-word chunk make a 10^5-document shard ~0.3 GB to build
SHARD_DOCS = 100_000
FORMAT = 1

#: weigh(term ids, term frequencies, document lengths, df per term id, documents, mean length)
Weigh = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, float], np.ndarray]


class Vocabulary:
    """Sorted terms, looked up by binary search over their UTF-8 bytes (sorted UTF-8 bytes
    are sorted code points, i.e. Python's string order): no dictionary to build at load."""

    CACHE = 1 << 16

    def __init__(self, blob: bytes | mmap.mmap, offsets: np.ndarray):
        self._blob = blob
        self._off = memoryview(np.ascontiguousarray(offsets, dtype=np.int64))  # items are ints
        self._n = len(offsets) - 1
        self._seen: dict[str, int] = {}

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> bytes:
        return self._blob[self._off[i] : self._off[i + 1]]

    def id(self, term: str) -> int:
        """The term's id, or -1 when the index does not hold it (looked-up terms are cached)."""
        found = self._seen.get(term)
        if found is None:
            key = term.encode("utf-8")
            i = bisect.bisect_left(self, key)
            found = i if i < self._n and self[i] == key else -1
            if len(self._seen) >= self.CACHE:
                self._seen.clear()
            self._seen[term] = found
        return found

    def terms(self) -> Iterator[str]:
        for i in range(self._n):
            yield self[i].decode("utf-8")


@dataclass
class Shard:
    """One document-aligned part of the postings."""

    start: int  # global index of its first document
    n_docs: int
    terms: np.ndarray
    indptr: np.ndarray
    docs: np.ndarray
    weights: np.ndarray

    def scores(self, term_ids: np.ndarray) -> np.ndarray:
        """Sum of the weights of ``term_ids`` (repeats count again) per document of the shard."""
        out = np.zeros(self.n_docs, dtype=np.float64)
        if not len(self.terms):
            return out
        pos = np.searchsorted(self.terms, term_ids)
        for t, p in zip(term_ids.tolist(), pos.tolist(), strict=True):
            if p < len(self.terms) and self.terms[p] == t:
                a, b = int(self.indptr[p]), int(self.indptr[p + 1])
                out[self.docs[a:b]] += self.weights[a:b]  # a term holds a document once
        return out


@dataclass
class Postings:
    """The loaded index (arrays memory-mapped unless built in memory)."""

    vocab: Vocabulary
    df: np.ndarray
    n_docs: int
    mean_length: float
    shards: list[Shard]

    def term_ids(self, tokens: Iterable[str]) -> np.ndarray:
        """Ids of the tokens the index holds, in query order (unknown tokens dropped)."""
        ids = [self.vocab.id(t) for t in tokens]
        return np.array([i for i in ids if i >= 0], dtype=np.int64)

    def shard_scores(self, term_ids: np.ndarray) -> list[np.ndarray]:
        return [s.scores(term_ids) for s in self.shards]


def _save(folder: Path, name: str, a: np.ndarray) -> None:
    np.save(folder / name, a, allow_pickle=False)


class _Pass1:
    """Provisional term ids, per-shard (document, term, tf) triples spilled to ``scratch``."""

    def __init__(self, scratch: Path | None, shard_docs: int):
        self.scratch, self.shard_docs = scratch, shard_docs
        self.vocab: defaultdict[str, int] = defaultdict()
        self.vocab.default_factory = self.vocab.__len__  # a new term gets the next id
        self.df = np.zeros(1 << 16, dtype=np.int64)
        self.spilled: list[Path | dict[str, np.ndarray]] = []
        self.ids: list[np.ndarray] = []
        self.lengths: list[int] = []
        self.n_docs = 0
        self.total_length = 0

    def add(self, tokens: list[str]) -> None:
        get = self.vocab.__getitem__
        self.ids.append(np.fromiter(map(get, tokens), dtype=np.int32, count=len(tokens)))
        self.lengths.append(len(tokens))
        if len(self.lengths) == self.shard_docs:
            self.spill()

    def spill(self) -> None:
        if not self.lengths:
            return
        lengths = np.array(self.lengths, dtype=np.int64)
        flat = np.concatenate(self.ids) if self.ids else np.zeros(0, dtype=np.int32)
        doc = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        keys, tf = np.unique((doc << 32) | flat.astype(np.int64), return_counts=True)
        triples = {
            "docs": (keys >> 32).astype(np.int32),
            "terms": (keys & 0xFFFFFFFF).astype(np.int32),
            "tf": tf.astype(np.int32),
            "lengths": lengths.astype(np.int32),
        }
        if len(self.vocab) > len(self.df):
            self.df = np.concatenate([self.df, np.zeros(max(len(self.vocab), 2 * len(self.df)), np.int64)])
        self.df[: len(self.vocab)] += np.bincount(triples["terms"], minlength=len(self.vocab))
        if self.scratch is None:
            self.spilled.append(triples)
        else:
            path = self.scratch / f"pass1-{len(self.spilled):04d}.npz"
            np.savez(path, **triples)
            self.spilled.append(path)
        self.n_docs += len(lengths)
        self.total_length += int(lengths.sum())
        self.ids, self.lengths = [], []


def build_postings(
    token_lists: Iterable[list[str]],
    weigh: Weigh,
    folder: Path | None = None,
    shard_docs: int = SHARD_DOCS,
    progress: Callable[[int], None] | None = None,
) -> Postings:
    """Build the postings of ``token_lists`` (one list a document, streamed once) with
    weights from ``weigh``; written to ``folder`` and memory-mapped, or kept in memory
    when ``folder`` is None."""
    if shard_docs < 1:
        raise ValueError(f"shard_docs must be at least 1, got {shard_docs}")
    scratch = None if folder is None else folder / ".pass1"
    if scratch is not None:
        scratch.mkdir(parents=True)
    p1 = _Pass1(scratch, shard_docs)
    for i, tokens in enumerate(token_lists, 1):
        p1.add(tokens)
        if progress and i % 10_000 == 0:
            progress(i)
    p1.spill()
    n_terms = len(p1.vocab)
    terms_sorted = sorted(p1.vocab)
    new_id = np.empty(n_terms, dtype=np.int32)
    new_id[np.fromiter((p1.vocab[t] for t in terms_sorted), dtype=np.int64, count=n_terms)] = np.arange(
        n_terms, dtype=np.int32
    )
    df = np.empty(n_terms, dtype=np.int64)
    df[new_id] = p1.df[:n_terms]
    encoded = [t.encode("utf-8") for t in terms_sorted]
    offsets = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    blob = b"".join(encoded)
    del encoded, terms_sorted
    p1.vocab.clear()
    n_docs = p1.n_docs
    # bm25s's mean: np.mean of the integer lengths, i.e. their exact sum over the count
    mean_length = float(p1.total_length) / n_docs if n_docs else 0.0
    shards: list[Shard] = []
    start = 0
    for k, item in enumerate(p1.spilled):
        tri = dict(np.load(item)) if isinstance(item, Path) else item
        terms = new_id[tri["terms"]]
        lengths = tri["lengths"]
        w = weigh(terms, tri["tf"].astype(np.float64), lengths[tri["docs"]], df, n_docs, mean_length)
        order = np.argsort(terms, kind="stable")  # by term, documents stay ascending
        terms, docs, w = terms[order], tri["docs"][order], w[order]
        present, first = np.unique(terms, return_index=True)
        indptr = np.append(first, len(terms)).astype(np.int64)
        arrays = {"terms": present.astype(np.int32), "indptr": indptr, "docs": docs, "weights": w}
        if folder is not None:
            sub = folder / f"shard-{k:04d}"
            sub.mkdir()
            for name, a in arrays.items():
                _save(sub, f"{name}.npy", a)
        shards.append(Shard(start, len(lengths), **arrays))
        start += len(lengths)
        if isinstance(item, Path):
            item.unlink()
    if folder is None:
        return Postings(Vocabulary(blob, offsets), df, n_docs, mean_length, shards)
    shutil.rmtree(scratch)  # type: ignore[arg-type]
    (folder / "vocab.bin").write_bytes(blob)
    _save(folder, "vocab.offsets.npy", offsets)
    _save(folder, "df.npy", df)
    meta = {
        "format": FORMAT,
        "documents": n_docs,
        "mean_length": mean_length,
        "terms": n_terms,
        "shards": [{"start": s.start, "documents": s.n_docs, "postings": len(s.docs)} for s in shards],
    }
    (folder / "postings.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return load_postings(folder)


def load_postings(folder: Path) -> Postings:
    """The postings in ``folder``, arrays memory-mapped (pages are read on use)."""
    meta: dict[str, Any] = json.loads((folder / "postings.json").read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{folder}: postings format {meta.get('format')}, expected {FORMAT}")

    def arr(path: Path) -> np.ndarray:
        # a plain ndarray view of the map: slicing a np.memmap costs ~5 µs in __array_finalize__
        return load_array(path, mmap=True)

    shards = []
    for k, s in enumerate(meta["shards"]):
        sub = folder / f"shard-{k:04d}"
        shards.append(
            Shard(
                s["start"],
                s["documents"],
                *(arr(sub / f"{n}.npy") for n in ("terms", "indptr", "docs", "weights")),
            )
        )
    blob_path = folder / "vocab.bin"
    if blob_path.stat().st_size:
        with open(blob_path, "rb") as f:
            blob: bytes | mmap.mmap = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    else:
        blob = b""
    vocab = Vocabulary(blob, arr(folder / "vocab.offsets.npy"))
    return Postings(vocab, arr(folder / "df.npy"), meta["documents"], meta["mean_length"], shards)
