"""`sourcepage sweep` on the generated safety corpus: a small grid (work shared between
cells, every cell equal to a standalone run of its settings, the report), resume after a
kill, the dev/test discipline, and grid errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sourcepage.evaluation import stats as S
from sourcepage.evaluation.runner import run_benchmark
from sourcepage.executor import make_executor
from sourcepage.ingest import ingest
from sourcepage.sweep.cell import CellBenchmark
from sourcepage.sweep.grid import Grid, Level, affected_runs, study_grid, text_key
from sourcepage.sweep.sweep import Session, Sweep, SweepError, run_sweep


def _q(
    qid: str, text: str, topic: str, evidence: list[tuple[str, int]] | None = None, kind: str = ""
) -> dict:
    row = {"id": qid, "question": text, "topic": topic, "type": "direct"}
    if evidence:
        row["answerability"] = "answerable"
        row["evidence"] = [{"page": p, "grade": g, "excerpt": "x"} for p, g in evidence]
    else:
        row["answerability"] = kind or "unsupported"
    return row


DEV = [
    _q("D1", "Which switches are not energy isolating devices?", "loto", [("loto_energy_control#p1", 2)]),
    _q("D2", "Who removes a lock when the worker has left?", "loto", [("loto_energy_control#p3", 2)]),
    _q(
        "D3",
        "What is tested first before going into a tank?",
        "confined_spaces",
        [("confined_space_entry#p3", 2)],
    ),
    _q("D4", "At what noise level must ear defenders be worn?", "ppe", [("hse_ppe_at_work#p2", 2)]),
    _q(
        "D5",
        "What protects hands from being drawn into belts?",
        "machine_guarding",
        [("machine_guarding#p2", 2)],
    ),
    _q(
        "D6",
        "What does the employer do about protective equipment?",
        "ppe",
        [("hse_ppe_at_work#p1", 2), ("hse_ppe_at_work#p3", 1)],
    ),
    _q("D7", "What colour must lockout tags be?", "loto"),
]
TEST = [
    _q("T1", "How is a crew locked out as a group?", "loto", [("loto_energy_control#p2", 2)]),
    _q("T2", "Which oxygen range is safe to enter?", "confined_spaces", [("confined_space_entry#p3", 2)]),
    _q(
        "T3",
        "What gap is allowed at the grinder tongue guard?",
        "machine_guarding",
        [("machine_guarding#p2", 2)],
    ),
    _q("T4", "How long should bread dough rise?", "none", kind="out_of_domain"),
]

GRID = {
    "base": {
        "bootstrap": 400,
        "design": [{"versions": ["raw", "cleaned"], "methods": ["bm25", "lsa", "rrf:bm25+lsa"]}],
    },
    "factors": {
        "chunking": [
            {"label": "300/60", "chunk": {"size": 300, "overlap": 60}},
            {"label": "1000/200", "chunk": {"size": 1000, "overlap": 200}},
            {"label": "page", "chunk": {"mode": "page"}},
        ],
        "bm25": {"bm25.k1": [0.9, 1.5], "bm25.b": [0.5, 0.75]},
        "cleaning": [{"label": "no headers/footers", "clean": {"headers_footers": False}}],
        "rrf": {"rrf.k": [10, 60]},
    },
}


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def splits(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("splits")
    return _write(d / "dev.jsonl", DEV), _write(d / "test.jsonl", TEST)


@pytest.fixture(scope="module")
def swept(safety_corpus: Path, splits: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sweep") / "out"
    events = []
    run_sweep(
        safety_corpus,
        splits[0],
        out,
        Grid.from_dict(GRID),
        test=splits[1],
        executor=make_executor("inline"),
        progress=events.append,
        keep_indexes=True,
    )
    cells = [e for e in events if e.phase == "cells"]
    assert cells[-1].done == cells[-1].total == 8 and cells[-1].best
    assert all(e.eta is not None for e in cells[1:])
    return out


def _metrics(folder: Path) -> dict:
    runs = json.loads((folder / "metrics.json").read_text())["runs"]
    return {(r["text_version"], r["method"]): {k: v for k, v in r.items() if k != "query_ms"} for r in runs}


def test_grid_cells_share_work(swept: Path) -> None:
    spec = json.loads((swept / "sweep.json").read_text())
    ids = [c["id"] for c in spec["cells"]]
    # 1000/200, k1=1.5 b=0.75 and k=60 are the default's settings: one cell, not four
    assert ids == [
        "default",
        "chunking-300-60",
        "chunking-page",
        "bm25-k1-0.9-b-0.5",
        "bm25-k1-0.9-b-0.75",
        "bm25-k1-1.5-b-0.5",
        "cleaning-no-headers-footers",
        "rrf-k-10",
    ]
    runs = {c["id"]: [tuple(r) for r in c["runs"]] for c in spec["cells"]}
    assert runs["rrf-k-10"] == [("raw", "rrf:bm25+lsa"), ("cleaned", "rrf:bm25+lsa")]
    assert ("raw", "bm25") not in runs["cleaning-no-headers-footers"]
    assert set(_metrics(swept / "cells" / "rrf-k-10")) == set(runs["rrf-k-10"])  # only what it changes
    # extraction once: one store extracted, the other text settings re-chunked from its raw text
    ready = [json.loads(p.read_text()) for p in (swept / "cache" / "text").glob("*/ready.json")]
    assert len(ready) >= 4  # default, 300/60, page, no headers/footers (and the chosen cell's)
    assert sorted(len(r["extracted"]) for r in ready) == [0] * (len(ready) - 1) + [4]
    # indexes per method: the rrf cell reads the default cell's bm25 and lsa indexes
    view = swept / "cache" / "views"
    for method in ("bm25", "lsa"):
        a = (view / _key(spec, "default") / "indexes" / "raw" / method).resolve()
        b = (view / _key(spec, "rrf-k-10") / "indexes" / "raw" / method).resolve()
        assert a == b and (a / "CURRENT").is_file()
    k1 = (view / _key(spec, "bm25-k1-0.9-b-0.5") / "indexes" / "raw" / "bm25").resolve()
    assert k1 != (view / _key(spec, "default") / "indexes" / "raw" / "bm25").resolve()


def _key(spec: dict, cid: str) -> str:
    return next(c["key"] for c in spec["cells"] if c["id"] == cid)


@pytest.mark.parametrize("cid", ["chunking-page", "bm25-k1-0.9-b-0.5", "rrf-k-10"])
def test_cell_equals_a_standalone_run(
    swept: Path, safety_corpus: Path, splits: tuple[Path, Path], tmp_path: Path, cid: str
) -> None:
    """Shared stores, copied databases and linked indexes change nothing: a cell's metrics
    are those of the same cell run on a store ingested afresh with its settings."""
    grid = Grid.from_dict(GRID)
    cell = next(c for c in grid.cells() if c.id == cid)
    runs = affected_runs(cell.design, grid.default().design)
    store = tmp_path / "store"
    ingest(safety_corpus, store, settings=cell.design.text, workers=1)
    run_benchmark(
        CellBenchmark(safety_corpus, splits[0], cell.as_dict(), runs), tmp_path / "alone", store=store
    )
    assert _metrics(swept / "cells" / cid) == _metrics(tmp_path / "alone")


def test_report_and_paired_comparisons(swept: Path) -> None:
    res = json.loads((swept / "results.json").read_text())
    assert [f["name"] for f in res["factors"]] == ["chunking", "bm25", "cleaning", "rrf"]
    assert res["n_evaluated"] == 6
    # a ΔMRR and its CI recomputed from the cells' per-question files
    bm = next(f for f in res["factors"] if f["name"] == "bm25")
    lv = next(x for x in bm["levels"] if x["label"] == "k1=0.9 b=0.5")
    entry = lv["runs"]["raw bm25"]

    def rr(cell: str) -> list[float]:
        rows = [
            json.loads(x) for x in (swept / "cells" / cell / "per_question.jsonl").read_text().splitlines()
        ]
        return [r["mrr"] for r in rows if r["text_version"] == "raw" and r["method"] == "bm25" and "mrr" in r]

    d, lo, hi = S.paired_bootstrap_ci(rr("bm25-k1-0.9-b-0.5"), rr("default"), 400, 42)
    assert entry["delta"] == pytest.approx(d, abs=1e-6) and entry["ci"] == pytest.approx([lo, hi], abs=1e-6)
    default_level = next(x for x in bm["levels"] if x["is_default"])
    assert default_level["label"] == "k1=1.5 b=0.75" and default_level["runs"]["raw bm25"]["delta"] == 0
    assert "raw lsa" not in bm["runs"]  # BM25 settings do not touch LSA
    assert len(res["orderings"]) == 6 + 3
    report = (swept / "report.md").read_text()
    for text in (
        "## Which conclusions hold across the grid",
        "## Defaults the grid would change",
        "## Test split, reported once",
        "![bm25](figures/sweep_bm25.png)",
    ):
        assert text in report
    for f in res["factors"]:
        png = swept / f["figure"]
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    csv_rows = (swept / "comparisons.csv").read_text().splitlines()
    assert csv_rows[0].startswith("factor,level,cell,run,changed,mrr,delta_mrr,ci_low,ci_high")
    # the test split: the default (and the chosen cell, if any) on the test questions, once
    assert res["test"]["n_evaluated"] == 3
    assert (swept / "test" / "default" / "run.json").is_file()
    assert (swept / "test" / "chosen").exists() == bool(res["chosen"]["levels"])


def test_resume_after_kill(
    safety_corpus: Path, splits: tuple[Path, Path], tmp_path: Path, swept: Path
) -> None:
    """A sweep killed (SIGKILL) after its first cells continues where it stopped: finished
    cells are not run again, and the results equal an uninterrupted sweep's."""
    (tmp_path / "grid.yaml").write_text(json.dumps(GRID))
    out = tmp_path / "out"
    cmd = [
        sys.executable, "-m", "sourcepage.cli", "sweep", "--corpus", str(safety_corpus),
        "--questions", str(splits[0]), "--test", str(splits[1]), "--out", str(out),
        "--grid", str(tmp_path / "grid.yaml"), "--executor", "inline",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    log = tmp_path / "stderr.txt"
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=f)
    deadline = time.monotonic() + 300
    while not list((out / "cells").glob("*/run.json")):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = {p: p.stat().st_mtime_ns for p in (out / "cells").glob("*/run.json")}
    assert 1 <= len(done) < 8
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert all(p.stat().st_mtime_ns == t for p, t in done.items())  # not run again
    assert not (out / "cache" / "indexes").exists()  # deleted once every cell is done
    session = json.loads((out / "timings.json").read_text())[-1]
    assert session["cells_reused"] == len(done) and session["cells_run"] == 8 - len(done) + (
        len(list((out / "test").glob("*/run.json"))) + (out / "cells" / "chosen").exists()
    )
    a, b = (json.loads((d / "results.json").read_text()) for d in (out, swept))
    for key in ("factors", "orderings", "chosen", "default"):
        a_, b_ = json.dumps(a[key]).replace(str(out), ""), json.dumps(b[key]).replace(str(swept), "")
        assert a_ == b_, key


