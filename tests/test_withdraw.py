"""Withdrawing a document (``sourcepage document withdraw``): no longer searched nor
re-ingested, kept in the store with its pages and history, its reviews kept, listed as
withdrawn on the library page; ``restore`` puts it back."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from sourcepage.cli import app
from sourcepage.service.app import create_app
from sourcepage.store.db import Store
from tests.service_client import LocalClient

DOC = "loto_energy_control"
QUESTION = "Who may remove a lock from the group lockbox?"


def _doc_ids(store: Path) -> set[str]:
    res = CliRunner().invoke(app, ["search", QUESTION, "--store", str(store), "--method", "bm25", "--json"])
    assert res.exit_code == 0, res.output
    return {r["doc_id"] for r in json.loads(res.stdout)["results"]}


def test_withdraw_and_restore(fresh_store: Path, fresh_corpus: Path) -> None:
    run = CliRunner().invoke
    assert run(app, ["index", "--store", str(fresh_store), "--method", "bm25"]).exit_code == 0
    assert DOC in _doc_ids(fresh_store)
    with LocalClient(create_app(fresh_store)) as c:  # a review citing one of its pages
        review = {"question": QUESTION, "decision": "answer", "reviewer": "ada", "pages": [f"{DOC}#p2"]}
        assert c.post("/reviews", json=review).status_code == 201
    pages_before = Store(fresh_store).page_count(DOC)

    res = run(
        app,
        [
            "document",
            "withdraw",
            DOC,
            "--store",
            str(fresh_store),
            "--reason",
            "superseded",
            "--by",
            "ada",
            "--no-index",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "withdrawn" in res.output and "by ada: superseded" in res.output
    assert run(app, ["index", "--store", str(fresh_store), "--method", "bm25"]).exit_code == 0
    assert DOC not in _doc_ids(fresh_store) and _doc_ids(fresh_store)  # others still found
    st = Store(fresh_store)
    assert st.page_count(DOC) == pages_before  # kept in the store
    assert [d.doc_id for d, _ in st.withdrawn_documents()] == [DOC]
    assert st.run_args("withdraw")[0] == {"doc_id": DOC, "by": "ada", "reason": "superseded"}
    with LocalClient(create_app(fresh_store)) as c:
        assert DOC not in {d["doc_id"] for d in c.get("/documents").json()}
        html = c.get("/library").text
        assert f'data-withdrawn="{DOC}"' in html and "by ada: superseded" in html
        assert any(f"{DOC}#p2" in r["pages"] for r in c.get("/reviews").json()["reviews"])  # reviews kept
        # and the pages they cite still open, saying the document is withdrawn
        assert "by ada: superseded" in c.get(f"/pages/{DOC}%23p2").json()["withdrawn"]
        view = c.get(f"/view/{DOC}%23p2")
        assert view.status_code == 200 and "Withdrawn: withdrawn" in view.text
        assert c.get(f"/pages/{DOC}%23p2/image").status_code == 200

    # the manifest still lists it: ingest leaves it out, with a warning
    res = run(app, ["ingest", "--corpus", str(fresh_corpus), "--store", str(fresh_store)])
    assert res.exit_code == 0 and f"{DOC} is withdrawn" in res.output, res.output
    assert [d.doc_id for d, _ in Store(fresh_store).withdrawn_documents()] == [DOC]
    # twice is an error naming it; restore puts it back
    res = run(app, ["document", "withdraw", DOC, "--store", str(fresh_store), "--no-index"])
    assert res.exit_code == 2 and f"no searchable document '{DOC}'" in res.output
    res = run(app, ["document", "restore", DOC, "--store", str(fresh_store), "--no-index"])
    assert res.exit_code == 0, res.output
    assert run(app, ["index", "--store", str(fresh_store), "--method", "bm25"]).exit_code == 0
    assert DOC in _doc_ids(fresh_store) and not Store(fresh_store).withdrawn_documents()
