"""A small cache that is also single-flight, for question vectors.

A search encodes its question on a prefetch thread (``api``) while its ranking may ask
for the same vector: a thread asking for a value another thread is computing waits for
that one instead of computing it again, which ``functools.lru_cache`` would do.
Hand-written: neither functools nor cachetools has a single-flight cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future

import numpy as np


def single_flight(
    compute: Callable[[str], np.ndarray], key_of: Callable[[str], Hashable], size: int
) -> Callable[[str], np.ndarray]:
    """``compute`` (text → vector) behind a cache of the ``size`` most recent keys
    (``key_of(text)``); vectors are float32, flat and read-only. ``cache_clear()`` empties it."""
    lock = threading.Lock()
    done: OrderedDict[Hashable, np.ndarray] = OrderedDict()
    flying: dict[Hashable, Future[np.ndarray]] = {}

    def cached(text: str) -> np.ndarray:
        key = key_of(text)
        with lock:
            if key in done:
                done.move_to_end(key)
                return done[key]
            pending = flying.get(key)
            if pending is None:
                mine: Future[np.ndarray] = Future()
                flying[key] = mine
        if pending is not None:
            return pending.result()
        try:
            v = np.asarray(compute(text), dtype=np.float32).reshape(-1)
            v.setflags(write=False)
        except BaseException as e:
            with lock:
                del flying[key]
            mine.set_exception(e)
            raise
        with lock:
            done[key] = v
            del flying[key]
            while len(done) > size:
                done.popitem(last=False)
        mine.set_result(v)
        return v

    def clear() -> None:
        with lock:
            done.clear()

    cached.cache_clear = clear  # type: ignore[attr-defined]
    return cached
