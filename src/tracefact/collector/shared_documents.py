"""Retrieved documents shared by every consumer of a Redis queue.

With `queue: redis`, a trace's retriever span and its LLM span can sit in two requests
that two workers take. Each worker still reads spans with the SDK's `DocumentStore`, but
this one also writes every trace's documents to Redis (a list per trace, with a time to
live) and reads them from there: the LLM span, held for the window by whichever worker
took it, meets the documents of a retriever span another worker routed. The documents
also outlive a worker that died, so an entry handed out again is judged against them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from tracefact._imports import import_extra
from tracefact.conventions import DocumentStore

logger = logging.getLogger(__name__)


class SharedDocumentStore(DocumentStore):
    """A `DocumentStore` whose documents are in Redis too, for every worker.

    Args:
        url: the Redis server of the queue.
        key_prefix: a trace's list is ``{key_prefix}{trace id in hex}``.
        ttl_seconds: how long a trace's documents stay after the last one was added.
        **bounds: the local store's bounds (`DocumentStore`); `max_documents` and the
            size of one document bound the Redis lists as well.
    """

    def __init__(
        self,
        url: str,
        *,
        key_prefix: str = "tracefact:documents:",
        ttl_seconds: float = 600.0,
        socket_timeout_seconds: float = 5.0,
        **bounds: Any,
    ) -> None:
        super().__init__(**bounds)
        redis = import_extra("redis", "redis")
        self._errors: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)
        # Any: redis-py annotates its sync and async clients alike (X | Awaitable[X]).
        self._redis: Any = redis.Redis.from_url(
            url,
            socket_timeout=socket_timeout_seconds,
            socket_connect_timeout=socket_timeout_seconds,
        )
        self._prefix = key_prefix
        self._ttl_ms = max(1, int(ttl_seconds * 1000))

    def add(self, trace_id: int, texts: Sequence[str]) -> None:
        super().add(trace_id, texts)
        kept = [t for t in texts if len(t.encode("utf-8", "surrogatepass")) <= self.max_bytes]
        if not kept:
            return
        key = self._key(trace_id)
        try:
            pipe = self._redis.pipeline(transaction=True)
            pipe.rpush(key, *kept)
            pipe.ltrim(key, 0, self.max_documents - 1)
            pipe.pexpire(key, self._ttl_ms)
            pipe.execute()
        except self._errors as exc:  # this worker's own LLM spans still see them locally
            logger.warning("retrieved documents not shared (redis unreachable): %s", exc)

    def documents(self, trace_id: int) -> list[str]:
        try:
            stored = self._redis.lrange(self._key(trace_id), 0, self.max_documents - 1)
        except self._errors as exc:
            logger.warning("shared documents not read (redis unreachable): %s", exc)
            return super().documents(trace_id)
        # A retriever span handed out again (its worker died) adds its documents twice.
        return list(dict.fromkeys(text.decode("utf-8", "surrogatepass") for text in stored))

    def close(self) -> None:
        self._redis.close()

    def _key(self, trace_id: int) -> str:
        return f"{self._prefix}{trace_id:032x}"
