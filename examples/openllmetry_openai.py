"""An app instrumented with OpenLLMetry's OpenAI instrumentor, evaluated by tracefact.

# tracefact is not on a package index: install it from a clone (or the wheel
# that `make dist` builds, dist/tracefact-*.whl, in place of `-e .`):
pip install -e . openai opentelemetry-instrumentation-openai
OPENAI_API_KEY=... python examples/openllmetry_openai.py
"""

import openai
from opentelemetry.instrumentation.openai import OpenAIInstrumentor

import tracefact

DOCUMENT = "The Eiffel Tower is 330 metres tall and was completed in 1889."

provider = tracefact.configure(service_name="openllmetry-example", exporter="console")
OpenAIInstrumentor().instrument(tracer_provider=provider)

client = openai.OpenAI()
with tracefact.grounding([DOCUMENT]):
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "How tall is the Eiffel Tower?"}],
    )
print(reply.choices[0].message.content)
tracefact.shutdown()  # the evaluated span, with tracefact.eval.* attributes, is printed
