"""BEIR ids: the ``beir_ids`` table maps each BEIR ``_id`` to its doc_id, stable across
re-ingests, and records the run that last saw it (duplicates within a run, removals)."""

from __future__ import annotations

import sqlite3


class BeirIdTables:
    """The ``beir_ids`` table of a Store."""

    conn: sqlite3.Connection

    def claim_beir_id(
        self, conn: sqlite3.Connection, beir_id: str, base: str, dataset: str, run_id: int
    ) -> tuple[str, bool]:
        """(doc_id, first) for a BEIR ``_id`` seen by run ``run_id``, inside the caller's
        transaction. An id seen before keeps its doc_id; a new one gets ``base`` or, when
        another id holds that, ``base-2``, ``base-3``, ... ``first`` is False when this
        run saw the id already (a duplicate line)."""
        row = conn.execute("SELECT doc_id, seen_run FROM beir_ids WHERE beir_id=?", (beir_id,)).fetchone()
        if row is None:
            doc_id, n = base, 1
            while conn.execute("SELECT 1 FROM beir_ids WHERE doc_id=?", (doc_id,)).fetchone():
                n += 1
                doc_id = f"{base}-{n}"
            conn.execute(
                "INSERT INTO beir_ids (beir_id, doc_id, dataset) VALUES (?,?,?)", (beir_id, doc_id, dataset)
            )
            seen = 0
        else:
            doc_id, seen = str(row[0]), row[1]
        if seen == run_id:
            return doc_id, False
        conn.execute("UPDATE beir_ids SET seen_run=? WHERE beir_id=?", (run_id, beir_id))
        return doc_id, True

    def remove_unseen_beir(self, conn: sqlite3.Connection, run_id: int) -> int:
        """Mark removed every good document whose BEIR id run ``run_id`` did not see;
        returns how many."""
        cur = conn.execute(
            "UPDATE documents SET status='removed' WHERE status='ok' AND doc_id NOT IN"
            " (SELECT doc_id FROM beir_ids WHERE seen_run=?)",
            (run_id,),
        )
        return cur.rowcount

    def beir_id_map(self) -> dict[str, str]:
        """doc_id → original BEIR ``_id`` for every BEIR document of the store."""
        return {d: b for b, d in self.conn.execute("SELECT beir_id, doc_id FROM beir_ids")}
