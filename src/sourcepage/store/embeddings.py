"""The embedding cache: vectors by model and chunk-text SHA-256, so a rebuilt dense index
embeds only new texts."""

from __future__ import annotations

import sqlite3
import threading
from typing import Any


class EmbeddingTables:
    """The ``embeddings`` table of a Store."""

    conn: sqlite3.Connection
    #: Serialises the embedding cache's write transactions (and the reads beside them) on
    #: a connection that several threads share: a search may fill the cache (rerank,
    #: calibrated features) while another thread searches the same Searcher's store.
    _cache_lock = threading.Lock()

    def cached_embeddings(self, model: str, shas: list[str]) -> dict[str, Any]:
        """Vectors cached for ``model`` by chunk-text SHA-256."""
        import numpy as np

        out: dict[str, Any] = {}
        for i in range(0, len(shas), 500):
            part = shas[i : i + 500]
            marks = ",".join("?" * len(part))
            q = f"SELECT text_sha, dim, vector FROM embeddings WHERE model=? AND text_sha IN ({marks})"
            with self._cache_lock:
                rows = self.conn.execute(q, (model, *part)).fetchall()
            for sha, _dim, blob in rows:
                out[sha] = np.frombuffer(blob, dtype=np.float32)
        return out

    def cache_embeddings(self, model: str, vectors: dict[str, Any]) -> None:
        with self._cache_lock, self.conn:
            self.conn.executemany(
                "INSERT OR REPLACE INTO embeddings VALUES (?,?,?,?)",
                [(model, s, int(v.shape[0]), v.astype("float32").tobytes()) for s, v in vectors.items()],
            )
