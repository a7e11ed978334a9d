"""The editor's walk in Debian's Chromium (Playwright, no browser download), at 1280 and
390 px: sign in as an editor, upload a PDF from the library page, check the drafted form
(guesses marked), add it, follow the progress, find it with a search, see it in the
library, withdraw it. Screenshots (the drafted form, the progress) in ``test-artifacts/``,
and in ``docs/`` with SOURCEPAGE_UPLOAD_SHOTS=docs."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sourcepage.service.app import create_app
from sourcepage.store.reviewers import EDITOR, add_reviewer

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
OSHA_PDF = Path("/work/shared/corpus/pdf/osha-factsheet-lockout-tagout-es.pdf")
QUESTION = "¿Qué es la norma sobre el control de fuentes de energía peligrosas? candado etiqueta"

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent"),
    pytest.mark.skipif(not OSHA_PDF.is_file(), reason=f"{OSHA_PDF} is absent"),
    pytest.mark.usefixtures("browser_watchdog"),
    pytest.mark.flaky(reruns=1),  # a hung browser is killed by the watchdog (conftest) and run again
]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")


@pytest.fixture
def served(fresh_store: Path, tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """(base URL, an editor's token, the PDF to upload: one, copied to the test's folder)."""
    import uvicorn

    from tests.service.test_browser import _free_port

    token = add_reviewer(fresh_store, "ed", [EDITOR])
    folder = tmp_path / "upload"
    folder.mkdir()
    pdf = Path(shutil.copyfile(OSHA_PDF, folder / OSHA_PDF.name))
    srv = uvicorn.Server(
        uvicorn.Config(create_app(fresh_store), host="127.0.0.1", port=_free_port(), log_level="warning")
    )
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    deadline = time.time() + 20
    while not srv.started:
        assert time.time() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{srv.config.port}", token, pdf
    srv.should_exit = True
    t.join(timeout=10)


def _shots(name: str) -> list[Path]:
    ARTIFACTS.mkdir(exist_ok=True)
    extra = os.environ.get("SOURCEPAGE_UPLOAD_SHOTS")
    return [ARTIFACTS / name] + ([Path(extra) / name] if extra else [])


@pytest.mark.parametrize("width", [1280, 390])
def test_upload_progress_search_library_withdraw_in_chromium(
    served: tuple[str, str, Path], width: int
) -> None:
    base, token, pdf = served
    doc_id = "osha-factsheet-lockout-tagout-es"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto(base + "/login?next=/library")
            page.fill("input[name=token]", token)
            page.click("form[action='/login'] button[type=submit]")
            page.wait_for_selector("details.add-doc")
            page.click("details.add-doc summary")
            page.set_input_files("details.add-doc input[type=file]", str(pdf))
            page.click("details.add-doc button[type=submit]")

            # the form drafted from the PDF, its guesses marked
            page.wait_for_selector("form.add-form")
            assert page.input_value("input[name=doc_id]") == doc_id
            assert page.locator("dd.guessed[data-field=authority] .chip.guessed").count() == 1
            assert page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways scroll
            for shot in _shots(f"upload-{width}.png"):
                page.screenshot(path=str(shot), full_page=True)
            page.fill("input[name=title]", "Control de energía peligrosa (hoja informativa de OSHA)")
            page.click("form.add-form button[type=submit]")

            # the progress view, then the library with the new document
            page.wait_for_selector("section.job[data-job]")
            for shot in _shots(f"upload-progress-{width}.png"):  # most often mid-way (the job runs seconds)
                page.screenshot(path=str(shot), full_page=False)
            page.wait_for_selector("section.job[data-phase=done]", timeout=120_000)
            assert "searches read it now" in page.locator("section.job").inner_text()
            assert page.locator(f"li.doc[data-doc='{doc_id}']").count() == 1
            assert "(guessed)" in page.locator(f"li.doc[data-doc='{doc_id}']").inner_text()
            assert page.evaluate("document.documentElement.scrollWidth") <= width

            if width == 1280:  # a new edition: the fields given to the first one are kept
                edition = pdf.with_name("edicion-2.pdf")
                edition.write_bytes(pdf.read_bytes() + b"\n% edition 2\n")
                row = page.locator(f"li.doc[data-doc='{doc_id}']")
                row.locator("form.replace input[type=file]").set_input_files(str(edition))
                row.locator("form.replace button[type=submit]").click()
                page.wait_for_selector("form.add-form")
                assert page.input_value("input[name=title]").startswith("Control de energía peligrosa")
                assert page.get_attribute("input[name=doc_id]", "readonly") is not None
                page.click("form.add-form button[type=submit]")
                page.wait_for_selector("section.job[data-phase=done]", timeout=120_000)
                assert "edition 2" in page.locator(f"li.doc[data-doc='{doc_id}']").inner_text()

            # searchable
            page.goto(base + "/")
            page.fill("input[name=q]", QUESTION)
            page.select_option("select[name=method]", "bm25")
            page.click("form.search button[type=submit]")
            page.wait_for_selector("ol.cards li.card")
            assert (page.locator("ol.cards li.card").first.get_attribute("data-page") or "").startswith(
                doc_id
            )

            # withdrawn from the library page: no longer searched
            page.goto(base + "/library")
            row = page.locator(f"li.doc[data-doc='{doc_id}']")
            row.locator("input[name=reason]").fill("walk test")
            row.locator("form.withdraw button[type=submit]").click()
            page.wait_for_selector("section.job[data-phase=done]", timeout=120_000)
            assert page.locator(f"li.doc[data-withdrawn='{doc_id}']").count() == 1
            assert page.locator(f"li.doc[data-doc='{doc_id}']").count() == 0
            page.goto(base + "/")
            page.fill("input[name=q]", QUESTION)
            page.select_option("select[name=method]", "bm25")
            page.click("form.search button[type=submit]")
            page.wait_for_selector("ol.cards li.card")
            pages = [c.get_attribute("data-page") or "" for c in page.locator("ol.cards li.card").all()]
            assert not any(p.startswith(doc_id) for p in pages)
        finally:
            browser.close()