def test_sweep_refuses_another_grid_and_shared_splits(
    safety_corpus: Path, splits: tuple[Path, Path], swept: Path, tmp_path: Path
) -> None:
    other = dict(GRID, factors={"lsa": {"lsa.dims": [4, 8]}})
    with pytest.raises(SweepError, match="another grid"):
        run_sweep(safety_corpus, splits[0], swept, Grid.from_dict(other), executor=make_executor("inline"))
    with pytest.raises(SweepError, match="share questions"):
        run_sweep(safety_corpus, splits[0], tmp_path / "x", Grid.from_dict(GRID), test=splits[0])


def test_grid_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown keys \\['factor'\\]"):
        Grid.from_dict({"factor": {}})
    with pytest.raises(ValueError, match="unknown keys \\['sise'\\] in chunk"):
        Grid.from_dict({"factors": {"chunking": [{"chunk": {"sise": 500}}]}})
    with pytest.raises(ValueError, match="metric"):
        Grid.from_dict({"metric": "accuracy", "factors": {"x": {"bm25.k1": [1.0]}}})
    bad = tmp_path / "grid.yaml"
    bad.write_text("factors:\n  bm25: []\n")
    with pytest.raises(ValueError, match=f"{bad}: factor 'bm25'"):
        Grid.from_yaml(bad)


