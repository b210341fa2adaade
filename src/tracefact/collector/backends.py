"""The request queue and the document store a configuration names.

`memory` keeps both in the process. `sqlite` keeps both in one file (one machine), so
documents outlive a crash with the requests. `redis` shares both between every collector
and `tracefact worker`: the stream of requests, and each trace's retrieved documents
(`SharedDocumentStore`), so a trace's spans meet on any consumer.
"""

from __future__ import annotations

from tracefact.collector.config import CollectorConfig
from tracefact.collector.memory import MemoryQueue
from tracefact.collector.queue import RequestQueue
from tracefact.collector.redis_queue import RedisQueue
from tracefact.collector.shared_documents import (
    RedisShelf,
    SharedDocumentStore,
    Shelf,
    SqliteShelf,
)
from tracefact.collector.sqlite_queue import SqliteQueue
from tracefact.conventions import DocumentStore


def open_queue(config: CollectorConfig) -> RequestQueue:
    retry_after = config.forwarding.retry_after_seconds
    if config.queue == "sqlite":
        assert config.sqlite is not None  # the configuration's validator requires it
        return SqliteQueue(
            config.sqlite.path,
            max_entries=config.queue_max_requests,
            max_bytes=config.sqlite.max_bytes,
            lease_seconds=config.sqlite.lease_seconds,
            synchronous=config.sqlite.synchronous,
            retry_after_seconds=retry_after,
        )
    if config.queue == "redis":
        assert config.redis is not None
        return RedisQueue(
            config.redis.url,
            stream=config.redis.stream,
            group=config.redis.group,
            max_entries=config.queue_max_requests,
            lease_seconds=config.redis.lease_seconds,
            retry_after_seconds=retry_after,
        )
    return MemoryQueue(config.queue_max_requests, retry_after)


def document_store(config: CollectorConfig) -> DocumentStore:
    bounds = config.evaluation.documents.model_dump()
    ttl = bounds["max_age_seconds"]
    if config.queue == "redis" and config.redis is not None:
        shelf: Shelf = RedisShelf(
            config.redis.url,
            key_prefix=config.redis.documents_prefix,
            ttl_seconds=ttl,
            max_documents=bounds["max_documents"],
        )
        return SharedDocumentStore(shelf, **bounds)
    if config.queue == "sqlite" and config.sqlite is not None:
        shelf = SqliteShelf(config.sqlite.path, ttl_seconds=ttl, max_bytes=bounds["max_bytes"])
        return SharedDocumentStore(shelf, **bounds)
    return DocumentStore(**bounds)
