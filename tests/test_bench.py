"""``sourcepage bench``: every section is measured, positive, and BM25 parity holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sourcepage.bench.speed import run_bench
from sourcepage.cli import app

QUESTIONS = [
    ("B1", "Who may remove a personal lock from a group lockbox at shift change?", "loto_energy_control#p2"),
    (
        "B2",
        "How close must the tongue guard be to the abrasive wheel of a bench grinder?",
        "machine_guarding#p2",
    ),
    (
        "B3",
        "Which gas is tested first before entry of a permit-required confined space?",
        "confined_space_entry#p3",
    ),
    ("B4", "Must PPE be provided free of charge, and is it the last resort?", "hse_ppe_at_work#p1"),
    ("B5", "What is the boiling point of liquid nitrogen in a cryogenic dewar?", None),
]


def _write_questions(path: Path) -> Path:
    lines = []
    for qid, text, page in QUESTIONS:
        obj = {"id": qid, "question": text, "topic": "safety", "type": "direct"}
        if page:
            obj.update(answerability="answerable", evidence=[{"page": page, "grade": 2}])
        else:
            obj.update(answerability="unsupported")
        lines.append(json.dumps(obj))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def bench_json(safety_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("bench")
    questions = _write_questions(tmp / "questions.jsonl")
    out = tmp / "bench.json"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "--corpus",
            str(safety_corpus),
            "--questions",
            str(questions),
            "--store",
            str(tmp / "store"),
            "--repeats",
            "1",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert "Extraction" in result.output and "query latency" in result.output
    assert "Time to an answer" in result.output and "one-shot" in result.output
    return json.loads(out.read_text())


def test_every_section_present(bench_json: dict) -> None:
    for key in ("machine", "settings", "reference", "extraction", "chunks", "index_build", "query", "parity"):
        assert key in bench_json
    m = bench_json["machine"]
    assert m["python"] and m["platform"] and m["cpu_count"] >= 1
    assert m["packages"]["bm25s"] and m["packages"]["rank-bm25"] and m["packages"]["pypdf"]
    assert bench_json["settings"]["repeats"] == 1


def test_time_to_an_answer_beside_the_figures_before(bench_json: dict) -> None:
    """The cold one-shot search, the first web search after ready and the web API with the
    default method and its decisions are measured, next to issue #24's figures."""
    s = bench_json["startup"]
    assert s["before"]["one_shot_s"] and s["before"]["web_requests_per_s"] > 0
    o, w = s["one_shot"], s["web"]
    assert 0 < o["min_s"] <= o["median_s"] <= o["max_s"] and o["timings_ms"]["decision"]
    assert w["errors"] == 0 and w["requests"] == 50 * len(QUESTIONS) and w["requests_per_s"] > 0
    assert w["first_search_ms"] > 0 and w["p50_ms"] <= w["p95_ms"]


def test_extraction_numbers_positive(bench_json: dict) -> None:
    engines = bench_json["extraction"]["engines"]
    assert set(engines) == {"pypdfium2", "pypdf"}
    for e in engines.values():
        assert e["pages"] == 11 and not e["failed"]
        assert e["seconds"] > 0 and e["pages_per_s"] > 0 and e["x_study"] > 0


def test_index_and_query_numbers_positive(bench_json: dict) -> None:
    ix = bench_json["index_build"]
    assert ix["chunks"] > 0 and ix["tokens"] > 0
    assert len(ix["builds"]) == 3
    for b in ix["builds"].values():
        assert b["seconds"] > 0 and b["x_study"] > 0
    q = bench_json["query"]
    assert q["questions"] == len(QUESTIONS)
    assert len(q["paths"]) == 6  # bm25 page-level, the default ranking, the whole search, three peers
    for s in q["paths"].values():
        for k in ("mean", "p50", "p95", "max", "x_rank_bm25_p50", "x_study_p50"):
            assert s[k] > 0, k
        assert s["p50"] <= s["p95"] <= s["max"]
    assert q["paths"]["rank_bm25 get_scores"]["x_rank_bm25_p50"] == pytest.approx(1.0)


def test_parity_with_rank_bm25(bench_json: dict) -> None:
    p = bench_json["parity"]
    assert p["questions"] == len(QUESTIONS)
    assert p["max_abs_diff"] < 1e-6 and p["ok"]


def test_run_bench_rejects_zero_repeats(safety_corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="repeats"):
        run_bench(safety_corpus, _write_questions(tmp_path / "q.jsonl"), tmp_path / "store", repeats=0)


def test_bench_without_rank_bm25(
    safety_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain install has no rank_bm25 (dev extra): its rows say so, the rest runs."""
    import sys

    monkeypatch.setitem(sys.modules, "rank_bm25", None)  # import rank_bm25 → ImportError
    out = tmp_path / "bench.json"
    args = [
        "bench",
        "--corpus",
        str(safety_corpus),
        "--questions",
        str(_write_questions(tmp_path / "q.jsonl")),
    ]
    res = CliRunner().invoke(
        app, [*args, "--store", str(tmp_path / "store"), "--repeats", "1", "--json", str(out)]
    )
    assert res.exit_code == 0, res.output + repr(res.exception)
    lines = res.output.splitlines()
    assert any("rank_bm25 BM25Okapi" in line and "not installed" in line for line in lines)
    assert any("rank_bm25 get_scores" in line and "not installed" in line for line in lines)
    assert any(line.startswith("Parity with rank_bm25") and "not installed" in line for line in lines)
    r = json.loads(out.read_text())
    assert r["index_build"]["builds"]["rank_bm25 BM25Okapi"] == {"installed": False}
    assert r["index_build"]["builds"]["ours (bm25.build)"]["seconds"] > 0
    paths = r["query"]["paths"]
    assert paths["rank_bm25 get_scores"] == {"installed": False}
    assert paths["ours bm25.scores"]["p50"] > 0 and paths["ours bm25.scores"]["x_rank_bm25_p50"] is None
    assert r["parity"]["ok"] is None and r["parity"]["installed"] is False
