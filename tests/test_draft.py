"""A folder of PDFs is a corpus: the drafted manifest (corpus.draft, corpus.guess) on real
safety PDFs copied without their manifest, ``manifest draft`` and ``ingest --accept-draft``
through the CLI, and the hits saying which fields were guessed."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sourcepage.cli import app
from sourcepage.corpus.draft import DraftError, draft_manifest, needs_draft, unique_ids, write_draft
from sourcepage.corpus.manifest import read_manifest, sha256_file
from tests.pdf_factory import text_pdf

SHARED = Path("/work/shared")
US = SHARED / "corpus" / "pdf"
INTL = SHARED / "corpus-intl" / "pdf"
PICKED = (
    US / "osha3120-lockout-tagout.pdf",
    US / "osha-factsheet-lockout-tagout.pdf",
    INTL / "nz-hswa-2015-as-at-2025-04-05.pdf",
    INTL / "uk-hse-l74-first-aid-at-work.pdf",
    INTL / "au-nsw-electrical-risks-cop-2019.pdf",
    INTL / "eu-reg-2023-1230-machinery.pdf",
)
needs_shared = pytest.mark.skipif(not all(p.is_file() for p in PICKED), reason="shared corpus PDFs absent")


@pytest.fixture
def loose_pdfs(tmp_path: Path) -> Path:
    """A folder holding the picked PDFs directly: no manifest, no pdf/."""
    folder = tmp_path / "my-pdfs"
    folder.mkdir()
    for p in PICKED:
        shutil.copy(p, folder / p.name)
    return folder


def _rows(folder: Path) -> dict[str, dict[str, str]]:
    with (folder / "manifest.csv").open(encoding="utf-8") as f:
        return {r["doc_id"]: r for r in csv.DictReader(f)}


@needs_shared
def test_draft_guesses_real_pdfs(loose_pdfs: Path) -> None:
    draft = draft_manifest(loose_pdfs)
    assert draft.linked == len(PICKED) and not draft.unreadable
    path = write_draft(draft)
    rows = _rows(loose_pdfs)
    loto = rows["osha3120-lockout-tagout"]
    assert (loto["jurisdiction"], loto["year"], loto["authority"]) == (
        "US",
        "2002",
        "US OSHA (Department of Labor)",
    )
    assert loto["title"] == "Control of Hazardous Energy" and loto["topic"] == "loto"
    assert loto["pages"] == "45" and loto["sha256"] == sha256_file(PICKED[0])
    assert loto["license"] == "unknown — check" and str(loose_pdfs.resolve()) in loto["found_in"]
    assert set(loto["guessed"].split(";")) >= {"title", "jurisdiction", "year", "authority"}
    nz = rows["nz-hswa-2015-as-at-2025-04-05"]
    assert (nz["jurisdiction"], nz["doc_type"], nz["title"]) == (
        "NZ",
        "regulation",
        "Health and Safety at Work Act 2015",
    )
    assert rows["uk-hse-l74-first-aid-at-work"]["jurisdiction"] == "UK"
    assert rows["uk-hse-l74-first-aid-at-work"]["topic"] == "first_aid"
    nsw = rows["au-nsw-electrical-risks-cop-2019"]
    assert (nsw["jurisdiction"], nsw["year"], nsw["doc_type"]) == ("AU-NSW", "2019", "code_of_practice")
    assert rows["eu-reg-2023-1230-machinery"]["jurisdiction"] == "EU"
    assert rows["eu-reg-2023-1230-machinery"]["year"] == "2023"
    assert rows["osha-factsheet-lockout-tagout"]["doc_type"] == "fact_sheet"
    # each guess says where it was read
    ev = {
        g.field: g.evidence
        for r in draft.rows
        if r.doc.doc_id == "osha3120-lockout-tagout"
        for g in r.guesses
    }
    assert ev["jurisdiction"] == "'OSHA' on page 1" and "2002 (Revised)" in ev["year"]
    # the draft is a valid manifest, its files under pdf/ and the originals left where they were
    m = read_manifest(loose_pdfs)
    assert len(m.documents) == len(PICKED) and m.extra_columns == ("guessed",)
    assert all((loose_pdfs / "pdf" / p.name).is_file() and (loose_pdfs / p.name).is_file() for p in PICKED)
    assert m.documents[0].guessed and path == loose_pdfs / "manifest.csv"


def test_draft_never_overwrites_without_force(tmp_path: Path) -> None:
    (tmp_path / "pdf").mkdir()
    text_pdf(
        tmp_path / "pdf" / "Site Rules (v2).pdf",
        ["Site rules for lifting operations. Health and Safety Executive 2021."],
    )
    assert needs_draft(tmp_path)
    draft = draft_manifest(tmp_path)
    write_draft(draft)
    assert not needs_draft(tmp_path)
    (tmp_path / "manifest.csv").write_text("edited by a person\n", encoding="utf-8")
    with pytest.raises(DraftError, match="exists; give --force"):
        write_draft(draft)
    assert (tmp_path / "manifest.csv").read_text(encoding="utf-8") == "edited by a person\n"
    write_draft(draft, force=True)
    assert _rows(tmp_path)["site-rules-v2"]["jurisdiction"] == "UK"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_ids_from_file_names_are_valid_and_unique(tmp_path: Path) -> None:
    assert unique_ids(["OSHA 3120", "osha_3120", "OSHA-3120", "Ärger!", "..."]) == [
        "osha-3120",
        "osha_3120",
        "osha-3120-2",
        "rger",
        "doc",
    ]
    with pytest.raises(DraftError, match="holds no PDF"):
        draft_manifest(tmp_path)
    assert not needs_draft(tmp_path)


@needs_shared
def test_ingest_drafts_stops_then_accepts_and_hits_say_guessed(loose_pdfs: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    for p in PICKED[2:]:  # two documents keep the test short
        (loose_pdfs / p.name).unlink()
    res = CliRunner().invoke(app, ["ingest", "--corpus", str(loose_pdfs), "--store", str(store)])
    assert res.exit_code == 1, res.output
    assert (
        "jurisdiction" in res.output and "'OSHA' on page 1" in res.output and "--accept-draft" in res.output
    )
    assert (loose_pdfs / "manifest.csv").is_file() and not store.exists()
    (loose_pdfs / "manifest.csv").unlink()
    res = CliRunner().invoke(
        app, ["ingest", "--corpus", str(loose_pdfs), "--store", str(store), "--accept-draft"]
    )
    assert res.exit_code == 0, res.output
    assert "extracted 2 documents" in res.output
    res = CliRunner().invoke(app, ["index", "--store", str(store), "--method", "bm25"])
    assert res.exit_code == 0, res.output
    q = "Who may remove a lockout device?"
    res = CliRunner().invoke(app, ["search", q, "--store", str(store), "--method", "bm25", "--json"])
    assert res.exit_code == 0, res.output
    hits = json.loads(res.stdout)["results"]
    assert hits and hits[0]["doc_id"].startswith("osha")
    assert hits[0]["jurisdiction"] == "US" and "jurisdiction" in hits[0]["guessed"]
    assert "guessed" not in hits[0].get("fields", {})  # not shown as a document field
    res = CliRunner().invoke(
        app, ["search", q, "--store", str(store), "--method", "bm25"], env={"COLUMNS": "200"}
    )
    assert "jurisdiction: US · year: 2002" in res.output and "(guessed from the text)" in res.output


def test_manifest_draft_command(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    text_pdf(folder / "cop.pdf", ["Code of Practice: Managing noise. Safe Work Australia, November 2020."])
    res = CliRunner().invoke(app, ["manifest", "draft", str(folder)])
    assert res.exit_code == 0, res.output
    assert "Safe Work Australia" in res.output and _rows(folder)["cop"]["jurisdiction"] == "AU"
    res = CliRunner().invoke(app, ["manifest", "draft", str(folder)])
    assert res.exit_code != 0 and "--force" in res.output
