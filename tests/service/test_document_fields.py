"""A document's fields are declared once (``records.Document``: name, type, description) and
the API's schemas are made from that declaration: a search hit (``response.Result``) and
``GET /documents`` (``service.documents.LibraryDocument``) carry every field, and /docs
(the OpenAPI schema) shows each with its type and description (issue 48, point 5)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter
from service_client import LocalClient

from sourcepage.records import MANIFEST_COLUMNS, document_fields
from sourcepage.retrieval.index import build_indexes
from sourcepage.service.app import create_app

LOCKBOX = "How do workers use a group lockbox at shift change?"


def _declared(prop: dict[str, Any]) -> dict[str, Any]:
    """A schema property without what pydantic adds around the type (title, description)."""
    return {k: v for k, v in prop.items() if k not in ("title", "description")}


@pytest.fixture
def served(safety_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The OpenAPI schemas, a bm25 search and /documents of the safety store."""
    monkeypatch.setenv("SOURCEPAGE_WARM", "0")
    store = Path(shutil.copytree(safety_store, tmp_path / "store"))
    build_indexes(store, "raw", ["bm25"])
    with LocalClient(create_app(store)) as c:
        return {
            "schemas": c.get("/openapi.json").json()["components"]["schemas"],
            "search": c.post("/search", json={"question": LOCKBOX, "method": "bm25"}).json(),
            "documents": c.get("/documents").json(),
        }


def test_the_schemas_carry_every_document_field_with_its_type_and_description(served: dict) -> None:
    schemas = served["schemas"]
    declared = document_fields()
    assert [name for name, _, _ in declared] == [*MANIFEST_COLUMNS, "extra"]
    for model, names in (("Result", [n for n, _, _ in declared]), ("LibraryDocument", MANIFEST_COLUMNS)):
        props = schemas[model]["properties"]
        for name, kind, text in declared:
            if name not in names:
                continue
            assert props[name]["description"] == text, (model, name)
            assert _declared(props[name]) == _declared(TypeAdapter(kind).json_schema()), (model, name)
            assert name in schemas[model]["required"], (model, name)


def test_a_hit_carries_its_documents_fields(served: dict) -> None:
    """Every hit has all of its document's manifest columns, as ``GET /documents`` has
    them (``license``, ``sha256``, ``file``, ``pages`` and ``found_in`` too)."""
    docs = {d["doc_id"]: d for d in served["documents"]}
    hits = served["search"]["results"]
    assert hits
    for hit in hits:
        doc = docs[hit["doc_id"]]
        assert {c: hit[c] for c in MANIFEST_COLUMNS} == {c: doc[c] for c in MANIFEST_COLUMNS}
        assert hit["license"] and len(hit["sha256"]) == 64
