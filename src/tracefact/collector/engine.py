"""The engine: received requests in, spans routed, LLM spans through the pipeline, out.

An adapter over the SDK's pieces, not a second implementation of them: spans are read
by `conventions` (roles, retrieved documents), sampled, evaluated and enriched by the
same `EvaluationProcessor`, and retrieved documents wait in its reader's `DocumentStore`.

For each request taken from the `RequestQueue`:
- spans that are not LLM spans go to the forwarder at once, exactly as received (under
  their original resource and scope); a retriever span of any convention also leaves its
  documents in the store, for LLM spans of its trace;
- LLM spans already evaluated (they carry `tracefact.eval.status`: an SDK upstream of
  the collector did it) pass through untouched;
- other LLM spans wait `window_seconds`, so that retriever spans of their trace sent in
  a later request still count, then enter the pipeline as an SDK span view. What the
  pipeline exports comes back to `Results`, which puts the added attributes and events
  onto the ORIGINAL protobuf span (or encodes a carrier span) and forwards it.

A request is acknowledged to the queue once all of its spans left upstream (or were
counted as failed there): that is the bookkeeping durable queues rely on. With a durable
queue, spans wait there (not in this process) until evaluation has room: the engine
takes entries only while fewer than `max_in_flight` LLM spans are in the pipeline and
the window has room (`window_max_spans`), and due spans stay in the window while the
pipeline is full, so several workers share a stream and none drops what another could
evaluate.
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
from collections.abc import Callable
from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from tracefact import semconv
from tracefact.collector import spans
from tracefact.collector.forwarder import Forwarder
from tracefact.collector.metrics import CollectorMetrics
from tracefact.collector.queue import Entry, RequestQueue
from tracefact.conventions import DocumentStore, Reading, retrieved_documents, span_role
from tracefact.conventions.roles import ROLE_KEYS

logger = logging.getLogger("tracefact.collector")

ROUTING_KEYS = dict.fromkeys(ROLE_KEYS | {semconv.EVAL_STATUS})
"""The attributes that decide where a span goes; the rest are not decoded to route it."""
ENTRIES_PER_TAKE = 64
IDLE_SECONDS = 0.05


class Tracker:
    """An entry's spans still to leave upstream; the entry is acknowledged at zero.

    With a durable queue (`keep` given), a span that could not leave by the drain
    deadline (evaluation or forwarding cut off) keeps the entry: it is never acknowledged
    here, so the queue hands it to another consumer, which evaluates and forwards it.
    """

    __slots__ = ("_ack", "_keep", "_kept", "_left", "_lock", "entry_id")

    def __init__(
        self,
        entry_id: str,
        ack: Callable[[str], None],
        keep: Callable[[str], None] | None = None,
    ) -> None:
        self.entry_id = entry_id
        self._ack = ack
        self._keep = keep
        self._kept = False
        self._left = 1  # held by the router until it has counted every span
        self._lock = threading.Lock()

    @property
    def keeps(self) -> bool:
        """True when a span cut off at shutdown leaves the entry to another consumer."""
        return self._keep is not None

    def add(self, spans: int) -> None:
        with self._lock:
            self._left += spans

    def done(self, spans: int = 1, settled: bool = True) -> None:
        """`spans` left upstream (`settled`), or were cut off by the drain deadline."""
        with self._lock:
            self._left -= spans
            newly_kept = not settled and self._keep is not None and not self._kept
            self._kept = self._kept or newly_kept
            finished = self._left == 0 and not self._kept
        if newly_kept and self._keep is not None:
            self._keep(self.entry_id)
        if finished:
            self._ack(self.entry_id)


@dataclass(slots=True)
class Held:
    """An LLM span between its arrival and its forwarding."""

    span: Span
    resource_spans: ResourceSpans
    scope_spans: ScopeSpans
    resource: Resource
    tracker: Tracker
    trace_id: int
    due: float
    keys: frozenset[str] = frozenset()
    events: int = 0


class Results(SpanProcessor):
    """The pipeline's downstream: what it exports goes back onto the received spans.

    An exported span whose ids match a held span is that span, possibly with results
    added: they are written onto the original protobuf span, which is forwarded. Any
    other span is a carrier of results (attach "span", or a result later than
    `max_hold_seconds`), encoded as the SDK's OTLP exporter encodes it; carriers are not
    counted in their request's acknowledgement (the evaluated span itself went upstream).
    """

    def __init__(self, forwarder: Forwarder) -> None:
        self.forwarder = forwarder
        self._held: dict[tuple[int, int], deque[Held]] = {}
        self._pending = 0
        self._lock = threading.Lock()  # the engine adds, the evaluation loop takes

    @property
    def pending(self) -> int:
        """Spans handed to the pipeline whose result has not come back yet."""
        return self._pending

    def expect(self, key: tuple[int, int], held: Held) -> None:
        with self._lock:
            self._held.setdefault(key, deque()).append(held)
            self._pending += 1

    def take(self, key: tuple[int, int]) -> Held | None:
        with self._lock:
            waiting = self._held.get(key)
            if not waiting:
                return None
            held = waiting.popleft()
            if not waiting:
                del self._held[key]
            self._pending -= 1
            return held

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        held = self.take((context.trace_id, context.span_id)) if context is not None else None
        if held is None:
            payload = spans.request_of(span).SerializeToString()
            self.forwarder.send(payload, 1, None)
            return
        status = (span.attributes or {}).get(semconv.EVAL_STATUS)
        if status == semconv.STATUS_SHUTDOWN and held.tracker.keeps:
            held.tracker.done(1, settled=False)  # evaluated by the entry's next consumer
            return
        try:
            spans.add_results(held.span, held.keys, held.events, span)
        except Exception:  # an unencodable result must not cost the span itself
            logger.exception("results not added to the span", extra={"event": "enrich_failed"})
        self.forward(held)

    def forward(self, held: Held) -> None:
        payload = spans.single_request(held.resource_spans, held.scope_spans, held.span)
        self.forwarder.send(payload, 1, _done(held.tracker, 1))


class Engine:
    """Takes entries from the queue on its own thread and routes their spans."""

    def __init__(
        self,
        queue: RequestQueue,
        forwarder: Forwarder,
        processor: SpanProcessor | None,
        results: Results,
        store: DocumentStore,
        window_seconds: float,
        window_max_spans: int,
        metrics: CollectorMetrics,
        *,
        max_in_flight: int | None = None,
        max_age_seconds: float | None = None,
        max_deliveries: int | None = None,
    ) -> None:
        self.queue = queue
        self.forwarder = forwarder
        self.processor = processor
        self.results = results
        self.store = store
        self.window_seconds = window_seconds
        self.window_max_spans = window_max_spans
        self.metrics = metrics
        self.max_in_flight = max_in_flight
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
        self._thread = threading.Thread(target=self._run, name="tracefact-engine", daemon=True)

    @property
    def waiting(self) -> int:
        """LLM spans in the window."""
        return len(self._window)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop the thread; `drain` then finishes what is left."""
        self._stop.set()
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
            self._window.popleft().tracker.done(1, settled=False)

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
        if self.max_in_flight is None:
            return ENTRIES_PER_TAKE
        pipeline = self.max_in_flight - self.results.pending
        return min(ENTRIES_PER_TAKE, pipeline, self.window_max_spans - len(self._window))

    def _pipeline_full(self) -> bool:
        return self.max_in_flight is not None and self.results.pending >= self.max_in_flight

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
        """Forward what passes through, remember documents, hold LLM spans."""
        tracker = self._tracker(entry)
        request = entry.request
        due = time.monotonic() + self.window_seconds
        expired = self._expired(entry)
        held: list[Held] = []
        expired_spans = 0
        total = 0
        for resource_spans in request.resource_spans:
            resource: Resource | None = None
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    total += 1
                    role = self._role(span)
                    if role is None:
                        continue
                    if role == "retriever":
                        self._remember(span)
                        continue
                    if expired is not None:  # forwarded with the rest, plus its status
                        spans.add_attributes(span, _EXPIRED[expired])
                        expired_spans += 1
                        continue
                    if resource is None:
                        resource = spans.resource_of(
                            resource_spans.resource, resource_spans.schema_url
                        )
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
        if entry.deliveries > 1:
            self.metrics.redelivered.add(total)
        if expired_spans:
            self.metrics.expired.add(expired_spans, {"reason": expired})
        self._forward_rest(request, held, total, tracker)
        for item in held:
            self._hold(item)
        tracker.done(1)  # the router's own count: every span is accounted for now

    def _pass_through(self, entry: Entry) -> None:
        """A request the router failed on goes upstream as received, unevaluated.

        Spans of it that were already forwarded or held may then arrive twice: better
        twice than never.
        """
        tracker = self._tracker(entry)
        count = sum(len(s.spans) for r in entry.request.resource_spans for s in r.scope_spans)
        tracker.add(count)
        if count:
            self.forwarder.send(entry.request.SerializeToString(), count, _done(tracker, count))
        tracker.done(1)

    def _tracker(self, entry: Entry) -> Tracker:
        return Tracker(entry.id, self.queue.ack, self._keep if self.queue.durable else None)

    def _role(self, span: Span) -> str | None:
        """The span's role if the pipeline takes it (llm, retriever); None passes it through."""
        if self.processor is None:
            return None
        routing = spans.selected_attributes(span.attributes, ROUTING_KEYS)
        if not routing or semconv.EVAL_STATUS in routing:
            if not span.parent_span_id and self.store.traces:
                self._root_arrived(span)
            return None
        role = span_role(routing)
        if role is None or not spans.has_valid_ids(span):
            if not span.parent_span_id and self.store.traces:
                self._root_arrived(span)
            return None
        if role == "retriever" and not span.parent_span_id:
            self._root_arrived(span)
        return role

    def _root_arrived(self, span: Span) -> None:
        if len(span.trace_id) == spans.TRACE_ID_BYTES:
            trace_id = int.from_bytes(span.trace_id, "big")
            if trace_id in self.store.traces:
                self._forget_later(trace_id, time.monotonic() + self.window_seconds)

    def _forget_later(self, trace_id: int, when: float) -> None:
        self._forgets.append((when, trace_id))

    def _remember(self, span: Span) -> None:
        events = [(e.name, spans.attributes(e.attributes)) for e in span.events]
        documents = retrieved_documents(spans.attributes(span.attributes), events)
        if documents:
            self.store.add(int.from_bytes(span.trace_id, "big"), documents)

    def _forward_rest(
        self, request: ExportTraceServiceRequest, held: list[Held], total: int, tracker: Tracker
    ) -> None:
        """Everything not held, as received: the whole request when nothing is held."""
        count = total - len(held)
        tracker.add(count + len(held))
        if count == 0:
            return
        if not held:
            self.forwarder.send(request.SerializeToString(), count, _done(tracker, count))
            return
        taken = {id(h.span) for h in held}
        rest = ExportTraceServiceRequest()
        for resource_spans in request.resource_spans:
            out_resource: ResourceSpans | None = None
            for scope_spans in resource_spans.scope_spans:
                keep = [s for s in scope_spans.spans if id(s) not in taken]
                if not keep:
                    continue
                if out_resource is None:
                    out_resource = rest.resource_spans.add()
                    out_resource.resource.CopyFrom(resource_spans.resource)
                    out_resource.schema_url = resource_spans.schema_url
                out_scope = out_resource.scope_spans.add()
                out_scope.scope.CopyFrom(scope_spans.scope)
                out_scope.schema_url = scope_spans.schema_url
                out_scope.spans.extend(keep)
        self.forwarder.send(rest.SerializeToString(), count, _done(tracker, count))

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
            if self._pipeline_full():  # durable: due spans wait here, not dropped there
                break
            self._evaluate(self._window.popleft())
        while self._forgets and self._forgets[0][0] <= now:
            _, trace_id = self._forgets.popleft()
            if self._waiting[trace_id] > 0:
                self._forget_later(trace_id, now + self.window_seconds)
            else:
                self.store.forget(trace_id)

    def _evaluate(self, held: Held) -> None:
        assert self.processor is not None, "spans are held only when evaluation is on"
        marks = self._nesting(held)
        self._waiting[held.trace_id] -= 1
        if self._waiting[held.trace_id] <= 0:
            del self._waiting[held.trace_id]
            self._llm_spans.pop(held.trace_id, None)
        # A tree of its own: results are written on the evaluation thread while this
        # thread goes on reading the request the span came from.
        held.span = spans.detached(held.span)
        held.keys = frozenset(kv.key for kv in held.span.attributes)
        held.events = len(held.span.events)
        view = spans.view(held.span, held.resource, held.scope_spans, marks)
        key = (view.context.trace_id, view.context.span_id) if view.context else (0, 0)
        self.results.expect(key, held)
        try:
            self.processor.on_end(view)
        except Exception:  # never lose the span: it goes on as received
            logger.exception("evaluation pipeline failed", extra={"event": "pipeline_failed"})
            taken = self.results.take(key)
            if taken is not None:
                self.results.forward(taken)

    def _nesting(self, held: Held) -> dict[str, str]:
        """The SDK's `nested` skip, for an LLM span whose parent is an LLM span of the window.

        One model call traced twice (an app's LLM span around an instrumented client
        call) is evaluated once, on the outer span, as the SDK decides when spans open.
        """
        parent = held.span.parent_span_id
        if not parent or int.from_bytes(parent, "big") not in self._llm_spans.get(
            held.trace_id, ()
        ):
            return {}
        reading = Reading(None, skip_reason=semconv.SKIP_NESTED, nested_in=parent.hex())
        return {semconv.EVAL_STATUS: semconv.STATUS_SKIPPED, **reading.skip_attributes()}


_EXPIRED = {
    semconv.QUEUE_AGE_ERROR: {
        semconv.EVAL_STATUS: semconv.STATUS_TIMEOUT,
        semconv.EVAL_ERROR: semconv.QUEUE_AGE_ERROR,
    },
    semconv.QUEUE_DELIVERIES_ERROR: {
        semconv.EVAL_STATUS: semconv.STATUS_ERROR,
        semconv.EVAL_ERROR: semconv.QUEUE_DELIVERIES_ERROR,
    },
}
"""What an LLM span that a durable queue held too long, or handed out too often, carries
instead of results, by reason."""


def _done(tracker: Tracker, spans: int) -> Callable[[bool], None]:
    return lambda settled: tracker.done(spans, settled)
