"""Quick processes and scale: no heavy import for a BM25 search, lazy documents,
memory-mapped dense float32, ``bench --scale`` and ``bench --load`` end to end (small)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from sourcepage.bench.load import serve_and_load
from sourcepage.bench.scale import run_scale_bench, synthetic_beir
from sourcepage.cli import app
from sourcepage.retrieval import dense
from sourcepage.retrieval.methods import parse_method
from sourcepage.retrieval.search import Searcher

HEAVY = ("sklearn", "torch", "pandas", "matplotlib", "numba", "scipy", "transformers", "faiss")


def test_bm25_search_imports_nothing_heavy(fresh_store: Path) -> None:
    """The CLI module and a bm25 ranking in a new interpreter import none of the heavy
    packages (the shipped answer policy loads its models only when a search is decided)."""
    code = (
        "import sys; import sourcepage.cli; from sourcepage import api;"
        f"r = api.searcher({str(fresh_store)!r}).rank('group lockbox', 'bm25', k=10);"
        "assert r.hits;"
        f"print(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == ""


def test_searcher_reads_documents_on_demand(safety_store: Path) -> None:
    s = Searcher(safety_store, "raw")
    assert s.documents._all is None  # type: ignore[attr-defined]
    s.rank("group lockbox", "bm25", k=5)
    assert s.documents._all is None  # type: ignore[attr-defined]  # no filter: no full read
    assert s.documents["machine_guarding"].doc_id == "machine_guarding"
    assert "nope" not in s.documents and len(s.documents) == 4
    hits = s.rank("group lockbox", "bm25", k=5, filters={"jurisdiction": "UK"}).hits
    assert {h.page_id.split("#")[0] for h in hits} == {"hse_ppe_at_work"}


def test_dense_scores_float32_memory_mapped(safety_store: Path) -> None:
    vectors = Searcher(safety_store, "raw").index(parse_method("dense:e5-small")).model.vectors
    assert vectors.dtype == np.float32 and isinstance(vectors.base, np.memmap)
    q = dense.MODELS["e5-small"].query("oxygen level before entry")
    got = dense.scores(vectors, q)
    want = np.asarray(vectors, dtype=np.float64) @ q.astype(np.float64)
    assert got.dtype == np.float64 and np.allclose(got, want, atol=1e-6)
    assert list(np.argsort(-got, kind="stable")[:5]) == list(np.argsort(-want, kind="stable")[:5])


def test_synthetic_collection_deterministic(tmp_path: Path) -> None:
    a = synthetic_beir(tmp_path / "a", 50, queries=5)
    b = synthetic_beir(tmp_path / "b", 50, queries=5)
    assert (a / "corpus.jsonl").read_bytes() == (b / "corpus.jsonl").read_bytes()
    docs = [json.loads(x) for x in (a / "corpus.jsonl").read_text().splitlines()]
    qs = [json.loads(x) for x in (a / "queries.jsonl").read_text().splitlines()]
    assert len(docs) == 50 and len(qs) == 5
    by_id = {d["_id"]: d["text"] for d in docs}
    assert all(q["text"] in by_id[q["doc"]] for q in qs)  # each question is a run of its document


def test_scale_bench_end_to_end(tmp_path: Path) -> None:
    r = run_scale_bench(300, tmp_path / "w", queries=10, repeats=1)
    assert r["ingest"]["chunks"]["raw"] == 300 and r["index"]["chunks"] == 300
    assert r["index"]["disk_bytes"] > 0 and r["index"]["peak_mb"] > 0 and r["index"]["postings"] > 300
    assert r["query"]["p50"] > 0 and r["query"]["p95"] >= r["query"]["p50"]
    assert r["bm25s"]["tokens"] > 300 * 20 and r["bm25s"]["x_ours_p50"] > 0


def test_scale_bench_without_ingest_matches_store_path(tmp_path: Path) -> None:
    """--no-ingest indexes the texts directly: the same postings as the store's index."""
    r = run_scale_bench(200, tmp_path / "w", queries=5, repeats=1, peer=False, ingest=False)
    assert r["ingest"] is None and r["index"]["chunks"] == 200 and r["query"]["p50"] > 0
    s = run_scale_bench(200, tmp_path / "w", queries=5, repeats=1, peer=False)
    assert s["index"]["postings"] == r["index"]["postings"]
    assert json.loads((tmp_path / "w" / "index.json").read_text())["chunks"] == 200


def test_bench_scale_cli(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app, ["bench", "--scale", "120", "--work", str(tmp_path / "w"), "--queries", "5", "--no-peer"]
    )
    assert res.exit_code == 0, res.output
    assert "BM25 at scale — 120 chunks" in res.output


def test_load_on_loopback(safety_store: Path) -> None:
    r = serve_and_load(
        safety_store, ["group lockbox", "oxygen before entry"], workers=1, clients=4, requests=40
    )
    assert r["requests"] == 40 and r["errors"] == 0 and r["requests_per_s"] > 0
    assert r["p95_ms"] >= r["p50_ms"] > 0
