"""The engine: received requests in, spans routed, LLM spans through the pipeline, out.

The collector's host of the `Pipeline`, as `EvaluationProcessor` is the SDK's: spans are
read by `conventions` (roles, retrieved documents), admitted, evaluated and given their
verdicts by the same pipeline, and retrieved documents wait in its reader's store. The
engine decides, once each, what only it can see: a span's role, whether an upstream
already evaluated it, nesting (from the window), when a trace is over, and whether the
pipeline has room before taking more from a durable queue.

For each request taken from the `RequestQueue`:
- spans that are not LLM spans go to the forwarder at once, exactly as received (under
  their original resource and scope); a retriever span of any convention also leaves its
  documents in the store, and a tool span its result, for LLM spans of its trace;
- LLM spans already evaluated (they carry `tracefact.eval.status`: an SDK upstream of
  the collector did it) pass through untouched; those selected for review upstream
  (`tracefact.review.stratum`) are counted by the review monitor on the way;
- other LLM spans wait `window_seconds`, so that retriever spans of their trace sent in
  a later request still count, then are admitted: one the sampler passes over (bounded
  by the pipeline's room, so an evaluator slower than the traffic samples more out)
  leaves at once, neither copied nor read; an admitted one goes to the pipeline as a
  `SpanRecord` with the held protobuf span; its verdicts come back to `WriteBack`, which
  writes them onto that span (or a protobuf carrier span) and forwards it.

A request is acknowledged to the queue once all of its spans left upstream (or were
counted as failed there): that is the bookkeeping durable queues rely on. With a durable
queue (`hold_in_queue`), spans wait there (not in this process) until evaluation has
room: the engine takes entries only while the pipeline's admission has room for more
spans in flight and the window has room (`window_max_spans`), and due spans stay in the
window while the pipeline is full, so several workers share a stream and none drops what
another could evaluate.
At shutdown with a durable queue, an entry with an LLM span not evaluated by the drain
deadline (or spans the forwarder could not send by then) is not acknowledged: the queue
hands it to another consumer, which evaluates it; its spans that already left are then
counted as redelivered. The memory queue has no other consumer: such spans go on with
status `shutdown`.
An entry handed out again (its consumer died) counts its spans as possible duplicates;
LLM spans of an entry older than `max_age_seconds` go on unevaluated, status `timeout`,
and those of an entry handed out more than `max_deliveries` times, status `error`.

The SDK forgets a trace's documents when its local root ends; here a root can arrive
before an LLM span of its trace has left the window, so the engine forgets a trace only
once its root arrived and no LLM span of it is waiting (the store's own bounds, by
bytes, traces and age, cover traces whose root never comes).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracefact import semconv
from tracefact.collector import spans
from tracefact.collector.forwarder import Forwarder
from tracefact.collector.metrics import CollectorMetrics
from tracefact.collector.queue import Entry, RequestQueue
from tracefact.collector.supervisor import Supervisor
from tracefact.collector.writeback import Held, Tracker, WriteBack, done_callback
from tracefact.conventions import Role, span_role
from tracefact.conventions.roles import ROLE_KEYS
from tracefact.pipeline import Pipeline
from tracefact.pipeline.verdict import SAMPLED_OUT, Verdict, nested, unevaluated
from tracefact.sampling import Decision

logger = logging.getLogger("tracefact.collector")

ROUTING_KEYS = dict.fromkeys(ROLE_KEYS | {semconv.EVAL_STATUS, semconv.REVIEW_STRATUM})
"""The attributes that decide where a span goes; the rest are not decoded to route it."""
ENTRIES_PER_TAKE = 64
IDLE_SECONDS = 0.05


class Engine:
    """Takes entries from the queue on its own thread and routes their spans."""

    def __init__(
        self,
        queue: RequestQueue,
        forwarder: Forwarder,
        pipeline: Pipeline[Held] | None,
        writeback: WriteBack,
        window_seconds: float,
        window_max_spans: int,
        metrics: CollectorMetrics,
        *,
        hold_in_queue: bool = False,
        max_age_seconds: float | None = None,
        max_deliveries: int | None = None,
        supervisor: Supervisor | None = None,
        review: Callable[[int, int, Mapping[str, Any], int | None], None] | None = None,
    ) -> None:
        self.queue = queue
        self.review = review
        """Sees LLM spans evaluated upstream that carry a review selection (an SDK app's)."""
        self.forwarder = forwarder
        self.pipeline = pipeline
        self.writeback = writeback
        self.window_seconds = window_seconds
        self.window_max_spans = window_max_spans
        self.metrics = metrics
        self.hold_in_queue = hold_in_queue
        """Take entries only while the pipeline has room: spans wait in the (durable) queue."""
        self.max_age_seconds = max_age_seconds
        self.max_deliveries = max_deliveries
        self._window: deque[Held] = deque()
        self._waiting: Counter[int] = Counter()  # LLM spans in the window, per trace
        self._llm_spans: dict[int, set[int]] = {}  # their span ids, while any waits
        self._forgets: deque[tuple[float, int]] = deque()  # (when, trace id) of ended roots
        self.kept = 0
        """Entries left unacknowledged at shutdown for another consumer."""
        self._kept_lock = threading.Lock()
        self._stop = threading.Event()
        self.supervisor = supervisor or Supervisor(metrics)
        """Restarts `_run` when it raises (a queue fault, a bug), counted and logged."""
        self._thread: threading.Thread | None = None

    @property
    def waiting(self) -> int:
        """LLM spans in the window."""
        return len(self._window)

    def start(self) -> None:
        self._thread = self.supervisor.spawn("tracefact-engine", self._run, self._stop)

    def stop(self, timeout: float) -> None:
        """Stop the thread; `drain` then finishes what is left."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def drain(self) -> None:
        """Route every entry left in the queue and release the whole window now.

        A durable queue keeps what nobody took, and the entries of window spans the
        pipeline has no room for: they wait there for the next consumer.
        """
        while not self.queue.durable and (entries := self.queue.get(ENTRIES_PER_TAKE, 0)):
            for entry in entries:
                self.route(entry)
        self._release(float("inf"))
        while self._window:  # durable only: `_release` stops at a full pipeline
            self._window.popleft().tracker.done(1, cut=True)

    def _keep(self, entry_id: str) -> None:
        with self._kept_lock:
            self.kept += 1
        self.metrics.requeued.add(1)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            if self.forwarder.full() or self._saturated():  # back-pressure: the queue fills
                self._release(now)
                self._stop.wait(IDLE_SECONDS)
                continue
            timeout = IDLE_SECONDS
            if self._window:
                timeout = min(timeout, max(0.0, self._window[0].due - now))
            for entry in self.queue.get(self._room(), timeout):
                try:
                    self.route(entry)
                except Exception:  # a bug here must not stop the collector, nor lose spans
                    logger.exception("routing failed", extra={"event": "route_failed"})
                    self._pass_through(entry)
            self._release(time.monotonic())

    def _saturated(self) -> bool:
        """Evaluation has no room for more: spans wait in the (durable) queue instead."""
        return self._room() <= 0

    def _room(self) -> int:
        """Entries to take now: one per free place in the pipeline and in the window.

        The window is not counted against the pipeline's room: its LLM spans wait for
        retriever spans in requests still to be taken, which must not be held back.
        """
        if not self.hold_in_queue:
            return ENTRIES_PER_TAKE
        window = self.window_max_spans - len(self._window)
        return min(ENTRIES_PER_TAKE, self._pipeline_room(), window)

    def _pipeline_room(self) -> int:
        """Spans the pipeline would admit now, when spans wait in the queue for room."""
        if not self.hold_in_queue or self.pipeline is None:
            return ENTRIES_PER_TAKE
        return self.pipeline.admission.room()

    def _expired(self, entry: Entry) -> str | None:
        """Why an entry's LLM spans go on unevaluated: too old, or handed out too often.

        An entry handed out more than `max_deliveries` times has killed (or been killed
        with) every consumer that took it: evaluating it again would do so once more.
        """
        if self.max_deliveries is not None and entry.deliveries > self.max_deliveries:
            return semconv.QUEUE_DELIVERIES_ERROR
        if (
            self.max_age_seconds is not None
            and time.time() - entry.stored_at > self.max_age_seconds
        ):
            return semconv.QUEUE_AGE_ERROR
        return None

    # --- routing ---------------------------------------------------------------------
    def route(self, entry: Entry) -> None:
        """Forward what passes through, remember documents, hold LLM spans.

        With evaluation off, and for a request of which nothing is held or changed, the
        bytes received are forwarded as they are: no span is decoded or encoded again.
        """
        tracker = self._tracker(entry)
        if self.pipeline is None:
            self._redelivered(entry, entry.spans)
            self._forward_rest(entry, [], entry.spans, tracker, changed=False)
            tracker.done(1)
            return
        request = entry.request
        due = time.monotonic() + self.window_seconds
        expired = self._expired(entry)
        held: list[Held] = []
        at: list[tuple[int, int, int]] = []  # where each held span is in the request
        expired_spans = 0
        total = 0
        for r, resource_spans in enumerate(request.resource_spans):
            resource: Mapping[str, Any] | None = None
            for s, scope_spans in enumerate(resource_spans.scope_spans):
                for i, span in enumerate(scope_spans.spans):
                    total += 1
                    role = self._role(span)
                    if role is None:
                        continue
                    if role != "llm":  # a retriever or a tool: evidence for LLM spans
                        self._remember(span, role)
                        continue
                    if expired is not None:  # forwarded with the rest, plus its status
                        spans.write(span, _EXPIRED[expired])
                        expired_spans += 1
                        continue
                    if resource is None:
                        resource = spans.attributes(resource_spans.resource.attributes)
                    at.append((r, s, i))
                    held.append(
                        Held(
                            span,
                            resource_spans,
                            scope_spans,
                            resource,
                            tracker,
                            int.from_bytes(span.trace_id, "big"),
                            due,
                        )
                    )
        self._redelivered(entry, total)
        if expired_spans:
            self.metrics.expired.add(expired_spans, {"reason": expired})
        self._forward_rest(entry, at, total, tracker, changed=expired_spans > 0)
        for item in held:
            self._hold(item)
        tracker.done(1)  # the router's own count: every span is accounted for now

    def _redelivered(self, entry: Entry, spans: int) -> None:
        if entry.deliveries > 1:
            self.metrics.redelivered.add(spans)
            logger.warning(
                "request handed out again: the consumer that took it stopped before it "
                "was done; its spans may arrive upstream twice",
                extra={
                    "event": "redelivered",
                    "entry": entry.id,
                    "delivery": entry.deliveries,
                    "spans": spans,
                },
            )

    def _pass_through(self, entry: Entry) -> None:
        """A request the router failed on goes upstream as received, unevaluated.

        Spans of it that were already forwarded or held may then arrive twice: better
        twice than never.
        """
        tracker = self._tracker(entry)
        count = entry.spans
        tracker.add(count)
        if count:
            self.forwarder.send(entry.body, count, done_callback(tracker, count))
        tracker.done(1)

    def _tracker(self, entry: Entry) -> Tracker:
        return Tracker(entry.id, self.queue.ack, self._keep if self.queue.durable else None)

    def _role(self, span: Span) -> Role | None:
        """The span's role if the pipeline takes it (llm, retriever, tool); None passes it on.

        A span already evaluated upstream (it has a status) passes through untouched.
        """
        if self.pipeline is None:
            return None
        routing = spans.selected_attributes(span.attributes, ROUTING_KEYS)
        if not routing or semconv.EVAL_STATUS in routing:
            if not span.parent_span_id:
                self._root_arrived(span)
            if self.review is not None and semconv.REVIEW_STRATUM in routing:
                self._reviewed_upstream(span)
            return None
        role = span_role(routing)
        if role is None or not spans.has_valid_ids(span):
            if not span.parent_span_id:
                self._root_arrived(span)
            return None
        if role != "llm" and not span.parent_span_id:
            self._root_arrived(span)
        return role

    def _reviewed_upstream(self, span: Span) -> None:
        """An upstream evaluated and selected it: the review monitor counts its selection."""
        assert self.review is not None
        if not spans.has_valid_ids(span):
            return
        self.review(
            int.from_bytes(span.trace_id, "big"),
            int.from_bytes(span.span_id, "big"),
            spans.attributes(span.attributes),
            span.end_time_unix_nano or None,
        )

    def _root_arrived(self, span: Span) -> None:
        """A trace's root arrived: its documents go once none of its LLM spans waits."""
        assert self.pipeline is not None
        traces = self.pipeline.reader.store.traces
        if traces and len(span.trace_id) == spans.TRACE_ID_BYTES:
            trace_id = int.from_bytes(span.trace_id, "big")
            if trace_id in traces:
                self._forget_later(trace_id, time.monotonic() + self.window_seconds)

    def _forget_later(self, trace_id: int, when: float) -> None:
        self._forgets.append((when, trace_id))

    def _remember(self, span: Span, role: Role) -> None:
        assert self.pipeline is not None
        events = [(e.name, spans.attributes(e.attributes)) for e in span.events]
        trace_id = int.from_bytes(span.trace_id, "big")
        attributes = spans.attributes(span.attributes)
        ended = span.end_time_unix_nano or None
        self.pipeline.reader.remember(trace_id, role, attributes, events, ended)

    def _forward_rest(
        self,
        entry: Entry,
        at: list[tuple[int, int, int]],
        total: int,
        tracker: Tracker,
        *,
        changed: bool,
    ) -> None:
        """Everything not held, as received.

        The bytes received when nothing is held or `changed` (a status written on an
        expired span); else the request without the held spans (at `at`), encoded again.
        """
        count = total - len(at)
        tracker.add(total)
        if count == 0:
            return
        if not at:
            body = entry.request.SerializeToString() if changed else entry.body
            self.forwarder.send(body, count, done_callback(tracker, count))
            return
        self.forwarder.send(_without(entry.request, at), count, done_callback(tracker, count))

    # --- the window --------------------------------------------------------------------
    def _hold(self, held: Held) -> None:
        self._window.append(held)
        self._waiting[held.trace_id] += 1
        span_id = int.from_bytes(held.span.span_id, "big")
        self._llm_spans.setdefault(held.trace_id, set()).add(span_id)
        while len(self._window) > self.window_max_spans:  # bounded: the oldest go early
            self._evaluate(self._window.popleft())

    def _release(self, now: float) -> None:
        while self._window and self._window[0].due <= now:
            if self._pipeline_room() <= 0:  # durable: due spans wait here, not dropped there
                break
            self._evaluate(self._window.popleft())
        while self._forgets and self._forgets[0][0] <= now:
            _, trace_id = self._forgets.popleft()
            if self._waiting[trace_id] > 0:
                self._forget_later(trace_id, now + self.window_seconds)
            elif self.pipeline is not None:
                self.pipeline.reader.forget(trace_id)

    def _evaluate(self, held: Held) -> None:
        pipeline = self.pipeline
        assert pipeline is not None, "spans are held only when evaluation is on"
        nested_in = self._nested_in(held)
        self._waiting[held.trace_id] -= 1
        if self._waiting[held.trace_id] <= 0:
            del self._waiting[held.trace_id]
            self._llm_spans.pop(held.trace_id, None)
        answer: Decision | Verdict | None = None  # an admitted Decision holds a place
        try:
            attributes = spans.LazyAttributes(held.span.attributes)
            answer = (
                nested(nested_in)
                if nested_in is not None
                else pipeline.admission.admit(held.trace_id, held.span.name, attributes)
            )
            if answer is SAMPLED_OUT:  # by the configured sampler or for want of room: unread
                pipeline.sampled_out()
                self.writeback.apply(held, answer)  # on this thread: no copy needed
                return
            # A tree of its own: the verdict is written on the evaluation thread while this
            # thread goes on reading the request the span came from.
            held.span = spans.detached(held.span)
            record = spans.record_of(held.span, held.resource, attributes.decoded)
            if isinstance(answer, Verdict):  # nested in another LLM span, or `dropped`
                pipeline.deliver(record, held, answer)
            else:
                admitted, answer = answer, None  # from here the pipeline gives the place back
                # Read on the evaluation loop (with the trace's evidence as it is now): this
                # thread goes on routing every other span.
                pipeline.evaluate(record, held, admitted, prepare=lambda: (record, held))
        except Exception:  # never lose the span: it goes on as received
            logger.exception("evaluation pipeline failed", extra={"event": "pipeline_failed"})
            if answer is not None and not isinstance(answer, Verdict):
                pipeline.admission.release(answer)  # admitted, but never handed over
            self.writeback.forward(held)

    def _nested_in(self, held: Held) -> str | None:
        """The span's parent, when it is an LLM span of the same trace in the window.

        One model call traced twice (an app's LLM span around an instrumented client
        call) is judged once, on the outer span, as the SDK decides when spans open.
        """
        parent = held.span.parent_span_id
        if not parent or int.from_bytes(parent, "big") not in self._llm_spans.get(
            held.trace_id, ()
        ):
            return None
        return parent.hex()


def _without(request: ExportTraceServiceRequest, at: list[tuple[int, int, int]]) -> bytes:
    """The request encoded without the spans at these (resource, scope, span) positions.

    A copy with those spans deleted, last first, and the scopes and resources left
    empty: the copy and the deletions run in C, not a Python step per span kept.
    """
    rest = ExportTraceServiceRequest()
    rest.CopyFrom(request)
    resources = rest.resource_spans
    for r, s, i in reversed(at):  # last first: a deletion moves only what comes after it
        scopes = resources[r].scope_spans
        del scopes[s].spans[i]
        if not scopes[s].spans:
            del scopes[s]
            if not scopes:
                del resources[r]
    encoded: bytes = rest.SerializeToString()
    return encoded


_EXPIRED = {
    semconv.QUEUE_AGE_ERROR: unevaluated(semconv.STATUS_TIMEOUT, error=semconv.QUEUE_AGE_ERROR),
    semconv.QUEUE_DELIVERIES_ERROR: unevaluated(
        semconv.STATUS_ERROR, error=semconv.QUEUE_DELIVERIES_ERROR
    ),
}
"""The verdict on an LLM span that a durable queue held too long, or handed out too
often, by reason: it goes on unevaluated, with the rest of its request."""
