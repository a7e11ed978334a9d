"""`sourcepage eval` end to end on the generated safety corpus: the §4 contract files,
numbers recomputable from ranked.jsonl (and by ir_measures from the TREC files),
byte-identical reruns, and clear errors on a bad question set."""

from __future__ import annotations

import io
import json
from pathlib import Path

import ir_measures
import pytest
from ir_measures import RR, P, R, Success, nDCG
from typer.testing import CliRunner

from sourcepage.cli import app
from sourcepage.evaluation.experiment import Design, metrics_from_ranked, run_experiment
from sourcepage.evaluation.questions import read_questions

QUESTIONS = [
    {
        "id": "A1",
        "question": "How does a group lockbox work in group lockout?",
        "topic": "loto",
        "type": "direct",
        "answerability": "answerable",
        "evidence": [{"page": "loto_energy_control#p2", "grade": 2, "excerpt": "group lockbox"}],
    },
    {
        "id": "A2",
        "question": "What atmospheric testing is needed before entering a permit-required confined space?",
        "topic": "confined_spaces",
        "type": "procedural",
        "answerability": "answerable",
        "evidence": [
            {"page": "confined_space_entry#p3", "grade": 2, "excerpt": "atmospheric testing"},
            {"page": "confined_space_entry#p1", "grade": 1, "excerpt": "permit"},
        ],
    },
    {
        "id": "A3",
        "question": "When must hearing protection be worn?",
        "topic": "ppe",
        "type": "direct",
        "answerability": "answerable",
        "evidence": [{"page": "hse_ppe_at_work#p2", "grade": 2, "excerpt": "hearing protection"}],
    },
    {
        "id": "A4",
        "question": "How close must the tongue guard be to the abrasive wheel?",
        "topic": "machine_guarding",
        "type": "direct",
        "answerability": "answerable",
        "evidence": [{"page": "machine_guarding#p2", "grade": 2, "excerpt": "tongue guard"}],
    },
    {
        "id": "U1",
        "question": "What is the fine for a missing lockout lock?",
        "topic": "loto",
        "type": "direct",
        "answerability": "unsupported",
    },
    {
        "id": "U2",
        "question": "Which brand of gas detector is approved for sewers?",
        "topic": "confined_spaces",
        "type": "direct",
        "answerability": "unsupported",
    },
    {
        "id": "O1",
        "question": "How long should sourdough bread proof?",
        "topic": "none",
        "type": "direct",
        "answerability": "out_of_domain",
    },
]


@pytest.fixture(scope="module")
def questions_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("q") / "questions.jsonl"
    p.write_text("// a comment line\n" + "\n".join(json.dumps(q) for q in QUESTIONS) + "\n")
    return p


def _design() -> Design:
    return Design(blocks=[(["raw", "cleaned", "enriched"], ["bm25", "lsa", "rrf:bm25+lsa"])], bootstrap=300)


