"""An app that knows nothing of tracefact, evaluated by the tracefact collector.

It is instrumented with OpenInference only (the OpenAI instrumentor, and its span
conventions for a retriever span of its own) and exports OTLP to whatever
OTEL_EXPORTER_OTLP_ENDPOINT names, here a tracefact collector. The collector finds the
LLM span, grounds it in the retriever span's documents (same trace, sent in the same
or an earlier request), evaluates it and forwards every span to its upstream, the LLM
span with `tracefact.eval.*` attributes.

    pip install openai openinference-instrumentation-openai opentelemetry-exporter-otlp-proto-http
    pip install -e '.[collector]'   # the collector, from a clone (or dist/tracefact-*.whl)
    tracefact collector --config collector/tracefact.yaml &        # see collector/README.md
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OPENAI_API_KEY=... \
        python examples/openinference_collector.py                  # OPENAI_BASE_URL for others
"""

from __future__ import annotations

import re

import openai
from openinference.instrumentation.openai import OpenAIInstrumentor
from openinference.semconv.trace import (
    DocumentAttributes,
    OpenInferenceSpanKindValues,
    SpanAttributes,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

CORPUS = [
    "The Eiffel Tower is 330 metres tall and was completed in 1889.",
    "Python was created by Guido van Rossum and first released in 1991.",
    "Mount Kilimanjaro, in Tanzania, rises 5,895 metres above sea level.",
]
QUESTIONS = ["How tall is the Eiffel Tower?", "Who created Python?"]
KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND

provider = TracerProvider(resource=Resource.create({"service.name": "openinference-collector"}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # OTEL_EXPORTER_OTLP_*
OpenAIInstrumentor().instrument(tracer_provider=provider)
tracer = provider.get_tracer("openinference-collector-example")
client = openai.OpenAI()


def search(question: str) -> list[str]:
    """A keyword retriever, traced as an OpenInference RETRIEVER span."""
    attributes = {KIND: OpenInferenceSpanKindValues.RETRIEVER.value, "input.value": question}
    with tracer.start_as_current_span("search", attributes=attributes) as span:
        words = set(re.findall(r"\w+", question.lower())) - {"how", "who", "is", "the"}
        found = [text for text in CORPUS if words & set(re.findall(r"\w+", text.lower()))]
        for i, text in enumerate(found):
            prefix = f"{SpanAttributes.RETRIEVAL_DOCUMENTS}.{i}"
            span.set_attribute(f"{prefix}.{DocumentAttributes.DOCUMENT_CONTENT}", text)
        return found


def answer(question: str) -> str:
    attributes = {KIND: OpenInferenceSpanKindValues.CHAIN.value, "input.value": question}
    with tracer.start_as_current_span("rag", attributes=attributes) as span:
        documents = "\n".join(search(question))
        reply = client.chat.completions.create(  # the LLM span, by OpenInference
            model="gpt-4o-mini",
            messages=[
                {"role": "system", "content": f"Answer only from these documents:\n{documents}"},
                {"role": "user", "content": question},
            ],
        )
        text = reply.choices[0].message.content or ""
        span.set_attribute("output.value", text)
        return text


for question in QUESTIONS:
    print(f"{question} -> {answer(question)}")
provider.shutdown()  # sends what is left to the collector
