"""The reviewer's desk through the API: referrals from review decisions, the queue, a
reviewer's decision (and who may not post one), the asker's page, reviewed answers for
the same question and a near-duplicate, and decisions that outlive the server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from sourcepage import api
from sourcepage.cli import app as cli
from sourcepage.labels import referrals
from sourcepage.service.app import create_app
from sourcepage.store.reviewers import add_reviewer

LOCAL = "http://127.0.0.1"
#: decided ``review`` on the test store (UK and US pages in its top five)
REFERRED = "hearing protection and who may remove a lock"
NEAR = "Hearing protection, and who may remove the lock?"  # stemmed terms: the same words
DECISION = {
    "decision": "answer",
    "pages": ["loto_energy_control#p3"],
    "quotes": ["Each lock is removed by the employee who applied it."],
    "answer": "Only the employee who applied a lock removes it.",
    "note": "checked against the procedure page",
    "ratings": {"correctness": 4, "completeness": 3, "faithfulness": 5, "traceability": 5, "usefulness": 4},
}


@pytest.fixture
def client(fresh_store: Path) -> TestClient:
    with TestClient(create_app(fresh_store), base_url=LOCAL) as c:
        yield c


def _bearer(store: Path, name: str = "ada") -> dict[str, str]:
    return {"Authorization": f"Bearer {add_reviewer(store, name)}"}


def _refer(client: TestClient, question: str = REFERRED, **extra: object) -> dict:
    res = client.post("/search", json={"question": question, **extra}).json()
    assert res["decision"] == "review", res["reasons"]
    return res


def test_review_searches_are_referred_and_join_the_open_referral(
    client: TestClient, fresh_store: Path
) -> None:
    first = _refer(client)
    rid = first["referral"]["id"]
    assert first["referral"] == {"id": rid, "url": f"/questions/{rid}"}
    again = _refer(client, "  HEARING protection and who   may remove a lock ")  # same normalised question
    py = api.search(REFERRED, fresh_store, build=False)  # the Python API refers too
    assert again["referral"]["id"] == py["referral"]["id"] == rid
    other = _refer(client, filters={"jurisdiction": ["US", "UK"]})  # other filters: its own referral
    assert other["referral"]["id"] != rid
    queue = client.get("/referrals", params={"status": "pending"}).json()
    assert [r["id"] for r in queue["referrals"]] == [rid, other["referral"]["id"]]  # oldest first
    assert queue["counts"] == {"pending": 2, "decided": 0}
    case = client.get(f"/referrals/{rid}").json()
    assert case["asked"] == 3 and case["status"] == "pending" and case["decision"] is None
    assert case["pages"] == [r["page"] for r in first["results"][:5]]
    assert case["reasons"] == first["reasons"] and case["jurisdictions"] == first["jurisdictions"]
    assert [q["text"] for q in case["quotes"]] == [q["text"] for q in first["answer"]["quotes"]]
    assert client.get("/referrals", params={"jurisdiction": "nowhere"}).json()["counts"]["pending"] == 0
    assert client.get("/referrals", params={"status": "open"}).status_code == 422
    assert client.get("/referrals/999").status_code == 404
    answered = client.post("/search", json={"question": "lockout"}).json()
    assert answered["decision"] == "review" or "referral" not in answered  # only review is referred


def test_anonymous_and_cross_site_decisions_are_refused(client: TestClient, fresh_store: Path) -> None:
    rid = _refer(client)["referral"]["id"]
    url = f"/referrals/{rid}/decision"
    assert client.post(url, json=DECISION).status_code == 401  # nobody
    ada = _bearer(fresh_store)
    for header in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        assert client.post(url, json=DECISION, headers={**ada, **header}).status_code == 403
    form = {"decision": "refuse", "csrf": "x"}
    r = client.post(url, data=form, follow_redirects=False)  # a signed-out form: sign in, nothing kept
    assert r.status_code == 303 and r.headers["location"].startswith("/login?next=%2Fdesk%2F")
    assert client.post(url, data=form, headers={"Origin": "http://evil.example"}).status_code == 403
    # a session without its CSRF token
    token = add_reviewer(fresh_store, "bo")
    assert (
        client.post("/login", data={"token": token, "next": "/desk"}, follow_redirects=False).status_code
        == 303
    )
    assert client.post(url, data=form).status_code == 403
    assert client.post(url, json=DECISION).status_code == 403
    assert client.post(url, json={**DECISION, "reviewer": "cy"}, headers=ada).status_code == 403
    assert client.get(f"/referrals/{rid}").json()["status"] == "pending"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"ratings": {"correctness": 6}}, "from 1 to 5"),
        ({"ratings": {"style": 3}}, "unknown rating"),
        ({"pages": ["loto_energy_control#p9"]}, "not in this store"),
        ({"pages": []}, "at least one evidence page"),
        ({"decision": "review"}, "decision"),
    ],
)
def test_bad_decisions_are_refused(client: TestClient, fresh_store: Path, change: dict, words: str) -> None:
    rid = _refer(client)["referral"]["id"]
    r = client.post(f"/referrals/{rid}/decision", json={**DECISION, **change}, headers=_bearer(fresh_store))
    assert r.status_code == 422 and words in r.json()["error"]
    assert client.get(f"/referrals/{rid}").json()["status"] == "pending"


def test_a_decision_reaches_the_asker_and_the_same_question_again(
    client: TestClient, fresh_store: Path
) -> None:
    rid = _refer(client)["referral"]["id"]
    r = client.post(f"/referrals/{rid}/decision", json=DECISION, headers=_bearer(fresh_store))
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["review"]["referral"] == rid and body["review"]["ratings"] == DECISION["ratings"]
    got = client.get(f"/referrals/{rid}").json()
    assert got["status"] == "decided" and got["decision"]["reviewer"] == "ada"
    assert got["decision"]["answer"] == DECISION["answer"] and got["decision"]["pages"] == DECISION["pages"]
    page = client.get(f"/questions/{rid}")  # no sign-in needed to read
    assert page.status_code == 200 and "Reviewed answer" in page.text and DECISION["answer"] in page.text
    assert "ada" in page.text and "/view/loto_energy_control%23p3" in page.text
    same = client.post("/search", json={"question": REFERRED.upper()}).json()
    assert same["reviewed"]["match"] == "same question" and same["reviewed"]["referral"] == rid
    assert same["reviewed"]["answer"] == DECISION["answer"] and same["results"]  # beside the fresh ranking
    assert same["referral"]["id"] == rid  # no second referral
    near = client.post("/search", json={"question": NEAR}).json()
    assert near["reviewed"]["match"] == "near-duplicate" and near["reviewed"]["referral"] == rid
    assert near["reviewed"]["similarity"] >= referrals.NEAR_DUPLICATE
    unrelated = client.post("/search", json={"question": "confined space entry permit"}).json()
    assert "reviewed" not in unrelated
    filtered = client.post("/search", json={"question": REFERRED, "filters": {"jurisdiction": "UK"}}).json()
    assert "reviewed" not in filtered  # other filters: not the reviewed question
    html = client.get("/", params={"q": REFERRED}).text
    assert "Reviewed answer" in html and DECISION["answer"] in html
    queue = client.get("/referrals", params={"status": "decided"}).json()
    assert [x["id"] for x in queue["referrals"]] == [rid]


def test_decisions_survive_a_restart(fresh_store: Path) -> None:
    with TestClient(create_app(fresh_store), base_url=LOCAL) as first:
        rid = _refer(first)["referral"]["id"]
        assert (
            first.post(f"/referrals/{rid}/decision", json=DECISION, headers=_bearer(fresh_store)).status_code
            == 201
        )
    with TestClient(create_app(fresh_store), base_url=LOCAL) as second:  # a new server on the same store
        got = second.get(f"/referrals/{rid}").json()
        assert got["status"] == "decided" and got["decision"]["ratings"] == DECISION["ratings"]


def test_the_desk_form_with_a_session(client: TestClient, fresh_store: Path) -> None:
    rid = _refer(client)["referral"]["id"]
    assert client.get("/desk", follow_redirects=False).headers["location"] == "/login?next=%2Fdesk"
    token = add_reviewer(fresh_store, "ada")
    client.post("/login", data={"token": token, "next": "/desk"})
    queue = client.get("/desk").text
    assert f'href="/desk/{rid}"' in queue and "1 pending" in queue
    case = client.get(f"/desk/{rid}").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', case).group(1)
    assert "/pages/" in case and "/image?" in case and "Why the system referred it" in case
    quotes = referrals.get(fresh_store, rid).shown["quotes"]  # each names its section, when known
    assert quotes and all("section" in q for q in quotes)
    assert case.count('class="quote-section"') == sum(1 for q in quotes if q["section"])
    form = {
        "csrf": csrf,
        "decision": "answer",
        "pages": ["loto_energy_control#p3"],
        "quotes": "Each lock is removed by the employee who applied it.\n",
        "answer": "Only the one who applied it.",
        "rating_correctness": "5",
        "rating_usefulness": "",
    }
    bad = client.post(f"/referrals/{rid}/decision", data={**form, "rating_correctness": "9"})
    assert bad.status_code == 422 and "from 1 to 5" in bad.text and "Only the one who applied it." in bad.text
    r = client.post(f"/referrals/{rid}/decision", data=form, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/questions/{rid}"
    dec = client.get(f"/referrals/{rid}").json()["decision"]
    assert dec["ratings"] == {"correctness": 5} and dec["quotes"] == [form["quotes"].strip()]


def test_desk_and_reviews_export_in_the_terminal(
    client: TestClient, fresh_store: Path, tmp_path: Path
) -> None:
    rid = _refer(client)["referral"]["id"]
    runner = CliRunner()
    res = runner.invoke(cli, ["desk", "--store", str(fresh_store)], terminal_width=200)
    assert res.exit_code == 0 and "1 pending" in res.output and REFERRED in res.output
    client.post(f"/referrals/{rid}/decision", json=DECISION, headers=_bearer(fresh_store))
    out = tmp_path / "reviewed.jsonl"
    res = runner.invoke(
        cli, ["reviews", "--store", str(fresh_store), "--export", str(out)], terminal_width=200
    )
    assert res.exit_code == 0, res.output
    from sourcepage.evaluation.questions import read_questions

    (q,) = read_questions(out)
    assert q.evidence == {"loto_energy_control#p3": 1} and q.extra["ratings"] == DECISION["ratings"]


def test_routing_is_shown_in_the_web_results(client: TestClient) -> None:
    res = client.post(
        "/search", json={"question": "What does the HSE require for hearing protection?"}
    ).json()
    assert res["routing"]["jurisdictions"] == ["UK"] and res["routing"]["applied"]
    html = client.get("/", params={"q": "What does the HSE require for hearing protection?"}).text
    assert 'class="routing-note" data-routed="UK"' in html and "Searched only <strong>UK</strong>" in html
    plain = client.get(
        "/", params={"q": "What does the HSE require for hearing protection?", "method": "bm25"}
    )
    assert "does not route, so every" in plain.text


def test_a_reviewer_can_accept_a_page_the_asker_was_not_shown(client: TestClient, fresh_store: Path) -> None:
    """The case page lists further pages of the same search (ranked now, beyond those the
    asker saw) to tick, and takes any other page by its id; a page that is not the store's
    is refused with its id named, and what the reviewer typed is kept."""
    res = _refer(client)
    rid = res["referral"]["id"]
    token = add_reviewer(fresh_store, "ada")
    client.post("/login", data={"token": token, "next": f"/desk/{rid}"})
    case = client.get(f"/desk/{rid}").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', case).group(1)
    shown = set(referrals.get(fresh_store, rid).shown["pages"])
    further = re.findall(r'<label class="further"><input type="checkbox" name="pages" value="([^"]+)"', case)
    assert further and not shown & set(further), further
    assert "Further pages of the same search" in case and 'name="other_pages"' in case
    form = {"csrf": csrf, "decision": "answer", "pages": [further[0]], "answer": "From the further page."}
    bad = client.post(f"/referrals/{rid}/decision", data={**form, "other_pages": "loto_energy_control#p999"})
    assert bad.status_code == 422 and "loto_energy_control#p999" in bad.text
    assert 'value="loto_energy_control#p999"' in bad.text  # kept for the reviewer to correct
    ok = client.post(
        f"/referrals/{rid}/decision",
        data={**form, "other_pages": "loto_energy_control#p2, " + further[0]},
        follow_redirects=False,
    )
    assert ok.status_code == 303
    pages = client.get(f"/referrals/{rid}").json()["decision"]["pages"]
    assert pages == [further[0], "loto_energy_control#p2"]
