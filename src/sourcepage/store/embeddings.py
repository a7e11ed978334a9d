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

    #: set by ``Store.read_only``: new vectors are kept in memory, never written
    readonly: bool = False
    #: how many vectors a read-only store keeps in memory (the oldest go first)
    MEMORY_VECTORS = 50_000

    def cached_embeddings(self, model: str, shas: list[str]) -> dict[str, Any]:
        """Vectors cached for ``model`` by chunk-text SHA-256 (in the table, or in memory
        on a read-only store)."""
        import numpy as np

        mem = self.__dict__.get("_memory_vectors", {})
        out: dict[str, Any] = {s: mem[(model, s)] for s in shas if (model, s) in mem}
        rest = [s for s in shas if s not in out]
        for i in range(0, len(rest), 500):
            part = rest[i : i + 500]
            marks = ",".join("?" * len(part))
            q = f"SELECT text_sha, dim, vector FROM embeddings WHERE model=? AND text_sha IN ({marks})"
            with self._cache_lock:
                rows = self.conn.execute(q, (model, *part)).fetchall()
            for sha, _dim, blob in rows:
                out[sha] = np.frombuffer(blob, dtype=np.float32)
        return out

    def cache_embeddings(self, model: str, vectors: dict[str, Any]) -> None:
        """Keep ``vectors`` of ``model`` (by text SHA-256): in the table, or on a read-only
        store (the web service) in a bounded memory cache, so that a search never writes."""
        if self.readonly:
            with self._cache_lock:
                mem = self.__dict__.setdefault("_memory_vectors", {})
                mem.update({(model, s): v for s, v in vectors.items()})
                for k in list(mem)[: max(0, len(mem) - self.MEMORY_VECTORS)]:
                    del mem[k]
            return
        with self._cache_lock, self.conn:
            self.conn.executemany(
                "INSERT OR REPLACE INTO embeddings VALUES (?,?,?,?)",
                [(model, s, int(v.shape[0]), v.astype("float32").tobytes()) for s, v in vectors.items()],
            )
