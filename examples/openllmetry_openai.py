"""An app instrumented with OpenLLMetry's OpenAI instrumentor, evaluated by tracefact.

pip install tracefact openai opentelemetry-instrumentation-openai
OPENAI_API_KEY=... python examples/openllmetry_openai.py
"""

import openai
from opentelemetry.instrumentation.openai import OpenAIInstrumentor

import tracefact

DOCUMENT = "The Eiffel Tower is 330 metres tall and was completed in 1889."

provider = tracefact.configure(service_name="openllmetry-example")
OpenAIInstrumentor().instrument(tracer_provider=provider)

client = openai.OpenAI()
with tracefact.grounding([DOCUMENT]):
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "How tall is the Eiffel Tower?"}],
    )
print(reply.choices[0].message.content)
tracefact.shutdown()
