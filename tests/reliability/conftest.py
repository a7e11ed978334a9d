"""Stores for the reliability tests, copied rather than ingested per test (a copy of a
1 MB store takes milliseconds): ``indexed_store`` has BM25 built on the raw text,
``plain_store`` has no index. Both read page images from the session's safety corpus."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sourcepage.retrieval.index import build_indexes


@pytest.fixture(scope="session")
def indexed_template(safety_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = Path(shutil.copytree(safety_store, tmp_path_factory.mktemp("indexed_template") / "store"))
    build_indexes(store, "raw", ["bm25", "dense"])
    return store


@pytest.fixture
def indexed_store(indexed_template: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(indexed_template, tmp_path / "store"))


@pytest.fixture
def plain_store(safety_store: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(safety_store, tmp_path / "store"))
