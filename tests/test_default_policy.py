"""The shipped default answer policy on a fresh store of documents from ../shared/corpus
(ingested and searched; `calibrate` never run): off-topic questions are refused, a
supported one is answered with a citation, and the reasons name the features.

Bounded: the lockout/tagout documents only (osha3120 and the two fact sheets, 49 pages),
because the first search builds the dense index the default policy reads (minutes for
the whole corpus on a busy 2-core machine). Marked ``slow``; skipped, with the reason,
where the corpus mirror is absent."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from sourcepage import api
from sourcepage.ingest import ingest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
DOCS = ("osha3120-lockout-tagout", "osha-factsheet-lockout-tagout", "osha-factsheet-lockout-tagout-es")
OFF_TOPIC = (
    "How long should a smoked beef brisket rest before slicing?",
    "What is the capital of Australia?",
    "What is the offside rule in association football?",
    "How do I reset the Wi-Fi password on my home router?",
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (CORPUS / "manifest.csv").is_file(),
        reason=f"the OSHA corpus mirror {CORPUS} is not present on this machine",
    ),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh store of the lockout/tagout documents of ../shared/corpus (the PDFs copied:
    ingest refuses links out of pdf/)."""
    corpus = tmp_path_factory.mktemp("loto") / "corpus"
    (corpus / "pdf").mkdir(parents=True)
    with open(CORPUS / "manifest.csv", newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows = [r for r in reader if r["doc_id"] in DOCS]
        fields = reader.fieldnames
    assert len(rows) == len(DOCS) and fields
    with open(corpus / "manifest.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    for r in rows:
        shutil.copyfile(CORPUS / "pdf" / r["file"], corpus / "pdf" / r["file"])
    path = tmp_path_factory.mktemp("loto_store") / "store"
    report = ingest(corpus, path)
    assert not report.failed and report.pages_extracted == 49
    assert not (path / "indexes" / "raw" / "policy.json").exists()  # never calibrated
    return path


def test_fresh_store_refuses_off_topic_questions_without_calibrate(store: Path) -> None:
    for q in OFF_TOPIC:
        out = api.search(q, store, k=5)
        assert out["decision"] == "refuse", (q, out["reasons"])
        sup = out["support"]
        assert sup["origin"] == "default" and sup["probability"] < sup["t_refuse"]
        assert out["answer"]["quotes"] == []
        if "no document in this corpus is from" in out["reasons"][0]:
            continue  # names a country the corpus does not cover: refused for that first
        assert "shipped default policy" in out["reasons"][0]
        assert out["reasons"][1].startswith("Against: ") and "similarity" in out["reasons"][1]


def test_fresh_store_answers_a_supported_question_with_a_citation(store: Path) -> None:
    out = api.search("Who may remove a lockout device?", store, k=5)
    # the answer threshold fitted with the quote threshold (#22) sits at P ≈ 0.994: a question
    # this close to it may go to a reviewer, never to a refusal
    assert out["decision"] in ("answer", "review"), out["reasons"]
    if out["decision"] == "answer":
        assert out["support"]["probability"] >= out["support"]["t_answer"]
        assert out["answer"]["check"]["supported"]
    assert any(r.startswith("For: ") for r in out["reasons"])
    quotes = out["answer"]["quotes"]
    assert quotes and quotes[0]["citation"].startswith("[osha3120-lockout-tagout p.")
    assert "[osha3120-lockout-tagout p." in out["answer"]["text"]


def test_a_value_the_documents_do_not_state_is_not_answered(store: Path) -> None:
    """Near-domain, unsupported: the guide never gives a waiting time in minutes."""
    out = api.search(
        "How many minutes must we wait after shutdown for capacitors to discharge before we verify "
        "zero energy?",
        store,
        k=5,
    )
    assert out["decision"] != "answer", out["reasons"]
