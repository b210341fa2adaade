"""`ReviewMonitor`: the collector's one place that holds selections and labels, live.

It is a span observer: every evaluated span's final verdict carries its review selection,
which goes into a `Ledger` (and a journal, so that a restart loses none); a poller thread
reads people's labels back (Phoenix HUMAN annotations on the selected spans) every
`poll_seconds`. Gauges publish each evaluator's corrected rate over the review window:
rate and bounds only while the figure is shown, labels, pending, the window's end, and
whether it is shown. App processes never poll: only the collector builds one.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from tracefact import semconv
from tracefact._version import __version__
from tracefact.pipeline.verdict import SpanRecord, Verdict
from tracefact.review.ledger import Label, Ledger, ReviewEstimate, Selection, selection_of
from tracefact.review.strata import Stratum

logger = logging.getLogger("tracefact")

Poller = Callable[[Sequence[tuple[str, str]]], list[Label]]
"""Labels for the given (trace id, span id) pairs of selected spans."""


class ReviewMonitor:
    """Selections from verdicts, labels from a poller, the corrected rate as gauges."""

    def __init__(
        self,
        ledger: Ledger,
        meter_provider: MeterProvider | None = None,
        *,
        journal: Path | None = None,
        poller: Poller | None = None,
        poll_seconds: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ledger = ledger
        self.journal = journal
        self.poller = poller
        self.poll_seconds = poll_seconds
        self.clock = clock
        self._journal_lock = threading.Lock()  # one writer of the journal file at a time
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if journal is not None and journal.exists():
            self._replay(journal)
        _gauges(meter_provider or metrics.get_meter_provider(), self)

    # --- in ------------------------------------------------------------------------------
    def observe(self, record: SpanRecord, verdict: Verdict) -> None:
        """Count an evaluated span's selection (quick; never raises)."""
        if semconv.REVIEW_STRATUM in verdict.attributes:
            self.upstream(record.trace_id, record.span_id, verdict.attributes, record.end_time)

    def upstream(
        self, trace_id: int, span_id: int, attributes: Mapping[str, Any], end_time: int | None
    ) -> None:
        """Count the selection a span carries (one evaluated here, or by an SDK upstream)."""
        try:
            when = end_time / 1e9 if end_time is not None else self.clock()
            selection = selection_of(f"{trace_id:032x}", f"{span_id:016x}", attributes, when)
            if selection is None:
                return
            self.ledger.add_selection(selection)
            if self.journal is not None:
                self._write(selection)
        except Exception:  # an observer must never fail the pipeline
            logger.exception("tracefact: could not record a review selection")

    def poll(self) -> int:
        """Read labels for the selected spans now; how many came back."""
        if self.poller is None:
            return 0
        labels = self.poller(self.ledger.selected_ids)
        self.ledger.add_labels(labels)
        return len(labels)

    def estimates(self) -> list[ReviewEstimate]:
        return self.ledger.estimates(self.clock())

    # --- the poller thread -----------------------------------------------------------------
    def start(self) -> None:
        if self.poller is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="tracefact-review", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # Phoenix down: try again next time
                logger.warning("tracefact: polling review labels failed: %s", exc)
            self._stop.wait(self.poll_seconds)

    # --- the journal -----------------------------------------------------------------------
    def _write(self, s: Selection) -> None:
        fields = (s.trace_id, s.span_id, s.evaluator, str(s.stratum))
        line = json.dumps([*fields, s.probability, s.weight, s.selected, s.time])
        assert self.journal is not None
        with self._journal_lock, self.journal.open("a", encoding="utf-8") as out:
            out.write(line + "\n")

    def _replay(self, journal: Path) -> None:
        with journal.open(encoding="utf-8") as lines:
            for line in lines:
                try:
                    t, s, e, h, p, w, chosen, when = json.loads(line)
                    selection = Selection(t, s, e, Stratum.parse(h), p, w, chosen, when)
                except (ValueError, TypeError):
                    continue  # a line cut short by a crash
                self.ledger.add_selection(selection)


_MONITORS: weakref.WeakKeyDictionary[MeterProvider, list[ReviewMonitor]] = (
    weakref.WeakKeyDictionary()
)


def _gauges(provider: MeterProvider, monitor: ReviewMonitor) -> None:
    """The gauges, once per meter provider; a later monitor on it takes them over."""
    followed = _MONITORS.get(provider)
    if followed is not None:
        followed[:] = [monitor]
        return
    followed = _MONITORS[provider] = [monitor]
    meter = provider.get_meter("tracefact", __version__)

    def observe(
        value: Callable[[ReviewEstimate], float | None],
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(options: CallbackOptions) -> Iterable[Observation]:
            out = []
            for each in followed:
                for estimate in each.estimates():
                    number = value(estimate)
                    if number is not None:
                        attributes = {semconv.MONITOR_EVALUATOR: estimate.evaluator}
                        if estimate.group:
                            attributes[semconv.REVIEW_GROUP] = estimate.group
                        out.append(Observation(number, attributes))
            return out

        return callback

    def shown(e: ReviewEstimate) -> bool:
        return e.corrected.shown

    gauges: tuple[tuple[str, Callable[[ReviewEstimate], float | None], str], ...] = (
        (
            semconv.METRIC_REVIEW_RATE,
            lambda e: e.corrected.rate if shown(e) else None,
            "corrected hallucination rate over the review window",
        ),
        (
            semconv.METRIC_REVIEW_RATE_LOWER,
            lambda e: e.corrected.lower if shown(e) else None,
            "its 95% lower bound",
        ),
        (
            semconv.METRIC_REVIEW_RATE_UPPER,
            lambda e: e.corrected.upper if shown(e) else None,
            "its 95% upper bound",
        ),
        (semconv.METRIC_REVIEW_LABELS, lambda e: e.corrected.labels, "labelled spans"),
        (
            semconv.METRIC_REVIEW_PENDING,
            lambda e: e.corrected.pending,
            "selected spans without a decided label",
        ),
        (semconv.METRIC_REVIEW_WINDOW_END, lambda e: e.window_end, "end of the window (unix s)"),
        (
            semconv.METRIC_REVIEW_SHOWN,
            lambda e: 1.0 if shown(e) else 0.0,
            "1 when the corrected rate is shown, 0 when withheld",
        ),
    )
    for name, value, description in gauges:
        meter.create_observable_gauge(name, callbacks=[observe(value)], description=description)
