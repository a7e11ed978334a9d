"""The construction question set (benchmarks/construction) is well formed and its labels hold.

Always checked: every line parses with the project's reader against the page ids that the
copied manifest's page counts allow; the extra fields eval tables by are present; the
dev/test split is a partition of the set and matches the SHA-256 recorded in the README.
Checked where ../shared/corpus-construction is present (or CONSTRUCTION_CORPUS names it):
each excerpt occurs in the text of its page (whitespace collapsed), the manifest copy is
the corpus manifest, and every unsupported question's absence check still finds its terms
only on the pages it lists (the authoring build reproduces the file byte for byte).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from collections import defaultdict
from pathlib import Path

import pytest

from sourcepage.evaluation.questions import read_questions

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "construction"
QUESTIONS = BENCH / "questions.jsonl"
CORPUS = Path(os.environ.get("CONSTRUCTION_CORPUS", ROOT.parent / "shared" / "corpus-construction"))
PHASES = {"design", "pre_construction", "groundworks", "structure", "envelope", "demolition", "all", "none"}

needs_corpus = pytest.mark.skipif(
    not (CORPUS / "manifest.csv").is_file(),
    reason=f"the construction corpus {CORPUS} is not present on this machine",
)


def _rows() -> list[dict]:
    return [json.loads(ln) for ln in QUESTIONS.read_text(encoding="utf-8").splitlines() if ln.strip()]


def _manifest(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _known_pages() -> set[str]:
    return {
        f"{r['doc_id']}#p{i}"
        for r in _manifest(BENCH / "manifest.csv")
        for i in range(1, int(r["pages"]) + 1)
    }


def _collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_set_parses_and_pages_exist() -> None:
    questions = read_questions(QUESTIONS, _known_pages())
    assert len(questions) >= 150
    kinds = defaultdict(int)
    for q in questions:
        kinds[q.answerability] += 1
    assert kinds["unsupported"] >= 30 and kinds["out_of_domain"] >= 15


def test_extra_fields_and_coverage() -> None:
    rows = _rows()
    manifest_phases = {p for r in _manifest(BENCH / "manifest.csv") for p in r["phase"].split(";")} - {"any"}
    manifest_topics = {r["topic"] for r in _manifest(BENCH / "manifest.csv")} | {"none"}
    assert {r["manifest_topic"] for r in rows} <= manifest_topics
    seen_phases = {r["phase"] for r in rows}
    assert seen_phases <= PHASES
    assert manifest_phases <= seen_phases, manifest_phases - seen_phases
    for r in rows:
        for field in ("phase", "work_package", "project_type", "jurisdiction", "manifest_topic"):
            assert isinstance(r.get(field), str) and r[field], (r["id"], field)
        if r["answerability"] == "unsupported":
            check = r["absence_check"]
            assert check["terms"] and set(check["pages_matching"]) == set(check["terms"]), r["id"]
            assert "note" in check or not any(check["pages_matching"].values()), r["id"]
    types = {r["type"] for r in rows if r["answerability"] == "answerable"}
    assert types == {"direct", "procedural", "scenario", "comparison"}


def test_split_is_a_partition_with_recorded_hashes() -> None:
    ids = [r["id"] for r in _rows()]
    halves = {
        n: [json.loads(ln)["id"] for ln in (BENCH / f"{n}.jsonl").read_text().splitlines() if ln]
        for n in ("dev", "test")
    }
    assert sorted(halves["dev"] + halves["test"]) == sorted(ids)
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    for n in ("dev", "test"):
        digest = hashlib.sha256((BENCH / f"{n}.jsonl").read_bytes()).hexdigest()
        assert digest in readme, f"{n}.jsonl SHA-256 {digest} is not the one in README.md"


def test_split_is_what_split_py_makes(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    shutil.copy(QUESTIONS, tmp_path / "questions.jsonl")
    script = ROOT / "benchmarks" / "split.py"
    subprocess.run(
        [sys.executable, str(script), str(tmp_path / "questions.jsonl"), "--seed", "42"],
        check=True,
        capture_output=True,
    )
    for n in ("dev", "test"):
        assert (tmp_path / f"{n}.jsonl").read_bytes() == (BENCH / f"{n}.jsonl").read_bytes(), n


@needs_corpus
def test_manifest_copy_matches_corpus() -> None:
    assert _manifest(BENCH / "manifest.csv") == _manifest(CORPUS / "manifest.csv")


@needs_corpus
def test_excerpts_occur_on_their_pages() -> None:
    import pypdfium2 as pdfium

    wanted: dict[str, dict[int, list[tuple[str, str]]]] = defaultdict(lambda: defaultdict(list))
    for r in _rows():
        for e in r.get("evidence", []):
            doc, n = e["page"].rsplit("#p", 1)
            wanted[doc][int(n)].append((r["id"], _collapse(e["excerpt"])))
    files = {r["doc_id"]: r["file"] for r in _manifest(CORPUS / "manifest.csv")}
    missing: list[str] = []
    for doc, pages in wanted.items():
        pdf = pdfium.PdfDocument(str(CORPUS / "pdf" / files[doc]))
        try:
            for n, items in pages.items():
                textpage = pdf[n - 1].get_textpage()
                text = _collapse(textpage.get_text_range())
                missing += [f"{qid} {doc}#p{n}: {ex[:60]!r}" for qid, ex in items if ex not in text]
        finally:
            pdf.close()
    assert not missing, "\n".join(missing)


@needs_corpus
def test_authoring_sources_rebuild_the_set_byte_for_byte(tmp_path: Path) -> None:
    """authoring/build.py re-extracts every page, resolves every excerpt and reruns every
    absence check over all 1,114 pages; its output must be the committed questions.jsonl."""
    import subprocess
    import sys

    out = tmp_path / "questions.jsonl"
    subprocess.run(
        [sys.executable, str(BENCH / "authoring" / "build.py"), "--corpus", str(CORPUS), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    assert out.read_bytes() == QUESTIONS.read_bytes()


def test_experiment_design_reads() -> None:
    from sourcepage.evaluation.experiment import Design

    design = Design.from_yaml(BENCH / "experiment.yaml")
    assert design.seed == 42 and design.engine == "pypdfium2"


def _load_kappa():
    import importlib.util

    spec = importlib.util.spec_from_file_location("construction_kappa", BENCH / "kappa.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_blind_file_has_no_grades_and_mixes_labelled_pages() -> None:
    known = _known_pages()
    evidence = {r["id"]: {e["page"] for e in r.get("evidence", [])} for r in _rows()}
    blind = [json.loads(ln) for ln in (BENCH / "second_pass" / "blind.jsonl").read_text().splitlines() if ln]
    assert len(blind) >= 40
    for row in blind:
        assert set(row) == {"id", "question", "candidates"}, row["id"]
        pages = [c["page"] for c in row["candidates"]]
        assert 4 <= len(pages) <= 6 and len(set(pages)) == len(pages), row["id"]
        assert all(set(c) == {"page"} and c["page"] in known for c in row["candidates"]), row["id"]
        assert evidence[row["id"]] & set(pages) and set(pages) - evidence[row["id"]], row["id"]


def test_kappa_script_agrees_with_itself_and_sees_a_disagreement(tmp_path: Path) -> None:
    kappa = _load_kappa()
    first = kappa.first_pass(QUESTIONS)
    blind = [json.loads(ln) for ln in (BENCH / "second_pass" / "blind.jsonl").read_text().splitlines() if ln]
    graded = tmp_path / "graded.jsonl"
    rows = [
        {
            **r,
            "candidates": [
                {"page": c["page"], "grade": first[r["id"]].get(c["page"], 0)} for c in r["candidates"]
            ],
        }
        for r in blind
    ]
    graded.write_text("".join(json.dumps(r) + "\n" for r in rows))
    same = kappa.compare(first, kappa.second_pass(graded, first))
    assert same["kappa"] == pytest.approx(1.0) and not same["disagreements"]
    rows[0]["candidates"][0]["grade"] = (rows[0]["candidates"][0]["grade"] + 1) % 3
    graded.write_text("".join(json.dumps(r) + "\n" for r in rows))
    other = kappa.compare(first, kappa.second_pass(graded, first))
    assert other["kappa"] < 1.0 and len(other["disagreements"]) == 1
