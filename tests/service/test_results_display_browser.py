"""At 390 px (a phone) in Debian's Chromium the search form shows its question placeholder
and the method's name whole (issue 49: both were cut), and no card passage is a box that
scrolls or ends mid-line. The page is saved as test-artifacts/search-390.png (and
docs/search-390.png with SOURCEPAGE_DESK_SCREENSHOTS=docs)."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sourcepage.service.app import create_app

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]

pytestmark = [
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install chromium)"
    ),
    pytest.mark.usefixtures("browser_watchdog"),
    pytest.mark.flaky(reruns=1),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

#: the text a form control shows, measured in its own font, against the room it has for it
FITS = """(sel) => {
    const el = document.querySelector(sel);
    const s = getComputedStyle(el);
    const ctx = document.createElement("canvas").getContext("2d");
    ctx.font = `${s.fontStyle} ${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
    const text = el.tagName === "SELECT" ? el.options[el.selectedIndex].text : el.placeholder;
    const pad = parseFloat(s.paddingLeft) + parseFloat(s.paddingRight);
    const arrow = el.tagName === "SELECT" ? 24 : 0;  // the select's drop-down arrow
    return {text, need: ctx.measureText(text).width, room: el.clientWidth - pad - arrow};
}"""


@pytest.fixture
def base(fresh_store: Path) -> Iterator[str]:
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(
        uvicorn.Config(create_app(fresh_store), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not srv.started:
        assert time.time() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=15)


def test_the_search_form_and_cards_at_390_px_in_chromium(base: str) -> None:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 390, "height": 844})
            page.goto(base + "/")
            placeholder = page.evaluate(FITS, "input[name=q]")
            assert placeholder["text"] and placeholder["need"] <= placeholder["room"], placeholder
            method = page.evaluate(FITS, "select[name=method]")
            assert ":" in method["text"] and method["need"] <= method["room"], method  # sect:route:rrf:…
            page.goto(base + "/?q=Who+may+remove+a+lock+from+the+group+lockbox%3F&k=10")
            page.wait_for_selector("ol.cards li.card")
            assert page.evaluate(FITS, "select[name=method]")["need"] <= method["room"]
            boxes = page.eval_on_selector_all(
                "blockquote.passage",
                "els => els.map(e => [e.scrollHeight - e.clientHeight, getComputedStyle(e).overflowY])",
            )
            assert boxes and all(extra <= 1 and flow == "visible" for extra, flow in boxes), boxes
            assert page.evaluate("document.documentElement.scrollWidth") <= 390
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "search-390.png"), full_page=False)
            docs = os.environ.get("SOURCEPAGE_DESK_SCREENSHOTS")
            if docs:
                page.screenshot(path=str(Path(docs) / "search-390.png"), full_page=False)
        finally:
            browser.close()
