"""What a process has already read of immutable versions: their lines and their outlines.

A version never changes once written, so an entry can never go stale and needs no
invalidation; the cache only bounds memory (`KNOWLEDGE_VERSION_CACHE_BYTES` per process, 0 turns
it off). It is what lets an agent page through a 10 MiB document section by section without the
database sending the whole body, and Python splitting it, on every read. Callers check access
first: the cache is keyed by version id and knows nothing about who may read what.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from cachetools import LRUCache
from django.conf import settings

T = TypeVar("T")

_lock = threading.Lock()
_caches: dict[int, LRUCache] = {}


def _cache() -> LRUCache | None:
    limit = settings.KNOWLEDGE_VERSION_CACHE_BYTES
    if limit <= 0:
        return None
    with _lock:
        cache = _caches.get(limit)
        if cache is None:
            _caches.clear()
            cache = _caches[limit] = LRUCache(maxsize=limit, getsizeof=lambda entry: entry[1])
        return cache


def cached(key: Hashable, load: Callable[[], tuple[T, int]]) -> T:
    """The value for key, loading it (value, approximate size in bytes) on a miss.

    The load runs outside the lock: two threads missing at once both load, and the second
    store wins, which is harmless because both loaded the same immutable data.
    """
    cache = _cache()
    if cache is None:
        return load()[0]
    with _lock:
        entry: tuple[Any, int] | None = cache.get(key)
    if entry is not None:
        return entry[0]
    value, size = load()
    if size <= cache.maxsize:
        with _lock:
            cache[key] = (value, size)
    return value


def clear() -> None:
    """Forget everything (tests that count database reads start from a cold cache)."""
    with _lock:
        for cache in _caches.values():
            cache.clear()