def test_study_grid_is_the_study_design() -> None:
    g = study_grid()
    labels = {name: [lv.label for lv in levels] for name, levels in g.factors.items()}
    assert labels["chunking"] == ["500/100", "1000/200", "1500/300", "page", "two-page"]
    assert len(labels["bm25"]) == 12 and labels["lsa"] == ["dims=100", "dims=256", "dims=512"]
    assert labels["rrf"] == ["k=10", "k=30", "k=60", "k=100"]
    assert len(labels["cleaning"]) == 4 and len(labels["enrichment"]) == 7
    # the levels equal to today's defaults are the default cell
    assert len(g.cells()) == 1 + 4 + 11 + 2 + 3 + 6 + 3


def test_later_text_settings_are_copies_not_extractions(swept: Path, safety_corpus: Path) -> None:
    """A text setting first needed after the grid (a chosen combination) is re-chunked
    from a copy of the extracted store, never extracted again."""
    grid = Grid.from_dict(GRID)
    over = {"chunk": {"size": 400, "overlap": 80}, "clean": {"dehyphenate": False}}
    cell = grid.combine([Level("x", "400/80 no dehyphenation", over)])
    sweep = Sweep(swept, safety_corpus, make_executor("inline"), None, Session("inline", 1))
    path = sweep.stores([cell])[text_key(cell.design)]
    ready = json.loads((path / "ready.json").read_text())
    assert ready["extracted"] == [] and ready["rebuilt"] == 4
    assert ready["text_settings"]["chunk"]["size"] == 400
