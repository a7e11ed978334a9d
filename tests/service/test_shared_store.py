"""The store reads the service shares between threads (``Store`` methods at the end of
the class) and the assumption that makes sharing one connection safe."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from sourcepage.store.db import Store


def test_sqlite_is_serialized() -> None:
    # Store.read_only shares one connection between threads: that needs SQLite built in
    # serialized mode, which the sqlite3 module reports as threadsafety 3.
    assert sqlite3.threadsafety == 3


def test_service_reads(safety_store: Path) -> None:
    st = Store(safety_store).read_only()
    try:
        d = st.document("loto_energy_control")
        assert d is not None and d.authority == "OSHA"
        assert st.document("nothing") is None
        assert st.page_count("loto_energy_control") == 3 and st.page_count("nothing") == 0
        c = st.chunk("raw", "loto_energy_control#p2#c1")
        assert c is not None and c.doc_id == "loto_energy_control" and c.page == 2
        assert c.text and all(len(s) == 3 for s in c.spans)
        assert st.chunk("raw", "loto_energy_control#p2#c99") is None
        assert st.chunk("pretty", "loto_energy_control#p2#c1") is None
        args = st.run_args("ingest")
        assert args and isinstance(args[0], dict) and "corpus" in args[0]
        assert st.run_args("no-such-command") == []
    finally:
        st.close()


def test_read_only_store_refuses_writes(safety_store: Path) -> None:
    st = Store(safety_store).read_only()
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            st.set_meta("x", 1)
    finally:
        st.close()


def test_shared_reads_from_many_threads(safety_store: Path) -> None:
    st = Store(safety_store).read_only()
    expected = [st.page("loto_energy_control", n) for n in (1, 2, 3)]
    errors: list[BaseException] = []

    def one() -> None:
        try:
            for _ in range(50):
                assert [st.page("loto_energy_control", n) for n in (1, 2, 3)] == expected
                assert st.page_count("loto_energy_control") == 3
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    st.close()
    assert not errors
