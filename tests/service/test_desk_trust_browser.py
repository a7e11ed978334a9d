"""The desk a reviewer can trust (issue 49), walked in Debian's Chromium at 1280 and 390 px:
the case starts with nothing of the system's accepted (pages unticked, with their ranks;
answer and quotes empty beside the draft, which buttons copy); the form scrolls with the
page (no panel scrolling inside it); a quote copied from the draft is refused, in the form,
until its page is ticked; the session ends while typing and the form comes back filled after
sign-in; the question asked again reads the reviewed answer as the answer (no referral
banner); the page view's review form keeps its text through a sign-in too.

Screenshots go to ``test-artifacts/``; with SOURCEPAGE_DESK_SCREENSHOTS=docs they are also
saved in docs/ (desk-case.png, desk-case-390.png, desk-quote-refused.png,
desk-answered.png, desk-again.png, desk-again-390.png).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sourcepage.service.app import create_app
from sourcepage.store.reviewers import add_reviewer

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
QUESTION = "hearing protection and who may remove a lock"
ANSWER = (
    "Hearing protection must be available on request from 80 dB(A) and worn in the marked zone from"
    " 85 dB(A); a lock is removed only by the employee who applied it."
)
#: the lock half of the question: on this page, which the draft does not quote
LOCK_PAGE = "loto_energy_control#p3"
LOCK_QUOTE = "Each lock is removed by the employee who applied it."

pytestmark = [
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install chromium)"
    ),
    pytest.mark.usefixtures("browser_watchdog"),
    pytest.mark.flaky(reruns=1),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")


@pytest.fixture
def served(fresh_store: Path) -> Iterator[tuple[str, str]]:
    """(base URL, ada's token) of uvicorn serving a copy of the test store."""
    import uvicorn

    token = add_reviewer(fresh_store, "ada")
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
    yield f"http://127.0.0.1:{port}", token
    srv.should_exit = True
    thread.join(timeout=15)


def _shot(page: object, name: str, width: int, full: bool = True) -> None:
    """A screenshot in test-artifacts/, and in docs/ when asked (the 390 px one named so)."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)  # type: ignore[attr-defined]
    docs = os.environ.get("SOURCEPAGE_DESK_SCREENSHOTS")
    if docs:
        file = f"{name}.png" if width == 1280 else f"{name}-{width}.png"
        page.screenshot(path=str(Path(docs) / file), full_page=full)  # type: ignore[attr-defined]


def _sign_in(page: object, token: str) -> None:
    page.fill("input[name=token]", token)  # type: ignore[attr-defined]
    page.click("form[action='/login'] button[type=submit]")  # type: ignore[attr-defined]


def _sign_out_elsewhere(ctx: object, base: str) -> None:
    """The session ends (signed out in another tab of the same browser)."""
    other = ctx.new_page()  # type: ignore[attr-defined]
    other.goto(base + "/desk")
    other.click("header form[action='/logout'] button")
    other.close()


def _one_scroll(page: object) -> None:
    """Neither the form nor anything around it scrolls inside the page."""
    nested = page.evaluate(  # type: ignore[attr-defined]
        """() => {
            const out = [];
            let e = document.querySelector("section.case-form");
            for (; e && e !== document.body; e = e.parentElement) {
                const s = getComputedStyle(e);
                if (["auto", "scroll"].includes(s.overflowY) || e.scrollHeight > e.clientHeight + 1)
                    out.push(e.className || e.tagName);
            }
            return out;
        }"""
    )
    assert nested == []


@pytest.mark.parametrize("width", [1280, 390])
def test_the_desk_walk_in_chromium(served: tuple[str, str], width: int) -> None:
    base, token = served
    res = httpx.post(base + "/search", json={"question": QUESTION}).json()
    assert res["decision"] == "review"
    rid = res["referral"]["id"]
    draft = res["answer"]["quotes"][0]
    shown = [r["page"] for r in res["results"][:5]]
    assert LOCK_PAGE in shown and draft["page"] != LOCK_PAGE
    viewport = {"width": width, "height": 900 if width > 600 else 844}
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            ctx = browser.new_context(viewport=viewport)
            rev = ctx.new_page()
            rev.goto(f"{base}/desk/{rid}")
            _sign_in(rev, token)
            rev.wait_for_selector("section.case-form textarea[name=answer]")
            boxes = rev.locator("input[name=pages]")
            assert boxes.count() >= 5 and not [i for i in range(boxes.count()) if boxes.nth(i).is_checked()]
            assert "rank 1" in rev.inner_text("fieldset.pages")
            assert (
                rev.input_value("textarea[name=answer]") == ""
                and rev.input_value("textarea[name=quotes]") == ""
            )
            assert rev.locator("aside.draft-beside").is_visible()
            _one_scroll(rev)
            assert rev.evaluate("document.documentElement.scrollWidth") <= width
            rev.locator("aside.draft-beside").scroll_into_view_if_needed()
            _shot(rev, "desk-case", width, full=False)

            # the draft's first quote copied, only the lock page ticked: refused in the form
            rev.check("input[name=decision][value=answer]")
            rev.locator("aside.draft-beside button[data-copy-to=quotes]").first.click()
            assert rev.input_value("textarea[name=quotes]") == draft["text"]
            rev.fill("textarea[name=answer]", ANSWER)
            rev.check(f"input[name=pages][value='{LOCK_PAGE}']")
            rev.click("section.case-form button[type=submit]")
            rev.wait_for_selector("p.form-error")
            error = rev.inner_text("p.form-error")
            assert f"is not on an accepted page ({LOCK_PAGE}): it is on {draft['page']}" in error
            assert rev.input_value("textarea[name=answer]") == ANSWER  # kept
            rev.locator("p.form-error").scroll_into_view_if_needed()
            _shot(rev, "desk-quote-refused", width, full=False)

            # the quote's page ticked too, the lock sentence quoted; the session ends before it is sent
            rev.check(f"input[name=pages][value='{draft['page']}']")
            quotes = draft["text"] + "\n" + LOCK_QUOTE
            rev.fill("textarea[name=quotes]", quotes)
            _sign_out_elsewhere(ctx, base)
            rev.click("section.case-form button[type=submit]")
            rev.wait_for_selector("input[name=token]")
            assert httpx.get(f"{base}/referrals/{rid}").json()["status"] == "pending"
            _sign_in(rev, token)
            rev.wait_for_selector("form[data-restored='1']")
            assert rev.input_value("textarea[name=answer]") == ANSWER
            assert rev.input_value("textarea[name=quotes]") == quotes
            assert rev.is_checked(f"input[name=pages][value='{draft['page']}']")
            assert rev.is_checked(f"input[name=pages][value='{LOCK_PAGE}']")
            rev.click("section.case-form button[type=submit]")
            rev.wait_for_selector("[data-status=decided]")
            _shot(rev, "desk-answered", width, full=False)

            # asked again: the reviewed answer is the answer
            asker = browser.new_context(viewport=viewport).new_page()
            asker.goto(base + "/?" + str(httpx.QueryParams({"q": QUESTION})))
            asker.wait_for_selector("section.reviewed")
            text = asker.inner_text("section.reviewed")
            assert ANSWER in text and "ada" in text and draft["page"] in text
            assert asker.locator("[data-decision=review]").count() == 0
            assert "Refer to a reviewer" not in asker.inner_text("main")
            assert asker.evaluate("document.documentElement.scrollWidth") <= width
            _shot(asker, "desk-again", width, full=False)
        finally:
            browser.close()
    got = httpx.get(f"{base}/referrals/{rid}").json()["decision"]
    assert sorted(got["pages"]) == sorted([draft["page"], LOCK_PAGE]) and got["reviewer"] == "ada"
    assert got["quotes"] == [draft["text"], LOCK_QUOTE]


def test_the_page_view_form_survives_a_sign_in_in_chromium(served: tuple[str, str]) -> None:
    base, token = served
    url = base + "/view/loto_energy_control%23p3?" + str(httpx.QueryParams({"q": "who removes a lock"}))
    note = "The supervisor may remove it only after the three checks."
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            ctx = browser.new_context(viewport={"width": 390, "height": 844})
            page = ctx.new_page()
            page.goto(base + "/login")
            _sign_in(page, token)
            page.wait_for_url(base + "/")
            page.goto(url)
            page.check("#review input[name=decision][value=answer]")
            page.fill("#review textarea[name=note]", note)
            _sign_out_elsewhere(ctx, base)
            page.click("#review button[type=submit]")
            page.wait_for_selector("input[name=token]")
            _sign_in(page, token)
            page.wait_for_selector("form[data-restored='1']")
            assert "restore=1" in page.url
            assert page.input_value("#review textarea[name=note]") == note
            assert page.is_checked("#review input[name=decision][value=answer]")
            page.click("#review button[type=submit]")
            page.wait_for_selector("p.success")
        finally:
            browser.close()
    (rec,) = httpx.get(base + "/reviews").json()["reviews"]
    assert rec["note"] == note and rec["reviewer"] == "ada" and rec["pages"] == ["loto_energy_control#p3"]
