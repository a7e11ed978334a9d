"""Relevance judging through the service (sourcepage.labels.judgments behind HTTP)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_client import LocalClient

from sourcepage.evaluation.questions import read_questions
from sourcepage.service.app import create_app

QUESTIONS = [
    {
        "id": "Q1",
        "question": "How do workers use a group lockbox at shift change?",
        "topic": "loto",
        "type": "procedural",
        "answerability": "answerable",
        "evidence": [{"page": "loto_energy_control#p2", "grade": 2, "excerpt": "group lockbox"}],
    },
    {
        "id": "Q2",
        "question": "Which hearing protection is needed above 85 dB(A)?",
        "topic": "ppe",
        "type": "direct",
        "answerability": "answerable",
        "evidence": [{"page": "hse_ppe_at_work#p2", "grade": 2}],
    },
    {
        "id": "N1",
        "question": "What is the speed limit on a forklift ramp?",
        "topic": "none",
        "type": "direct",
        "answerability": "out_of_domain",
    },
]


@pytest.fixture
def qfile(tmp_path: Path) -> Path:
    p = tmp_path / "questions.jsonl"
    p.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    return p


@pytest.fixture
def client(fresh_store: Path, qfile: Path) -> TestClient:
    with LocalClient(create_app(fresh_store, questions=qfile)) as c:
        yield c


def test_pool_pending_record_agreement_export(client: TestClient, tmp_path: Path) -> None:
    body = client.get("/judgments/pool", params={"methods": "bm25", "depth": 3, "reviewer": "ada"}).json()
    assert set(body["pool"]) == {"Q1", "Q2"} and all(len(v) == 3 for v in body["pool"].values())
    assert body["pool"]["Q1"][0] == "loto_energy_control#p2"
    assert len(body["pending"]) == 6
    p1, p2 = body["pool"]["Q1"][:2]
    for reviewer, grade in (("ada", 2), ("bo", 1)):
        r = client.post(
            "/judgments", json={"question_id": "Q1", "page": p2, "grade": grade, "reviewer": reviewer}
        )
        assert r.status_code == 201
    for reviewer in ("ada", "bo"):
        client.post("/judgments", json={"question_id": "Q1", "page": p1, "grade": 2, "reviewer": reviewer})
    pending = client.get("/judgments/pool", params={"methods": "bm25", "depth": 3, "reviewer": "ada"}).json()
    assert len(pending["pending"]) == 4
    agree = client.get("/judgments/agreement", params={"a": "ada", "b": "bo"}).json()
    assert agree["n"] == 2 and agree["agreement"] == 0.5
    assert agree["disagreements"] == [{"question_id": "Q1", "page": p2, "grades": [2, 1]}]
    r = client.post(
        "/judgments/adjudicate", json={"question_id": "Q1", "page": p2, "grade": 1, "adjudicator": "cy"}
    )
    assert r.status_code == 201
    assert len(client.get("/judgments", params={"question_id": "Q1"}).json()["judgments"]) == 5
    text = client.get("/judgments/export").text
    out = tmp_path / "judged.jsonl"
    out.write_text(text, encoding="utf-8")
    qs = {q.id: q for q in read_questions(out)}
    assert qs["Q1"].evidence == {"loto_energy_control#p2": 2, p2: 1}
    assert qs["N1"].answerability == "out_of_domain"


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"question_id": "Q9", "page": "loto_energy_control#p1", "grade": 1, "reviewer": "a"}, 422),
        ({"question_id": "Q1", "page": "../x#p1", "grade": 1, "reviewer": "a"}, 422),
        ({"question_id": "Q1", "page": "nodoc#p1", "grade": 1, "reviewer": "a"}, 404),
        ({"question_id": "Q1", "page": "loto_energy_control#p1", "grade": 3, "reviewer": "a"}, 422),
        (
            {"question_id": "Q1", "page": "loto_energy_control#p1", "grade": 1, "reviewer": "adjudicator:x"},
            403,  # signed in as "a": nobody writes as an adjudicator (no account can have that name)
        ),
    ],
)
def test_judgment_validation(client: TestClient, payload: dict, status: int) -> None:
    r = client.post("/judgments", json=payload, headers={"Authorization": f"Bearer {client.token('a')}"})
    assert r.status_code == status and isinstance(r.json()["error"], str)


def test_judge_page_flow(client: TestClient) -> None:
    html = client.get("/judge", params={"reviewer": "ada", "methods": "bm25", "depth": 2}).text
    assert "0 of 4 pooled pages judged" in html and "How do workers use a group lockbox" in html
    r = client.post(
        "/judge",
        data={
            "question_id": "Q1",
            "page": "loto_energy_control#p2",
            "grade": "2",
            "reviewer": "ada",
            "methods": "bm25",
            "depth": "2",
        },
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert "1 of 4 pooled pages judged" in client.get(r.headers["location"]).text
    bad = client.post(
        "/judge",
        data={"question_id": "Q1", "page": "loto_energy_control#p2", "grade": "2", "reviewer": ""},
        headers={"Authorization": f"Bearer {client.token('ada')}"},
    )
    assert bad.status_code == 422
    assert "Agreement" in client.get("/judge/agreement", params={"a": "ada", "b": "bo"}).text


def test_without_question_set(fresh_store: Path) -> None:
    with LocalClient(create_app(fresh_store)) as c:
        r = c.get("/judgments/pool")
        assert r.status_code == 404 and "--questions" in r.json()["error"]
        assert "No question set is loaded" in c.get("/judge").text
        ok = c.post(
            "/judgments",
            json={"question_id": "X1", "page": "loto_energy_control#p1", "grade": 0, "reviewer": "ada"},
        )
        assert ok.status_code == 201
