"""An app instrumented with OpenInference's OpenAI instrumentor, evaluated by tracefact.

# tracefact is not on a package index: install it from a clone (or the wheel
# that `make dist` builds, dist/tracefact-*.whl, in place of `-e .`):
pip install -e . openai openinference-instrumentation-openai
OPENAI_API_KEY=... python examples/openinference_openai.py   # OPENAI_BASE_URL for others
"""

import openai
from openinference.instrumentation.openai import OpenAIInstrumentor

import tracefact

DOCUMENT = "The Eiffel Tower is 330 metres tall and was completed in 1889."

# Spans are printed here; exporter="otlp" (the default) sends them to a collector or Phoenix.
provider = tracefact.configure(service_name="openinference-example", exporter="console")
OpenAIInstrumentor().instrument(tracer_provider=provider)

client = openai.OpenAI()
with tracefact.grounding([DOCUMENT]):  # the contexts the answer must be grounded in
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": f"Answer from this document: {DOCUMENT}"},
            {"role": "user", "content": "How tall is the Eiffel Tower?"},
        ],
    )
print(reply.choices[0].message.content)
tracefact.shutdown()  # the evaluated span, with tracefact.eval.* attributes, is printed
