"""Ray as the executor: a local Ray cluster on the loopback interface runs ingest
(extraction and chunking), index builds (dense embedding in batches) and a sweep, and
every output equals the one made without Ray.

One local cluster (2 CPUs) serves the module; the CLI commands in it join that cluster
(``RayExecutor`` uses a Ray already running in the process). About 40-60 s on 2 shared
cores, most of it the MiniLM model loading in each Ray worker."""

from __future__ import annotations

import csv
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from sourcepage.cli import app
from sourcepage.executor import RayExecutor, make_executor
from sourcepage.ingest import ingest
from sourcepage.records import TEXT_VERSIONS
from sourcepage.retrieval.index import build_indexes, current_build, load_index
from sourcepage.retrieval.methods import parse_method
from sourcepage.store.db import Store
from sourcepage.sweep.grid import Grid
from sourcepage.sweep.sweep import run_sweep

pytest.importorskip("ray", reason="the Ray executor needs the ray package (the dev extra has it)")
pytestmark = pytest.mark.slow

OSHA = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
#: two real PDFs of the OSHA mirror: a 2-page fact sheet and a 45-chunk booklet
SUBSET = ("osha-factsheet-lockout-tagout", "osha3138-permit-required-confined-spaces")
QUERIES = ("Who may remove a lockout device?", "What is tested before entering a confined space?")


