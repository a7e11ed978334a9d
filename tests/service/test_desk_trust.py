"""The desk a reviewer can trust (issue 49), through real requests: nothing of the system's
is accepted for the reviewer (its pages are unticked suggestions with their ranks, the
answer and quotes boxes start empty beside its draft); an answer needs an accepted page and
each quoted sentence on one of them (a 422 shown in the form, what was typed kept); the same
question asked again reads the reviewed answer as the answer, without the system's
referral banner; a review form posted after the session ended goes to sign-in and back."""

from __future__ import annotations

import html
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from sourcepage.cli import app as cli
from sourcepage.labels import quotecheck, referrals
from sourcepage.service.app import create_app
from sourcepage.store.reviewers import add_reviewer

LOCAL = "http://127.0.0.1"
REFERRED = "hearing protection and who may remove a lock"
#: on loto_energy_control#p3 (tests/pdf_factory.py), not on #p2
ON_P3 = "Each lock is removed by the employee who applied it."


@pytest.fixture
def client(fresh_store: Path) -> TestClient:
    with TestClient(create_app(fresh_store), base_url=LOCAL) as c:
        yield c


def _refer(client: TestClient) -> int:
    res = client.post("/search", json={"question": REFERRED}).json()
    assert res["decision"] == "review", res["reasons"]
    return int(res["referral"]["id"])


def _signed_in(client: TestClient, store: Path, rid: int) -> str:
    """Sign ada in; the CSRF token of the case page."""
    client.post("/login", data={"token": add_reviewer(store, "ada"), "next": f"/desk/{rid}"})
    case = client.get(f"/desk/{rid}").text
    return re.search(r'name="csrf" value="([^"]+)"', case).group(1)


def _textarea(page: str, name: str) -> str:
    return html.unescape(re.search(rf'<textarea name="{name}"[^>]*>(.*?)</textarea>', page, re.S).group(1))


def test_quote_pieces_are_checked_on_letters_and_digits() -> None:
    pages = {"d#p3": ["coming off. Each lock is re-\nmoved by the employee who applied it.\nIf that"]}
    assert quotecheck.unsourced(["“Each lock is removed by the employee who applied it.”"], pages) == []
    assert quotecheck.unsourced(["Each lock is removed … who applied it."], pages) == []
    (problem,) = quotecheck.unsourced(["Each lock is removed by the employee. A supervisor may not."], pages)
    assert problem == "the sentence “A supervisor may not.” of a quote is not on an accepted page (d#p3)"
    elsewhere = {"d#p9": ["A supervisor may not."]}
    (problem,) = quotecheck.unsourced(["A supervisor may not."], pages, elsewhere)
    assert problem == "the quote “A supervisor may not.” is not on an accepted page (d#p3): it is on d#p9"
    assert quotecheck.pieces("(a) Each lock. [...] The crew removes theirs!") == [
        "(a) Each lock.",
        "The crew removes theirs!",
    ]
    assert quotecheck.letters("Re-\nmoved ﬁrst") == "removedfirst"


def test_the_case_starts_with_nothing_accepted(client: TestClient, fresh_store: Path) -> None:
    rid = _refer(client)
    _signed_in(client, fresh_store, rid)
    case = client.get(f"/desk/{rid}").text
    shown = referrals.get(fresh_store, rid).shown
    boxes = re.findall(r'<input type="checkbox" name="pages" value="([^"]+)"([^>]*)>', case)
    assert {p for p, _ in boxes} >= set(shown["pages"])
    assert not [p for p, attrs in boxes if "checked" in attrs]  # no page is ticked for the reviewer
    for rank, page in enumerate(shown["pages"], 1):  # the system's pages: suggestions with their ranks
        assert re.search(
            rf'value="{re.escape(page)}" > <code>{re.escape(page)}</code>\s*<span[^>]*>rank {rank}\b', case
        )
    assert _textarea(case, "answer").strip() == "" and _textarea(case, "quotes").strip() == ""
    assert 'class="draft-beside"' in case and 'data-copy-to="answer"' in case  # the draft, to copy from
    for q in shown["quotes"]:
        assert html.escape(q["text"], quote=False) in case
    assert "max-height" not in re.search(
        r"\.case-form \{[^}]*\}", client.get("/static/style.css").text
    ).group(0)


