"""Leases on queue entries, renewed while their holder lives.

A durable queue hands an entry out again once its consumer stops answering for it. The
time that takes must not be a guess at how long processing may last (a slow upstream or
evaluator would get its entries duplicated), so each process renews the leases of the
entries it holds on a thread: only a dead, frozen or stalled holder's leases run out.

A holder is stalled when it makes no progress: nothing acknowledged for `stall_seconds`.
It then renews only the entries it took within that time, so the older ones run out
and a healthy consumer takes them over (a collector whose acknowledgements fail, say,
must not keep its claim on what it cannot finish). The holder itself never takes back
what it still holds (`held`): a slow upstream or evaluator would have it evaluate and
forward its own entries again, and count them toward `queue_max_deliveries`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

logger = logging.getLogger(__name__)


class Leases:
    """The entry ids this process holds, renewed every `interval_seconds` until acknowledged.

    Args:
        renew: extends the leases of the given ids in the backend; may raise (logged, and
            tried again at the next interval: a lease that ran out meanwhile only costs
            a counted duplicate).
        interval_seconds: well under the backend's lease (a third of it).
        name: the renewal thread's name.
        stall_seconds: with no acknowledgement for this long, entries held longer stop
            being renewed (default: nine renewal intervals, three leases).
    """

    def __init__(
        self,
        renew: Callable[[list[str]], None],
        interval_seconds: float,
        name: str,
        stall_seconds: float | None = None,
    ) -> None:
        self._renew = renew
        self._interval = interval_seconds
        self._name = name
        self._stall = interval_seconds * 9 if stall_seconds is None else stall_seconds
        self._held: dict[str, float] = {}  # id: when it was taken (monotonic)
        self._progress = time.monotonic()  # the last acknowledgement
        self._lock = threading.Lock()  # guards _held and _thread
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self, ids: Iterable[str]) -> None:
        now = time.monotonic()
        with self._lock:
            if not self._held:  # idle until now: the stall clock starts with this work
                self._progress = now
            self._held.update(dict.fromkeys(ids, now))
            if self._thread is None and self._held and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def held(self) -> set[str]:
        """The ids this process holds: a queue hands none of them out to it again."""
        with self._lock:
            return set(self._held)

    def release(self, entry_id: str) -> None:
        """The entry was acknowledged: progress."""
        with self._lock:
            self._held.pop(entry_id, None)
            self._progress = time.monotonic()

    def renewable(self) -> list[str]:
        """The ids to renew now: all of them, or while stalled only the recently taken."""
        now = time.monotonic()
        with self._lock:
            if now - self._progress < self._stall:
                return sorted(self._held)
            return sorted(i for i, taken in self._held.items() if now - taken < self._stall)

    def close(self) -> list[str]:
        """Stop renewing; the ids still held, which the backend may hand back at once.

        Otherwise they expire there and are handed out again after the lease.
        """
        self._stop.set()
        with self._lock:
            thread, self._thread = self._thread, None
            held = sorted(self._held)
            self._held.clear()
        if thread is not None:
            thread.join()
        return held

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            ids = self.renewable()
            if not ids:
                continue
            try:
                self._renew(ids)
            except Exception:  # the backend is away: the next round tries again
                logger.warning("could not renew %d queue leases", len(ids), exc_info=True)
