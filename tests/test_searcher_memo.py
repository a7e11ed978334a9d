"""The stages' values a Searcher keeps (``Searcher.memo``): declared keys only, made once,
and under concurrent searches one value for all (the router, the section index and the
LTR models were set in the searcher's ``__dict__`` outside its lock before)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sourcepage.retrieval.routing import router
from sourcepage.retrieval.search import Searcher


def test_memo_makes_a_declared_value_once(safety_store: Path) -> None:
    s = Searcher(safety_store, "raw")
    made: list[int] = []

    def make() -> list[int]:
        made.append(1)
        return [len(made)]

    first = s.memo("ltr_model:bm25+dense", make)
    assert s.memo("ltr_model:bm25+dense", make) is first and made == [1]
    with pytest.raises(KeyError, match="MEMO_KEYS"):
        s.memo("anything_else", make)
    assert router(s) is router(s)  # the router, built once per searcher


def test_concurrent_makers_share_the_first_value_kept(safety_store: Path) -> None:
    s = Searcher(safety_store, "raw")
    gate = threading.Barrier(4)
    got: list[object] = []

    def search() -> None:
        def make() -> object:
            gate.wait()  # every thread is making at once
            return object()

        got.append(s.memo("heading_terms", make))

    threads = [threading.Thread(target=search) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(g is got[0] for g in got)


def test_ltr_keeps_its_page_features_in_the_memo(safety_store: Path) -> None:
    """``ltr:``'s page features (content words, contents and low-text flags) are a declared
    memo value, made once, not an attribute the stage sets on the searcher."""
    from sourcepage.retrieval.ltr import _page_info

    s = Searcher(safety_store, "raw")
    info = _page_info(s)
    assert info and _page_info(s) is info
    assert s.memo("ltr_pages", dict) is info and not hasattr(s, "_ltr_pages")