def test_a_quote_off_the_accepted_pages_is_refused(client: TestClient, fresh_store: Path) -> None:
    rid = _refer(client)
    csrf = _signed_in(client, fresh_store, rid)
    form = {
        "csrf": csrf,
        "decision": "answer",
        "pages": ["loto_energy_control#p2"],  # the system's page, not the one the quote is on
        "quotes": ON_P3,
        "answer": "Only the employee who applied a lock removes it.",
    }
    bad = client.post(f"/referrals/{rid}/decision", data=form)
    assert bad.status_code == 422
    error = html.unescape(re.search(r'<p class="form-error" role="alert">(.*?)</p>', bad.text, re.S).group(1))
    assert (
        f"the quote “{ON_P3}” is not on an accepted page (loto_energy_control#p2): "
        "it is on loto_energy_control#p3" in error
    )
    assert _textarea(bad.text, "answer") == form["answer"] and _textarea(bad.text, "quotes") == ON_P3  # kept
    assert re.search(r'value="loto_energy_control#p2" checked', bad.text)
    nothing = client.post(f"/referrals/{rid}/decision", data={**form, "pages": [], "quotes": ""})
    assert nothing.status_code == 422 and "at least one evidence page" in nothing.text
    empty = client.post(f"/referrals/{rid}/decision", data={**form, "quotes": "", "answer": ""})
    assert empty.status_code == 422 and "an answer needs its text or a quote" in empty.text
    bearer = {"Authorization": f"Bearer {add_reviewer(fresh_store, 'bo')}"}
    body = {"decision": "answer", "pages": ["loto_energy_control#p2"], "quotes": [ON_P3], "answer": "x"}
    js = client.post(f"/referrals/{rid}/decision", json=body, headers=bearer)
    assert js.status_code == 422 and "not on an accepted page" in js.json()["error"]
    assert client.get(f"/referrals/{rid}").json()["status"] == "pending"  # nothing published
    ok = client.post(
        f"/referrals/{rid}/decision",
        data={**form, "pages": ["loto_energy_control#p2", "loto_energy_control#p3"]},
        follow_redirects=False,
    )
    assert ok.status_code == 303
    assert client.get(f"/referrals/{rid}").json()["decision"]["quotes"] == [ON_P3]


def test_the_reviewed_answer_is_the_answer_when_asked_again(client: TestClient, fresh_store: Path) -> None:
    rid = _refer(client)
    draft = [q["text"] for q in referrals.get(fresh_store, rid).shown["quotes"]]
    csrf = _signed_in(client, fresh_store, rid)
    answer = "Only the employee who applied a lock removes it."
    form = {
        "csrf": csrf,
        "decision": "answer",
        "pages": ["loto_energy_control#p3"],
        "quotes": ON_P3,
        "answer": answer,
    }
    assert client.post(f"/referrals/{rid}/decision", data=form, follow_redirects=False).status_code == 303
    client.post("/logout", data={"csrf": csrf})
    again = client.get("/", params={"q": REFERRED.upper()}).text
    reviewed = re.search(r'<section class="banner banner-answer reviewed".*?</section>', again, re.S).group(0)
    assert "Reviewed answer" in reviewed and answer in reviewed and "<strong>ada</strong>" in reviewed
    assert re.search(r"on \d{4}-\d\d-\d\d", reviewed) and "loto_energy_control#p3" in reviewed
    assert "Refer to a reviewer" not in again and 'data-decision="review"' not in again  # no referral banner
    assert "Draft quotes for the reviewer" not in again
    assert not [q for q in draft if f"“{html.escape(q, quote=False)}" in again]  # nor the old draft's quotes
    assert 'class="card"' in again  # the fresh ranking still follows
    page = client.get("/view/loto_energy_control%23p3", params={"q": REFERRED}).text
    assert "Reviewed answer" in page and "Refer to a reviewer" not in page
    cli_out = CliRunner().invoke(cli, ["search", REFERRED, "--store", str(fresh_store)], terminal_width=200)
    said = " ".join(cli_out.output.split())
    assert cli_out.exit_code == 0, cli_out.output
    own = said.index("the system's own decision, before the review")
    assert said.index("reviewed answer: answer by ada") < own
    assert f"{answer} “{ON_P3}” sources: loto_energy_control#p3" in said
    assert "draft quotes for the reviewer" not in said  # the old draft is not printed as an answer


