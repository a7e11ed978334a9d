"""Construction fields as provenance, and a user's project records searched with the guidance.

The collection is two folders built with reportlab (``project_factory``): four records of two
projects (SWMS, method statement, inspection record, lift plan) with project, project_type,
phase, work_package, contractor and asset_id columns, and two guidance documents for every
project and phase."""

from __future__ import annotations

import json
from pathlib import Path

import project_factory as prj
import pytest
from typer.testing import CliRunner

from sourcepage import api
from sourcepage.cli import app
from sourcepage.corpus.fields import (
    asset_links,
    check_asset_url,
    document_fields,
    field_choices,
    field_matches,
    field_values,
)
from sourcepage.corpus.manifest import read_manifest
from sourcepage.ingest import ingest
from sourcepage.records import Document

TEMPLATE = "https://bim.example.com/viewer?guid={asset_id}"


def _doc(**extra: str) -> Document:
    return Document.from_dict({"doc_id": "d", "title": "T", "jurisdiction": "AU", **extra})


def test_a_semicolon_list_is_a_list_and_matches_each_value() -> None:
    d = _doc(phase="structure", work_package="precast_tiltup; lifting", bim_id="")
    assert field_values(d, "work_package") == ["precast_tiltup", "lifting"]
    assert field_values(d, "title") == ["T"]  # a core column is one value, never split
    assert document_fields(d) == {"phase": ["structure"], "work_package": ["precast_tiltup", "lifting"]}
    assert field_matches(d, "work_package", ["LIFTING"]) and field_matches(
        d, "work_package", ["precast_tiltup"]
    )
    assert not field_matches(d, "work_package", ["precast_tiltup;lifting"])  # a value, not the cell
    assert not field_matches(d, "work_package", ["formwork"])


def test_all_and_any_apply_to_every_value_of_their_field() -> None:
    guidance = _doc(phase="all", project_type="any", work_package="general")
    assert field_matches(guidance, "phase", ["structure"]) and field_matches(
        guidance, "project_type", ["civil"]
    )
    assert not field_matches(guidance, "work_package", ["lifting"])
    assert not field_matches(_doc(title="all"), "title", ["x"])  # core columns have no wildcard


def test_named_fields_come_first_then_the_others_by_name() -> None:
    d = _doc(zeta="z", bim_id="B1", asset_id="A1", phase="design", project="p")
    assert list(document_fields(d)) == ["project", "phase", "asset_id", "bim_id", "zeta"]
    assert field_choices([d, _doc(phase="structure;design")], "phase") == ["design", "structure"]


def test_asset_url_template_is_checked_and_ids_are_encoded() -> None:
    assert check_asset_url("  ") == ""
    for bad in (
        "javascript:alert(1)//{asset_id}",
        "https://x/viewer",
        "https://x/{asset_id}/{asset_id}",
        "https://x/{project}/{asset_id}",
    ):
        with pytest.raises(ValueError, match="asset URL"):
            check_asset_url(bad)
    links = asset_links({"asset_id": ["2O2Fr$t4X7Zf8NOew3FLOH", "A/1 b"]}, TEMPLATE)
    assert links == [
        {
            "asset_id": "2O2Fr$t4X7Zf8NOew3FLOH",
            "url": "https://bim.example.com/viewer?guid=2O2Fr%24t4X7Zf8NOew3FLOH",
        },
        {"asset_id": "A/1 b", "url": "https://bim.example.com/viewer?guid=A%2F1%20b"},
    ]
    assert asset_links({"asset_id": ["X"]}, "") == []


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("construction")
    return prj.construction_guidance(root / "guidance"), prj.project_records(root / "project")


