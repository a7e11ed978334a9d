"""sourcepage: find, judge and measure the exact source pages that support a safety answer.

Public API (imported lazily so that ``import sourcepage`` stays cheap)::

    sourcepage.ingest(corpus, store)                 # corpus folder → store
    sourcepage.search(question, store, method="bm25", k=10, version="raw", filters=None)
    sourcepage.evaluate(corpus, questions, out, versions=[...], methods=[...])  # says what it does
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["ingest", "search", "evaluate", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "ingest":
        from sourcepage.ingest import ingest

        return ingest
    if name == "search":
        from sourcepage.api import search

        return search
    if name == "evaluate":
        from sourcepage.api import evaluate

        return evaluate
    raise AttributeError(name)
