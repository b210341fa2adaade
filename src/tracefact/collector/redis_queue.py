"""The `redis` request queue: Redis Streams shared by many collectors and workers.

Each received request is one stream entry (field `p`: the request's protobuf bytes),
added with XADD by a Lua script that refuses it at the bound. Every consumer (a collector
or a `tracefact worker`) reads through one consumer group (XREADGROUP), so an entry goes to
one of them; it is acknowledged with XACK and deleted with XDEL once its spans left
upstream, so the stream's length is the queue's depth. An entry whose consumer died stays
in the group's pending list; once idle longer than `lease_seconds` any consumer takes it
over (XAUTOCLAIM) and sees its delivery count from the pending list: delivery is at least
once. Live consumers reset the idle time of what they hold (XCLAIM JUSTID, through
`Leases`), so a slow evaluation is not taken over.

Durability is Redis's: `put` returns once Redis has the entry in memory. With
`appendonly yes` it survives a Redis restart (`appendfsync always`: also a power loss;
`everysec`: up to a second of acknowledged requests may be lost with the machine).
While Redis is unreachable or refuses writes (out of memory, MISCONF, READONLY: a
`ResponseError`), `put` raises `QueueUnavailable` (the client is told to retry and keeps
its data), `get` returns nothing and tries again with backoff, an `ack` that fails waits
in this process and is tried again first at the next `get` (should this consumer stall,
its leases run out and another takes the entry over: a counted duplicate, never a
loss), and `unavailable` says so (the collector's `/readyz` answers 503). `unavailable`
asks Redis itself (a probe write, at most once a second): while a load balancer keeps requests
away, no `put` would notice that it is back.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracefact._imports import import_extra
from tracefact.collector._leases import Leases
from tracefact.collector.queue import (
    Encoded,
    Entry,
    Outage,
    QueueFull,
    QueueUnavailable,
    require_positive,
)

logger = logging.getLogger(__name__)

_PAYLOAD = b"p"
_CHECK_SECONDS = 1.0
"""How often `unavailable` asks Redis; between asks it answers what it last saw."""
_PROBE_MS = 5000
"""How long `unavailable`'s probe key lives (it is written again at each ask)."""
_BOUNDED_XADD = """
if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[1]) then return false end
return redis.call('XADD', KEYS[1], '*', 'p', ARGV[2])
"""
"""XADD unless the stream holds `ARGV[1]` entries: atomic, so concurrent collectors cannot
overshoot the bound."""