@pytest.fixture(scope="module")
def result(safety_corpus: Path, questions_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("eval") / "out"
    run_experiment(safety_corpus, questions_file, out, design=_design())
    return out


def test_contract_files(result: Path) -> None:
    m = json.loads((result / "metrics.json").read_text())
    assert m["schema"] == 1
    assert m["questions"] == {"answerable": 4, "unsupported": 2, "out_of_domain": 1}
    assert len(m["runs"]) == 9
    for r in m["runs"]:
        for key in ("hit@1", "hit@3", "hit@5", "hit@10", "recall@10", "mrr", "ndcg@10", "doc_hit@3"):
            assert 0.0 <= r[key] <= 1.0
        assert set(r["auroc"]) == {"broad", "near_domain", "out_of_domain"}
        assert set(r["auroc_margin"]) == {"broad", "near_domain", "out_of_domain"}
        assert set(r["query_ms"]) == {"mean", "p50", "p95", "max"}
    rows = [json.loads(x) for x in (result / "ranked.jsonl").read_text().splitlines()]
    assert set(rows[0]) == {
        "question_id",
        "text_version",
        "method",
        "rank",
        "page",
        "score",
        "chunk_id",
        "grade",
    }
    # every question (answerable or not) in every run has every page of the 10 non-blank pages ranked
    per = {}
    for r in rows:
        per.setdefault((r["question_id"], r["text_version"], r["method"]), []).append(r["rank"])
    assert len(per) == 7 * 9
    assert all(ranks == list(range(1, len(ranks) + 1)) and len(ranks) == 10 for ranks in per.values())
    a1 = [
        r for r in rows if r["question_id"] == "A1" and r["method"] == "bm25" and r["text_version"] == "raw"
    ]
    assert a1[0]["page"] == "loto_energy_control#p2" and a1[0]["grade"] == 2
    assert a1[0]["chunk_id"].startswith("loto_energy_control#p2#c")
    report = (result / "report.md").read_text()
    for heading in (
        "Page-level retrieval",
        "bootstrap CIs",
        "Paired statistics",
        "By topic",
        "By question type",
        "Failures",
        "How to read this report",
    ):
        assert heading in report
    # the five-line summary opens the report; every feature is defined; fusion AUROC is marked
    top = report.split("\n\n")[1].splitlines()
    assert [line.split(":**")[0] for line in top] == [
        "**Best retrieval",
        "**Survives Holm correction",
        "**Refuses best",
        "**Quotes",
        "**Read with care",
    ]
    assert "`sent_top3`:" in report and "**ms p50**:" in report
    assert "†" in report.split("## Document level")[0]
    for f in (
        "stats.json",
        "run.json",
        "per_question.jsonl",
        "trec/qrels.txt",
        "trec/raw__bm25.run",
        "hit3_by_topic_raw.png",
        "answerability_scores.png",
    ):
        assert (result / f).is_file(), f


def test_metrics_recomputable_from_ranked(result: Path, questions_file: Path) -> None:
    m = json.loads((result / "metrics.json").read_text())
    rows = [json.loads(x) for x in (result / "ranked.jsonl").read_text().splitlines()]
    again = metrics_from_ranked(rows, read_questions(questions_file))
    for r, a in zip(m["runs"], again, strict=True):
        assert {k: v for k, v in r.items() if k != "query_ms"} == a


def test_trec_files_rescore_with_ir_measures(result: Path) -> None:
    """Metrics from the TREC files by ir_measures (trec_eval semantics) equal ours.

    Our rows carry distinct scores within a query in this corpus, so trec_eval's
    re-sort by score keeps our order."""
    m = {
        (r["text_version"], r["method"]): r for r in json.loads((result / "metrics.json").read_text())["runs"]
    }
    qrels = list(ir_measures.read_trec_qrels(str(result / "trec" / "qrels.txt")))
    binary = [q._replace(relevance=1 if q.relevance >= 1 else 0) for q in qrels]
    for (version, method), ours in m.items():
        name = f"{version}__{method.replace(':', '-').replace('+', '_')}"
        run = list(ir_measures.read_trec_run(str(result / "trec" / f"{name}.run")))
        agg = ir_measures.calc_aggregate([Success @ 3, R @ 10, RR @ 20, nDCG @ 10, P @ 1], binary, run)
        assert agg[Success @ 3] == pytest.approx(ours["hit@3"], abs=1e-6)
        assert agg[R @ 10] == pytest.approx(ours["recall@10"], abs=1e-6)
        assert agg[RR @ 20] == pytest.approx(ours["mrr"], abs=1e-6)
        assert agg[nDCG @ 10] == pytest.approx(ours["ndcg@10"], abs=1e-6)


def test_rerun_is_byte_identical(
    result: Path, safety_corpus: Path, questions_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "again"
    run_experiment(safety_corpus, questions_file, out, design=_design())
    for name in ("ranked.jsonl", "stats.json", "per_question.jsonl", "trec/raw__rrf-bm25_lsa.run"):
        assert (out / name).read_bytes() == (result / name).read_bytes(), name
    a = json.loads((out / "metrics.json").read_text())["runs"]
    b = json.loads((result / "metrics.json").read_text())["runs"]
    assert [{k: v for k, v in r.items() if k != "query_ms"} for r in a] == [
        {k: v for k, v in r.items() if k != "query_ms"} for r in b
    ]


def test_cli_eval_and_bad_question_file(safety_corpus: Path, questions_file: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "eval",
            "--corpus",
            str(safety_corpus),
            "--questions",
            str(questions_file),
            "--out",
            str(tmp_path / "o"),
            "--versions",
            "raw",
            "--methods",
            "bm25",
            "--bootstrap",
            "100",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "report:" in res.output and (tmp_path / "o" / "report.md").is_file()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({**QUESTIONS[0], "evidence": [{"page": "loto_energy_control#p9", "grade": 2}]}) + "\n"
    )
    res = runner.invoke(
        app,
        [
            "eval",
            "--corpus",
            str(safety_corpus),
            "--questions",
            str(bad),
            "--out",
            str(tmp_path / "o2"),
            "--versions",
            "raw",
            "--methods",
            "bm25",
        ],
    )
    assert res.exit_code == 2
    assert "bad.jsonl:1" in res.output and "loto_energy_control#p9" in res.output


def test_design_override() -> None:
    d = Design(blocks=[(["raw"], ["bm25"]), (["cleaned"], ["lsa"])], bootstrap=300)
    assert d.override() is d and d.blocks == [(["raw"], ["bm25"]), (["cleaned"], ["lsa"])]
    assert d.override(methods=["lsa", "rrf:bm25+lsa"]).blocks == [(["raw"], ["lsa", "rrf:bm25+lsa"])]
    assert d.override(versions=["enriched"], bootstrap=7).blocks == [(["enriched"], ["lsa", "rrf:bm25+lsa"])]
    assert d.bootstrap == 7
    with pytest.raises(ValueError, match="unknown text version"):
        Design().override(versions=["nope"])
    with pytest.raises(ValueError, match="unknown method"):
        Design().override(methods=["nope"])


def test_eval_command_marks_rank_fusion_auroc(
    safety_corpus: Path, questions_file: Path, tmp_path: Path
) -> None:
    """The table ``sourcepage eval`` prints marks a rank-fusion run's AUROC as not a
    calibrated score, as the report does, and says why under the table."""
    res = CliRunner().invoke(
        app,
        [
            "eval",
            "--corpus",
            str(safety_corpus),
            "--questions",
            str(questions_file),
            "--out",
            str(tmp_path / "out"),
            "--versions",
            "raw",
            "--methods",
            "bm25,rrf:bm25+lsa",
            "--bootstrap",
            "100",
        ],
    )
    assert res.exit_code == 0, res.output
    rows = [line.split() for line in res.stdout.splitlines() if line.startswith("raw ")]
    assert [r[1] for r in rows] == ["bm25", "rrf:bm25+lsa"] * 2  # retrieval table, then AUROC table
    auroc = rows[2:]
    assert not any("†" in x for x in auroc[0]) and auroc[1][2].endswith("†") and auroc[1][3].endswith("†")
    assert "† rank-fusion scores measure rank agreement" in res.stdout


def test_eval_tables_fit_an_80_column_terminal(result: Path) -> None:
    """The tables ``eval`` prints are read whole on an 80-column terminal: no value or
    header is cut to an ellipsis."""
    from rich.console import Console

    from sourcepage.cli.evaluation import _run_tables

    console = Console(width=80, record=True, file=io.StringIO())
    for t in _run_tables(json.loads((result / "metrics.json").read_text())):
        console.print(t)
    text = console.export_text()
    assert "…" not in text and "enriched  rrf:bm25+lsa" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_python_evaluate_says_what_it_does(
    safety_corpus: Path, questions_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``sourcepage.evaluate`` as the README calls it, with the options its docstring names:
    it prints its plan and a line when each step starts and ends, and writes the report."""
    import sourcepage

    m = sourcepage.evaluate(
        safety_corpus, questions_file, tmp_path / "out", versions=["raw"], methods=["bm25"], bootstrap=100
    )
    assert [(r["text_version"], r["method"]) for r in m["runs"]] == [("raw", "bm25")]
    assert (tmp_path / "out" / "report.md").is_file()
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("evaluating 1 run (raw bm25) on ") and "(built on first use)" in err[0]
    assert "extract the PDFs …" in err and any(line.startswith("extract the PDFs: done in ") for line in err)
    assert "run 1/1 raw bm25 …" in err and any(line.startswith("run 1/1 raw bm25: done in ") for line in err)
    capsys.readouterr()
    sourcepage.evaluate(
        safety_corpus, questions_file, tmp_path / "q", methods=["bm25"], bootstrap=100, quiet=True
    )
    assert capsys.readouterr().err == ""