@pytest.fixture(scope="module")
def store(folders: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Guidance and project records ingested as one collection, asset links configured."""
    st = tmp_path_factory.mktemp("construction_store") / "store"
    rep = ingest(list(folders), st, workers=1)
    assert not rep.failed and len(rep.extracted) == 6
    assert api.set_asset_url(st, TEMPLATE) == TEMPLATE
    return st


def test_project_manifest_keeps_its_columns(folders: tuple[Path, Path]) -> None:
    m = read_manifest(folders[1])
    assert m.extra_columns == ("project", "project_type", "phase", "work_package", "contractor", "asset_id")
    swms = m.documents[0]
    assert document_fields(swms)["asset_id"] == ["2O2Fr$t4X7Zf8NOew3FLOH", "1hOSvn6df7F8_7GcBWlRGQ"]


def _search(store: Path, question: str, **filters: str) -> dict:
    return api.search(question, store, method="bm25", k=10, filters=filters or None)


def test_every_hit_carries_its_fields_and_asset_links(store: Path) -> None:
    res = _search(store, "lifting inserts of the tilt-up panel")
    top = res["results"][0]
    assert top["page"] == "rt-swms-precast-panels#p1"
    assert top["fields"] == {
        "project": ["riverside-tower"],
        "project_type": ["commercial_building"],
        "phase": ["structure"],
        "work_package": ["precast_tiltup", "lifting"],
        "contractor": ["Acme Precast Pty Ltd"],
        "asset_id": ["2O2Fr$t4X7Zf8NOew3FLOH", "1hOSvn6df7F8_7GcBWlRGQ"],
    }
    assert top["asset_links"][0]["url"] == "https://bim.example.com/viewer?guid=2O2Fr%24t4X7Zf8NOew3FLOH"
    assert top["extra"]["work_package"] == "precast_tiltup;lifting"  # the raw cell is kept as it was
    guide = next(r for r in res["results"] if r["doc_id"].startswith("guide-"))
    assert guide["fields"]["phase"] == ["all"] and guide["asset_links"] == []


def test_records_and_guidance_are_searched_together_and_filtered(store: Path) -> None:
    docs = {r["doc_id"] for r in _search(store, "guardrail scaffold tag midrail")["results"]}
    assert {"guide-falls", "rt-scaffold-inspection"} <= docs
    lifting = {
        r["doc_id"] for r in _search(store, "crane lift panel girder", work_package="lifting")["results"]
    }
    assert lifting == {"rt-swms-precast-panels", "hb-crane-lift-plan"}
    project = {
        r["doc_id"]
        for r in _search(store, "crane lift excavation scaffold", project="riverside-tower")["results"]
    }
    assert project == {"rt-swms-precast-panels", "rt-method-basement-dig", "rt-scaffold-inspection"}
    asset = _search(store, "scaffold guardrail inspection", asset_id="SCAF-A-03")["results"]
    assert {r["doc_id"] for r in asset} == {"rt-scaffold-inspection"}
    by_guid = _search(store, "panel", asset_id="1hOSvn6df7F8_7GcBWlRGQ")["results"]
    assert {r["doc_id"] for r in by_guid} == {"rt-swms-precast-panels"}
    # phase=structure: the structure records and the guidance written for every phase
    structure = {
        r["doc_id"] for r in _search(store, "crane guardrail hazard panel", phase="structure")["results"]
    }
    assert structure == {"rt-swms-precast-panels", "hb-crane-lift-plan", "guide-falls", "guide-whs-risk"}


def test_cli_shows_the_fields_and_the_asset_link(store: Path) -> None:
    res = CliRunner().invoke(
        app,
        [
            "search",
            "lifting inserts tilt-up panel",
            "--store",
            str(store),
            "--method",
            "bm25",
            "--filter",
            "work_package=lifting",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    hits = json.loads(res.stdout)["results"]
    assert hits[0]["fields"]["work_package"] == ["precast_tiltup", "lifting"]
    res = CliRunner().invoke(
        app, ["search", "lifting inserts tilt-up panel", "--store", str(store), "--method", "bm25"]
    )
    assert res.exit_code == 0, res.output
    assert "work package: precast_tiltup, lifting" in res.output
    assert "asset: 2O2Fr$t4X7Zf8NOew3FLOH <https://bim.example.com/viewer?guid=2O2Fr%24t4X7Zf8NOew3FLOH>" in (
        " ".join(res.output.split())
    )


def test_ingest_refuses_a_bad_asset_url_before_any_work(folders: tuple[Path, Path], tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app,
        [
            "ingest",
            "--corpus",
            str(folders[1]),
            "--store",
            str(tmp_path / "s"),
            "--asset-url",
            "ftp://x/{asset_id}",
        ],
    )
    assert res.exit_code != 0 and "http:// or https://" in res.output
    assert not (tmp_path / "s").exists()


def test_web_api_and_page_show_fields_facets_and_asset_links(store: Path) -> None:
    from service_client import LocalClient

    from sourcepage.retrieval.index import build_indexes
    from sourcepage.service.app import create_app

    build_indexes(store, ["raw"], ["bm25"])  # the service never builds one
    with LocalClient(create_app(store)) as c:
        body = {
            "question": "lifting inserts tilt-up panel",
            "method": "bm25",
            "filters": {"asset_id": "CR-02"},
        }
        hits = c.post("/search", json=body).json()["results"]
        assert [h["doc_id"] for h in hits] == ["hb-crane-lift-plan"]
        assert hits[0]["fields"]["project"] == ["harbour-bridge"]
        assert hits[0]["asset_links"] == [
            {"asset_id": "CR-02", "url": "https://bim.example.com/viewer?guid=CR-02"}
        ]
        page = c.get(
            "/", params={"q": "lifting inserts tilt-up panel", "method": "bm25", "work_package": "lifting"}
        )
        assert page.status_code == 200, page.text
        html = page.text
        assert 'href="https://bim.example.com/viewer?guid=2O2Fr%24t4X7Zf8NOew3FLOH"' in html
        assert '<span class="field-name">Work package</span> precast tiltup, lifting</span>' in " ".join(
            html.split()
        )
        assert '<select name="work_package">' in html and '<option value="lifting" selected>' in html
        assert '<select name="project">' in html and '<option value="harbour-bridge"' in html
        assert "rt-method-basement-dig" not in html  # filtered out: excavation only
        view = c.get("/view/rt-scaffold-inspection%23p1", params={"q": "scaffold tag", "method": "bm25"})
        assert view.status_code == 200, view.text
        flat = " ".join(view.text.split())
        assert '<dt>Contractor</dt><dd data-field="contractor">ScaffCo</dd>' in flat
        assert '<a class="asset" href="https://bim.example.com/viewer?guid=SCAF-A-03"' in flat


PROJECT_QUESTIONS = [
    (
        "P1",
        "What must the crew check on the lifting inserts before a tilt-up panel lift?",
        "rt-swms-precast-panels#p1",
        "structure",
        "precast_tiltup;lifting",
    ),
    (
        "P2",
        "How large is the exclusion zone below a panel lift?",
        "rt-swms-precast-panels#p2",
        "structure",
        "lifting",
    ),
    (
        "P3",
        "What trench shoring is used in the basement excavation?",
        "rt-method-basement-dig#p1",
        "groundworks",
        "excavation",
    ),
    (
        "P4",
        "What duty load is the scaffold bay rated for?",
        "rt-scaffold-inspection#p1",
        "envelope",
        ["scaffolding"],
    ),
]


def test_eval_report_has_tables_by_phase_and_work_package(folders: tuple[Path, Path], tmp_path: Path) -> None:
    from sourcepage.evaluation.experiment import Design, run_experiment

    qs = [
        {
            "id": i,
            "question": q,
            "topic": "construction",
            "type": "direct",
            "answerability": "answerable",
            "phase": ph,
            "work_package": wp,
            "evidence": [{"page": page, "grade": 2, "excerpt": "x"}],
        }
        for i, q, page, ph, wp in PROJECT_QUESTIONS
    ]
    qs[0]["names_jurisdiction"] = "AU;US"  # a ;-list string, as the construction set writes it
    qs[1]["names_jurisdiction"] = ["AU"]  # a JSON list, as intl20 does
    qs.append(
        {
            "id": "U1",
            "question": "What is the noise limit for piling rigs?",
            "topic": "construction",
            "type": "direct",
            "answerability": "unsupported",
            "phase": "groundworks",
            "work_package": "piling",
        }
    )
    qs.append(
        {
            "id": "O1",
            "question": "How long should sourdough proof?",
            "topic": "none",
            "type": "direct",
            "answerability": "out_of_domain",
        }
    )
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps(q) for q in qs) + "\n")
    out = tmp_path / "out"
    run_experiment(folders[1], path, out, design=Design(blocks=[(["raw"], ["bm25"])], bootstrap=200))
    rows = {
        r["question_id"]: r for r in map(json.loads, (out / "per_question.jsonl").read_text().splitlines())
    }
    assert rows["P1"]["work_package"] == ["precast_tiltup", "lifting"] and rows["P4"]["phase"] == ["envelope"]
    assert "phase" not in rows["O1"]
    assert rows["P1"]["named_jurisdiction"] == "AU+US" and rows["P2"]["named_jurisdiction"] == "AU"
    report = (out / "report.md").read_text()
    table = report.split("## By project phase")[1].split("\n## ")[0]
    lines = [x for x in table.splitlines() if x.startswith("| ")]
    assert lines[0] == "| project phase | answerable | unsupported / ood | raw bm25 |"
    structure = [rows[q] for q in ("P1", "P2")]
    h3 = sum(r["hit@3"] for r in structure) / 2
    rr = sum(r["mrr"] for r in structure) / 2
    assert lines[1:] == [
        f"| envelope | 1 | 0 / 0 | {rows['P4']['hit@3']:.2f} / {rows['P4']['mrr']:.2f} |",
        f"| groundworks | 1 | 1 / 0 | {rows['P3']['hit@3']:.2f} / {rows['P3']['mrr']:.2f} |",
        f"| structure | 2 | 0 / 0 | {h3:.2f} / {rr:.2f} |",
    ]
    wp = report.split("## By work package")[1].split("\n## ")[0]
    groups = {x.split(" | ")[0].strip("| "): x for x in wp.splitlines() if x.startswith("| ")}
    assert groups.pop("work package") == "| work package | answerable | unsupported / ood | raw bm25 |"
    assert list(groups) == ["excavation", "lifting", "piling", "precast_tiltup", "scaffolding"]
    assert groups["lifting"].startswith("| lifting | 2 | 0 / 0 |")
    assert groups["piling"] == "| piling | 0 | 1 / 0 | – |"  # an unsupported question only
