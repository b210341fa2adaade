"""The pipeline's invariant, over random mixes of spans, evaluator behaviours and settings.

Every span that enters leaves exactly once, with a valid status and its original fields.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.pipeline.helpers import Pipeline, carriers, evaluated_copies
from tracefact import semconv

STATUSES = {"ok", "skipped", "sampled_out", "dropped", "timeout", "error", "shutdown"}
BEHAVIOURS = ["ok", "hallucinated", "slow:0.01", "slow:0.15", "hang", "error", "flaky:1", "garbage"]

span_specs = st.lists(
    st.tuples(
        st.sampled_from(["llm", "llm", "llm", "chain"]),
        st.sampled_from([*BEHAVIOURS, None]),
        st.booleans(),  # has contexts
        st.booleans(),  # flush after this span
    ),
    min_size=1,
    max_size=20,
)
options = st.fixed_dictionaries(
    {
        "attach": st.sampled_from(["enrich", "span"]),
        "queue_size": st.integers(1, 8),
        "concurrency": st.integers(1, 4),
        "timeout_seconds": st.sampled_from([0.05, 0.3]),
        "max_hold_seconds": st.sampled_from([0.02, 0.1, 5.0]),
        "max_retries": st.integers(0, 2),
        "drain_seconds": st.just(0.05),
    }
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=span_specs, opts=options)
def test_every_span_is_exported_exactly_once(
    specs: list[tuple[str, str | None, bool, bool]], opts: dict[str, Any]
) -> None:
    p = Pipeline(**opts)
    originals = []
    for kind, output, has_contexts, flush in specs:
        if kind == "chain":
            with p.tracer.start_as_current_span("chain"):
                pass
            originals.append(p.originals.get_finished_spans()[-1])
        else:
            contexts = ["ctx"] if has_contexts else None
            originals.append(
                p.llm_span(output=output, contexts=contexts, question=str(len(originals)))
            )
        if flush:
            p.flush(0.05)
    p.close()

    exported = p.exported()
    copies = evaluated_copies(exported)
    by_id = {}
    for span in copies:
        assert span.context.span_id not in by_id, "a span was exported twice"
        by_id[span.context.span_id] = span
    assert set(by_id) == {o.context.span_id for o in originals}, "a span was lost"

    for original in originals:
        out = by_id[original.context.span_id]
        for field in ("name", "context", "parent", "kind", "start_time", "end_time", "links"):
            assert getattr(out, field) == getattr(original, field)
        assert out.status.status_code == original.status.status_code
        assert dict(original.attributes).items() <= dict(out.attributes).items()
        assert out.events[: len(original.events)] == original.events
        if original.name == "chain":
            assert out is original
            continue
        status = out.attributes.get(semconv.EVAL_STATUS)
        if opts["attach"] == "span" and status is None:
            (carrier,) = [c for c in carriers(exported) if c.links[0].context == original.context]
            status = carrier.attributes[semconv.EVAL_STATUS]
        assert status in STATUSES

    for carrier in carriers(exported):
        (link,) = carrier.links
        assert link.context.span_id in by_id
        assert carrier.parent == link.context
        assert carrier.attributes[semconv.EVAL_STATUS] in STATUSES


def test_exactly_once_under_concurrent_application_threads() -> None:
    import random
    import threading

    p = Pipeline(queue_size=16, concurrency=4, timeout_seconds=0.1, drain_seconds=0.05)
    rng = random.Random(3)
    plans = [[rng.choice(BEHAVIOURS) for _ in range(40)] for _ in range(8)]

    def app_thread(outputs: list[str]) -> None:
        for output in outputs:
            p.llm_span(output=output)

    threads = [threading.Thread(target=app_thread, args=(plan,)) for plan in plans]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    p.close()
    copies = evaluated_copies(p.exported())
    assert len(copies) == 8 * 40
    assert len({s.context.span_id for s in copies}) == 8 * 40
    assert {s.attributes[semconv.EVAL_STATUS] for s in copies} <= STATUSES