def test_a_page_view_review_after_the_session_ended_signs_in_and_comes_back(
    client: TestClient, fresh_store: Path
) -> None:
    view = client.get("/view/loto_energy_control%23p3", params={"q": REFERRED}).text
    assert 'data-draft="view-loto_energy_control#p3"' in view  # app.js keeps what is typed
    url = "/view/loto_energy_control%23p3/review?" + f"q={REFERRED.replace(' ', '+')}"
    r = client.post(
        url, data={"decision": "refuse", "question": REFERRED, "reviewer": "ada"}, follow_redirects=False
    )
    assert r.status_code == 303 and r.headers["location"].startswith("/login?")
    target = parse_qs(urlsplit(r.headers["location"]).query)["next"][0]
    assert target.startswith("/view/loto_energy_control%23p3?") and "restore=1" in target
    assert parse_qs(urlsplit(target).query)["q"] == [REFERRED]
    assert client.get("/reviews").json()["reviews"] == []  # nothing recorded
    token = add_reviewer(fresh_store, "ada")
    back = client.post("/login", data={"token": token, "next": target}, follow_redirects=False)
    assert back.status_code == 303 and back.headers["location"] == target


def test_a_form_posted_signed_out_to_a_public_service_comes_back_to_restore(fresh_store: Path) -> None:
    """``serve --public``: the Guard answers a signed-out write before any route; a browser's
    form goes to sign-in and back to the page it came from with ``restore=1``; a JSON client
    gets its 401."""
    add_reviewer(fresh_store, "ada")
    app = create_app(fresh_store, public=True, allowed_hosts=["sp.example"])
    with TestClient(app, base_url="http://sp.example") as c:
        page = "http://sp.example/view/loto_energy_control%23p3?q=lock&restore=1&k=5"
        r = c.post(
            "/view/loto_energy_control%23p3/review",
            data={"decision": "refuse", "note": "typed"},
            headers={"accept": "text/html", "referer": page},
            follow_redirects=False,
        )
        assert r.status_code == 303
        target = parse_qs(urlsplit(r.headers["location"]).query)["next"][0]
        assert target == "/view/loto_energy_control%23p3?q=lock&k=5&restore=1"
        elsewhere = {"accept": "text/html", "referer": "http://evil.example/x", "origin": "http://sp.example"}
        other = c.post("/referrals/1/decision", data={"decision": "refuse"}, headers=elsewhere)
        assert other.status_code == 401
        assert c.post("/referrals/1/decision", json={"decision": "refuse"}).status_code == 401


def test_any_browser_form_refused_for_its_session_goes_to_sign_in_and_back(client: TestClient) -> None:
    """On this machine (no --public) a route answers a signed-out form with 401; a browser's
    form (same-origin Referer, HTML accepted) is sent to sign in and back instead."""
    browser = {"accept": "text/html", "referer": f"{LOCAL}/judge?question=Q1&page=loto_energy_control%23p3"}
    form = {"grade": "2", "reviewer": "ada", "note": "typed"}
    r = client.post("/judge", data=form, headers=browser, follow_redirects=False)
    if r.status_code == 404:
        pytest.skip("the judging pages are not installed")
    assert r.status_code == 303
    target = parse_qs(urlsplit(r.headers["location"]).query)["next"][0]
    assert target == "/judge?question=Q1&page=loto_energy_control%23p3&restore=1"
    assert client.post("/judge", data=form, follow_redirects=False).status_code == 401  # a script
