"""The library: ``GET /documents`` (provenance, page count, audit flags, guessed fields,
with a declared response model) and the ``/library`` page, by real requests; read only;
and in Chromium at 1280 and 390 px on a store drafted from real PDFs (screenshots in
``test-artifacts/``, and in ``docs/`` with SOURCEPAGE_LIBRARY_SHOTS=docs)."""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sourcepage.cli import app as cli
from sourcepage.corpus.audit import summarize_audit
from sourcepage.retrieval.index import build_indexes
from sourcepage.service.app import create_app
from sourcepage.store.db import Store
from tests.service_client import LocalClient

SHARED = Path("/work/shared")
PICKED = (
    SHARED / "corpus" / "pdf" / "osha3120-lockout-tagout.pdf",
    SHARED / "corpus-intl" / "pdf" / "nz-hswa-2015-as-at-2025-04-05.pdf",
    SHARED / "corpus-intl" / "pdf" / "uk-hse-l74-first-aid-at-work.pdf",
    SHARED / "corpus-intl" / "pdf" / "osha3903-factsheet-walking-working-surfaces.pdf",
)


@pytest.fixture
def client(fresh_store: Path) -> Iterator[LocalClient]:
    with LocalClient(create_app(fresh_store)) as c:
        yield c


def _files(store: Path) -> dict[str, str]:
    return {
        str(p.relative_to(store)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(store.rglob("*"))
        if p.is_file()
    }


def test_documents_json_has_provenance_audit_and_keeps_its_fields(
    client: LocalClient, fresh_store: Path
) -> None:
    before = _files(fresh_store)
    docs = client.get("/documents").json()
    assert [d["doc_id"] for d in docs] == sorted(d["doc_id"] for d in docs)
    by_id = {d["doc_id"]: d for d in docs}
    loto = by_id["loto_energy_control"]
    # the manifest row as before (extra columns among them), then what the store knows
    assert {
        "title",
        "authority",
        "jurisdiction",
        "year",
        "sha256",
        "license",
        "source_url",
        "project_type",
    } <= set(loto)
    assert loto["page_count"] == 3 and loto["version"] == 1 and loto["ingested_at"].endswith("Z")
    assert loto["guessed"] == [] and loto["first_page"] == "loto_energy_control#p1"
    # the audit counts are the store's page audit (`sourcepage audit`)
    summaries = {s.doc_id: s for s in summarize_audit(Store(fresh_store).page_rows())[0]}
    for d in docs:
        s = summaries[d["doc_id"]]
        assert d["audit"]["column_risk_pages"] == s.counts["multi_column_risk"]
        assert d["audit"]["low_text_pages"] == s.counts["low_text_100"]
        assert d["audit"]["ocr_pages"] == s.counts["ocr"]
    assert by_id["machine_guarding"]["audit"]["column_risk_pages"] >= 1
    schema = client.get("/openapi.json").json()
    ok = schema["paths"]["/documents"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok["items"]["$ref"].endswith("/LibraryDocument")
    assert {"audit", "guessed", "page_count"} <= set(
        schema["components"]["schemas"]["LibraryDocument"]["properties"]
    )
    # the library page, filtered, each document linking to its first page
    html = client.get("/library").text
    assert html.count('class="doc"') == len(docs) and 'href="/view/loto_energy_control%23p1"' in html
    only = client.get("/library", params={"jurisdiction": "UK"}).text
    uk = [d for d in docs if d["jurisdiction"] == "UK"]
    assert uk and only.count('class="doc"') == len(uk) and "hse_ppe_at_work" in only
    assert "No document matches" in client.get("/library", params={"topic": "nothing-such"}).text
    assert client.get("/view/loto_energy_control%23p1").status_code == 200
    assert _files(fresh_store) == before  # read-only GETs wrote nothing


@pytest.fixture(scope="module")
def drafted_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store ingested from real PDFs copied without their manifest, the draft accepted;
    one row then checked by a person (its guesses cleared, licence and source filled)."""
    if not all(p.is_file() for p in PICKED):
        pytest.skip("shared corpus PDFs absent")
    base = tmp_path_factory.mktemp("library")
    folder = base / "team-pdfs"
    folder.mkdir()
    for p in PICKED:
        shutil.copy(p, folder / p.name)
    assert CliRunner().invoke(cli, ["manifest", "draft", str(folder)]).exit_code == 0
    manifest = folder / "manifest.csv"
    with manifest.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        header, rows = list(reader.fieldnames or []), list(reader)
    for row in rows:
        if row["doc_id"] == "osha3120-lockout-tagout":  # a person checked this one
            row["source_url"] = "https://www.osha.gov/sites/default/files/publications/osha3120.pdf"
            row["license"] = "US Government work - public domain (17 USC 105)"
            row["guessed"] = ""
    with manifest.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        w.writerows(rows)
    store = base / "store"
    res = CliRunner().invoke(cli, ["ingest", "--corpus", str(folder), "--store", str(store)])
    assert res.exit_code == 0, res.output
    return store


def test_drafted_documents_say_what_was_guessed(drafted_store: Path, tmp_path: Path) -> None:
    store = Path(shutil.copytree(drafted_store, tmp_path / "store"))
    build_indexes(store, ["raw"], ["bm25"])
    with LocalClient(create_app(store)) as c:
        docs = {d["doc_id"]: d for d in c.get("/documents").json()}
        html = c.get("/library").text
        page = c.get("/", params={"q": "What are the duties of officers?", "method": "bm25"}).text
    assert "NZ (guessed from the text)" in page  # the result cards say it too
    assert docs["osha3120-lockout-tagout"]["guessed"] == []
    assert docs["osha3120-lockout-tagout"]["license"].startswith("US Government work")
    nz = docs["nz-hswa-2015-as-at-2025-04-05"]
    assert (
        nz["jurisdiction"] == "NZ" and "jurisdiction" in nz["guessed"] and nz["license"] == "unknown — check"
    )
    assert "NZ (guessed)" in html and "unknown — check" in html


CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent")
@pytest.mark.usefixtures("browser_watchdog")
def test_library_in_chromium_at_1280_and_390(drafted_store: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    import uvicorn

    from tests.service.test_browser import _free_port

    srv = uvicorn.Server(
        uvicorn.Config(create_app(drafted_store), host="127.0.0.1", port=_free_port(), log_level="warning")
    )
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    while not srv.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{srv.config.port}"
    shots = [ARTIFACTS] + (
        [Path(os.environ["SOURCEPAGE_LIBRARY_SHOTS"])] if os.environ.get("SOURCEPAGE_LIBRARY_SHOTS") else []
    )
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            try:
                for width in (1280, 390):
                    page = browser.new_page(viewport={"width": width, "height": 900})
                    page.goto(base + "/library")
                    assert page.locator("ol.library li.doc").count() == len(PICKED)
                    assert (
                        page.evaluate("document.documentElement.scrollWidth") <= width
                    )  # no sideways scroll
                    for d in shots:
                        page.screenshot(path=str(d / f"library-{width}.png"), full_page=False)
                    page.select_option("select[name=jurisdiction]", "NZ")
                    page.click("form.library-filters button[type=submit]")
                    page.wait_for_url("**jurisdiction=NZ**")
                    assert page.locator("ol.library li.doc").count() == 1
                    page.locator("ol.library a.title").first.click()
                    page.wait_for_selector("figure.page-image img")
                    assert "nz-hswa-2015-as-at-2025-04-05#p1" in page.content()
                    page.close()
            finally:
                browser.close()
    finally:
        srv.should_exit = True
        t.join(timeout=10)
