"""Evaluated spans out of a stream of exported spans, carriers merged onto what they judge.

Results reach an exporter on the evaluated span itself, or on a carrier EVALUATOR span
(`attach="span"`, or a result that outlived `max_hold_seconds`, in which case the
evaluated span went first with status `timeout`). The report and the live monitor
count one outcome per evaluated span, grouped by the evaluated span's own attributes
(its model), so a carrier's results are laid over the span it links to.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracefact import semconv
from tracefact.conventions import span_role
from tracefact.conventions.otlp import OtlpSpan
from tracefact.spans_file import FileSpan, SpansFileReader

SpanKey = tuple[int, int]
"""(trace id, span id) of the evaluated span."""


@dataclass(frozen=True, slots=True)
class JudgedSpan:
    """An LLM span as evaluation left it: its attributes with any carrier's results on top."""

    key: SpanKey
    span: OtlpSpan
    """The LLM span, or the carrier when the LLM span itself was not seen."""
    resource: Mapping[str, Any]
    attributes: Mapping[str, Any]
    replaces: JudgedSpan | None = None
    """The same span seen earlier without these results (status `timeout`, held too long)."""

    @property
    def time(self) -> float:
        """When the evaluated call ended, in Unix seconds."""
        return self.span.end_time / 1e9


class JudgedSpans:
    """Turns spans, in the order they were exported, into evaluated spans.

    Keeps the last `remember` LLM spans, so that a carrier arriving after its span is
    merged onto it; an older one is counted on its own (grouped as `(none)`).
    """

    def __init__(self, remember: int = 10_000) -> None:
        self.remember = remember
        self._llm: OrderedDict[SpanKey, JudgedSpan | FileSpan] = OrderedDict()
        self._carriers: OrderedDict[SpanKey, FileSpan] = OrderedDict()

    def add(self, item: FileSpan) -> JudgedSpan | None:
        """The evaluated span `item` completes, or None (not an LLM span, or waiting)."""
        span, attributes = item.span, item.span.attributes
        if _is_carrier(attributes) and span.parent_span_id is not None:
            key = (span.trace_id, span.parent_span_id)
            seen = self._llm.get(key)
            if seen is None:  # its span comes later, or was never exported
                self._keep(self._carriers, key, item)
                return None
            return self._merge(key, seen, item)
        if span_role(attributes) != "llm":
            return None
        key = (span.trace_id, span.span_id)
        carrier = self._carriers.pop(key, None)
        if carrier is not None:
            return self._merge(key, item, carrier)
        if semconv.EVAL_STATUS not in attributes:  # attach="span": the carrier will judge it
            self._keep(self._llm, key, item)
            return None
        evaluated = JudgedSpan(key, span, item.resource, attributes)
        self._keep(self._llm, key, evaluated)
        return evaluated

    def waiting(self) -> int:
        """LLM spans kept with no status and no carrier yet: not evaluated, so far."""
        return sum(isinstance(seen, FileSpan) for seen in self._llm.values())

    def pending(self) -> list[JudgedSpan]:
        """Carriers whose span never came: counted on their own, at the end of a file."""
        found = [
            JudgedSpan(key, c.span, c.resource, _results(c.span.attributes))
            for key, c in self._carriers.items()
        ]
        self._carriers.clear()
        return found

    def _merge(self, key: SpanKey, seen: JudgedSpan | FileSpan, carrier: FileSpan) -> JudgedSpan:
        attributes = {**seen.span.attributes, **_results(carrier.span.attributes)}
        replaces = seen if isinstance(seen, JudgedSpan) else None
        merged = JudgedSpan(key, seen.span, seen.resource, attributes, replaces)
        self._keep(self._llm, key, merged)
        return merged

    def _keep(self, store: OrderedDict[SpanKey, Any], key: SpanKey, value: Any) -> None:
        store[key] = value
        store.move_to_end(key)
        while len(store) > self.remember:
            store.popitem(last=False)


@dataclass(frozen=True, slots=True)
class ReadSpans:
    """A whole spans file's evaluated spans, in the order their calls ended."""

    judged: list[JudgedSpan]
    spans: int
    """Spans read, each once: a span the file holds twice (an export retried) counts once."""
    waiting: int
    """LLM spans with no status and no carrier: not evaluated."""


def read_judged(reader: SpansFileReader) -> ReadSpans:
    """Every evaluated span of a finished file, a carrier's results laid over its span."""
    merger = JudgedSpans(remember=sys.maxsize)  # a file: every carrier finds its span
    latest: dict[SpanKey, JudgedSpan] = {}
    seen: set[SpanKey] = set()
    for item in reader.follow(final=True):  # only LLM and carrier spans are kept
        seen.add((item.span.trace_id, item.span.span_id))
        evaluated = merger.add(item)
        if evaluated is not None:
            latest[evaluated.key] = evaluated  # a carrier's merge replaces the timeout
    for evaluated in merger.pending():
        latest.setdefault(evaluated.key, evaluated)
    ordered = sorted(latest.values(), key=lambda e: e.time)
    return ReadSpans(ordered, len(seen), merger.waiting())


def _is_carrier(attributes: Mapping[str, Any]) -> bool:
    return (
        attributes.get(semconv.OPENINFERENCE_SPAN_KIND) == semconv.KIND_EVALUATOR
        and semconv.EVAL_STATUS in attributes
    )


def _results(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """A carrier's attributes without its span kind (the evaluated span keeps its own)."""
    return {k: v for k, v in attributes.items() if k != semconv.OPENINFERENCE_SPAN_KIND}
