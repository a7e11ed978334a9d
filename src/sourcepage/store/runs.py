"""The run log and its warnings: one row per command run (ingest, BEIR ingest), with its
arguments, status and summary; warnings name the run and the document."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from sourcepage.store.schema import now


class RunTables:
    """The ``runs`` and ``warnings`` tables of a Store."""

    conn: sqlite3.Connection

    def start_run(self, command: str, args: dict[str, Any]) -> int:
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO runs (command, args, started_at, status) VALUES (?,?,?, 'running')",
                (command, json.dumps(args, default=str), now()),
            )
        return int(cur.lastrowid or 0)

    def finish_run(self, run_id: int, status: str, summary: dict[str, Any]) -> None:
        with self.conn:
            self.conn.execute(
                "UPDATE runs SET finished_at=?, status=?, summary=? WHERE id=?",
                (now(), status, json.dumps(summary, default=str), run_id),
            )

    def warn(
        self, conn: sqlite3.Connection, run_id: int, doc_id: str | None, kind: str, message: str
    ) -> None:
        conn.execute(
            "INSERT INTO warnings (run_id, doc_id, kind, message, created_at) VALUES (?,?,?,?,?)",
            (run_id, doc_id, kind, message, now()),
        )

    def warnings(self, run_id: int | None = None) -> list[dict[str, Any]]:
        q = "SELECT run_id, doc_id, kind, message, created_at FROM warnings"
        rows = self.conn.execute(
            q + (" WHERE run_id=?" if run_id else "") + " ORDER BY id", (run_id,) if run_id else ()
        ).fetchall()
        return [
            dict(zip(("run_id", "doc_id", "kind", "message", "created_at"), r, strict=True)) for r in rows
        ]

    def content_stamp(self) -> tuple[int, str | None]:
        """A cheap value that changes with every ingest run (started or finished): a cached
        searcher or service compares it to notice a re-ingest by another process."""
        n, last = self.conn.execute("SELECT count(*), max(finished_at) FROM runs").fetchone()
        return int(n), last

    def run_args(self, command: str) -> list[Any]:
        """The arguments of every run of ``command``, newest first (None where the
        recorded JSON does not parse)."""
        rows = self.conn.execute(
            "SELECT args FROM runs WHERE command=? ORDER BY id DESC", (command,)
        ).fetchall()
        out: list[Any] = []
        for (args,) in rows:
            try:
                out.append(json.loads(args))
            except ValueError:
                out.append(None)
        return out

    def runs(self) -> list[dict[str, Any]]:
        cur = self.conn.execute(
            "SELECT id, command, started_at, finished_at, status, summary FROM runs ORDER BY id"
        )
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
