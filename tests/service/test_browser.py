"""End to end in Debian's Chromium, driven by Playwright (no browser download).

Skipped when /usr/bin/chromium or the playwright package is absent. Screenshots go to
``test-artifacts/``; with SOURCEPAGE_SCREENSHOT=docs/screenshot.png the results page
is also saved there for the README.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = [
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install chromium)"
    ),
    pytest.mark.usefixtures("browser_watchdog"),
    pytest.mark.flaky(reruns=1),  # a hung browser is killed by the watchdog (conftest) and run again
]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(fresh_store: Path):
    import uvicorn

    from sourcepage.service.app import create_app
    from sourcepage.store.reviewers import add_reviewer

    token = add_reviewer(fresh_store, "ada")
    port = _free_port()
    srv = uvicorn.Server(
        uvicorn.Config(create_app(fresh_store), host="127.0.0.1", port=port, log_level="warning")
    )
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    deadline = time.time() + 20
    while not srv.started:
        if time.time() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", token
    srv.should_exit = True
    t.join(timeout=10)


def test_search_view_and_review_in_chromium(server: tuple[str, str]) -> None:
    server, token = server
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(server + "/login")  # recording a decision needs a reviewer
            page.fill("input[name=token]", token)
            page.click("form[action='/login'] button[type=submit]")
            page.wait_for_selector("input[name=q]")
            assert "Sign out ada" in page.locator("header").inner_text()
            page.fill("input[name=q]", "What hearing protection is needed, and who may remove a lock?")
            page.select_option("select[name=method]", "bm25")
            page.click("form.search button[type=submit]")
            page.wait_for_selector("ol.cards li.card")
            banner = page.locator(".banner")
            assert banner.get_attribute("data-decision") in ("answer", "refuse", "review")
            assert page.locator(".juris-note").count() == 1  # UK and US pages at the top
            assert page.locator("ol.cards li.card").count() == 10
            assert page.locator("ol.cards mark.hit").count() > 0
            page.screenshot(path=str(ARTIFACTS / "results.png"), full_page=True)
            shot = os.environ.get("SOURCEPAGE_SCREENSHOT")
            if shot:
                Path(shot).parent.mkdir(parents=True, exist_ok=True)
                page.set_viewport_size({"width": 1280, "height": 1100})
                page.screenshot(path=shot, full_page=False)

            first = page.locator("ol.cards li.card").first
            page_id = first.get_attribute("data-page")
            first.locator("a.title").click()
            page.wait_for_selector("figure.page-image img")
            img = page.locator("figure.page-image img")
            page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=img.element_handle())
            assert img.evaluate("img => img.naturalWidth") > 500
            assert page.locator("pre.page-text mark.ev").count() > 0
            page.click("button.tab[data-tab=text-cleaned]")
            assert page.locator("#text-cleaned").is_visible() and not page.locator("#text-raw").is_visible()
            page.screenshot(path=str(ARTIFACTS / "view.png"), full_page=True)

            page.check("input[name=decision][value=answer]")
            page.fill("input[name=reviewer]", "ada")
            page.fill("textarea[name=note]", "This page states the exposure action values.")
            page.click("section.review button[type=submit]")
            page.wait_for_selector("p.success")
            page.evaluate("window.scrollTo(0, 0)")
            assert "Recorded as review #1" in page.locator("p.success").inner_text()
            page.screenshot(path=str(ARTIFACTS / "recorded.png"), full_page=True)

            page.goto(server + "/review-log")
            assert "ada" in page.locator("table.log").inner_text()
        finally:
            browser.close()
    reviews = httpx.get(server + "/reviews").json()["reviews"]
    assert len(reviews) == 1
    assert reviews[0]["reviewer"] == "ada" and reviews[0]["decision"] == "answer"
    assert reviews[0]["pages"] == [page_id]
    assert reviews[0]["question"].startswith("What hearing protection")


def test_phone_width_quotes_and_citations_in_chromium(server: tuple[str, str]) -> None:
    """At 390 px (a phone) neither the results nor the page view scrolls sideways; a
    citation link carries the question, the chunk and the quote, and the page view marks
    the quoted sentence; the site has an icon."""
    server, _token = server  # reading needs no reviewer on this machine
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 390, "height": 844})
            page.goto(server + "/?q=Who+may+remove+a+lock+from+the+group+lockbox%3F&method=bm25&k=10")
            page.wait_for_selector("ol.cards li.card")
            assert page.evaluate("document.documentElement.scrollWidth") <= 390
            page.screenshot(path=str(ARTIFACTS / "results-390.png"), full_page=True)
            cite = page.locator(".quotes a.cite").first
            href = cite.get_attribute("href") or ""
            assert "q=Who+may+remove" in href and "chunk=" in href and "quote=" in href
            cite.click()
            page.wait_for_selector("figure.page-image img")
            assert page.evaluate("document.documentElement.scrollWidth") <= 390
            assert page.locator("pre.page-text mark.quote").count() > 0
            assert page.locator(".banner").get_attribute("data-decision") in ("answer", "review")
            # each legend swatch sits on the line of its label, also where the legend wraps
            lines = page.eval_on_selector_all(
                "figure.page-image figcaption .key",
                "keys => keys.map(k => { const r = document.createRange(); r.selectNodeContents(k);"
                " const mid = [...r.getClientRects()].map(c => (c.top + c.bottom) / 2);"
                " return Math.max(...mid) - Math.min(...mid); })",
            )
            assert len(lines) == 3 and max(lines) < 8, lines  # one line each
            page.screenshot(path=str(ARTIFACTS / "view-390.png"), full_page=True)
        finally:
            browser.close()
    icon = httpx.get(server + "/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/x-icon"
