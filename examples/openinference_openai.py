"""An app instrumented with OpenInference's OpenAI instrumentor, evaluated by tracefact.

pip install tracefact openai openinference-instrumentation-openai
OPENAI_API_KEY=... python examples/openinference_openai.py   # OPENAI_BASE_URL for others
"""

import openai
from openinference.instrumentation.openai import OpenAIInstrumentor

import tracefact

DOCUMENT = "The Eiffel Tower is 330 metres tall and was completed in 1889."

provider = tracefact.configure(service_name="openinference-example")  # spans to the console
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