@pytest.fixture(scope="module")
def ray_ex() -> Iterator[RayExecutor]:
    ex = RayExecutor(cpus=2)
    try:
        yield ex
    finally:
        ex.close()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, safety_corpus: Path) -> Path:
    """Two PDFs of the OSHA corpus (its manifest's rows), or the generated safety corpus
    where the mirror is absent."""
    if not (OSHA / "manifest.csv").is_file():
        return safety_corpus
    d = tmp_path_factory.mktemp("osha2")
    (d / "pdf").mkdir()
    with open(OSHA / "manifest.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    keep = [r for r in rows if r["doc_id"] in SUBSET]
    with open(d / "manifest.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(keep)
    for r in keep:
        shutil.copy(OSHA / "pdf" / r["file"], d / "pdf" / r["file"])
    return d


@pytest.fixture(scope="module")
def stores(corpus: Path, ray_ex: RayExecutor, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The corpus ingested the usual way (extraction in limited worker processes) and
    through Ray (extraction and chunking as Ray tasks)."""
    d = tmp_path_factory.mktemp("ray_stores")
    plain = ingest(corpus, d / "plain")
    rayed = ingest(corpus, d / "ray", executor=ray_ex)
    assert not plain.failed and not rayed.failed
    assert plain.extracted == rayed.extracted and plain.chunks == rayed.chunks
    return d / "plain", d / "ray"


def _contents(path: Path) -> dict:
    st = Store(path)
    try:
        docs = [d.doc_id for d in st.documents()]
        return {
            "chunks": {v: list(st.iter_chunk_texts(v)) for v in TEXT_VERSIONS},
            "pages": {(d, v): st.page_texts(d, v) for d in docs for v in ("raw", "cleaned")},
            "fingerprints": {v: st.chunk_fingerprint(v) for v in TEXT_VERSIONS},
        }
    finally:
        st.close()


def test_local_cluster_is_on_loopback(ray_ex: RayExecutor) -> None:
    import ray

    assert ray_ex.workers == 2
    assert [n["NodeManagerAddress"] for n in ray.nodes()] == ["127.0.0.1"]
    assert ray_ex.map(abs, [-3, 2, -1]) == [3, 2, 1]  # in order
    with pytest.raises(ValueError, match="invalid literal"):  # the job's own exception
        ray_ex.map(int, ["1", "x"])


def test_ingest_through_ray_equals_the_process_path(stores: tuple[Path, Path]) -> None:
    plain, rayed = (_contents(p) for p in stores)
    assert plain["chunks"]["raw"] and plain == rayed  # same chunk ids and texts, page texts


def test_indexes_through_ray_equal_the_process_path(stores: tuple[Path, Path], ray_ex: RayExecutor) -> None:
    """BM25 on two versions and dense (MiniLM, embedded in batches as Ray tasks) on raw:
    the same arrays, bit for bit, and the same BM25 rankings."""
    plain, rayed = stores
    for path, ex in ((plain, None), (rayed, ray_ex)):
        build_indexes(path, ["raw", "cleaned"], ["bm25"], executor=ex)
        build_indexes(path, "raw", ["dense"], executor=ex)
    a, b = Store(plain), Store(rayed)
    try:
        for version, name in (("raw", "bm25"), ("cleaned", "bm25"), ("raw", "dense")):
            m = parse_method(name)
            fa, fb = current_build(a, version, m), current_build(b, version, m)
            arrays = sorted(p.relative_to(fa) for p in fa.rglob("*.npy"))  # type: ignore[union-attr]
            assert arrays and arrays == sorted(p.relative_to(fb) for p in fb.rglob("*.npy"))  # type: ignore[union-attr]
            for rel in arrays:
                assert np.array_equal(np.load(fa / rel), np.load(fb / rel)), (version, name, rel)  # type: ignore[operator]
            ia, ib = load_index(a, version, m), load_index(b, version, m)
            assert ia is not None and ib is not None and ia.chunk_ids == ib.chunk_ids
            if name == "bm25":
                for q in QUERIES:
                    sa, sb = ia.scores(q), ib.scores(q)
                    assert np.array_equal(sa, sb) and sa.max() > 0
                    assert list(np.argsort(-sa, kind="stable")) == list(np.argsort(-sb, kind="stable"))
    finally:
        a.close()
        b.close()


GRID = {
    "base": {"bootstrap": 50, "design": [{"versions": ["raw"], "methods": ["bm25", "lsa", "rrf:bm25+lsa"]}]},
    "factors": {"bm25": {"bm25.k1": [0.9, 1.5]}, "rrf": {"rrf.k": [10, 60]}},
}


def test_sweep_through_ray_equals_inline(safety_corpus: Path, ray_ex: RayExecutor, tmp_path: Path) -> None:
    """A 3-cell sweep in this process and through ``sourcepage sweep --ray``: the same
    cells with the same metrics."""
    from test_sweep import DEV, _metrics, _write

    dev = _write(tmp_path / "dev.jsonl", DEV)
    grid = tmp_path / "grid.yaml"
    grid.write_text(json.dumps(GRID))  # JSON is YAML
    run_sweep(safety_corpus, dev, tmp_path / "inline", Grid.from_yaml(grid), executor=make_executor("inline"))
    args = ["sweep", "--corpus", str(safety_corpus), "--questions", str(dev), "--grid", str(grid)]
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "ray"), "--ray"])
    assert res.exit_code == 0, res.output
    assert "(ray, 2 workers; 3 cells run" in " ".join(res.output.split())
    cells = sorted(p.name for p in (tmp_path / "inline" / "cells").iterdir())
    assert cells == sorted(p.name for p in (tmp_path / "ray" / "cells").iterdir()) and len(cells) >= 3
    for c in cells:
        assert _metrics(tmp_path / "inline" / "cells" / c) == _metrics(tmp_path / "ray" / "cells" / c), c
        ranked = [(tmp_path / run / "cells" / c / "ranked.jsonl").read_text() for run in ("inline", "ray")]
        assert ranked[0] == ranked[1], c  # every page, rank and score (LSA's too), bit for bit


def test_without_ray_installed_the_error_says_how(
    monkeypatch: pytest.MonkeyPatch, safety_corpus: Path, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(ValueError, match=r"pip install 'sourcepage\[ray\]'"):
        make_executor("ray")
    res = CliRunner().invoke(
        app, ["ingest", "--corpus", str(safety_corpus), "--store", str(tmp_path / "s"), "--ray"]
    )
    assert res.exit_code == 2 and "needs the package ray" in res.output
    assert not (tmp_path / "s").exists()  # nothing written
