"""A rating is an ASCII whole number from 1 to 5 (issue 51): the desk form's '²' and a
5,000-digit number answered 500 (``str.isdigit`` then ``int``), '٣' and '３' were stored
as 3, and a JSON ``true`` as 1. Each is refused with a 4xx and nothing is recorded."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from sourcepage.service.app import create_app
from sourcepage.store.reviewers import add_reviewer

BASE = "http://127.0.0.1:8000"
REVIEW = "hearing protection and who may remove a lock"
BAD = ["²", "9" * 5000, "٣", "３", "3.0", "+3", " 3x", "0", "6", "-1", "true"]


@pytest.fixture(scope="module")
def desk(indexed_template: Path, tmp_path_factory: pytest.TempPathFactory):
    """A client signed in as ada (session + CSRF token), a bearer header, a referral id
    (pending until the last test of the module)."""
    store = Path(shutil.copytree(indexed_template, tmp_path_factory.mktemp("ratings") / "store"))
    token = add_reviewer(store, "ada")
    with TestClient(create_app(store), base_url=BASE) as c:
        rid = c.post("/search", json={"question": REVIEW}).json()["referral"]["id"]
        c.post("/login", data={"token": token, "next": "/desk"})
        csrf = re.search(r'name="csrf" value="([^"]+)"', c.get(f"/desk/{rid}").text).group(1)
        yield c, {"Authorization": f"Bearer {token}"}, rid, csrf


@pytest.mark.parametrize("value", BAD)
def test_a_form_rating_that_is_no_ascii_number_is_refused(desk, value: str) -> None:
    client, _, rid, csrf = desk
    form = {"csrf": csrf, "decision": "refuse", "note": "out of scope", "rating_correctness": value}
    r = client.post(f"/referrals/{rid}/decision", data=form, follow_redirects=False)
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:200])
    assert client.get(f"/referrals/{rid}").json()["status"] == "pending"


@pytest.mark.parametrize("value", [True, False, "3", 3.0, 3.5, 10**30, None, [3], {"v": 3}])
def test_a_json_rating_that_is_no_int_is_refused(desk, value: object) -> None:
    client, bearer, rid, _ = desk
    body = {"decision": "refuse", "note": "out of scope", "ratings": {"correctness": value}}
    r = client.post(f"/referrals/{rid}/decision", json=body, headers=bearer)
    assert r.status_code == 422, (r.status_code, r.text[:200])
    assert client.get(f"/referrals/{rid}").json()["status"] == "pending"


def test_a_5000_digit_json_rating_is_refused(desk) -> None:
    client, bearer, rid, _ = desk
    raw = '{"decision": "refuse", "ratings": {"correctness": ' + "9" * 5000 + "}}"
    r = client.post(
        f"/referrals/{rid}/decision", content=raw, headers={**bearer, "Content-Type": "application/json"}
    )
    assert r.status_code == 422


def test_an_ascii_rating_is_kept(desk) -> None:  # last: it decides the referral
    client, bearer, rid, csrf = desk
    form = {"csrf": csrf, "decision": "refuse", "note": "out of scope", "rating_correctness": "4"}
    r = client.post(f"/referrals/{rid}/decision", data=form, follow_redirects=False)
    assert r.status_code == 303
    assert client.get(f"/referrals/{rid}").json()["decision"]["ratings"] == {"correctness": 4}
