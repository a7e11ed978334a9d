"""The runner returns a typed result; the report, the answerability study and the figures
are steps after it that read it; run.json has one writer for every adapter."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest
from test_beir import write_beir  # the BEIR folder of tests/test_beir.py
from test_experiment import QUESTIONS  # the question set of tests/test_experiment.py

from sourcepage.evaluation.beir import BeirBenchmark
from sourcepage.evaluation.experiment import Design, QuestionsBenchmark
from sourcepage.evaluation.questions import read_questions
from sourcepage.evaluation.report import write_beir_report, write_report
from sourcepage.evaluation.runner import RunResult, run_benchmark

SRC = Path(__file__).resolve().parents[1] / "src" / "sourcepage"
#: what every run.json records, whichever adapter ran
CORE = {
    "schema", "created_at", "seed", "bootstrap_resamples", "depth", "runs", "text_settings",
    "index_settings", "store", "packages", "inputs", "timings", "query_ms", "ingest", "figures", "outputs",
}  # fmt: skip


@pytest.fixture(scope="module")
def questions_run(safety_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, Path]:
    root = tmp_path_factory.mktemp("result")
    qpath = root / "questions.jsonl"
    qpath.write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n", encoding="utf-8")
    design = Design(blocks=[(["raw", "cleaned"], ["bm25", "lsa", "rrf:bm25+lsa"])], bootstrap=200)
    return run_benchmark(QuestionsBenchmark(safety_corpus, qpath, design), root / "out"), qpath


@pytest.fixture(scope="module")
def beir_run(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    root = tmp_path_factory.mktemp("beir")
    folder = write_beir(root / "scifact-mini")
    return run_benchmark(BeirBenchmark(folder, ["bm25", "lsa"], bootstrap=200), root / "out")


def _same(a: object, b: object) -> bool:
    """Equal as JSON (NaN, the value of an undefined statistic, equals itself there)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _sorted(x: object) -> object:
    return json.loads(json.dumps(x, sort_keys=True))


def _copy_without_report(result: RunResult, to: Path) -> RunResult:
    shutil.copytree(result.out, to, ignore=shutil.ignore_patterns("report.md", "store"))
    loaded = RunResult.load(to)
    loaded.out = to
    return loaded


def test_the_runner_returns_what_it_wrote(questions_run: tuple[RunResult, Path]) -> None:
    result, _ = questions_run
    out = result.out
    assert _same(result.metrics, json.loads((out / "metrics.json").read_text()))
    assert _same(result.stats, json.loads((out / "stats.json").read_text()))
    assert _same(result.support, json.loads((out / "answerability.json").read_text()))
    assert _same(result.provenance, json.loads((out / "run.json").read_text()))
    assert result.figures and all((out / f).is_file() for f in result.figures)
    assert [(r.text_version, r.method) for r in result.results.values()] == result.runs
    assert set(result.timings) >= {"ingest_s", "statistics_s", "answerability_s", "total_s"}


def test_the_result_round_trips_through_the_report(
    questions_run: tuple[RunResult, Path], tmp_path: Path
) -> None:
    """report.md is a function of the result alone: written again from the returned result
    it is the run's, byte for byte; and the result read back from the run's files
    (``RunResult.load``: JSON files keep their keys sorted) writes the report that the
    returned result writes with its keys in that order."""
    result, qpath = questions_run
    qs = read_questions(qpath)
    again = dataclasses.replace(result, out=tmp_path / "again")
    again.out.mkdir()
    write_report(again, qs)
    assert (again.out / "report.md").read_bytes() == (result.out / "report.md").read_bytes()

    loaded = _copy_without_report(result, tmp_path / "loaded")
    assert _same(loaded.metrics, result.metrics) and _same(loaded.stats, result.stats)
    assert _same(loaded.support, result.support) and _same(loaded.provenance, result.provenance)
    assert loaded.rows == result.rows and loaded.per_question == result.per_question
    assert loaded.runs == result.runs and loaded.figures == result.figures
    assert {k: r.ranked(q) for k, r in loaded.results.items() for q in r} == {
        k: r.ranked(q) for k, r in result.results.items() for q in r
    }
    write_report(loaded, qs)
    sorted_keys = {f: _sorted(getattr(result, f)) for f in ("metrics", "stats", "support", "provenance")}
    write_report(dataclasses.replace(result, **sorted_keys), qs)  # into result.out: same folder files
    assert (loaded.out / "report.md").read_bytes() == (result.out / "report.md").read_bytes()
    # a changed result changes the report: it is read, not copied
    loaded.metrics["runs"][0]["mrr"] = 0.123456
    write_report(loaded, qs)
    assert "0.123" in (loaded.out / "report.md").read_text()
    write_report(result, qs)  # the run's own report back in place


def test_beir_reuses_the_report_writer_and_round_trips(beir_run: RunResult, tmp_path: Path) -> None:
    loaded = _copy_without_report(beir_run, tmp_path / "again")
    assert _same(loaded.metrics, beir_run.metrics) and loaded.rows == beir_run.rows
    write_beir_report(loaded)
    text = (tmp_path / "again" / "report.md").read_text()
    assert text == (beir_run.out / "report.md").read_text()
    assert text.startswith("# BEIR evaluation — scifact-mini (test)\n\n") and "| raw | lsa |" in text


def test_one_provenance_writer_for_every_adapter(
    questions_run: tuple[RunResult, Path], beir_run: RunResult
) -> None:
    result, _ = questions_run
    for r in (result, beir_run):
        info = json.loads((r.out / "run.json").read_text())
        assert CORE <= set(info), CORE - set(info)
        on_disk = {p.name for p in r.out.iterdir() if p.is_file() and p.name != "run.json"}
        assert set(info["outputs"]) == on_disk
    assert json.loads((beir_run.out / "run.json").read_text())["benchmark"] == "beir"
    assert "experiment" in result.provenance and "chunk_fingerprints" in result.provenance
    # no adapter writes run.json, report.md or the package versions itself
    for module in ("experiment.py", "beir.py", "runner.py"):
        text = (SRC / "evaluation" / module).read_text(encoding="utf-8")
        assert not re.search(r"write_(json|text)\([^)]*(run\.json|report\.md)", text), module
        assert "def package_versions" not in text and "def _report" not in text, module
    assert "write_text" not in (SRC / "evaluation" / "beir.py").read_text(encoding="utf-8")