def consumer_name() -> str:
    """A name unique to this process: host, pid and a random part (pids are reused)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class RedisQueue:
    """A bounded, shared request queue on a Redis stream with one consumer group.

    Args:
        url: the Redis server, e.g. ``redis://127.0.0.1:6379/0`` (``rediss://`` for TLS,
            a password in the URL).
        stream: the stream's key; collectors and workers of one deployment share it.
        group: the consumer group; every consumer of the stream reads through it.
        max_entries: requests stored and not acknowledged; `put` raises `QueueFull` beyond.
        lease_seconds: how long an entry whose consumer stopped renewing it waits before
            another consumer takes it over.
        retry_after_seconds: the retry hint of `QueueFull` and `QueueUnavailable`.
        socket_timeout_seconds: the longest one Redis call may take.
        consumer: this consumer's name in the group (default: host, pid, random).
    """

    durable = True

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        stream: str = "tracefact:requests",
        group: str = "tracefact",
        max_entries: int = 100_000,
        lease_seconds: float = 30.0,
        retry_after_seconds: float = 1.0,
        socket_timeout_seconds: float = 5.0,
        consumer: str | None = None,
    ) -> None:
        require_positive(
            max_entries=max_entries,
            lease_seconds=lease_seconds,
            socket_timeout_seconds=socket_timeout_seconds,
        )
        redis = import_extra("redis", "redis")
        # Every error of a call: unreachable, too slow, or refused (OOM, MISCONF, READONLY).
        self._errors: tuple[type[Exception], ...] = (
            redis.ConnectionError,
            redis.TimeoutError,
            redis.ResponseError,
        )
        self._response_error: type[Exception] = redis.ResponseError
        # Any: redis-py annotates its sync and async clients alike (X | Awaitable[X]).
        self._redis: Any = redis.Redis.from_url(
            url,
            socket_timeout=socket_timeout_seconds,
            socket_connect_timeout=socket_timeout_seconds,
        )
        self._add = self._redis.register_script(_BOUNDED_XADD)
        self.stream = stream
        self.group = group
        self.consumer = consumer or consumer_name()
        self._max_entries = max_entries
        self._claim_ms = int(lease_seconds * 1000)
        # A blocking read ends within the socket timeout, and often enough to claim in time.
        self._poll_ms = max(50, min(int(socket_timeout_seconds * 500), self._claim_ms // 4))
        self._retry_after = retry_after_seconds
        self._claim_cursor = "0-0"
        self._depth = 0
        self._group_ready = False
        self._outage = threading.Event()  # set while Redis is unreachable: logged once
        self._outage_error = ""
        self._checking = threading.Lock()  # one probe at a time; other callers do not wait
        self._next_check = 0.0
        self._leases = Leases(self._renew, lease_seconds / 3, name="tracefact-redis-leases")
        self._backoff = Outage(f"redis:{stream}")  # when `get` and `ack` try again
        self._unacked: list[str] = []  # acknowledgements that failed, tried again first
        self._acking = threading.Lock()  # guards _unacked

    def put(self, request: ExportTraceServiceRequest | Encoded) -> None:
        try:
            entry_id = self._add(
                keys=[self.stream], args=[self._max_entries, Encoded.of(request).body]
            )
        except self._errors as exc:
            self._unreachable(exc)
            raise QueueUnavailable(self._describe(exc), self._retry_after) from exc
        self._reachable()
        if entry_id is None:
            raise QueueFull(self._retry_after)

    def get(self, max_entries: int, timeout_seconds: float) -> list[Entry]:
        if max_entries < 1:  # COUNT 0 would mean no limit to Redis
            return []
        deadline = time.monotonic() + max(0.0, timeout_seconds)
        wait = self._backoff.wait_seconds()
        if wait > 0:  # failed lately: not before the backoff is over
            if wait > deadline - time.monotonic():
                time.sleep(max(0.0, deadline - time.monotonic()))
                return []
            time.sleep(wait)
        try:
            if not self._try_acks():
                return []
            self._ensure_group()
            while True:  # claims are looked for between short blocking reads
                entries = self._claim(max_entries)
                block_ms = min(self._poll_ms, int((deadline - time.monotonic()) * 1000))
                if entries:
                    break
                entries = self._read(max_entries, block_ms)
                if entries or block_ms <= 0:
                    break
        except self._errors as exc:
            if isinstance(exc, self._response_error) and "NOGROUP" in str(exc):
                self._group_ready = False  # Redis lost the stream (restarted without its data)
                return []
            self._failed("get", exc)
            return []
        self._reachable()
        self._backoff.succeeded()
        self._leases.hold(entry.id for entry in entries)
        return entries

    def ack(self, entry_id: str) -> None:
        with self._acking:
            self._unacked.append(entry_id)
        if self._backoff.wait_seconds() <= 0:
            self._try_acks()

    def depth(self) -> int:
        """The stream's length; while Redis is unreachable, the last length read."""
        try:
            self._depth = int(self._redis.xlen(self.stream))
        except self._errors as exc:
            self._unreachable(exc)
        return self._depth

    def unavailable(self) -> str | None:
        if self._checking.acquire(blocking=False):
            try:
                if time.monotonic() >= self._next_check:
                    self._check()
                    self._next_check = time.monotonic() + _CHECK_SECONDS
            finally:
                self._checking.release()
        return self._outage_error if self._outage.is_set() else None

    def close(self) -> None:
        """Hand back what this consumer still holds (it will not finish it), then close."""
        self._try_acks()
        held = self._leases.close()
        if held:  # idle as if abandoned: the next XAUTOCLAIM takes them, not in lease_seconds
            try:
                self._redis.xclaim(
                    self.stream,
                    self.group,
                    self.consumer,
                    0,
                    held,
                    idle=self._claim_ms,
                    justid=True,
                )
            except self._errors as exc:
                self._unreachable(exc)  # they are taken over after lease_seconds instead
        self._redis.close()

    def _try_acks(self) -> bool:
        """Acknowledge and delete what is waiting; False when Redis refused (tried later)."""
        with self._acking:
            ids, self._unacked = self._unacked, []
        if not ids:
            return True
        try:
            pipe = self._redis.pipeline(transaction=True)
            pipe.xack(self.stream, self.group, *ids)
            pipe.xdel(self.stream, *ids)
            pipe.execute()
        except self._errors as exc:
            with self._acking:
                self._unacked[:0] = ids
            self._failed("ack", exc)
            return False
        self._backoff.succeeded()
        for entry_id in ids:
            self._leases.release(entry_id)
        return True

    def _failed(self, operation: str, exc: Exception) -> None:
        self._unreachable(exc)
        self._backoff.failed(operation, exc)

    def _check(self) -> None:
        """A short-lived probe key written next to the stream.

        Redis refuses it as it would refuse `put`'s write; a PING passes while it is
        read-only or out of memory.
        """
        try:
            self._redis.set(f"{self.stream}:probe", b"1", px=_PROBE_MS)
        except self._errors as exc:
            self._unreachable(exc)
        else:
            self._reachable()

    def _ensure_group(self) -> None:
        if self._group_ready:
            return
        try:
            self._redis.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except self._response_error as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    def _claim(self, max_entries: int) -> list[Entry]:
        """Entries whose consumer stopped renewing them, with their delivery counts."""
        cursor, messages, _deleted = self._redis.xautoclaim(
            self.stream,
            self.group,
            self.consumer,
            self._claim_ms,
            self._claim_cursor,
            count=max_entries,
        )
        self._claim_cursor = cursor
        held = self._leases.held()  # this consumer's own, run out while it works on them
        messages = [
            (entry_id, fields)
            for entry_id, fields in messages
            if fields and _key(entry_id) not in held
        ]
        if not messages:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for entry_id, _ in messages:
            pipe.xpending_range(self.stream, self.group, entry_id, entry_id, 1)
        pending = pipe.execute()
        return [
            # not pending any more: acknowledged since the claim, so at least a second delivery
            _entry(entry_id, fields, found[0]["times_delivered"] if found else 2)
            for (entry_id, fields), found in zip(messages, pending, strict=True)
        ]

    def _read(self, max_entries: int, block_ms: int) -> list[Entry]:
        """New entries, waiting up to `block_ms` (not at all when it is 0 or less)."""
        reply = self._redis.xreadgroup(
            self.group,
            self.consumer,
            {self.stream: ">"},
            count=max_entries,
            block=block_ms if block_ms > 0 else None,
        )
        return [
            _entry(entry_id, fields, 1)
            for _, messages in reply or []
            for entry_id, fields in messages
        ]

    def _renew(self, ids: list[str]) -> None:
        self._redis.xclaim(self.stream, self.group, self.consumer, 0, ids, justid=True)

    def _describe(self, exc: Exception) -> str:
        refused = isinstance(exc, self._response_error)  # OOM, MISCONF, READONLY
        return f"redis {'refused' if refused else 'unreachable'}: {exc}"

    def _unreachable(self, exc: Exception) -> None:
        self._outage_error = self._describe(exc)
        if not self._outage.is_set():
            self._outage.set()
            logger.warning("redis queue %s %s", self.stream, self._outage_error)

    def _reachable(self) -> None:
        if self._outage.is_set():
            self._outage.clear()
            logger.warning("redis queue %s reachable again", self.stream)


def _key(entry_id: bytes | str) -> str:
    return entry_id.decode() if isinstance(entry_id, bytes) else entry_id


def _entry(entry_id: bytes | str, fields: dict[bytes, bytes], deliveries: int) -> Entry:
    key = _key(entry_id)
    stored_ms = int(key.partition("-")[0])  # XADD's ids start with Redis's clock in ms
    return Entry.stored(key, fields.get(_PAYLOAD, b""), int(deliveries), stored_ms / 1000)
