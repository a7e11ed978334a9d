"""The service answers from built indexes only (a request never builds one): the stores
the service tests serve have their BM25 and LSA indexes for every text version, built
once per session and copied (an index is valid for a store with the same chunks)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sourcepage.retrieval.index import build_indexes


@pytest.fixture(scope="session")
def built_indexes(safety_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """indexes/ of a copy of the session store: bm25 and lsa on raw, cleaned, enriched."""
    store = Path(shutil.copytree(safety_store, tmp_path_factory.mktemp("indexed") / "store"))
    build_indexes(store, ["raw", "cleaned", "enriched"], ["bm25", "lsa"])
    build_indexes(store, "raw", ["dense"])  # the default method (sect:route:rrf:bm25+dense) reads it
    return store / "indexes"


@pytest.fixture
def fresh_store(fresh_store: Path, built_indexes: Path) -> Path:
    shutil.copytree(built_indexes, fresh_store / "indexes", dirs_exist_ok=True)
    return fresh_store
