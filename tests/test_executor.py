"""Executors: in process and a process pool give the same results, in order; indexes
built through either are identical."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from sourcepage.executor import InProcess, ProcessPool, make_executor
from sourcepage.retrieval.index import build_indexes, current_build, load_index
from sourcepage.retrieval.methods import parse_method
from sourcepage.store.db import Store


def test_make_executor_by_name_and_count() -> None:
    assert isinstance(make_executor(), InProcess) and isinstance(make_executor("inline"), InProcess)
    assert isinstance(make_executor(1), InProcess) and isinstance(make_executor(0), InProcess)
    assert make_executor(3).workers == 3 and isinstance(make_executor(3), ProcessPool)
    assert make_executor("process:2").workers == 2
    assert make_executor("process").workers >= 1
    for bad in ("threads", "process:0", "process:x", "inline:2"):
        with pytest.raises(ValueError, match="unknown executor"):
            make_executor(bad)


def test_both_executors_map_in_order() -> None:
    items = [5, 3, 9, 1, 7, 2]
    with ProcessPool(2) as pool:
        assert pool.map(abs, [-x for x in items]) == items
        assert pool.map(abs, []) == []
    assert InProcess().map(abs, [-x for x in items]) == items


def _build_files(store: Path, version: str, method: str) -> dict[str, object]:
    """The files of the current build (shard folders included), byte for byte, except
    params.json without its timings. The BM25 vocabulary is numbered in sorted order, so
    its arrays do not depend on the process (hash randomisation)."""
    st = Store(store)
    try:
        path = current_build(st, version, parse_method(method))
    finally:
        st.close()
    assert path is not None
    files: dict[str, object] = {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }
    params = json.loads(files.pop("params.json"))  # type: ignore[arg-type]
    for timing in ("build_seconds", "built_at"):
        params.pop(timing)
    files["params.json"] = params
    return files


def test_build_indexes_identical_in_process_and_in_a_pool(fresh_store: Path, tmp_path: Path) -> None:
    other = Path(shutil.copytree(fresh_store, tmp_path / "other"))
    versions, methods = ["raw", "cleaned"], ["bm25", "rrf:bm25+lsa"]  # a fusion: its bases are built
    inline = build_indexes(fresh_store, versions, methods)
    with ProcessPool(2) as pool:
        pooled = build_indexes(other, versions, methods, executor=pool)
    assert [(p.parent.parent.name, p.parent.name) for p in inline] == [
        ("raw", "bm25"),
        ("raw", "lsa"),
        ("cleaned", "bm25"),
        ("cleaned", "lsa"),
    ]
    assert [(p.parent.parent.name, p.parent.name) for p in pooled] == [
        (p.parent.parent.name, p.parent.name) for p in inline
    ]
    for v in versions:
        for m in ("bm25", "lsa"):
            assert _build_files(fresh_store, v, m) == _build_files(other, v, m), (v, m)
    a, b = Store(fresh_store), Store(other)
    try:
        for m in ("bm25", "lsa"):
            ia = load_index(a, "cleaned", parse_method(m))
            ib = load_index(b, "cleaned", parse_method(m))
            assert ia is not None and ib is not None
            assert np.array_equal(ia.scores("group lockbox"), ib.scores("group lockbox"))
    finally:
        a.close()
        b.close()


def test_a_pools_imap_gives_results_in_order_as_they_come() -> None:
    """``imap`` queues every job at once and yields the results in the items' order; a
    pool closed with jobs still queued drops them instead of running them out."""
    import time

    with ProcessPool(2) as pool:
        got = pool.imap(abs, [-5, 3, -9, 1])
        assert next(got) == 5
        assert list(got) == [3, 9, 1]
        assert list(pool.imap(abs, [])) == []
        pending = pool.imap(time.sleep, [0.2] * 40)
        next(pending)
        t = time.perf_counter()
    assert time.perf_counter() - t < 2.0  # not 40 x 0.2 s / 2 workers


def test_chunks_embedded_in_a_pool_as_in_process(
    fresh_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool's workers embed the chunks in jobs all queued at once (``imap``), each job's
    vectors cached as it comes: the cache ends the same as one process leaves it."""
    from sourcepage.retrieval import index as index_module
    from sourcepage.retrieval.dense import cache_key, text_sha

    other = Path(shutil.copytree(fresh_store, tmp_path / "other"))
    monkeypatch.setattr(index_module, "EMBED_JOB_TEXTS", 3)  # several jobs for two workers
    method = parse_method("dense")
    ticks: list[tuple[int, int]] = []
    one, two = Store(fresh_store), Store(other)
    try:
        n = index_module.embed_through(InProcess(), one, ["raw"], method)
        with ProcessPool(2) as pool:
            m = index_module.embed_through(pool, two, ["raw"], method, lambda d, t: ticks.append((d, t)))
        assert n == m >= 10
        assert ticks[-1] == (m, m) and len(ticks) == -(-m // 3)
        key = cache_key(method.spec.encoder(method))
        shas = sorted({text_sha(t) for _, t in one.iter_chunk_texts("raw")})
        a, b = one.cached_embeddings(key, shas), two.cached_embeddings(key, shas)
        assert sorted(a) == sorted(b) == shas
        assert all(np.array_equal(a[s], b[s]) for s in shas)
    finally:
        one.close()
        two.close()
