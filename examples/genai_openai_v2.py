"""An app instrumented with OpenTelemetry's GenAI instrumentor, evaluated by tracefact.

The instrumentor's documented opt-in puts the messages on the span, where tracefact
reads them; by default they are log records and the span is skipped as `capture_off`.

    # tracefact is not on a package index: install it from a clone (or the wheel
    # that `make dist` builds, dist/tracefact-*.whl, in place of `-e .`):
    pip install -e . openai opentelemetry-instrumentation-openai-v2
    OPENAI_API_KEY=... python examples/genai_openai_v2.py
"""

import os

os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")

import openai
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

import tracefact

DOCUMENT = "The Eiffel Tower is 330 metres tall and was completed in 1889."

provider = tracefact.configure(service_name="genai-example", exporter="console")
OpenAIInstrumentor().instrument(tracer_provider=provider)

client = openai.OpenAI()
with tracefact.grounding([DOCUMENT]):
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "How tall is the Eiffel Tower?"}],
        stream=True,
    )
    print("".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices))
tracefact.shutdown()  # the evaluated span, with tracefact.eval.* attributes, is printed
