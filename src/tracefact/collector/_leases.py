"""Leases on queue entries, renewed while their holder lives.

A durable queue hands an entry out again once its consumer stops answering for it. The
time that takes must not be a guess at how long processing may last (a slow upstream or
evaluator would get its entries duplicated), so each process renews the leases of the
entries it holds on a thread: only a dead (or frozen) holder's leases run out.
"""

from __future__ import annotations

import logging
import threading
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
    """

    def __init__(
        self, renew: Callable[[list[str]], None], interval_seconds: float, name: str
    ) -> None:
        self._renew = renew
        self._interval = interval_seconds
        self._name = name
        self._held: set[str] = set()
        self._lock = threading.Lock()  # guards _held and _thread
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self, ids: Iterable[str]) -> None:
        with self._lock:
            self._held.update(ids)
            if self._thread is None and self._held and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def release(self, entry_id: str) -> None:
        with self._lock:
            self._held.discard(entry_id)

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
            with self._lock:
                ids = sorted(self._held)
            if not ids:
                continue
            try:
                self._renew(ids)
            except Exception:  # the backend is away: the next round tries again
                logger.warning("could not renew %d queue leases", len(ids), exc_info=True)
